"""Momentum (EMA) branch (SCE Eq. 2) and cosine momentum schedule (SCE appendix D.1)."""

import itertools
import math

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from contrastkit.models import MomentumBranch, cosine_momentum


def make_online() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3)).double()


def perturb(module: nn.Module) -> None:
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p))


def snapshot(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def test_target_is_frozen_copy() -> None:
    online = make_online()
    branch = MomentumBranch(online)
    assert all(not p.requires_grad for p in branch.target.parameters())
    assert all(p.requires_grad for p in online.parameters())
    for t, o in zip(branch.target.parameters(), online.parameters(), strict=True):
        assert torch.equal(t, o) and t.data_ptr() != o.data_ptr()
    # only the target is registered: no duplicated online parameters
    assert all(k.startswith("target.") for k in branch.state_dict())
    assert len(list(branch.parameters())) == len(list(online.parameters()))
    assert branch.online is online


def test_momentum_one_keeps_zero_copies_half_averages() -> None:
    online = make_online()
    branch = MomentumBranch(online)
    perturb(online)
    before = snapshot(branch.target)
    branch.update(1.0)
    for t, b in zip(branch.target.parameters(), before, strict=True):
        assert torch.equal(t, b)
    branch.update(0.5)
    for t, b, o in zip(branch.target.parameters(), before, online.parameters(), strict=True):
        torch.testing.assert_close(t, (b + o) / 2, rtol=0, atol=1e-15)
    branch.update(0.0)
    for t, o in zip(branch.target.parameters(), online.parameters(), strict=True):
        assert torch.equal(t, o)


def test_general_momentum_matches_formula() -> None:
    online = make_online()
    branch = MomentumBranch(online)
    perturb(online)
    before = snapshot(branch.target)
    m = 0.9
    branch.update(m)
    for t, b, o in zip(branch.target.parameters(), before, online.parameters(), strict=True):
        torch.testing.assert_close(t, m * b + (1 - m) * o.detach(), rtol=0, atol=1e-14)


def test_target_gets_no_grad_and_online_grad_unaffected() -> None:
    online = make_online()
    branch = MomentumBranch(online)
    x = torch.randn(5, 4, dtype=torch.float64)
    z_t = branch(x)
    assert not z_t.requires_grad and z_t.grad_fn is None
    (online(x) * z_t).sum().backward()
    assert all(p.grad is None for p in branch.target.parameters())
    assert all(p.grad is not None for p in online.parameters())


def test_buffers_copy_by_default() -> None:
    online = make_online().train()
    branch = MomentumBranch(online)
    online(torch.randn(6, 4, dtype=torch.float64))  # online running stats move
    bn_t, bn_o = branch.target[1], online[1]
    assert not torch.equal(bn_t.running_mean, bn_o.running_mean)
    branch.update(0.99)
    assert torch.equal(bn_t.running_mean, bn_o.running_mean)
    assert torch.equal(bn_t.running_var, bn_o.running_var)
    assert int(bn_t.num_batches_tracked) == 1


def test_buffers_ema_and_keep() -> None:
    online = make_online().train()
    ema = MomentumBranch(online, buffers="ema")
    keep = MomentumBranch(online, buffers="keep")
    old = ema.target[1].running_mean.clone()
    online(torch.randn(6, 4, dtype=torch.float64))
    ema.update(0.75)
    keep.update(0.75)
    torch.testing.assert_close(
        ema.target[1].running_mean, 0.75 * old + 0.25 * online[1].running_mean,
        rtol=0, atol=1e-15,
    )
    assert int(ema.target[1].num_batches_tracked) == 1  # integers are copied
    assert torch.equal(keep.target[1].running_mean, old)


class ForeachCalls(TorchDispatchMode):
    """Records the dtypes of the first tensor list of every ``_foreach_*`` call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, set[torch.dtype]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.__name__.startswith("_foreach_"):
            self.calls.append((func.__name__, {t.dtype for t in args[0]}))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("policy", ["copy", "ema"])
def test_update_groups_foreach_calls_by_dtype(policy: str) -> None:
    # float32 and float64 layers: weights and BN statistics of both dtypes, and the int64
    # num_batches_tracked. One foreach call per dtype (a mixed list runs one GPU kernel per
    # tensor); the result is the EMA formula.
    online = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.Conv2d(4, 2, 1).double(),
                           nn.BatchNorm2d(2).double())
    branch = MomentumBranch(online, buffers=policy)
    perturb(online)
    expected = [0.5 * t + 0.5 * o
                for t, o in zip(snapshot(branch.target), snapshot(online), strict=True)]
    with ForeachCalls() as mode:
        branch.update(0.5)
    assert all(len(dtypes) == 1 for _, dtypes in mode.calls), mode.calls
    per_call = sorted((name.split(".")[0], str(next(iter(d)))) for name, d in mode.calls)
    buffers = {"copy": [("_foreach_copy_", "torch.float32"), ("_foreach_copy_", "torch.float64")],
               "ema": [("_foreach_lerp_", "torch.float32"), ("_foreach_lerp_", "torch.float64")]}
    assert per_call == sorted([("_foreach_copy_", "torch.int64"),
                               ("_foreach_lerp_", "torch.float32"),
                               ("_foreach_lerp_", "torch.float64"), *buffers[policy]])
    for got, want in zip(snapshot(branch.target), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_target_mode_follows_branch_by_default() -> None:
    online = make_online()
    branch = MomentumBranch(online)
    assert branch.target.training
    branch.eval()
    assert not branch.target.training
    branch.train()
    assert branch.target[1].training
    frozen_stats = MomentumBranch(online, eval_target=True).train()
    assert not frozen_stats.target.training


def test_bad_arguments() -> None:
    branch = MomentumBranch(make_online())
    with pytest.raises(ValueError, match="momentum"):
        branch.update(1.5)
    with pytest.raises(ValueError, match="buffers"):
        MomentumBranch(make_online(), buffers="average")


def test_cosine_momentum_endpoints_and_midpoint() -> None:
    assert cosine_momentum(0, 100, base=0.99) == pytest.approx(0.99, abs=1e-15)
    assert cosine_momentum(100, 100, base=0.99) == 1.0
    assert cosine_momentum(50, 100, base=0.99) == pytest.approx(0.995, abs=1e-15)
    assert cosine_momentum(250, 100, base=0.9) == 1.0
    k, total, base = 17, 60, 0.996
    expected = 1 - (1 - base) * (math.cos(math.pi * k / total) + 1) / 2
    assert cosine_momentum(k, total, base) == pytest.approx(expected, abs=1e-15)
    values = [cosine_momentum(s, 10, 0.9) for s in range(11)]
    assert all(a < b for a, b in itertools.pairwise(values))


def test_cosine_momentum_bad_arguments() -> None:
    with pytest.raises(ValueError, match="total_steps"):
        cosine_momentum(0, 0)
    with pytest.raises(ValueError, match="step"):
        cosine_momentum(-1, 10)
    with pytest.raises(ValueError, match="base"):
        cosine_momentum(0, 10, base=1.5)


@pytest.mark.parametrize("policy", ["copy", "ema", "keep"])
def test_an_update_by_a_device_rate_equals_the_update_by_a_number(policy) -> None:
    """``update_by(1 - m)`` (a captured step's EMA: the rate a 0-d tensor) leaves the target
    exactly as ``update(m)`` (on the CPU: the same lerp kernels), buffers included."""
    torch.manual_seed(0)
    online = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    a = MomentumBranch(online, buffers=policy)
    b = MomentumBranch(online, buffers=policy)
    b.load_state_dict(a.state_dict())
    for step, m in enumerate((0.9, 0.99, 0.996)):
        with torch.no_grad():
            for p in online.parameters():
                p.add_(torch.randn_like(p))
        online(torch.randn(8, 4))  # moves the online running statistics
        a.update(m)
        b.update_by(torch.tensor(1.0 - m, dtype=torch.float64).float())
        for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
            assert torch.equal(x, y), (step, name)
