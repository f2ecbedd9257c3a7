"""studies.repro.plan: the second round's planned cost against hand computation: shared
runs counted once, reused runs left out, a tuned run reusing its grid's chosen run adding only
evaluations at the grid's seed."""

from __future__ import annotations

import pytest

from studies.repro.plan import (
    EVAL_SECONDS,
    ROUND_TWO,
    STEP_SECONDS,
    config_steps,
    planned_cost,
)
from studies.repro.studies import STUDIES

F, K, A, H = (EVAL_SECONDS[k] for k in ("features", "knn", "analyze", "heldout_features"))


def test_steps_come_from_the_configs():
    assert config_steps("configs/repro/cpu/simclr_t0.1.yaml") == 30 * 39
    assert config_steps("configs/repro/cpu/cifar2_sincere.yaml") == 30 * (4000 // 256)
    assert config_steps("configs/repro/cpu/random_init.yaml") == 1


def test_temperature_and_dystress_share_the_simclr_runs_and_reuse_random_init():
    temperature, dystress = planned_cost([STUDIES["temperature"], STUDIES["dystress"]])
    assert (temperature.runs, dystress.runs) == (9, 3)  # random init: the first round's
    steps = 30 * 39
    assert temperature.train_seconds == pytest.approx(9 * steps * STEP_SECONDS["simclr"])
    assert dystress.train_seconds == pytest.approx(3 * steps * STEP_SECONDS["dystress"])
    # 200-NN, analyze on the backbone (features once) and analyze on the projector (its own)
    per_run = (F + K + A) + (F + A)
    assert temperature.eval_seconds == pytest.approx(9 * per_run)
    assert dystress.eval_seconds == pytest.approx(3 * per_run)


def test_tuned_runs_reuse_the_grid_run_at_its_seed():
    grid, sincere, cifar2 = planned_cost([STUDIES[n] for n in ("sincere_grid", "sincere",
                                                                 "cifar2")])
    steps = 30 * 39
    assert grid.runs == 8
    assert grid.train_seconds == pytest.approx(
        4 * steps * (STEP_SECONDS["sincere"] + STEP_SECONDS["supcon"]))
    assert grid.eval_seconds == pytest.approx(8 * (H + K))  # the validation 1-NN only
    # seeds 1 and 2 of each loss are trained; seed 0 is the chosen grid run, evaluated
    assert sincere.runs == 4
    assert sincere.train_seconds == pytest.approx(
        2 * steps * (STEP_SECONDS["sincere"] + STEP_SECONDS["supcon"]))
    per_run = 2 * (F + 2 * K + A)  # 1-NN, 5-NN, analyze in each of two spaces
    assert sincere.eval_seconds == pytest.approx(6 * per_run)
    # CIFAR-2: 3 seeds of each loss (450 steps) and of its own random init (1 step)
    assert cifar2.runs == 9
    assert cifar2.train_seconds == pytest.approx(
        3 * 450 * (STEP_SECONDS["cifar2_sincere"] + STEP_SECONDS["cifar2_supcon"])
        + 3 * STEP_SECONDS["cifar2_random_init"])
    assert cifar2.eval_seconds == pytest.approx(9 * (F + 2 * K + A))


def test_the_second_round_plan_is_within_its_budget():
    total = sum(c.seconds for c in planned_cost([STUDIES[n] for n in ROUND_TWO])) / 3600
    assert 15.0 < total < 20.0  # CPU-hours: the "about 15-18"
