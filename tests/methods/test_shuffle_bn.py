"""Shuffling BN of the key encoder (``shuffle_bn``; He et al., 2020, MoCo "Shuffling BN").

Checked against what it is defined to be (contrastkit.methods.shuffle_bn): the global key
batch, permuted by ``p = torch.randperm(N, generator)``, is cut into ``G`` groups
``p[d*g:(d+1)*g]``, each normalised with its own batch statistics, and put back in order.

* a BN-only encoder: every output row equals the analytic ``(x - mean_d) / sqrt(var_d + eps)
  * w + b`` of its group; running statistics move towards the mean of the groups' statistics;
* MoCo, ReSSL, SCE: the keys equal a reference loop that runs an ordinary copy of the target
  (train-mode BN) on each group separately and reassembles the rows; the online branch and the
  EMA update are unchanged; permutations are deterministic, saved and restored;
* 2 gloo processes: each rank's keys and the statistics each group sees equal those of one
  process on the combined batch with the same ``G`` and permutation, even when the ranks'
  generators were seeded differently (rank 0's is used); a DistributedDataParallel step of SCE
  gives the single-process loss and gradients.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from gloo_harness import run_ranks
from queue_inspect import ordered
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode

from contrastkit.methods import SCE, MoCo, ReSSL
from contrastkit.methods.shuffle_bn import ShuffleBN, SplitBatchNorm
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import ScheduleState

TINY = {"backbone": BackboneSpec(name="small_convnet", width=4, out_dim=8),
        "projector": HeadSpec(hidden_dim=8, out_dim=6, batch_norm="hidden")}
STATE = ScheduleState(step=0, total_steps=10)


def _build(cls: type = SCE, shuffle_bn: int | None = 4, seed: int = 0, **kw: Any):
    torch.manual_seed(seed)
    kw = {"queue_size": 16, "momentum": 0.9, **kw}
    return cls(shuffle_bn=shuffle_bn, **TINY, **kw).double().train()


def _plain_copy(method) -> nn.Module:
    """An ordinary (unsplit) target encoder with the method's current target weights."""
    twin = _build(type(method), shuffle_bn=None, queue_size=method.queue.size)
    state = {k: v for k, v in method.state_dict().items() if "key_shuffle" not in k}
    twin.load_state_dict(state)
    return twin.target.target


def _batch(n: int = 12, seed: int = 1) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, 8, 8, generator=g, dtype=torch.float64)


def _next_perm(shuffle: ShuffleBN, n: int) -> Tensor:
    """The permutation the next call will draw (without consuming it)."""
    g = torch.Generator()
    g.set_state(shuffle.generator.get_state())
    return torch.randperm(n, generator=g)


def _reference(encoder: nn.Module, x: Tensor, perm: Tensor, groups: int) -> Tensor:
    """Run ``encoder`` (train-mode BN) on each group separately and reassemble the rows."""
    size = x.shape[0] // groups
    out = None
    for d in range(groups):
        rows = perm[d * size:(d + 1) * size]
        z = encoder(x[rows])
        out = z.new_empty(x.shape[0], *z.shape[1:]) if out is None else out
        out[rows] = z
    return out


