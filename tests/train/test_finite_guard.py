"""The device-side NaN/Inf flag keeps the first bad step, whatever follows it."""

from __future__ import annotations

import pytest
import torch

from contrastkit.train.finite_guard import FiniteGuard, NonFiniteLossError


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_the_first_non_finite_step_is_named(bad: float) -> None:
    guard = FiniteGuard(check_every=100)
    losses = [1.0, 0.5, bad, 2.0, float("nan"), 1e30]
    for step, value in enumerate(losses, start=10):
        guard.observe(torch.tensor(value), step, epoch=1, batch=step - 10)
    # counted from 1 in the message, as the epoch lines count (epoch=1 is Lightning's second)
    with pytest.raises(NonFiniteLossError, match=r"at step 12 \(epoch 2, batch 3\)"):
        guard.check()


def test_finite_losses_pass_and_the_check_every_count() -> None:
    guard = FiniteGuard(check_every=3)
    due = [guard.observe(torch.tensor(v, dtype=torch.bfloat16), s, 0, s)
           for s, v in enumerate([3.0, -1e38, 0.0, 65504.0])]
    assert due == [False, False, True, False]
    guard.check()  # no error: every loss was finite
