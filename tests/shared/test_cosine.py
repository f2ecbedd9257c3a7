"""The one half-cosine curve (contrastkit.cosine) and the five schedules that use it.

Each schedule is compared, bit for bit, with its formula written out as its source gives it, so
that routing it through the shared helper changed no value.
"""

from __future__ import annotations

import itertools
import math

import pytest

from contrastkit.cosine import cosine_anneal
from contrastkit.eval.finetune import FinetuneProtocol
from contrastkit.eval.linear import LinearProtocol
from contrastkit.models.momentum import cosine_momentum
from contrastkit.optim import warmup_cosine
from contrastkit.schedules import CosineSchedule, ScheduleState

STEPS = 12


def test_endpoints_midpoint_and_monotone_decay() -> None:
    assert cosine_anneal(2.0, 0.5, 0.0) == 2.0
    assert cosine_anneal(2.0, 0.5, 1.0) == 0.5
    assert cosine_anneal(2.0, 0.5, 0.5) == pytest.approx(1.25, abs=1e-15)
    values = [cosine_anneal(2.0, 0.5, k / STEPS) for k in range(STEPS + 1)]
    assert all(a > b for a, b in itertools.pairwise(values))
    assert cosine_anneal(0.99, 1.0, 0.25) < cosine_anneal(0.99, 1.0, 0.75)  # rising as well


@pytest.mark.parametrize("k", range(STEPS + 1))
def test_every_cosine_schedule_is_its_formula_bit_for_bit(k: int) -> None:
    p = k / STEPS
    half = 0.5 * (1.0 + math.cos(math.pi * p))
    # BYOL momentum (Grill et al. 2020, section 3.2): 1 - (1 - base) (cos(pi k / K) + 1) / 2
    assert cosine_momentum(k, STEPS, 0.99) == 1.0 - (1.0 - 0.99) * (math.cos(math.pi * p) + 1) / 2
    # learning rate without warm-up (Loshchilov & Hutter 2017, eq. 5 without restart)
    assert warmup_cosine(k, STEPS, 0, 0.4, final_lr=0.01) == 0.01 + (0.4 - 0.01) * half
    schedule = CosineSchedule(start=1.0, end=0.2)
    assert schedule(ScheduleState(step=k, total_steps=STEPS)) == 0.2 + (1.0 - 0.2) * half
    linear = LinearProtocol(epochs=STEPS, lr=0.3)
    assert linear.lr_at(float(k)) == 0.3 * half
    finetune = FinetuneProtocol(epochs=STEPS, lr=0.1, lr_reference_batch=64, batch_size=128)
    assert finetune.lr_at(float(k)) == 0.2 * half
