"""The one-page examples run, and each step does what its comments say."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import torch
import torch.nn.functional as F

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sce_one_step_runs():
    losses = load("sce_one_step").main(steps=2)
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)


def test_sce_one_step_updates_online_target_and_queue_in_order():
    page = load("sce_one_step")
    torch.manual_seed(1)
    make_views, online, target, queue, optimizer = page.build()
    before_target = [p.clone() for p in target.target.parameters()]
    before_online = [p.clone() for p in online.parameters()]
    x = torch.randint(0, 256, (page.BATCH, 3, page.SIZE, page.SIZE), dtype=torch.uint8)
    _, z2 = page.train_step(x, make_views, online, target, queue, optimizer, momentum=0.9)
    after_online = list(online.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after_online, before_online, strict=True))
    for t_after, t_before, o_after in zip(target.target.parameters(), before_target,
                                          after_online, strict=True):
        torch.testing.assert_close(t_after, 0.9 * t_before + 0.1 * o_after)  # EMA of the new
    torch.testing.assert_close(queue.keys[: page.BATCH], F.normalize(z2, dim=1))  # FIFO head
    assert int(queue.ptr) == page.BATCH
