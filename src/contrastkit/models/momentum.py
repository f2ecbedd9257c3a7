"""Momentum (EMA) target branch and its cosine momentum schedule.

SCE (Denize et al.) section 3.1, Eq. (2): after each optimizer step the target parameters are
``theta_t <- m * theta_t + (1 - m) * theta_s`` with the momentum (keep rate) ``m``. Appendix
D.1-D.3: ``m`` follows a cosine schedule from its initial value (Table 21 "ema" column, e.g.
0.99 / 0.996) to 1 at the end of training (the schedule of BYOL, Grill et al., 2020).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import torch
from torch import nn

from contrastkit.cosine import cosine_anneal

__all__ = ["MomentumBranch", "cosine_momentum", "lerp_by_tensor_"]

BufferPolicy = Literal["copy", "ema", "keep"]
_BUFFER_POLICIES = ("copy", "ema", "keep")


def cosine_momentum(step: int, total_steps: int, base: float = 0.99) -> float:
    """Cosine momentum schedule from ``base`` (step 0) to 1 (step ``total_steps``).

    ``m(k) = 1 - (1 - base) * (cos(pi * k / K) + 1) / 2`` (SCE appendix D.1; BYOL Eq. in 3.2).
    Steps past ``total_steps`` return 1.

    Args:
        step: current step ``k`` (>= 0).
        total_steps: total number of steps ``K`` (>= 1).
        base: initial momentum, in [0, 1].
    """
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps!r}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step!r}")
    if not 0.0 <= base <= 1.0:
        raise ValueError(f"base must be in [0, 1], got {base!r}")
    progress = min(step, total_steps) / total_steps
    return cosine_anneal(base, 1.0, progress)


class MomentumBranch(nn.Module):
    """Frozen deep copy of an online module, updated by exponential moving average.

    The target is registered as the submodule ``target`` (so it is saved in ``state_dict`` and
    moved by ``.to()``); the online module is held by reference only, not registered, so the
    online parameters are not duplicated in this module's ``parameters()``/``state_dict``.

    Choices (documented, tested):

    * **Mode.** The target follows this module's train/eval mode, so during training its BN
      layers normalise with the current batch statistics, as the key/target encoders of MoCo
      (He et al., 2020) and BYOL (Grill et al., 2020). ``eval_target=True`` keeps the target
      always in eval mode (running statistics) instead.
    * **Buffers** (BN running mean/var, ``num_batches_tracked``): ``"copy"`` (default) copies
      the online buffers at every ``update``, so the target's statistics are those of the
      online encoder; ``"ema"`` averages floating buffers with the same momentum (and copies
      integer ones); ``"keep"`` leaves the target's own buffers, updated by its own forwards.

    Args:
        online: the online module (encoder, or encoder + projector).
        buffers: buffer policy, ``"copy"``, ``"ema"`` or ``"keep"``.
        eval_target: keep the target in eval mode whatever this module's mode.
    """

    def __init__(
        self, online: nn.Module, buffers: BufferPolicy = "copy", eval_target: bool = False
    ) -> None:
        super().__init__()
        if not isinstance(online, nn.Module):
            raise ValueError(f"online must be an nn.Module, got {type(online).__name__}")
        if buffers not in _BUFFER_POLICIES:
            raise ValueError(f"buffers must be one of {_BUFFER_POLICIES}, got {buffers!r}")
        self.buffers_policy: BufferPolicy = buffers
        self.eval_target = eval_target
        self.target = copy.deepcopy(online)
        self.target.requires_grad_(False)
        object.__setattr__(self, "_online", online)  # reference, not a submodule
        self.train(online.training)

    @property
    def online(self) -> nn.Module:
        """The online module this branch tracks."""
        return self._online

    def train(self, mode: bool = True) -> MomentumBranch:
        """Set train/eval mode; the target stays in eval mode if ``eval_target``."""
        super().train(mode)
        if self.eval_target:
            self.target.eval()
        return self

    @torch.no_grad()
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the target without building a graph."""
        return self.target(*args, **kwargs)

    @torch.no_grad()
    def update(self, momentum: float) -> None:
        """``theta_t <- m * theta_t + (1 - m) * theta_s`` for all parameters (SCE Eq. 2).

        Buffers follow the policy given at construction. Call after ``optimizer.step()``.

        Args:
            momentum: keep rate ``m`` in [0, 1]; 1 leaves the target unchanged, 0 copies.
        """
        m = float(momentum)
        if not 0.0 <= m <= 1.0:
            raise ValueError(f"momentum must be in [0, 1], got {momentum!r}")
        t_params, o_params = self._parameter_pairs()
        if t_params:  # fused multi-tensor kernels: t + (1 - m) (o - t) = m t + (1 - m) o
            for t_group, o_group in _same_dtype_groups(t_params, o_params):
                torch._foreach_lerp_(t_group, o_group, 1.0 - m)
        if self.buffers_policy != "keep":
            self._update_buffers(m)

    @torch.no_grad()
    def update_by(self, rate: torch.Tensor) -> None:
        """:meth:`update` with ``1 - m`` given as ``rate``, a 0-d tensor on the device, for a
        captured training step: no host value enters (:func:`lerp_by_tensor_`)."""
        t_params, o_params = self._parameter_pairs()
        for t_group, o_group in _same_dtype_groups(t_params, o_params):
            lerp_by_tensor_(t_group, o_group, rate.to(t_group[0].dtype))
        if self.buffers_policy != "keep":
            self._update_buffers(rate)

    def _parameter_pairs(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        t_params = list(self.target.parameters())
        o_params = list(self.online.parameters())
        if len(t_params) != len(o_params):
            raise ValueError(
                f"online has {len(o_params)} parameters, target {len(t_params)}: "
                "the online module changed structure after the branch was built"
            )
        return t_params, o_params

    def _update_buffers(self, m: float | torch.Tensor) -> None:
        """Buffers by the policy: ``m`` the keep rate, or the rate ``1 - m`` as a 0-d tensor
        (:meth:`update_by`)."""
        t_bufs = list(self.target.buffers())
        o_bufs = list(self.online.buffers())
        if len(t_bufs) != len(o_bufs):
            raise ValueError(
                f"online has {len(o_bufs)} buffers, target {len(t_bufs)}: "
                "the online module changed structure after the branch was built"
            )
        ema = self.buffers_policy == "ema"
        float_t, float_o, copy_t, copy_o = [], [], [], []
        for t, o in zip(t_bufs, o_bufs, strict=True):
            if ema and t.is_floating_point():
                float_t.append(t)
                float_o.append(o)
            else:
                copy_t.append(t)
                copy_o.append(o)
        for t_group, o_group in _same_dtype_groups(copy_t, copy_o):
            torch._foreach_copy_(t_group, o_group)
        for t_group, o_group in _same_dtype_groups(float_t, float_o):
            if isinstance(m, torch.Tensor):
                lerp_by_tensor_(t_group, o_group, m.to(t_group[0].dtype))
            else:
                torch._foreach_lerp_(t_group, o_group, 1.0 - m)


def lerp_by_tensor_(targets: list[torch.Tensor], sources: list[torch.Tensor],
                    weight: torch.Tensor) -> None:
    """``t += weight * (s - t)`` for every pair, ``weight`` a 0-d tensor on their device.

    On the CPU by ``torch.lerp`` with a tensor weight, which rounds as the Python-number weight
    of :meth:`MomentumBranch.update` does (the same values bit for bit); on other devices in
    three multi-tensor kernels (a tensor-weighted ``_foreach_lerp_`` would run one kernel per
    tensor there), whose roundings may differ from ``lerp``'s by one unit in the last place.
    """
    if not targets:
        return
    if targets[0].device.type == "cpu":
        torch._foreach_lerp_(targets, sources, [weight] * len(targets))
        return
    difference = torch._foreach_sub(sources, targets)
    torch._foreach_mul_(difference, weight)
    torch._foreach_add_(targets, difference)


def _same_dtype_groups(
    targets: list[torch.Tensor], sources: list[torch.Tensor]
) -> list[tuple[list[torch.Tensor], list[torch.Tensor]]]:
    """``(targets, sources)`` pairs split by the target's device and dtype (order kept).

    A ``torch._foreach_*`` call over tensors of one device and dtype runs as a few fused
    kernels on a GPU; a list that mixes them (BN's float32 statistics and int64
    ``num_batches_tracked``) falls back to one kernel per tensor.
    """
    groups: dict[tuple[torch.device, torch.dtype], tuple[list, list]] = {}
    for t, o in zip(targets, sources, strict=True):
        group = groups.setdefault((t.device, t.dtype), ([], []))
        group[0].append(t)
        group[1].append(o)
    return list(groups.values())
