"""studies.repro.plan: the planned cost against hand computation: shared runs counted once,
reused runs left out, a tuned run reusing its grid's chosen run adding only evaluations at the
grid's seed; issue 54's round within its budget."""

from __future__ import annotations

import pytest

from studies.repro.grids import LATER_EXTENSIONS
from studies.repro.plan import (
    EVAL_SECONDS,
    REUSED_BY_ROUND_THREE,
    STEP_SECONDS,
    config_steps,
    planned_cost,
)
from studies.repro.scale import extension_cost, round_three_cost, rounds
from studies.repro.studies import STUDIES

F, K, A, H = (EVAL_SECONDS[k] for k in ("features", "knn", "analyze", "heldout_features"))


def test_steps_come_from_the_configs():
    assert config_steps("configs/repro/cpu/simclr_t0.1.yaml") == 30 * 39
    assert config_steps("configs/repro/cpu/cifar2_sincere.yaml") == 30 * (4000 // 256)
    assert config_steps("configs/repro/cpu/random_init.yaml") == 1


def test_temperature_and_dystress_share_the_simclr_runs_and_reuse_random_init():
    temperature, dystress = planned_cost([STUDIES["temperature"], STUDIES["dystress"]],
                                         reused=frozenset({"random_init"}))
    assert (temperature.runs, dystress.runs) == (9, 3)  # random init: the first round's
    steps = 30 * 39
    assert temperature.train_seconds == pytest.approx(9 * steps * STEP_SECONDS["simclr"])
    assert dystress.train_seconds == pytest.approx(3 * steps * STEP_SECONDS["dystress"])
    # 200-NN, analyze on the backbone (features once) and analyze on the projector (its own)
    per_run = (F + K + A) + (F + A)
    assert temperature.eval_seconds == pytest.approx(9 * per_run)
    assert dystress.eval_seconds == pytest.approx(3 * per_run)


def test_tuned_runs_reuse_the_grid_run_at_its_seed():
    """Issue 54's round: the first grid's cells and CIFAR-2's random init are reused (the
    CIFAR-10 random init too, here, to count the tuned runs alone); the grid's extension is
    trained, and the runs tuned on it."""
    grid, sincere, cifar2 = planned_cost(
        [STUDIES[n] for n in ("sincere_grid", "sincere", "cifar2")],
        reused=REUSED_BY_ROUND_THREE | {"random_init"})
    steps = 30 * 39
    assert grid.runs == 18  # the extensions' cells: nine of each loss
    assert grid.train_seconds == pytest.approx(
        steps * 9 * (STEP_SECONDS["sincere"] + STEP_SECONDS["supcon"]))
    assert grid.eval_seconds == pytest.approx(18 * (H + K))  # the validation 1-NN only
    # seeds 1 and 2 of each loss are trained; seed 0 is the chosen grid run, evaluated
    assert sincere.runs == 4
    assert sincere.train_seconds == pytest.approx(
        2 * steps * (STEP_SECONDS["sincere"] + STEP_SECONDS["supcon"]))
    per_run = 2 * (F + 2 * K + A)  # 1-NN, 5-NN, analyze in each of two spaces
    assert sincere.eval_seconds == pytest.approx(6 * per_run)
    # CIFAR-2: 3 seeds of each loss (450 steps); its random init is the second round's
    assert cifar2.runs == 6
    assert cifar2.train_seconds == pytest.approx(
        3 * 450 * (STEP_SECONDS["cifar2_sincere"] + STEP_SECONDS["cifar2_supcon"]))
    assert cifar2.eval_seconds == pytest.approx(6 * (F + 2 * K + A))


def test_issue_54s_round_is_planned_near_its_budget():
    """Issue 54 budgets about 15 CPU-hours for its items 3 to 5; its runs (items 3 and 4: the
    first round's 12 records trained again, the grid extended, ReSSL's grid, the runs tuned
    on them) plan about 17, within 15% of it (lightly's anchor, item 5, is planned apart).
    The grids' later extensions, each planned before its runs, are counted apart: the
    second's four runs and the third's six (two and three of each loss)."""
    costs = round_three_cost()
    assert [(c.study, c.runs) for c in costs] == [
        ("sincere_grid", 8), ("ressl_grid", 4), ("sincere", 7), ("cifar2", 6), ("baselines", 8)]
    # item 3: SCE, MoCo v2 (baselines), ReSSL's own cell (its grid) and the CIFAR-10 random
    # init (study 1, the first to list it), 3 seeds each at one commit
    total = sum(c.seconds for c in costs) / 3600
    assert 15.0 * 0.85 < total < 15.0 * 1.15
    second, third = (extension_cost(e) for e in LATER_EXTENSIONS)
    assert (second.study, second.runs, third.runs) == ("sincere_grid", 4, 6)
    assert second.train_seconds == pytest.approx(
        2 * 30 * 39 * (STEP_SECONDS["sincere"] + STEP_SECONDS["supcon"]))
    assert third.train_seconds == pytest.approx(
        3 * 30 * 39 * (STEP_SECONDS["sincere"] + STEP_SECONDS["supcon"]))
    assert rounds()[1].runs == 33 + 4 + 6
