"""Pretraining methods under DistributedDataParallel equal one process on the combined batch.

Two processes (gloo, CPU, forked once for the whole module) each take their half of a fixed
batch of 8 images (two pre-made views of shape (8, 3, 8, 8), and labels) and run two
optimisation steps of a method wrapped in ``DistributedDataParallel``: forward through the
method, backward, ``SGD.step()``, ``method.after_optimizer_step(state)``. The parent process
runs the *same* steps on the full batch without a process group. In float64, to ``1e-5``:

* the loss: SimCLR (NT-Xent, DCLW), SupervisedContrastive (SINCERE) and W-MSE gather the
  projections with gradient and compute the loss of the *global* batch on every rank, so each
  rank's loss equals the single-process loss; SCE computes the mean loss of its *local* queries
  against the shared queue, BYOL the mean of its local pairs, MoCo v3 the mean of its local
  queries against the keys gathered from both ranks, so the single-process loss is the mean of
  the two ranks' losses;
* every gradient of a parameter that requires one (DDP averages them; the EMA target's
  parameters have ``requires_grad=False`` and are not DDP's concern);
* the parameters after the step, the EMA target parameters, and for SCE the memory queue
  (``keys``, ``ptr``, ``filled``) on both ranks. The queue has 10 rows, not a multiple of the
  global batch of 8, so the second commit wraps around the end of the buffer.

DDP runs with ``broadcast_buffers=False``: otherwise DDP would copy rank 0's buffers (queue
included) to every rank at each forward and could hide a queue that diverged across ranks.

Batch normalisation caveat: per-process BN statistics legitimately differ from those of the
combined batch (each rank normalises with its own 4 samples; ``SyncBatchNorm`` has no CPU
implementation), so the equivalence only holds without batch-statistics BN. The heads here
use ``HeadSpec(batch_norm="none")`` and the method is put in eval mode (``method.eval()``;
the EMA target follows the mode), so the backbone's BN layers use their running statistics.
``test_train_mode_batch_norm_breaks_equivalence`` shows that the caveat is real.

W-MSE whitens over the global batch as its official code does (one process, the backbone in
``nn.DataParallel``): with a whitening sub-batch of the whole global batch (``wmse``) and with
two sub-batches drawn at random (``wmse_sub_batches``). Each process seeds its generator
differently after the method is built (``1000 + rank``; the single process as rank 0), so the
second case holds only if every rank uses rank 0's partition; and only with whitening over the
gathered batch: each rank whitening its own half (solo-learn's way) differs
(``test_wmse_per_process_whitening_would_differ``).

Gradient accumulation (single process): two micro-batches of 4, each staging its keys, then
one commit, leave the same queue (and, with the loss halved, the same gradient) as one step
of 8.

SCE without a ready queue (``queue_size=0``, or ``queue_init="empty"`` on its first step)
uses in-batch negatives gathered from every process, so each process computes the loss of
the whole batch ("global"); with a ready queue each process computes the mean over its own
queries ("local") and DDP averages.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from gloo_harness import run_ranks
from queue_inspect import staged_rows
from torch import Tensor, nn

from contrastkit.distributed import rank
from contrastkit.losses import wmse
from contrastkit.methods import (
    BYOL,
    SCE,
    WMSE,
    ContrastiveMethod,
    MoCoV3,
    SimCLR,
    SupervisedContrastive,
)
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import ScheduleState

WORLD = 2
BATCH = 8  # combined batch, 4 per rank
STEPS = 2
TOTAL_STEPS = 10
LR = 0.1
QUEUE = 10  # not a multiple of BATCH
ATOL = 1e-5
TINY = {
    "backbone": BackboneSpec(name="small_convnet", width=4, out_dim=8),
    "projector": HeadSpec(hidden_dim=8, out_dim=6, num_layers=2, batch_norm="none"),
}
SCE_ARGS = {"coeff": 0.5, "temperature": 0.2, "target_temperature": 0.1, "momentum": 0.9}

# case -> loss convention ("global": every rank computes the combined batch's loss;
# "local": every rank computes its own anchors' mean loss)
CASES = {
    "simclr": "global",
    "sincere": "global",
    "sce_queue": "local",
    "sce_in_batch": "global",
    "sce_empty_queue": ("global", "local"),  # in-batch on the first step, then the queue
    "simclr_train_bn": "global",
    "simclr_dclw": "global",
    "byol": "local",
    "moco_v3": "local",
    "wmse": "global",
    "wmse_sub_batches": "global",
}


# --------------------------------------------------------------------------- shared pieces
def _build(case: str) -> ContrastiveMethod:
    """The method of ``case``, identically initialised in every process (seed 0, float64)."""
    torch.manual_seed(0)  # parameters and MoCo-style random queue rows
    if case in ("simclr", "simclr_train_bn"):
        method: ContrastiveMethod = SimCLR(temperature=0.5, **TINY)
    elif case == "sincere":
        method = SupervisedContrastive(loss="sincere", temperature=0.5, **TINY)
    elif case == "sce_queue":
        method = SCE(queue_size=QUEUE, **SCE_ARGS, **TINY)
    elif case == "sce_in_batch":
        method = SCE(queue_size=0, **SCE_ARGS, **TINY)
    elif case == "sce_empty_queue":
        method = SCE(queue_size=QUEUE, queue_init="empty", **SCE_ARGS, **TINY)
    elif case == "simclr_dclw":
        method = SimCLR(loss="dclw", temperature=0.2, sigma=0.5, **TINY)
    elif case == "byol":
        method = BYOL(predictor=TINY["projector"], momentum=0.9, **TINY)
    elif case == "moco_v3":
        method = MoCoV3(predictor=TINY["projector"], momentum=0.9, temperature=0.2, **TINY)
    elif case.startswith("wmse"):
        method = WMSE(w_size=BATCH if case == "wmse" else BATCH // 2, w_iter=2,
                      **{**TINY, "projector": HeadSpec(out_dim=3, num_layers=1,
                                                       batch_norm="none")})
    else:
        raise ValueError(f"unknown case {case!r}")
    method = method.double()
    # eval: BN uses running statistics (see the module docstring); train only for the caveat
    return method.train() if case.endswith("train_bn") else method.eval()


def _batch(step: int) -> tuple[list[Tensor], Tensor]:
    """Fixed combined batch of step ``step``: two views (BATCH, 3, 8, 8) and labels."""
    g = torch.Generator().manual_seed(100 + step)
    base = torch.rand(BATCH, 3, 8, 8, generator=g, dtype=torch.float64)
    views = [base + 0.2 * torch.randn(base.shape, generator=g, dtype=torch.float64)
             for _ in range(2)]
    labels = (torch.arange(BATCH) + step) % 3  # every class on both ranks
    return views, labels


def _snapshot(method: ContrastiveMethod) -> dict[str, Any]:
    """Online parameters, EMA target parameters and queue buffers, detached copies."""
    snap: dict[str, Any] = {
        "params": {n: p.detach().clone() for n, p in method.named_parameters()
                   if p.requires_grad},
    }
    if method.target is not None:
        snap["target"] = {n: p.detach().clone() for n, p in method.target.named_parameters()}
    if method.queue is not None:
        snap["queue"] = {k: v.clone() for k, v in method.queue.state_dict().items()}
    return snap


def _train(case: str, rows: slice, ddp: bool, micro_batches: int = 1) -> list[dict[str, Any]]:
    """Run STEPS optimisation steps on ``rows`` of every batch; one record per step.

    Each record holds the loss (the sum of the micro-batch losses, each divided by
    ``micro_batches``), the gradient of every parameter that requires one, and the
    :func:`_snapshot` after ``optimizer.step()`` and ``after_optimizer_step``.
    """
    method = _build(case)
    torch.manual_seed(1000 + rank())  # processes draw apart (W-MSE's sub-batches)
    model: nn.Module = method
    if ddp:
        model = nn.parallel.DistributedDataParallel(method, broadcast_buffers=False)
    opt = torch.optim.SGD(method.parameters(), lr=LR)
    records = []
    for step in range(STEPS):
        state = ScheduleState(step=step, total_steps=TOTAL_STEPS)
        views, labels = _batch(step)
        views, labels = [v[rows] for v in views], labels[rows]
        opt.zero_grad(set_to_none=True)
        loss = torch.zeros((), dtype=torch.float64)
        for chunk in range(micro_batches):
            part = slice(chunk * len(labels) // micro_batches,
                         (chunk + 1) * len(labels) // micro_batches)
            out = model([v[part] for v in views], labels[part], state)
            (out.loss / micro_batches).backward()
            loss = loss + out.loss.detach() / micro_batches
        record: dict[str, Any] = {
            "loss": loss,
            "grads": {n: p.grad.detach().clone() for n, p in method.named_parameters()
                      if p.grad is not None},
            "staged": staged_rows(method.queue) if method.queue is not None else 0,
        }
        opt.step()
        method.after_optimizer_step(state)
        record.update(_snapshot(method))
        records.append(record)
    return records


# --------------------------------------------------------------------------- 2-process run
def _worker(rk: int) -> dict[str, Any]:
    half = BATCH // WORLD
    rows = slice(rk * half, (rk + 1) * half)
    return {case: _train(case, rows, ddp=True) for case in CASES}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run_ranks(_worker, WORLD, tmp_path_factory.mktemp("dist_methods"))


def _close(got: Tensor, want: Tensor, what: str) -> None:
    torch.testing.assert_close(got, want, rtol=0, atol=ATOL, msg=lambda m: f"{what}: {m}")


def _assert_same_state(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    for part in ("params", "target"):
        assert (part in got) == (part in want), f"{where}: {part} present on one side only"
        if part in want:
            assert got[part].keys() == want[part].keys()
            for name, value in want[part].items():
                _close(got[part][name], value, f"{where} {part} {name}")
    assert ("queue" in got) == ("queue" in want)
    if "queue" in want:
        _close(got["queue"]["keys"], want["queue"]["keys"], f"{where} queue keys")
        assert int(got["queue"]["ptr"]) == int(want["queue"]["ptr"]), where
        assert int(got["queue"]["filled"]) == int(want["queue"]["filled"]), where


# --------------------------------------------------------------------------- tests
@pytest.mark.parametrize(
    "case",
    [
        "simclr",
        "sincere",
        "sce_queue",
        "sce_in_batch",
        "sce_empty_queue",
        "simclr_dclw",
        "byol",
        "moco_v3",
        "wmse",
        "wmse_sub_batches",
    ],
)
def test_ddp_steps_match_single_process(two_ranks: list[dict[str, Any]], case: str) -> None:
    reference = _train(case, slice(None), ddp=False)
    for step, want in enumerate(reference):
        ranks = [res[case][step] for res in two_ranks]
        # every parameter that requires a gradient got one, in both settings
        assert want["grads"].keys() == want["params"].keys()
        convention = CASES[case] if isinstance(CASES[case], str) else CASES[case][step]
        if convention == "global":
            for rk, got in enumerate(ranks):
                _close(got["loss"], want["loss"], f"step {step} rank {rk} loss")
        else:
            mean = torch.stack([got["loss"] for got in ranks]).mean()
            _close(mean, want["loss"], f"step {step} mean of the rank losses")
        for rk, got in enumerate(ranks):
            where = f"step {step} rank {rk}"
            assert got["grads"].keys() == want["grads"].keys(), where
            for name, grad in want["grads"].items():
                _close(got["grads"][name], grad, f"{where} grad {name}")
            _assert_same_state(got, want, where)
    if case == "sce_queue":  # the committed queue moved: 8 rows, then wrapped to row 6
        assert [int(r["queue"]["ptr"]) for r in reference] == [8, 6]
        assert all(int(r["queue"]["filled"]) == QUEUE for r in reference)
        assert all(r["staged"] == BATCH for r in reference)  # gathered from both ranks
        assert all(res[case][s]["staged"] == BATCH for res in two_ranks for s in range(STEPS))


def test_train_mode_batch_norm_breaks_equivalence(two_ranks: list[dict[str, Any]]) -> None:
    """The documented caveat: with batch statistics, DDP's gradient is not the combined one."""
    want = _train("simclr_train_bn", slice(None), ddp=False)[0]
    got = two_ranks[0]["simclr_train_bn"][0]
    worst = max(float((got["grads"][n] - g).abs().max()) for n, g in want["grads"].items())
    assert worst > 100 * ATOL
    assert float((got["loss"] - want["loss"]).abs()) > 100 * ATOL


