"""The outside anchor's section of the report (issue 54 item 5) on synthetic records: lightly's
SimCLR seeds beside contrastkit's SimCLR t = 0.2 seeds 0 and 1, the difference, whether it is
within the seeds' spread, and the commands; what ``collect`` reads from an anchor folder. The
anchor's training (lightly, torchvision) is tested in the timm lane
(``tests/timm_lane/test_lightly_anchor.py``)."""

from __future__ import annotations

import json

from repro_summaries import fake_sincere_summary, run_entry
from scipy import stats

from studies.repro import layout
from studies.repro.collection import collect
from studies.repro.lightly_anchor import anchor_headline, anchor_lines, budget, collect_anchor
from studies.repro.report import render_report


def _summary(ours, theirs):
    runs = {}
    for seed, top1 in enumerate(ours):
        runs |= run_entry("simclr_t0.2", seed, {"knn200/top1": top1})
    anchor = {str(seed): {"knn200/top1": top1} for seed, top1 in enumerate(theirs)}
    return {"runs": runs, "anchor": anchor}


def _row(lines, seed):
    return next(line for line in lines if line.startswith(f"| {seed} |"))


def test_the_section_sets_both_libraries_seeds_side_by_side():
    lines = anchor_lines(_summary([0.5113, 0.5105], [0.5150, 0.5090]))
    assert lines[0] == "## Outside anchor: lightly's SimCLR"
    assert _row(lines, 0) == "| 0 | 51.13 | 51.50 | +0.37 |"
    assert _row(lines, 1) == "| 1 | 51.05 | 50.90 | -0.15 |"
    verdict = next(line for line in lines if line.startswith("Mean difference"))
    # diffs +0.37, -0.15: mean +0.11, 95% t-interval with 1 degree of freedom
    half = stats.t.ppf(0.975, 1) * stats.tstd([0.37, -0.15]) / 2 ** 0.5
    assert verdict.startswith(f"Mean difference +0.11 points (95% t-interval over the 2 seed "
                              f"pairs [{0.11 - half:+.2f}, {0.11 + half:+.2f}]): within")
    assert "(0.60 points, the larger of the two libraries' seed-to-seed ranges)" in verdict
    text = "\n".join(lines)
    for seed in (0, 1):
        assert (f"OMP_NUM_THREADS=1 PYTHONPATH=src:. .venv-timm/bin/python -m "
                f"studies.repro.lightly_anchor --seed {seed}") in text


def test_a_difference_larger_than_the_seeds_spread_is_outside():
    lines = anchor_lines(_summary([0.5113, 0.5105], [0.5400, 0.5420]))
    verdict = next(line for line in lines if line.startswith("Mean difference"))
    assert verdict.startswith("Mean difference +3.01 points") and "): outside the" in verdict


def test_a_seed_not_yet_run_is_said_and_judged_by_nothing():
    lines = anchor_lines(_summary([0.5113, 0.5105], [0.5150]))
    assert _row(lines, 1) == "| 1 | 51.05 | not yet run | – |"
    assert ("No verdict yet: it needs both libraries at seeds 0, 1; not yet run: lightly "
            "seed 1.") in lines
    assert not any(line.startswith("Mean difference") for line in lines)


def test_the_page_has_the_section_and_its_commands_in_how_to_rerun():
    text = render_report(fake_sincere_summary())  # no anchor, no SimCLR run: not yet run
    section = text[text.index("## Outside anchor: lightly's SimCLR"):]
    assert "| 0 | not yet run | not yet run | – |" in section
    rerun = text[text.index("## How to rerun"):]
    assert text.index("## Outside anchor") < text.index("## How to rerun")  # the results first
    assert "studies.repro.lightly_anchor --seed 1" in rerun.split("\n## ")[0]


def test_collect_reads_the_anchor_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    seed_dir = tmp_path / "runs" / "repro" / "cpu" / "lightly_simclr_t0.2" / "seed1"
    (seed_dir / "eval" / "knn200").mkdir(parents=True)
    (seed_dir / "pretrain").mkdir()
    (seed_dir / "eval" / "knn200" / "results.json").write_text(
        json.dumps({"metrics": {"top1": 0.5123}}))
    (seed_dir / "pretrain" / "epochs.jsonl").write_text(
        "".join(json.dumps({"epoch": e, "loss": 5.0, "seconds": s}) + "\n"
                for e, s in ((1, 100.0), (2, 120.0))))
    (seed_dir / "provenance.jsonl").write_text(json.dumps({"step": "pretrain",
                                                           "lightly": "1.6.0"}) + "\n")
    # a seed whose evaluation has not run is left out
    (seed_dir.parent / "seed0" / "pretrain").mkdir(parents=True)
    expected = {"1": {"knn200/top1": 0.5123, "epochs": 2, "seconds_per_epoch": 110.0,
                      "lightly": "1.6.0"}}
    assert collect_anchor() == expected
    assert collect()["anchor"] == expected


def test_the_budget_is_the_study_configs():
    settings = budget()
    assert settings == {"temperature": 0.2, "lr": 0.06, "weight_decay": 5e-4,
                        "batch_size": 256, "images": 10000, "data_seed": 0, "epochs": 30,
                        "backbone": {"name": "resnet18", "cifar_stem": True, "width": 16},
                        "projector": {"hidden_dim": 256, "out_dim": 128, "num_layers": 2,
                                      "batch_norm": "all"}}
    smoke = budget(epochs=1, images=512, batch_size=64)
    assert (smoke["epochs"], smoke["images"], smoke["batch_size"]) == (1, 512, 64)


def test_the_headline_states_both_means_and_the_verdict():
    line = anchor_headline(_summary([0.5113, 0.5105], [0.5147, 0.5234]))
    assert line.startswith("* **Outside anchor**: lightly's SimCLR, trained on the same images")
    assert "51.91 % (200-NN, mean of 2 seeds) against contrastkit's SimCLR 51.09 %." in line
    assert "Mean difference +0.82 points" in line and "within the seeds' spread (0.87" in line
    pending = anchor_headline(_summary([0.5113, 0.5105], [0.5147]))
    assert pending.endswith("not yet run: lightly seed 1.")
