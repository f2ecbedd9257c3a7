"""SwAV, DINO and NNCLR under DistributedDataParallel equal one process on the combined batch.

The pattern of ``test_distributed_methods.py`` (its module docstring says why: float64, heads
without batch statistics, the method in eval mode, ``broadcast_buffers=False``): two gloo
processes each take half of a fixed batch of 8 and run two optimisation steps of the method
wrapped in DDP; the parent runs the same steps on the whole batch in one process. To 1e-5:
the loss, every gradient, the parameters after each step, and what each method keeps across
steps on both ranks:

* SwAV: the codes come from Sinkhorn-Knopp over the *global* batch (gathered projections),
  and from the second step on over a full feature queue as well (8 rows: the first step's
  global batch); two global and two local crops. Each process computes its own rows' mean loss
  ("local"); the queues are equal on every rank.
* DINO: the centre is updated from the teacher outputs of every process; the EMA teacher; two
  global crops and one local crop; "local" losses.
* NNCLR: the support set takes the first view's projections of the global batch (10 rows, so
  the second write wraps); neighbours found per process, the loss of the global batch on every
  process ("global").

Gradient accumulation (one process): two micro-batches of 4 give DINO's step of 8, and leave
SwAV's queues and NNCLR's support set as one step of 8 does.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from gloo_harness import run_ranks
from torch import nn

from contrastkit.methods import DINO, NNCLR, ContrastiveMethod, SwAV
from contrastkit.models.factory import BackboneSpec, DINOHeadSpec, HeadSpec
from contrastkit.schedules import ScheduleState

WORLD, BATCH, STEPS, TOTAL_STEPS, LR, ATOL = 2, 8, 2, 10, 0.1, 1e-5
BACKBONE = BackboneSpec(name="small_convnet", width=4, out_dim=8)
HEAD = HeadSpec(hidden_dim=8, out_dim=6, num_layers=2, batch_norm="none")

#: case -> (number of views, loss convention)
CASES = {"swav": (4, "local"), "dino": (3, "local"), "nnclr": (2, "global")}


def _build(case: str) -> ContrastiveMethod:
    torch.manual_seed(0)
    if case == "swav":
        method: ContrastiveMethod = SwAV(backbone=BACKBONE, projector=HEAD, num_prototypes=5,
                                         queue_size=BATCH, queue_start_epoch=0)
    elif case == "dino":
        method = DINO(backbone=BACKBONE, momentum=0.9, center_momentum=0.5,
                      projector=DINOHeadSpec(hidden_dim=8, bottleneck_dim=4, num_prototypes=7))
    else:
        method = NNCLR(backbone=BACKBONE, projector=HEAD, predictor=HEAD, queue_size=10,
                       temperature=0.2)
    return method.double().eval()


def _batch(step: int, views: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    base = torch.rand(BATCH, 3, 8, 8, generator=g, dtype=torch.float64)
    return [base + 0.2 * torch.randn(base.shape, generator=g, dtype=torch.float64)
            for _ in range(views)]


def _kept(method: ContrastiveMethod) -> dict[str, torch.Tensor]:
    """What the method keeps across steps besides its parameters."""
    if isinstance(method, SwAV):
        return {f"queue{i}.{k}": v.clone() for i, q in enumerate(method.queues)
                for k, v in q.state_dict().items()}
    if isinstance(method, DINO):
        return {"center": method.center.clone(),
                **{f"teacher.{n}": p.clone() for n, p in method.target.named_parameters()}}
    return {f"queue.{k}": v.clone() for k, v in method.queue.state_dict().items()}


def _train(case: str, rows: slice, ddp: bool, micro_batches: int = 1) -> list[dict[str, Any]]:
    views_per_step, _ = CASES[case]
    method = _build(case)
    model: nn.Module = (nn.parallel.DistributedDataParallel(method, broadcast_buffers=False)
                        if ddp else method)
    opt = torch.optim.SGD(method.parameters(), lr=LR)
    records = []
    for step in range(STEPS):
        state = ScheduleState(step=step, total_steps=TOTAL_STEPS, epoch=step / 5,
                              total_epochs=2.0)
        views = [v[rows] for v in _batch(step, views_per_step)]
        labels = torch.zeros(views[0].shape[0], dtype=torch.long)
        opt.zero_grad(set_to_none=True)
        loss = torch.zeros((), dtype=torch.float64)
        for chunk in range(micro_batches):
            part = slice(chunk * len(labels) // micro_batches,
                         (chunk + 1) * len(labels) // micro_batches)
            out = model([v[part] for v in views], labels[part], state)
            (out.loss / micro_batches).backward()
            loss = loss + out.loss.detach() / micro_batches
        grads = {n: p.grad.clone() for n, p in method.named_parameters() if p.grad is not None}
        opt.step()
        method.after_optimizer_step(state)
        records.append({"loss": loss, "grads": grads, "kept": _kept(method),
                        "params": {n: p.detach().clone() for n, p in method.named_parameters()
                                   if p.requires_grad}})
    return records


def _worker(rk: int) -> dict[str, Any]:
    half = BATCH // WORLD
    return {case: _train(case, slice(rk * half, (rk + 1) * half), ddp=True) for case in CASES}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run_ranks(_worker, WORLD, tmp_path_factory.mktemp("dist_swav_dino_nnclr"))


def _close(got, want, what: str) -> None:
    torch.testing.assert_close(got, want, rtol=0, atol=ATOL, msg=lambda m: f"{what}: {m}")


def _same_step(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    for part in ("grads", "params", "kept"):
        assert got[part].keys() == want[part].keys(), f"{where} {part}"
        for name, value in want[part].items():
            _close(got[part][name], value, f"{where} {part} {name}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_ddp_steps_match_single_process(two_ranks: list[dict[str, Any]], case: str) -> None:
    reference = _train(case, slice(None), ddp=False)
    convention = CASES[case][1]
    for step, want in enumerate(reference):
        ranks = [res[case][step] for res in two_ranks]
        assert want["grads"].keys() == want["params"].keys()
        if convention == "global":
            for rk, got in enumerate(ranks):
                _close(got["loss"], want["loss"], f"step {step} rank {rk} loss")
        else:
            _close(torch.stack([g["loss"] for g in ranks]).mean(), want["loss"],
                   f"step {step} mean of the rank losses")
        for rk, got in enumerate(ranks):
            _same_step(got, want, f"{case} step {step} rank {rk}")
    if case == "swav":  # the queue was full from the second step: its codes used it
        assert all(int(r["kept"]["queue0.filled"]) == BATCH for r in reference)
    if case == "nnclr":  # 8 rows, then wrapped to row 6
        assert [int(r["kept"]["queue.ptr"]) for r in reference] == [8, 6]
    if case == "dino":
        assert float(reference[0]["kept"]["center"].abs().sum()) > 0


def test_dino_two_micro_batches_equal_one_step() -> None:
    """DINO's loss is a mean over samples and its centre is staged until the optimiser step:
    two micro-batches of 4 give the step of 8 (loss, gradients, parameters, centre, teacher)."""
    one = _train("dino", slice(None), ddp=False)
    accumulated = _train("dino", slice(None), ddp=False, micro_batches=2)
    for step, (want, got) in enumerate(zip(one, accumulated, strict=True)):
        _close(got["loss"], want["loss"], f"step {step} loss")
        _same_step(got, want, f"step {step}")


@pytest.mark.parametrize("case", ["swav", "nnclr"])
def test_two_micro_batches_fill_the_queue_as_one_step(case: str) -> None:
    """The queue rows of both micro-batches are committed once, in order, after the step (the
    losses differ: SwAV's codes and NNCLR's negatives come from each micro-batch)."""
    want = _train(case, slice(None), ddp=False)[0]["kept"]
    got = _train(case, slice(None), ddp=False, micro_batches=2)[0]["kept"]
    assert got.keys() == want.keys()
    for name, value in want.items():
        _close(got[name], value, f"{case} {name}")
