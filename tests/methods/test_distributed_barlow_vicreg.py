"""Barlow Twins and VICReg under DistributedDataParallel equal one process on the combined batch.

The pattern of ``test_distributed_methods.py``: two gloo processes (CPU, forked once for the
module) each take their half of a fixed batch of 8 and run two SGD steps of the method wrapped
in DDP; the parent runs the same steps on the whole batch. In float64, to 1e-10 (sums in
another order): every gradient and the parameters after each step, and the loss:

* Barlow Twins gathers the projections with gradient and computes the loss of the whole batch
  on every process (the standardisation's statistics and the cross-correlation are the global
  batch's): each rank's loss is the one-process loss;
* VICReg computes the invariance on each process's rows and the variance and covariance on the
  gathered batch, as the official code: the mean of the ranks' losses is the one-process loss.

The heads have no batch norm and the method runs in eval mode (the backbone's BN on its running
statistics): per-process batch statistics of the network itself legitimately differ from the
combined batch's (``test_distributed_methods.py`` shows it); the losses' own standardisation is
over the batch whatever the mode. A third case computes the Barlow Twins loss the way solo-learn
does (each process standardises its own rows, the processes' C averaged): it is not the
one-process loss, which shows that the gathering is what makes the first case exact.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist
from gloo_harness import run_ranks
from torch import nn

from contrastkit.losses import barlow_twins
from contrastkit.methods import BarlowTwins, ContrastiveMethod, VICReg
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import ScheduleState

WORLD, BATCH, STEPS, LR, ATOL = 2, 8, 2, 0.05, 1e-10
TINY = {"backbone": BackboneSpec(name="small_convnet", width=4, out_dim=8),
        "projector": HeadSpec(hidden_dim=8, out_dim=6, num_layers=3, batch_norm="none")}
CASES = ("barlow", "vicreg", "vicreg_paper")


def _build(case: str) -> ContrastiveMethod:
    torch.manual_seed(0)
    if case == "barlow":
        method: ContrastiveMethod = BarlowTwins(lambd=0.05, **TINY)
    else:
        method = VICReg(halve_variance=case == "vicreg", **TINY)
    return method.double().eval()


def _batch(step: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    base = torch.rand(BATCH, 3, 8, 8, generator=g, dtype=torch.float64)
    return [base + 0.2 * torch.randn(base.shape, generator=g, dtype=torch.float64)
            for _ in range(2)]


def _train(case: str, rows: slice, ddp: bool) -> list[dict[str, Any]]:
    method = _build(case)
    model: nn.Module = nn.parallel.DistributedDataParallel(method) if ddp else method
    opt = torch.optim.SGD(method.parameters(), lr=LR)
    records = []
    for step in range(STEPS):
        views = [v[rows] for v in _batch(step)]
        labels = torch.zeros(views[0].shape[0], dtype=torch.long)
        opt.zero_grad(set_to_none=True)
        out = model(views, labels, ScheduleState(step=step, total_steps=10))
        out.loss.backward()
        record = {"loss": out.loss.detach(),
                  "grads": {n: p.grad.clone() for n, p in method.named_parameters()}}
        opt.step()
        record["params"] = {n: p.detach().clone() for n, p in method.named_parameters()}
        records.append(record)
    return records


def _solo_learn_barlow(rows: slice) -> torch.Tensor:
    """solo-learn's distributed form (``solo/losses/barlow.py``): each process standardises
    its own rows, the processes' cross-correlations are averaged."""
    method = _build("barlow")
    views = [v[rows] for v in _batch(0)]
    with torch.no_grad():
        z1, z2 = (method.encode(v)[1] for v in views)
        a = (z1 - z1.mean(0)) / torch.sqrt(z1.var(0, unbiased=False) + 1e-5)
        b = (z2 - z2.mean(0)) / torch.sqrt(z2.var(0, unbiased=False) + 1e-5)
        c = a.T @ b / a.shape[0]
        if dist.is_initialized():
            dist.all_reduce(c)
            c /= dist.get_world_size()
        on = ((torch.diagonal(c) - 1) ** 2).sum()
        return on + 0.05 * ((c ** 2).sum() - (torch.diagonal(c) ** 2).sum())


def _worker(rk: int) -> dict[str, Any]:
    half = BATCH // WORLD
    rows = slice(rk * half, (rk + 1) * half)
    out: dict[str, Any] = {case: _train(case, rows, ddp=True) for case in CASES}
    out["solo_learn_barlow"] = _solo_learn_barlow(rows)
    return out


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run_ranks(_worker, WORLD, tmp_path_factory.mktemp("dist_barlow_vicreg"))


def _close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(got, want, rtol=0, atol=ATOL, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("case", CASES)
def test_ddp_steps_match_single_process(two_ranks: list[dict[str, Any]], case: str) -> None:
    reference = _train(case, slice(None), ddp=False)
    for step, want in enumerate(reference):
        ranks = [res[case][step] for res in two_ranks]
        if case == "barlow":  # every rank computes the loss of the whole batch
            for rk, got in enumerate(ranks):
                _close(got["loss"], want["loss"], f"step {step} rank {rk} loss")
        else:  # local invariance + global variance and covariance
            _close(torch.stack([got["loss"] for got in ranks]).mean(), want["loss"],
                   f"step {step} mean of the rank losses")
            assert float((ranks[0]["loss"] - ranks[1]["loss"]).abs()) > 100 * ATOL
        for rk, got in enumerate(ranks):
            assert got["grads"].keys() == want["grads"].keys()
            for name, grad in want["grads"].items():
                _close(got["grads"][name], grad, f"step {step} rank {rk} grad {name}")
            for name, value in want["params"].items():
                _close(got["params"][name], value, f"step {step} rank {rk} param {name}")


def test_solo_learns_per_process_standardisation_is_not_the_global_loss(
        two_ranks: list[dict[str, Any]]) -> None:
    method = _build("barlow")
    with torch.no_grad():
        z1, z2 = (method.encode(v)[1] for v in _batch(0))
        one_process = barlow_twins(z1, z2, lambd=0.05)
    assert float(_solo_learn_barlow(slice(None))) == pytest.approx(float(one_process), rel=1e-12)
    for res in two_ranks:  # both ranks hold the same averaged C, another loss
        assert abs(float(res["solo_learn_barlow"]) - float(one_process)) > 1e-3