# --------------------------------------------------------------------------- (a) statistics
@pytest.mark.parametrize("shape", [(12, 5), (12, 5, 3, 2)], ids=["1d", "2d"])
def test_each_key_is_normalised_with_its_own_groups_statistics(shape):
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(5) if len(shape) == 2 else nn.BatchNorm2d(5)
    bn.weight.data.uniform_(0.5, 2.0)
    bn.bias.data.normal_()
    encoder = nn.Sequential(bn).double()
    shuffle = ShuffleBN(encoder, groups=3, seed=7)
    x = torch.randn(*shape, dtype=torch.float64) * 3 + 1
    perm = _next_perm(shuffle, 12)
    out = shuffle(encoder, x)
    dims = [0, *range(2, x.dim())]
    view = (1, 5) + (1,) * (x.dim() - 2)
    means, variances = [], []
    for d in range(3):
        rows = perm[4 * d:4 * (d + 1)]
        mean = x[rows].mean(dims)
        var = x[rows].var(dims, unbiased=False)
        expected = ((x[rows] - mean.view(view)) / torch.sqrt(var.view(view) + bn.eps)
                    * bn.weight.view(view) + bn.bias.view(view))
        torch.testing.assert_close(out[rows], expected)
        means.append(mean)
        variances.append(x[rows].var(dims, unbiased=True))
    # the whole batch's statistics would give other outputs
    whole = (x - x.mean(dims).view(view)) / torch.sqrt(x.var(dims, unbiased=False).view(view)
                                                      + bn.eps)
    assert not torch.allclose(out, whole * bn.weight.view(view) + bn.bias.view(view))
    layer = encoder[0]
    assert isinstance(layer, SplitBatchNorm) and layer.splits == 1  # reset after the call
    m = layer.momentum
    torch.testing.assert_close(layer.running_mean, m * torch.stack(means).mean(0))
    torch.testing.assert_close(layer.running_var, (1 - m) + m * torch.stack(variances).mean(0))
    assert int(layer.num_batches_tracked) == 0  # a momentum is set: nothing reads the counter


