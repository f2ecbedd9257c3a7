"""Shuffling BN for the key (target) encoder of momentum methods (MoCo v2, ReSSL, SCE).

He et al. (2020, MoCo, "Shuffling BN"): with batch-norm statistics computed over the same
samples in the query and the key encoder, the batch statistics can reveal the positive among
the negatives (the model "cheats" the pretext task). MoCo computes the keys' statistics on a
batch shuffled across GPUs and restores the order afterwards. Here the key batch is split
into ``G`` groups (devices, real or virtual), each normalised with its own statistics:

1. the keys of all ``W`` processes are gathered (``N = W * b`` rows in rank order) and
   permuted by ``p``, a random permutation of ``0..N-1`` identical on every process;
2. group ``d`` (``0 <= d < G``, ``g = N / G`` rows) holds the samples ``p[d*g : (d+1)*g]``;
   process ``r`` encodes the groups ``r*k ... r*k + k - 1`` (``k = G / W`` virtual devices per
   process), every batch-norm layer of the target normalising each group with the mean and
   (biased) variance of that group alone;
3. the outputs are gathered and put back in the original order; each process keeps its own
   ``b`` rows.

With one process and ``G = 8`` this simulates MoCo's 8 GPUs on one device; with ``W = G``
processes it is MoCo's cross-GPU shuffle exactly (one group per process). The partition into
groups depends only on ``G`` and ``p``, not on ``W``, so a run on 1 or 2 processes with the same
``G`` and permutation gives the same keys.

Virtual devices: the target's batch-norm layers are replaced, once, by :class:`SplitBatchNorm`
(same parameters and buffers, so checkpoints and the EMA update are unchanged). A process's
``k`` groups are laid out interleaved (row ``i*k + j`` is the ``i``-th sample of its group
``j``): the batch viewed as ``(b/k, k, C, ...)`` (a view in any memory layout, so a
channels_last activation stays channels_last and nothing is copied) gives every group's
statistics in one reduction and its normalisation in one pass. Running statistics (used only
in eval mode, and replaced at every EMA update by the online ones under MomentumBranch's
default ``copy`` buffer policy) move towards the mean of the groups' statistics.

Permutations: ``torch.randperm(N, generator=self.generator)`` on a CPU generator seeded with
``torch.initial_seed()`` when the method is built (the run's seed), copied from rank 0 to every
process at the first distributed call (so all ranks draw the same permutations without a
collective per step), and saved in the method's ``state_dict`` so that a resumed run draws
what an uninterrupted one would. On CUDA the permutation is copied to the device from pinned
memory without blocking.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from contrastkit.distributed import (
    broadcast_from_rank0,
    gather_no_grad,
    gather_no_grad_with_sizes,
    is_distributed,
    rank,
    world_size,
)
from contrastkit.models.batch_norm import UncountedBatchNorm

__all__ = ["ShuffleBN", "SplitBatchNorm", "split_batch_norms"]


class SplitBatchNorm(UncountedBatchNorm):
    """A batch-norm layer that, in training mode, can normalise ``splits`` sub-batches apart.

    Built from an existing batch-norm layer whose parameters and buffers it shares. With
    ``splits = k > 1`` and an input of ``n = k * m`` rows, rows ``j, j + k, j + 2k, ...`` form
    sub-batch ``j``, normalised as ``y = (x - mean_j) / sqrt(var_j + eps) * weight + bias``
    with the mean and biased variance of sub-batch ``j`` (per channel, over its rows and
    spatial positions); the running statistics move towards the mean over sub-batches of the
    usual update (skipped when ``update_running_stats`` is False); ``num_batches_tracked``
    counts only when ``momentum`` is None, the one case that reads it
    (:class:`~contrastkit.models.batch_norm.UncountedBatchNorm`). ``splits = 1`` or eval
    mode: the ordinary batch-norm forward.

    ``kernel`` says how the sub-batches' statistics are taken: ``"formula"`` (the default; the
    interleaved rows above, every sub-batch's statistics in one float32 ``var_mean``, then one
    pass for the normalisation: the fewest operators, each a kernel launch in an eager step) or
    ``"native"`` (sub-batch ``j`` is the contiguous block of rows ``j*m ... (j+1)*m - 1``, each
    block normalised by the native batch-norm kernel into its rows of the output: no float32
    copy of the activation, ``k`` calls; for a captured step, where a launch costs no host
    time; it does not update running statistics). Both compute the statistics of the same
    rows (``tests/methods/test_shuffle_bn.py``, float64).

    Args:
        source: the batch-norm layer to take over (``BatchNorm1d/2d/3d``).
    """

    def __init__(self, source: _BatchNorm) -> None:
        super().__init__(source.num_features, source.eps, source.momentum, source.affine,
                         source.track_running_stats)
        self.weight, self.bias = source.weight, source.bias
        self.running_mean, self.running_var = source.running_mean, source.running_var
        self.num_batches_tracked = source.num_batches_tracked
        self.train(source.training)
        self.splits = 1
        self.update_running_stats = True
        self.kernel: Literal["formula", "native"] = "formula"

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2-D input (N, C, ...), got {input.dim()}-D")

    def forward(self, input: Tensor) -> Tensor:
        k = self.splits
        if k == 1 or not self.training:
            return super().forward(input)
        self._check_input_dim(input)
        n, c = input.shape[:2]
        if n % k:
            raise ValueError(f"batch of {n} rows cannot be split into {k} equal sub-batches")
        if self.kernel == "native":
            return self._native_blocks(input, k)
        # (n, C, ...) -> (n/k, k, C, ...): a view in any memory layout (channels_last included);
        # sub-batch j is [:, j]
        grouped = input.unflatten(0, (n // k, k))
        dims = (0, *range(3, grouped.dim()))
        mean, var = _group_statistics(grouped, dims)  # (k, C), biased variance
        if self.update_running_stats and self.track_running_stats and self.running_mean is not None:
            factor = self.momentum
            if factor is None:  # cumulative average: the one reader of the counter
                self.num_batches_tracked.add_(1)
                factor = 1.0 / float(self.num_batches_tracked)
            count = grouped.numel() // (k * c)  # values per sub-batch and channel
            unbiased = var.mean(0).mul_(count / max(count - 1, 1))
            self.running_mean.lerp_(mean.mean(0).to(self.running_mean.dtype), factor)
            self.running_var.lerp_(unbiased.to(self.running_var.dtype), factor)
        scale = var.add_(self.eps).rsqrt_()  # var is not used after this
        if self.weight is not None:
            scale.mul_(self.weight)
        bias = self.bias if self.bias is not None else torch.zeros_like(mean)
        shift = torch.addcmul(bias, mean, scale, value=-1.0)
        shape = (1, k, c) + (1,) * (input.dim() - 2)
        if torch.compiler.is_compiling():  # the compiler fuses this into one pass itself
            return torch.addcmul(shift.view(shape), grouped, scale.view(shape)).to(
                input.dtype).flatten(0, 1)
        out = torch.empty_like(input)  # the input's dtype and memory layout
        # one pass, computed in the statistics' dtype, written in the input's (no autograd:
        # ShuffleBN encodes the keys without gradient)
        target = out.unflatten(0, grouped.shape[:2])
        torch.addcmul(shift.view(shape), grouped, scale.view(shape), out=target)
        return out

    def _native_blocks(self, input: Tensor, k: int) -> Tensor:
        """Sub-batch ``j`` = rows ``j*m ... (j+1)*m - 1``, each normalised by the native
        batch-norm kernel (``aten.native_batch_norm``: statistics in float32 for bf16/fp16
        input, written in the input's dtype and layout), straight into its rows of the output
        (no autograd: ShuffleBN encodes the keys without gradient)."""
        m = input.shape[0] // k
        out = torch.empty_like(input)
        stats = input.new_empty((2, k, input.shape[1]), dtype=_wide(input.dtype))
        for j in range(k):
            rows = slice(j * m, (j + 1) * m)
            torch.ops.aten.native_batch_norm.out(
                input[rows], self.weight, self.bias, None, None, True, 0.0, self.eps,
                out=out[rows], save_mean=stats[0, j], save_invstd=stats[1, j])
        return out


def _wide(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _group_statistics(grouped: Tensor, dims: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Per sub-batch and channel mean and biased variance over ``dims``, float32 or wider.

    One ``torch.var_mean``; float16/bfloat16 activations (autocast) are cast to float32 first
    (one more kernel), so the statistics are exact float32 ones, as cuDNN's batch norm keeps.
    """
    var, mean = torch.var_mean(grouped.to(_wide(grouped.dtype)), dim=dims, correction=0)
    return mean, var


def split_batch_norms(module: nn.Module) -> list[SplitBatchNorm]:
    """Replace every batch-norm layer inside ``module`` by a :class:`SplitBatchNorm` (in place).

    Parameters and buffers are shared with the replaced layers and keep their names and order,
    so ``state_dict`` keys and ``module.parameters()`` / ``buffers()`` order are unchanged.

    Returns:
        The :class:`SplitBatchNorm` layers now inside ``module``.
    """
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, _BatchNorm) and not isinstance(child, SplitBatchNorm):
                setattr(parent, name, SplitBatchNorm(child))
    return [m for m in module.modules() if isinstance(m, SplitBatchNorm)]


