"""studies.repro.trained: the collapse rule on the first grid's recorded cells (the issue's
three collapsed, the two low-scoring ones not), chance by the classes a run is evaluated on,
and the protocol a run's gain over random init is measured on."""

from __future__ import annotations

import json

import pytest

from studies.repro import layout
from studies.repro.collection import read_losses
from studies.repro.grids import FIRST_GRIDS, VALIDATION
from studies.repro.layout import RECORDS, eval_dir
from studies.repro.studies import STUDIES
from studies.repro.trained import chance, collapse_evidence, collapsed, gain_protocol


def _recorded(stem):
    """A first-grid cell's metrics as the collection reads them from its committed record."""
    seed_dir = layout.REPO / RECORDS / "cpu" / stem / "seed0"
    metrics = {f"pretrain/{k}": v for k, v in read_losses(seed_dir / "pretrain" /
                                                          "metrics.csv").items()}
    results = json.loads((eval_dir(seed_dir, VALIDATION) / "results.json").read_text())
    return metrics | {f"{VALIDATION}/top1": results["metrics"]["top1"]}


@pytest.mark.parametrize("stem, expected", [
    ("sincere_t0.05_lr0.2", True), ("sincere_t0.1_lr0.2", True), ("supcon_t0.05_lr0.2", True),
    ("supcon_t0.05_lr0.05", False), ("supcon_t0.1_lr0.2", False),
    ("sincere_t0.1_lr0.05", False), ("sincere_t0.05_lr0.05", False)])
def test_the_first_grids_collapsed_cells_are_labelled_by_the_rule(stem, expected):
    """Issue 54: three of the first grid's eight cells collapsed (positive-view cosine
    0.95-0.98, validation 1-NN near chance) though their loss fell; SupCon t 0.05 lr 0.05
    (31.6%) and t 0.1 lr 0.2 (45.4%) did not."""
    cell = next(c for cells in FIRST_GRIDS.values() for c in cells if c.stem == stem)
    metrics = _recorded(stem)
    assert metrics["pretrain/final_loss"] < 0.9 * metrics["pretrain/initial_loss"]
    assert collapsed(metrics, chance(cell)) is expected


def test_the_rule_reads_the_cosine_and_either_the_stuck_loss_or_chance():
    stuck = {"pretrain/final_positive_similarity": 0.98, "pretrain/initial_loss": 6.24,
             "pretrain/final_loss": 6.20}
    assert collapsed(stuck, 10.0)  # the loss stuck near its start
    fell = stuck | {"pretrain/final_loss": 5.0}
    assert not collapsed(fell, 10.0)  # the loss fell and no accuracy says otherwise
    assert collapsed(fell | {"knn1_projector/top1": 0.19}, 10.0)  # within 10 points of 10%
    assert not collapsed(fell | {"knn1_projector/top1": 0.21}, 10.0)
    assert collapsed(fell | {"knn1_projector/top1": 0.55}, 50.0)  # CIFAR-2's chance
    assert not collapsed(fell | {"knn1_projector/top1": 0.61}, 50.0)
    # a validation score is read before the test split's
    assert not collapsed(fell | {"knn1_heldout_projector/top1": 0.45,
                                 "knn1_projector/top1": 0.12}, 10.0)
    assert not collapsed(stuck | {"pretrain/final_positive_similarity": 0.94}, 10.0)
    assert not collapsed({"pretrain/initial_loss": 5.5, "pretrain/final_loss": 5.5}, 10.0)
    assert collapse_evidence("SupCon seed 1", fell | {"knn1_projector/top1": 0.1018}, 10.0) == (
        "SupCon seed 1: last-epoch positive cosine 0.980, loss 6.24 -> 5.00, knn1_projector "
        "10.2% (chance 10%)")


def test_chance_and_the_gain_protocol_follow_the_runs_evaluations():
    cifar2 = STUDIES["cifar2"]
    assert chance(cifar2.variant("cifar2_random_init")) == 50.0
    assert chance(STUDIES["baselines"].variant("sce")) == 10.0
    assert gain_protocol(STUDIES["baselines"].variant("sce")) == "knn200"
    assert gain_protocol(STUDIES["sincere"].variant("sincere")) == "knn1_projector"
    assert gain_protocol(cifar2.variant("cifar2_sincere")) == "knn1_projector"
    assert gain_protocol(FIRST_GRIDS["sincere"][0]) is None  # scored on validation only
