"""The one-page examples run, and each step does what its comments say."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import torch
import torch.nn.functional as F

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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


def test_simclr_dystress_one_step_computes_algorithm_3():
    """The page's loss is DySTreSS Alg. 3, written here line by line on the same views."""
    page = load("simclr_dystress_one_step")
    torch.manual_seed(2)
    augment, f, optimizer = page.build()
    x = torch.randint(0, 256, (page.BATCH, 3, page.SIZE, page.SIZE), dtype=torch.uint8)
    state = torch.random.get_rng_state()
    with torch.no_grad():
        x_1, x_2 = augment(x)
        z_1, z_2 = F.normalize(f(x_1), dim=-1), F.normalize(f(x_2), dim=-1)
    n = page.BATCH
    ndg = ~torch.eye(n, dtype=torch.bool)
    s11, s22 = (z_1 @ z_1.T)[ndg].view(n, -1), (z_2 @ z_2.T)[ndg].view(n, -1)
    s = torch.cat([torch.cat([z_1 @ z_2.T, s11], 1), torch.cat([z_2 @ z_1.T, s22], 1)], 0)
    temp = 0.1 + 0.5 * (0.2 - 0.1) * (1 + torch.cos(math.pi * (1 + s)))
    expected = F.cross_entropy(s / temp, torch.arange(n).repeat(2))
    torch.random.set_rng_state(state)
    loss = page.train_step(x, augment, f, optimizer)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)


def test_sincere_one_step_runs():
    losses = load("sincere_one_step").main(steps=2)
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
