"""studies.repro.tuning: the rule that picks a tuned run's setting from its grid, and the
tuned variants it resolves to."""

from __future__ import annotations

import json

from studies.repro import layout
from studies.repro.layout import eval_dir, run_dir
from studies.repro.studies import STUDIES, TUNINGS, VALIDATION
from studies.repro.tuning import (
    choose,
    folder_choices,
    grid_scores,
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
    assert list(grid_scores(tuning).values()) == [0.5, 0.51, 0.52, None]
    assert folder_choices(STUDIES.values())["sincere"]["chosen"] is None
    folder = tmp_path / eval_dir(run_dir("cpu", tuning.grid[3].stem, 0), VALIDATION)
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"metrics": {"top1": 0.49}}))
    assert folder_choices(STUDIES.values())["sincere"]["chosen"] == tuning.grid[2].name


def test_resolved_variants():
    cell = TUNINGS["sincere"].grid[1]
    tuned = STUDIES["sincere"].variant("sincere")
    reused = resolve(tuned, cell)  # the grid run's folder, the study's evaluations added
    assert (reused.name, reused.stem, reused.overrides) == ("sincere", cell.stem, cell.overrides)
    assert reused.evals == (VALIDATION, *tuned.evals) and reused.tuning is None
    assert reused.label == "SINCERE (tuned: t=0.05, lr=0.2)"
    cifar2 = resolve(STUDIES["cifar2"].variant("cifar2_sincere"), cell)  # its own config
    assert (cifar2.stem, cifar2.config) == ("cifar2_sincere",
                                            "configs/repro/cpu/cifar2_sincere.yaml")
    assert cifar2.overrides == cell.overrides and cifar2.eval_args == ("--classes", "cat", "dog")
    # nothing chosen, or a choice the grid does not hold: the placeholder stays
    assert resolve(tuned, None) is tuned
    study = resolve_study(STUDIES["sincere"], {"sincere": {"chosen": "not_a_cell"}})
    assert study.variant("sincere") is tuned
