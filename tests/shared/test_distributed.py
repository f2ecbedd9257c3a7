"""Collective helpers: single-process identity and a real 2-process gloo run on CPU.

The 2-process run (one ``torch.multiprocessing.spawn``, shared by the tests below through a
module fixture) checks that ``gather_with_grad`` + DistributedDataParallel reproduce, after
one optimisation step, the loss, every parameter gradient and every updated parameter of a
single process on the combined batch; that unequal local batches gather and back-propagate
correctly; and that a queue fed with gathered keys is identical on both ranks.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from gloo_harness import all_reduce_mean, run_ranks
from torch import Tensor, nn

from contrastkit.distributed import (
    gather_no_grad,
    gather_with_grad,
    is_distributed,
    max_over_processes,
    rank,
    world_size,
)
from contrastkit.hot_path import hot_path
from contrastkit.methods.queue import MemoryQueue

WORLD = 2
BATCH = 8  # combined batch; 4 per rank
TAU = 0.5
LR = 0.1
UNEVEN = (3, 5)  # local sizes for the unequal-batch check


# --------------------------------------------------------------------------- shared pieces
def _data() -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(1)
    x1 = torch.randn(BATCH, 5, generator=g, dtype=torch.float64)
    x2 = x1 + 0.3 * torch.randn(BATCH, 5, generator=g, dtype=torch.float64)
    return x1, x2


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 4)).double()


def _nt_xent(z1: Tensor, z2: Tensor, z1_all: Tensor, z2_all: Tensor, offset: int) -> Tensor:
    """NT-Xent (SimCLR) for the local anchors ``z1, z2`` against all ``2N`` embeddings.

    Anchor ``i`` of view 1 (global index ``offset + i``) has its view-2 partner as positive,
    every other gathered embedding except itself as negative; mean over the ``2b`` anchors.
    """
    b, n = z1.shape[0], z1_all.shape[0]
    anchors = F.normalize(torch.cat([z1, z2]), dim=1)
    bank = F.normalize(torch.cat([z1_all, z2_all]), dim=1)
    logits = anchors @ bank.T / TAU
    idx = torch.arange(b) + offset
    self_idx = torch.cat([idx, idx + n])
    pos_idx = torch.cat([idx + n, idx])
    mask = torch.zeros_like(logits, dtype=torch.bool)
    mask[torch.arange(2 * b), self_idx] = True
    return F.cross_entropy(logits.masked_fill(mask, float("-inf")), pos_idx)


def _queue_batches() -> list[list[Tensor]]:
    """Per step, the per-rank key batches (last step has unequal sizes 1 and 4)."""
    g = torch.Generator().manual_seed(7)
    steps = []
    for sizes in ((3, 3), (3, 3), (1, 4), (3, 3)):
        steps.append([torch.randn(n, 3, generator=g) for n in sizes])
    return steps


# --------------------------------------------------------------------------- worker
def _worker(rk: int) -> dict[str, Any]:
    out: dict[str, Any] = {"rank": rank(), "world": world_size(), "dist": is_distributed()}
    out.update(_ddp_step(rk))
    out.update(_uneven(rk))
    out.update(_queue(rk))
    out.update(_hot_path_gathers(rk))
    # a decision taken together: rank 1 alone has a signal (15), rank 0 alone a 2, neither one
    out["votes"] = [max_over_processes(v) for v in ((0, 15)[rk], (2, 0)[rk], 0)]
    return out


def _images(rk: int) -> Tensor:
    g = torch.Generator().manual_seed(20 + rk)
    return torch.randn(2, 3, 4, 5, generator=g).contiguous(memory_format=torch.channels_last)


def _hot_path_gathers(rk: int) -> dict[str, Any]:
    """The training step's gathers (equal sizes trusted): one output written by the collective;
    a channels_last image batch stays channels_last."""
    local = torch.randn(3, 4, generator=torch.Generator().manual_seed(30 + rk),
                        requires_grad=True)
    with hot_path():
        images = gather_no_grad(_images(rk))
        rows = gather_with_grad(local)
    (rows * torch.arange(24.0).view(6, 4)).sum().backward()
    return {"hot_images": images, "hot_images_cl": images.is_contiguous(
        memory_format=torch.channels_last), "hot_rows": rows.detach(), "hot_grad": local.grad}


def _ddp_step(rk: int) -> dict[str, Any]:
    x1, x2 = _data()
    b = BATCH // WORLD
    sl = slice(rk * b, (rk + 1) * b)
    model = nn.parallel.DistributedDataParallel(_model())
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    z = model(torch.cat([x1[sl], x2[sl]]))  # one forward per step under DDP
    z1, z2 = z[:b], z[b:]
    z1_all, z2_all = gather_with_grad(z1), gather_with_grad(z2)
    loss = _nt_xent(z1, z2, z1_all, z2_all, offset=rk * b)
    loss.backward()
    grads = [p.grad.detach().clone() for p in model.module.parameters()]
    opt.step()
    return {
        "gathered": torch.cat([z1_all, z2_all]).detach(),
        "loss": all_reduce_mean(loss),
        "grads": grads,
        "params": [p.detach().clone() for p in model.module.parameters()],
    }


def _uneven(rk: int) -> dict[str, Any]:
    g = torch.Generator().manual_seed(3)
    full = torch.randn(sum(UNEVEN), 2, generator=g, dtype=torch.float64)
    start = sum(UNEVEN[:rk])
    local = full[start : start + UNEVEN[rk]].clone().requires_grad_()
    weights = torch.randn(sum(UNEVEN), 2, generator=torch.Generator().manual_seed(10 + rk))
    gathered = gather_with_grad(local)
    (weights.double() * gathered).sum().backward()
    error = ""
    try:
        gather_no_grad(torch.zeros(2, 2 + rk))
    except ValueError as exc:
        error = str(exc)
    return {
        "uneven_gathered": gathered.detach(),
        "uneven_grad": local.grad,
        "uneven_no_grad": gather_no_grad(local),
        "shape_error": error,
        "mean": all_reduce_mean(torch.tensor([rk + 1.0])),
    }


def _queue(rk: int) -> dict[str, Any]:
    gathered_by_caller = MemoryQueue(10, 3, normalize=False)
    gathered_inside = MemoryQueue(10, 3, normalize=False, gather=True)
    for step in _queue_batches():
        gathered_by_caller.enqueue(gather_no_grad(step[rk]))
        gathered_inside.enqueue(step[rk])
    return {
        "queue_caller": gathered_by_caller.state_dict(),
        "queue_inside": gathered_inside.state_dict(),
    }


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run_ranks(_worker, WORLD, tmp_path_factory.mktemp("dist"))


# --------------------------------------------------------------------------- tests
def test_single_process_is_identity() -> None:
    assert not is_distributed() and rank() == 0 and world_size() == 1
    x = torch.randn(3, 2, requires_grad=True)
    y = gather_with_grad(x)
    assert y is x
    (2 * y).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3, 2), 2.0))
    assert not gather_no_grad(x).requires_grad
    assert max_over_processes(7) == 7


def test_two_ranks_agree_on_the_largest_value(two_ranks: list[dict[str, Any]]) -> None:
    """Issue 52 item 6: the stop after a signal is one decision of every process."""
    assert [r["votes"] for r in two_ranks] == [[15, 2, 0], [15, 2, 0]]


def test_two_ranks_ddp_step_matches_single_process(two_ranks: list[dict[str, Any]]) -> None:
    x1, x2 = _data()
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    z1, z2 = model(x1), model(x2)
    loss = _nt_xent(z1, z2, z1, z2, offset=0)
    loss.backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    opt.step()
    for res in two_ranks:
        assert res["dist"] and res["world"] == WORLD
        torch.testing.assert_close(res["gathered"], torch.cat([z1, z2]).detach())
        torch.testing.assert_close(res["loss"], loss.detach(), rtol=0, atol=1e-5)
        for got, want in zip(res["grads"], grads, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
        for got, want in zip(res["params"], model.parameters(), strict=True):
            torch.testing.assert_close(got, want.detach(), rtol=0, atol=1e-5)


def test_two_ranks_unequal_sizes_forward_backward(two_ranks: list[dict[str, Any]]) -> None:
    full = torch.randn(
        sum(UNEVEN), 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64
    )
    w = [
        torch.randn(sum(UNEVEN), 2, generator=torch.Generator().manual_seed(10 + r)).double()
        for r in range(WORLD)
    ]
    summed = w[0] + w[1]  # gradient of each slice summed over ranks
    for r, res in enumerate(two_ranks):
        torch.testing.assert_close(res["uneven_gathered"], full)
        torch.testing.assert_close(res["uneven_no_grad"], full)
        start = sum(UNEVEN[:r])
        torch.testing.assert_close(res["uneven_grad"], summed[start : start + UNEVEN[r]])
        assert "same dtype and the same shape" in res["shape_error"]
        torch.testing.assert_close(res["mean"], torch.tensor([1.5]))


def test_two_ranks_queue_identical_on_both_ranks(two_ranks: list[dict[str, Any]]) -> None:
    reference = MemoryQueue(10, 3, normalize=False)
    for step in _queue_batches():
        reference.enqueue(torch.cat(step))  # rank order
    want = reference.state_dict()
    for res in two_ranks:
        for key in ("queue_caller", "queue_inside"):
            got = res[key]
            torch.testing.assert_close(got["keys"], want["keys"])
            assert int(got["ptr"]) == int(want["ptr"]) and int(got["filled"]) == 10


def test_two_ranks_hot_path_gathers_write_once_and_keep_channels_last(
        two_ranks: list[dict[str, Any]]) -> None:
    images = torch.cat([_images(0), _images(1)])
    rows = torch.cat([torch.randn(3, 4, generator=torch.Generator().manual_seed(30 + r))
                      for r in (0, 1)])
    weights = torch.arange(24.0).view(6, 4)
    for rk, out in enumerate(two_ranks):
        assert torch.equal(out["hot_images"], images) and out["hot_images_cl"]
        assert torch.equal(out["hot_rows"], rows)
        # the gradient of rank rk's rows: the sum over both ranks of its slice of the weights
        torch.testing.assert_close(out["hot_grad"], 2 * weights[3 * rk:3 * rk + 3])
