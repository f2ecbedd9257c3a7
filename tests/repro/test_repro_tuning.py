"""studies.repro.tuning: the rule that picks a tuned run's setting from its grid, and the
tuned variants it resolves to."""

from __future__ import annotations

import json

from studies.repro import layout
from studies.repro.grids import TUNINGS, VALIDATION
from studies.repro.layout import eval_dir, run_dir
from studies.repro.studies import STUDIES
from studies.repro.tuning import (
    choose,
    folder_choices,
    grid_scores,
    neighbours,
    resolve,
    resolve_study,
    settings_text,
)


def test_settings_text_names_the_overrides():
    assert settings_text(["--model.method.init_args.temperature", "0.05",
                          "--model.optimizer.base_lr", "0.2"]) == "t=0.05, lr=0.2"


def test_the_highest_validation_score_wins_ties_go_to_the_first_cell():
    tuning = TUNINGS["supcon"]
    names = [c.name for c in tuning.grid]
    assert choose(tuning, dict.fromkeys(names, 0.5)) is tuning.grid[0]
    scores = {**dict.fromkeys(names, 0.4), names[2]: 0.6}
    assert choose(tuning, scores) is tuning.grid[2]
    assert choose(tuning, {**scores, names[1]: None}) is None  # a cell not scored yet


def test_scores_are_read_from_the_grid_runs_validation(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    tuning = TUNINGS["sincere"]
    for i, cell in enumerate(tuning.grid[:3]):
        folder = tmp_path / eval_dir(run_dir("cpu", cell.stem, 0), VALIDATION)
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps({"metrics": {"top1": 0.5 + 0.01 * i}}))
    # the grid's cells, then its bounds' (the first grid's, not evaluated here)
    assert list(grid_scores(tuning).values()) == [0.5, 0.51, 0.52,
                                                  *[None] * (len(tuning.grid) - 3 + 4)]
    assert list(grid_scores(tuning)) == [c.name for c in (*tuning.grid, *tuning.bounds)]
    assert folder_choices(STUDIES.values())["sincere"]["chosen"] is None
    for cell in tuning.grid[3:]:
        folder = tmp_path / eval_dir(run_dir("cpu", cell.stem, 0), VALIDATION)
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps({"metrics": {"top1": 0.49}}))
    assert folder_choices(STUDIES.values())["sincere"]["chosen"] == tuning.grid[2].name
    # a bound scoring higher is not chosen: the choice is among the grid's own cells
    bound = tmp_path / eval_dir(run_dir("cpu", tuning.bounds[0].stem, 0), VALIDATION)
    bound.mkdir(parents=True)
    (bound / "results.json").write_text(json.dumps({"metrics": {"top1": 0.9}}))
    assert folder_choices(STUDIES.values())["sincere"]["chosen"] == tuning.grid[2].name


def test_resolved_variants():
    cell = TUNINGS["sincere"].grid[1]
    tuned = STUDIES["sincere"].variant("sincere")
    reused = resolve(tuned, cell)  # the grid run's folder, the study's evaluations added
    assert (reused.name, reused.stem, reused.overrides) == ("sincere", cell.stem, cell.overrides)
    assert reused.evals == (VALIDATION, *tuned.evals) and reused.tuning is None
    assert reused.label == ("SINCERE (tuned: t=0.1, lr=0.05, warm-up=0.0125, "
                            "warm-up start=0.001)")
    # its own config, in a folder named after the config and the chosen cell
    cifar2 = resolve(STUDIES["cifar2"].variant("cifar2_sincere"), cell)
    assert (cifar2.stem, cifar2.config) == ("cifar2_sincere_t0.1_lr0.05_warmup",
                                            "configs/repro/cpu/cifar2_sincere.yaml")
    assert cifar2.overrides == cell.overrides and cifar2.eval_args == ("--classes", "cat", "dog")
    # nothing chosen, or a choice the grid does not hold: the placeholder stays
    assert resolve(tuned, None) is tuned
    study = resolve_study(STUDIES["sincere"], {"sincere": {"chosen": "not_a_cell"}})
    assert study.variant("sincere") is tuned


def test_neighbours_bracket_a_choice_on_each_swept_setting():
    """The nearest cells below and above a choice on each setting its grid sweeps, the other
    setting equal, among the grid and the earlier grid that bounds it."""
    sincere = TUNINGS["sincere"]
    cells = {c.name: c for c in (*sincere.grid, *sincere.bounds)}
    t, lr = "--model.method.init_args.temperature", "--model.optimizer.base_lr"
    middle = neighbours(sincere, cells["sincere_t0.1_lr0.05_warmup"])
    # t: 0.05 (the first grid's, without warm-up) below, 0.2 above; lr: 0.02 below, 0.1 (the
    # third extension's, nearer than the first grid's 0.2) above
    assert {k: tuple(c.name for c in v) for k, v in middle.items()} == {
        t: ("sincere_t0.05_lr0.05", "sincere_t0.2_lr0.05_warmup"),
        lr: ("sincere_t0.1_lr0.02_warmup", "sincere_t0.1_lr0.1_warmup")}
    # SupCon's t 0.1: lr 0.1 (the third extension's) above lr 0.05, the first grid's lr 0.2
    # (without warm-up) above lr 0.1
    supcon = TUNINGS["supcon"]
    supcon_cells = {c.name: c for c in (*supcon.grid, *supcon.bounds)}
    above = neighbours(supcon, supcon_cells["supcon_t0.1_lr0.05_warmup"])[lr][1]
    assert above is not None and above.name == "supcon_t0.1_lr0.1_warmup"
    above = neighbours(supcon, supcon_cells["supcon_t0.1_lr0.1_warmup"])[lr][1]
    assert above is not None and above.name == "supcon_t0.1_lr0.2"
    corner = neighbours(sincere, cells["sincere_t0.2_lr0.02_warmup"])
    assert corner[t][1] is None and corner[lr][0] is None  # open above t and below lr
    assert corner[t][0].name == "sincere_t0.1_lr0.02_warmup"
    ressl = TUNINGS["ressl"]
    corner = neighbours(ressl, ressl.grid[0])  # t 0.1, t_m 0.04: both lower sides open
    assert [sides[0] for sides in corner.values()] == [None, None]
    assert [sides[1].name for sides in corner.values()] == ["ressl_t0.2_tm0.04",
                                                             "ressl_t0.1_tm0.07"]