def test_sce_gradient_accumulation_matches_one_large_step() -> None:
    """Two micro-batches of 4 (stage, stage, commit) equal one step of 8 (single process)."""
    one = _train("sce_queue", slice(None), ddp=False)
    accumulated = _train("sce_queue", slice(None), ddp=False, micro_batches=2)
    for step, (want, got) in enumerate(zip(one, accumulated, strict=True)):
        where = f"step {step}"
        assert got["staged"] == want["staged"] == BATCH
        _close(got["loss"], want["loss"], f"{where} loss")
        for name, grad in want["grads"].items():
            _close(got["grads"][name], grad, f"{where} grad {name}")
        _assert_same_state(got, want, where)
    assert [int(r["queue"]["ptr"]) for r in accumulated] == [8, 6]


def test_wmse_per_process_whitening_would_differ(two_ranks: list[dict[str, Any]]) -> None:
    """The W-MSE case is not vacuous: whitening each rank's half apart (solo-learn's way) gives
    another loss than the gathered batch's, which the ranks computed."""
    method = _build("wmse")
    views, _ = _batch(0)
    z1, z2 = method.encode(views[0])[1], method.encode(views[1])[1]
    with torch.no_grad():
        halves = torch.stack([wmse(z1[rows], z2[rows]) for rows in (slice(0, 4), slice(4, 8))])
    global_loss = two_ranks[0]["wmse"][0]["loss"]
    assert float((halves.mean() - global_loss).abs()) > 100 * ATOL
