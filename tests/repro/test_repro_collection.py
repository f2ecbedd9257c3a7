"""studies.repro.collection: run state read from checkpoints, metrics.csv and evaluation
folders."""

from __future__ import annotations

import csv

import pytest
import torch
from repro_summaries import run_entry

from studies.repro.collection import (
    _accuracy_interval,
    pretrain_finished,
    read_losses,
)
from studies.repro.report import _cell


def _fake_ckpt(path, processed, last_batch):
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"loops": {"fit_loop": {
        "epoch_progress": {"current": {"processed": processed, "completed": processed - 1}},
        "epoch_loop.batch_progress": {"is_last_batch": last_batch}}}}, path)


def test_pretrain_finished(tmp_path):
    ckpt = tmp_path / "last.ckpt"
    assert not pretrain_finished(ckpt, 3)
    _fake_ckpt(ckpt, 3, True)
    assert pretrain_finished(ckpt, 3)
    assert not pretrain_finished(ckpt, 4)
    _fake_ckpt(ckpt, 3, False)  # stopped by max_time inside the last epoch
    assert not pretrain_finished(ckpt, 3)
    # written at the end of the last epoch's validation (the monitor's epochs): the epoch has
    # started and its batches are done, but it is not counted processed yet
    state = {"epoch_progress": {"current": {"started": 30, "processed": 29}},
             "epoch_loop.batch_progress": {"is_last_batch": True,
                                           "current": {"ready": 39, "completed": 39}}}
    torch.save({"loops": {"fit_loop": state}}, ckpt)
    assert pretrain_finished(ckpt, 30) and not pretrain_finished(ckpt, 31)
    state["epoch_loop.batch_progress"]["current"]["completed"] = 38
    torch.save({"loops": {"fit_loop": state}}, ckpt)
    assert not pretrain_finished(ckpt, 30)


def test_single_seed_accuracy_shows_its_bootstrap_interval(tmp_path):
    import numpy as np

    labels = np.arange(1000) % 10
    pred = np.where(np.arange(1000) % 4 == 0, (labels + 1) % 10, labels)  # 75% correct
    np.savez(tmp_path / "predictions.npz", pred=pred, labels=labels)
    (tmp_path / "results.json").write_text('{"predictions": "predictions.npz"}')  # an eval folder
    ci = _accuracy_interval(tmp_path, {"predictions": "predictions.npz"}, "knn200")
    assert ci["knn200/top1_ci_low"] < 0.75 < ci["knn200/top1_ci_high"]
    assert ci["knn200/top1_ci_high"] - ci["knn200/top1_ci_low"] == pytest.approx(
        2 * 1.96 * (0.75 * 0.25 / 1000) ** 0.5, rel=0.15)
    assert _accuracy_interval(tmp_path, {}, "knn200") == {}  # no predictions written
    summary = {"runs": run_entry("sce", 0, {"knn200/top1": 0.75, **ci})}
    cell = _cell(summary, "cpu", "sce", "knn200/top1", 100, 2)
    low, high = 100 * ci["knn200/top1_ci_low"], 100 * ci["knn200/top1_ci_high"]
    assert cell == f"75.00 [{low:.2f}, {high:.2f}] (1 seed)"
    summary["runs"] |= run_entry("sce", 1, {"knn200/top1": 0.77, **ci})
    assert _cell(summary, "cpu", "sce", "knn200/top1", 100, 2) == (
        "76.00 ± 1.41 (2 seeds)")  # several seeds: the spread over seeds instead


def test_read_losses_first_and_last_epoch_means(tmp_path):
    path = tmp_path / "metrics.csv"
    rows = [{"epoch": "", "step": "9", "train/loss": ""},
            {"epoch": "0", "step": "9", "train/loss": "6.0"},
            {"epoch": "0", "step": "19", "train/loss": "5.0"},
            {"epoch": "1", "step": "29", "train/loss": "4.0"},
            {"epoch": "2", "step": "39", "train/loss": "2.0"},
            {"epoch": "2", "step": "49", "train/loss": "1.0"}]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["epoch", "step", "train/loss"])
        writer.writeheader()
        writer.writerows(rows)
    assert read_losses(path) == {"initial_loss": 5.5, "final_loss": 1.5,
                                       "logged_epochs": 3}


def test_a_run_shared_by_studies_is_collected_with_all_their_evaluations(tmp_path):
    """The random-init baseline serves the SINCERE study (1-NN, 5-NN) and the others (200-NN):
    its 200-NN result must reach the summary, whichever study comes first."""
    import json

    from studies.repro.collection import collect, shared_variants
    from studies.repro.layout import RUNS

    variants = shared_variants("cpu")
    stems = [v.stem for v in variants]
    assert len(stems) == len(set(stems))  # one variant per run folder
    by_stem = dict(zip(stems, variants, strict=True))
    assert {"knn1", "knn5", "knn200"} <= set(by_stem["random_init"].evals)
    seed_dir = tmp_path / RUNS / "cpu" / "random_init" / "seed0"
    for protocol, top1 in (("knn200", 0.3155), ("knn1", 0.2599)):
        folder = seed_dir / "eval" / protocol
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps({"metrics": {"top1": top1}}))
    run = collect(tmp_path)["runs"]["cpu/random_init/seed0"]
    assert run["metrics"]["knn200/top1"] == pytest.approx(0.3155)
    assert run["metrics"]["knn1/top1"] == pytest.approx(0.2599)
    assert set(run["evals_done"]) == {"knn200", "knn1"}
    assert run["status"] == "partial"  # knn5 and the pretraining are missing