# ----------------------------------------------------------------- memory layout, precision
class Outputs4d(TorchDispatchMode):
    """Records every operator that returns a 4-D tensor, with whether it is channels_last."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, bool]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, Tensor) and out.dim() == 4 and out.shape[1] > 1:
            self.seen.append((func.__name__,
                              out.is_contiguous(memory_format=torch.channels_last)))
        return out


def test_keys_stay_channels_last_through_the_split_batch_norms():
    # A ResNet key encoder in channels_last: no layer's activation goes back to NCHW (each
    # would be a full copy, and the next convolution would convert it back).
    method = SCE(shuffle_bn=4, backbone=BackboneSpec(name="resnet18", cifar_stem=True, width=8),
                 projector=HeadSpec(hidden_dim=8, out_dim=6), queue_size=16).train()
    method.to(torch.float64, memory_format=torch.channels_last)
    plain = _split_free_copy(method)
    x = _batch(8).contiguous(memory_format=torch.channels_last)
    perm = _next_perm(method.key_shuffle, 8)
    with Outputs4d() as mode:
        keys = method.encode_target(x)
    assert len(mode.seen) > 40  # convolutions, batch norms, activations of the ResNet
    assert [name for name, cl in mode.seen if not cl] == []
    torch.testing.assert_close(keys, _reference(plain, x, perm, 4))


def _split_free_copy(method) -> nn.Module:
    twin = copy.deepcopy(method.target.target)
    for layer in twin.modules():
        if isinstance(layer, SplitBatchNorm):
            layer.splits = 1
    return twin


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_keys_match_the_float32_statistics(dtype):
    # Under autocast the activations are bf16/fp16: the statistics are accumulated in float32
    # and the output rounded once, as a float32 batch norm of the same values rounded.
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(5)
    bn.weight.data.uniform_(0.5, 2.0)
    bn.bias.data.normal_()
    layer = SplitBatchNorm(copy.deepcopy(bn))
    layer.splits = 4
    x = (torch.randn(16, 5, 6, 6) * 3 + 2).to(dtype)
    reference = SplitBatchNorm(copy.deepcopy(bn))
    reference.splits = 4
    with torch.no_grad():
        out, expected = layer(x), reference(x.float())
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), expected.to(dtype).float(), rtol=0,
                               atol=2 * torch.finfo(dtype).eps * expected.abs().max().item())
    torch.testing.assert_close(layer.running_mean, reference.running_mean)
    torch.testing.assert_close(layer.running_var, reference.running_var)


def test_copied_buffers_skip_the_split_running_statistics():
    # MomentumBranch's default "copy" policy replaces the target's buffers after every step:
    # the split layers leave them alone, and after the step they are the online ones.
    method = _build(SCE, shuffle_bn=4)
    layers = [m for m in method.target.target.modules() if isinstance(m, SplitBatchNorm)]
    assert layers and not any(m.update_running_stats for m in layers)
    before = [m.running_mean.clone() for m in layers]
    method.encode_target(_batch())
    assert all(torch.equal(m.running_mean, b) for m, b in zip(layers, before, strict=True))
    method.after_optimizer_step(STATE)
    online = dict(method.target.online.named_buffers())
    for name, buffer in method.target.target.named_buffers():
        assert torch.equal(buffer, online[name]), name


# --------------------------------------------------------------------------- (b) reference loop
@pytest.mark.parametrize("cls", [MoCo, ReSSL, SCE])
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_keys_equal_a_loop_over_the_groups(cls, groups):
    method = _build(cls, shuffle_bn=groups)
    plain = _plain_copy(method)
    x = _batch()
    for _ in range(2):  # a fresh permutation each call
        perm = _next_perm(method.key_shuffle, 12)
        keys = method.encode_target(x)
        torch.testing.assert_close(keys, _reference(plain, x, perm, groups))
    if groups > 1:  # the unshuffled whole batch gives different keys
        assert not torch.allclose(keys, plain(x), atol=1e-3)


def test_objective_stages_the_shuffled_keys():
    method = _build(SCE, shuffle_bn=3, queue_size=24)
    plain = _plain_copy(method)
    views = [_batch(seed=1), _batch(seed=2)]
    perm = _next_perm(method.key_shuffle, 12)
    method(views, torch.zeros(12, dtype=torch.long), STATE)
    method.queue.commit()
    want = nn.functional.normalize(_reference(plain, views[1], perm, 3).float(), dim=1)
    torch.testing.assert_close(ordered(method.queue)[-12:], want.to(method.queue.keys.dtype))


def test_online_branch_checkpoint_keys_and_ema_update_are_unchanged():
    shuffled, plain = _build(shuffle_bn=4), _build(shuffle_bn=None)
    x = _batch()
    assert not any(isinstance(m, SplitBatchNorm) for m in shuffled.backbone.modules())
    for a, b in zip(shuffled.encode(x), plain.encode(x), strict=True):
        torch.testing.assert_close(a, b)
    extra = {"key_shuffle._extra_state"}
    assert set(shuffled.state_dict()) == set(plain.state_dict()) | extra
    # EMA: parameters averaged, buffers (BN running statistics) copied from the online encoder
    shuffled.encode_target(x)
    shuffled.encode(x)  # moves the online running statistics
    shuffled.after_optimizer_step(STATE)
    online = dict(nn.Sequential(shuffled.backbone, shuffled.projector).named_buffers())
    for name, buf in shuffled.target.target.named_buffers():
        torch.testing.assert_close(buf, online[name])


def test_eval_mode_uses_running_statistics_and_draws_nothing():
    method = _build(shuffle_bn=4).eval()
    before = method.key_shuffle.generator.get_state()
    x = _batch()
    torch.testing.assert_close(method.encode_target(x), _plain_copy(method).eval()(x))
    assert torch.equal(method.key_shuffle.generator.get_state(), before)


def test_permutations_are_saved_and_restored():
    method, x = _build(shuffle_bn=4), _batch()
    method.encode_target(x)
    saved = copy.deepcopy(method.state_dict())
    expected = method.encode_target(x)
    resumed = _build(shuffle_bn=4, seed=5)  # another seed: the checkpoint must decide
    resumed.load_state_dict(saved)
    torch.testing.assert_close(resumed.encode_target(x), expected)
    # a checkpoint written without shuffle BN still loads (the seeded generator is kept)
    old = {k: v for k, v in saved.items() if "key_shuffle" not in k}
    _build(shuffle_bn=4).load_state_dict(old)


def test_the_run_seed_decides_the_permutations():
    x = _batch()
    a, b, c = (_build(shuffle_bn=4, seed=s) for s in (3, 3, 4))
    torch.testing.assert_close(a.encode_target(x), b.encode_target(x))
    assert not torch.equal(_next_perm(a.key_shuffle, 12), _next_perm(c.key_shuffle, 12))


@pytest.mark.parametrize("value", [0, -2, True, 2.0])
def test_bad_shuffle_bn_is_refused(value):
    with pytest.raises(ValueError, match="shuffle_bn must be a positive int"):
        _build(shuffle_bn=value)


def test_batch_not_divisible_and_missing_batch_norm_are_explained():
    method = _build(shuffle_bn=5)
    with pytest.raises(ValueError, match=r"shuffle_bn \(5\) must divide the key batch .*12"):
        method.encode_target(_batch())
    with pytest.raises(ValueError, match="no batch-norm layer"):
        ShuffleBN(nn.Sequential(nn.Linear(3, 3)), groups=2)
    nn.SyncBatchNorm.convert_sync_batchnorm(method.target.target)
    with pytest.raises(ValueError, match="sync_batchnorm"):
        method.encode_target(_batch(10))


# --------------------------------------------------------------------------- (c) 2 processes
WORLD = 2
BATCH = 8


def _first_bn_group_means(method) -> tuple[list[Tensor], Any]:
    """Record, at every call, the per-group mean of the first batch-norm layer's input."""
    layer = next(m for m in method.target.modules() if isinstance(m, SplitBatchNorm))
    seen: list[Tensor] = []

    def probe(module, args):
        x, k = args[0], module.splits  # interleaved groups: row i*k + j is in group j
        seen.append(x.reshape(x.shape[0] // k, k, *x.shape[1:]).mean(dim=(0, 3, 4)))

    return seen, layer.register_forward_pre_hook(probe)


def _keys_run(groups: int, rows: slice, generator_seed: int) -> dict[str, Any]:
    method = _build(SCE, shuffle_bn=groups)
    method.key_shuffle.generator.manual_seed(generator_seed)
    seen, _ = _first_bn_group_means(method)
    x = _batch(BATCH)[rows]
    keys = [method.encode_target(x) for _ in range(2)]
    return {"keys": keys, "group_means": seen}


def _ddp_step(groups: int, rows: slice, ddp: bool) -> dict[str, Any]:
    """One SCE step; online BN on running statistics (see test_distributed_methods), keys with
    shuffled train-mode BN."""
    method = _build(SCE, shuffle_bn=groups, queue_size=10)
    method.backbone.eval()
    method.projector.eval()
    model = nn.parallel.DistributedDataParallel(method, broadcast_buffers=False) if ddp else method
    views = [_batch(BATCH, seed=1)[rows], _batch(BATCH, seed=2)[rows]]
    out = model(views, torch.zeros(views[0].shape[0], dtype=torch.long), STATE)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in method.named_parameters() if p.grad is not None}
    return {"loss": out.loss.detach(), "grads": grads}


def _worker(rk: int) -> dict[str, Any]:
    rows = slice(rk * BATCH // WORLD, (rk + 1) * BATCH // WORLD)
    # ranks seeded differently on purpose: rank 0's generator must win
    return {"keys": {g: _keys_run(g, rows, generator_seed=100 + rk) for g in (2, 4)},
            "ddp": _ddp_step(4, rows, ddp=True)}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run_ranks(_worker, WORLD, tmp_path_factory.mktemp("shuffle_bn"))


@pytest.mark.parametrize("groups", [2, 4])
def test_two_processes_see_the_single_process_groups(two_ranks, groups):
    single = _keys_run(groups, slice(None), generator_seed=100)
    half, per_rank = BATCH // WORLD, groups // WORLD
    for rk, result in enumerate(two_ranks):
        got = result["keys"][groups]
        for call in range(2):
            torch.testing.assert_close(got["keys"][call],
                                       single["keys"][call][rk * half:(rk + 1) * half])
            # the statistics each group sees: rank rk holds groups rk*k ... rk*k + k - 1
            torch.testing.assert_close(
                got["group_means"][call],
                single["group_means"][call][rk * per_rank:(rk + 1) * per_rank])


def test_ddp_step_with_shuffle_bn_matches_one_process(two_ranks):
    want = _ddp_step(4, slice(None), ddp=False)
    mean_loss = torch.stack([r["ddp"]["loss"] for r in two_ranks]).mean()
    torch.testing.assert_close(mean_loss, want["loss"])
    for rk, result in enumerate(two_ranks):
        assert result["ddp"]["grads"].keys() == want["grads"].keys()
        for name, grad in want["grads"].items():
            torch.testing.assert_close(result["ddp"]["grads"][name], grad,
                                       msg=lambda m, n=name, r=rk: f"rank {r} {n}: {m}")


# ------------------------------------------------------- the native kernel, the planned draws
@pytest.mark.parametrize("shape", [(12, 5), (12, 5, 3, 2)], ids=["1d", "2d"])
@pytest.mark.parametrize("memory", ["contiguous", "channels_last"])
def test_the_native_kernel_normalises_each_block_with_its_own_statistics(shape, memory):
    """``kernel: native``: group ``j`` is the block of rows ``j*m ... (j+1)*m - 1``, each
    normalised by the native batch-norm kernel, with the statistics of the analytic formula
    (float64, to rounding), in the input's layout."""
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(5) if len(shape) == 2 else nn.BatchNorm2d(5)
    bn.weight.data.uniform_(0.5, 2.0)
    bn.bias.data.normal_()
    layer = SplitBatchNorm(bn.double())
    layer.splits, layer.kernel, layer.update_running_stats = 3, "native", False
    x = torch.randn(*shape, dtype=torch.float64) * 3 + 1
    if memory == "channels_last" and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():  # as ShuffleBN runs it: the keys take no gradient
        out = layer(x)
    dims = [0, *range(2, x.dim())]
    view = (1, 5) + (1,) * (x.dim() - 2)
    for j in range(3):
        block = x[4 * j:4 * (j + 1)]
        mean, var = block.mean(dims), block.var(dims, unbiased=False)
        expected = ((block - mean.view(view)) / torch.sqrt(var.view(view) + bn.eps)
                    * bn.weight.view(view) + bn.bias.view(view))
        torch.testing.assert_close(out[4 * j:4 * (j + 1)], expected, rtol=1e-12, atol=1e-12)
    assert out.stride() == x.stride()
    assert torch.equal(layer.running_mean, torch.zeros(5, dtype=torch.float64))  # untouched


@pytest.mark.parametrize("cls", [SCE, MoCo])
def test_the_native_kernel_gives_the_keys_of_the_formula(cls):
    """Same permutation, same groups: the keys of the native kernel (groups in blocks) equal
    those of the formula (groups interleaved), float64, to rounding."""
    method = _build(cls, shuffle_bn=4, queue_size=16)
    x = _batch(12)
    shuffle = method.key_shuffle
    state = shuffle.generator.get_state()
    formula = method.encode_target(x)
    shuffle.generator.set_state(state)
    shuffle.use_kernel("native")
    native = method.encode_target(x)
    assert all(layer.kernel == "native" for layer in shuffle._layers)
    torch.testing.assert_close(native, formula, rtol=1e-12, atol=1e-12)
    shuffle.use_kernel("formula")
    assert all(layer.kernel == "formula" for layer in shuffle._layers)


def test_the_native_kernel_needs_the_copy_buffer_policy():
    method = _build(SCE, shuffle_bn=4)
    shuffle = ShuffleBN(copy.deepcopy(method.target.target), groups=4, running_stats=True)
    with pytest.raises(ValueError, match="keeps no running statistics"):
        shuffle.use_kernel("native")


def test_planned_permutations_are_the_ones_it_would_draw():
    """A captured step reads the permutation from a buffer filled before each step: the same
    permutations, in the same order, as the draws of an eager step; the keys are the same."""
    method = _build(SCE, shuffle_bn=4)
    twin = copy.deepcopy(method)
    x = _batch(12)
    buffer = torch.empty(12, dtype=torch.int64)
    twin.key_shuffle.plan(buffer)
    for _ in range(3):
        want = _next_perm(method.key_shuffle, 12)
        keys = method.encode_target(x)
        twin.key_shuffle.draw_planned()
        assert torch.equal(buffer, want)
        assert torch.equal(twin.encode_target(x), keys)
    assert torch.equal(twin.key_shuffle.generator.get_state(),
                       method.key_shuffle.generator.get_state())
    twin.key_shuffle.plan(None)
    assert torch.equal(twin.encode_target(x), method.encode_target(x))  # drawing again