class ShuffleBN(nn.Module):
    """Encode a key batch with shuffled, grouped batch-norm statistics (module docstring).

    The target encoder is not registered here (it belongs to the method's target branch); it
    is passed to :meth:`forward`. Only the permutation generator's state is saved
    (``get_extra_state``).

    Args:
        encoder: the target encoder whose batch-norm layers are converted, in place, to
            :class:`SplitBatchNorm`.
        groups: ``G``, batch-norm groups of the global key batch (the ``shuffle_bn`` option).
        seed: seed of the permutation generator (default: ``torch.initial_seed()``).
        running_stats: whether the split layers update their running statistics. False when
            the EMA branch replaces the target's buffers by the online ones after every step
            (MomentumBranch's ``copy`` policy): the update would be overwritten unread (about
            ten operators per layer, each a kernel launch on a GPU).

    A captured training step (:mod:`contrastkit.train.captured_step`) cannot draw on the host
    inside its graph: it gives a device buffer to :meth:`plan`, and before each step
    :meth:`draw_planned` writes into it the permutation :meth:`permutation` would have drawn
    (the same generator, the same sequence); :meth:`forward` then reads the buffer.

    Raises:
        ValueError: if ``groups`` is not a positive int or ``encoder`` has no batch norm.
    """

    def __init__(self, encoder: nn.Module, groups: int, seed: int | None = None,
                 running_stats: bool = True) -> None:
        super().__init__()
        if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
            raise ValueError(
                f"shuffle_bn must be a positive int (batch-norm groups of the global key batch) "
                f"or null, got {groups!r}"
            )
        layers = split_batch_norms(encoder)
        if not layers:
            raise ValueError(
                "shuffle_bn is set but the target encoder has no batch-norm layer: there are no "
                "batch statistics to shuffle; set shuffle_bn: null"
            )
        for layer in layers:
            layer.update_running_stats = running_stats
        self.groups = groups
        self.running_stats = running_stats
        self.generator = torch.Generator()
        self.generator.manual_seed(torch.initial_seed() if seed is None else seed)
        self._synced = False
        self._layers = layers  # a plain list: the layers belong to the target branch
        self.kernel: Literal["formula", "native"] = "formula"
        self.planned: Tensor | None = None

    def use_kernel(self, kernel: Literal["formula", "native"]) -> None:
        """Take the groups' statistics by ``kernel`` (see :class:`SplitBatchNorm`); the groups
        are then laid out interleaved (``formula``) or in blocks (``native``).

        Raises:
            ValueError: for ``native`` when the layers update running statistics.
        """
        if kernel not in ("formula", "native"):
            raise ValueError(f"kernel must be 'formula' or 'native', got {kernel!r}")
        if kernel == "native" and self.running_stats:
            raise ValueError("the native shuffle-BN kernel keeps no running statistics: it "
                             "needs the momentum branch's 'copy' buffer policy")
        self.kernel = kernel
        for layer in self._layers:
            layer.kernel = kernel

    # --- the permutation ----------------------------------------------------------------------
    def get_extra_state(self) -> Tensor:
        """The permutation generator's state (a uint8 tensor, as other state entries)."""
        return self.generator.get_state()

    def set_extra_state(self, state: Tensor) -> None:
        self.generator.set_state(state.cpu())

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        # A checkpoint written without shuffle BN: keep the seeded generator.
        key = prefix + "_extra_state"
        if key in missing_keys:
            missing_keys.remove(key)

    def permutation(self, n: int, device: torch.device) -> Tensor:
        """The next permutation of ``0..n-1`` (the same on every process), on ``device``."""
        perm = self._draw(n, device)
        if device.type == "cuda":
            return perm.pin_memory().to(device, non_blocking=True)
        return perm.to(device)

    def _draw(self, n: int, device: torch.device) -> Tensor:
        if is_distributed() and not self._synced:
            state = broadcast_from_rank0(self.generator.get_state().to(device))
            self.generator.set_state(state.cpu())
            self._synced = True
        return torch.randperm(n, generator=self.generator)

    def plan(self, buffer: Tensor | None) -> None:
        """Read the permutations from ``buffer`` (a 1-D int64 device tensor of the global key
        batch's size) instead of drawing them; ``None``: draw again."""
        self.planned = buffer

    def draw_planned(self) -> None:
        """Draw the next permutation into the planned buffer (a host-to-device copy)."""
        if self.planned is None:
            raise RuntimeError("draw_planned needs a buffer given to plan()")
        perm = self._draw(self.planned.numel(), self.planned.device)
        cuda = self.planned.device.type == "cuda"
        self.planned.copy_(perm.pin_memory() if cuda else perm, non_blocking=cuda)

    # --- encoding -----------------------------------------------------------------------------
    @torch.no_grad()
    def forward(self, encoder: nn.Module, x: Tensor) -> Tensor:
        """``encoder(x)`` with the keys' batch-norm statistics computed per shuffled group.

        Args:
            encoder: the target encoder given at construction (in training mode).
            x: this process's key views, ``(b, ...)``, ``b`` equal on every process.

        Returns:
            The encoder's output for ``x``, rows in the order of ``x``.

        Raises:
            ValueError: if ``shuffle_bn`` is not a multiple of the number of processes, does
                not divide the global batch, or the local batches differ in size.
        """
        processes, me, groups = world_size(), rank(), self.groups
        if groups % processes:
            raise ValueError(
                f"shuffle_bn ({groups}) must be a multiple of the number of processes "
                f"({processes}): each process normalises shuffle_bn / processes groups of keys"
            )
        per_process = groups // processes
        layers = [m for m in encoder.modules() if isinstance(m, SplitBatchNorm)]
        if not layers:
            raise ValueError(
                "shuffle_bn is set but the target's batch-norm layers were replaced (by "
                "trainer.sync_batchnorm?): shuffled and synchronised batch norm exclude each "
                "other; set shuffle_bn: null or trainer.sync_batchnorm: false"
            )
        everything, sizes = gather_no_grad_with_sizes(x)
        if len(set(sizes)) != 1:
            raise ValueError(f"shuffle_bn needs the same batch size on every process, got {sizes}")
        total, local = everything.shape[0], sizes[0]
        if total % groups:
            raise ValueError(
                f"shuffle_bn ({groups}) must divide the key batch of all processes "
                f"({total} = {processes} x {local})"
            )
        size = total // groups
        perm = self.planned if self.planned is not None else self.permutation(total, x.device)
        if self.kernel == "native":  # order[r, j*size + i] = perm[(r*k + j)*size + i]: blocks
            order = perm.view(processes, -1)
        else:  # order[r, i*k + j] = perm[(r*k + j)*size + i]: process r's rows, interleaved
            order = perm.view(processes, per_process, size).transpose(1, 2).reshape(processes, -1)
        for layer in layers:
            layer.splits = per_process
        try:
            encoded = encoder(everything[order[me]])
        finally:
            for layer in layers:
                layer.splits = 1
        encoded_all = gather_no_grad(encoded) if processes > 1 else encoded
        inverse = torch.empty_like(perm)
        inverse[order.reshape(-1)] = torch.arange(total, device=perm.device)
        return encoded_all[inverse[me * local:(me + 1) * local]]
