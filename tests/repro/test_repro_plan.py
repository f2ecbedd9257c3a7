"""studies.repro.plan: the planned cost against hand computation, shared runs counted once."""

from __future__ import annotations

import pytest

from studies.repro.plan import (
    EVAL_SECONDS,
    SHARED_STEP_SECONDS,
    STEP_SECONDS,
    lane_seconds,
    planned_cost,
)
from studies.repro.studies import STUDIES


def test_planned_cost_by_hand():
    (cost,) = planned_cost([STUDIES["baselines"]])
    assert cost.runs == 12  # SCE, MoCo v2, ReSSL and the random-init baseline, 3 seeds each
    steps = 30 * 39
    train = 3 * steps * (STEP_SECONDS["sce"] + STEP_SECONDS["moco"] + STEP_SECONDS["ressl"])
    assert cost.train_seconds == pytest.approx(train + 3 * 1 * STEP_SECONDS["random_init"])
    # the random-init baseline: 1-, 5- and 200-NN on the backbone, features extracted once;
    # 1- and 5-NN on the projector's output, its features extracted once more; analyze in each
    init_evals = (EVAL_SECONDS["knn_first"] + 2 * EVAL_SECONDS["knn_cached"]
                  + EVAL_SECONDS["knn_first"] + EVAL_SECONDS["knn_cached"]
                  + 2 * EVAL_SECONDS["analyze"])
    assert cost.eval_seconds == pytest.approx(9 * EVAL_SECONDS["knn_first"] + 3 * init_evals)
    (shared,) = planned_cost([STUDIES["baselines"]], SHARED_STEP_SECONDS)
    assert shared.train_seconds == pytest.approx(3 * steps * 3 * 2.88 + 3 * 3.86)
    assert shared.eval_seconds == cost.eval_seconds
    assert set(SHARED_STEP_SECONDS) == set(STEP_SECONDS)


def test_shared_runs_are_counted_once_with_every_evaluation():
    dystress, temperature = planned_cost([STUDIES["dystress"], STUDIES["temperature"]])
    assert (dystress.runs, temperature.runs) == (15, 0)  # the SimCLR grid is the same runs
    assert temperature.seconds == 0.0
    sincere, baselines = planned_cost([STUDIES["sincere"], STUDIES["baselines"]])
    assert (sincere.runs, baselines.runs) == (9, 9)
    # the random-init runs are the sincere study's, evaluated with 1-NN, 5-NN and 200-NN: the
    # features once, then two cached kNN evaluations, and with 1-NN and 5-NN on the projector's
    # output (its features once more), and analyze in each space; SINCERE and SupCon: 1-NN,
    # 5-NN and analyze in each space
    first, cached, analyze = (EVAL_SECONDS[k] for k in ("knn_first", "knn_cached", "analyze"))
    per_seed = (2 * 2 * (first + cached + analyze) + (first + 2 * cached) + (first + cached)
                + 2 * analyze)
    assert sincere.eval_seconds == pytest.approx(3 * per_seed)
    assert baselines.eval_seconds == pytest.approx(9 * first)
    lanes = lane_seconds([sincere, baselines], lanes=[["sincere"], ["baselines"]])
    assert lanes == [sincere.seconds, baselines.seconds]
