"""Optimisers and learning-rate schedules for pretraining.

SCE (Denize et al., appendix D.1/D.2, Tables 21 and 24) trains with SGD (momentum 0.9) on
small/medium datasets and with LARS (You et al., 2017) on ImageNet and video, bias and
batch-norm parameters excluded in the LARS recipes (D.2, D.3; :func:`param_groups`'s
``exclude_bias_and_norm``), the learning rate scaled by the linear scaling rule
(Goyal et al., 2017: ``lr = base_lr * batch / 256``), a linear warm-up then a cosine decay
without restart (Loshchilov & Hutter, 2017).

Parameter groups carry a ``lars_adapt`` flag (False for excluded parameters), read by
:class:`LARS` and ignored by the torch optimisers. The LARS recipes of the non-contrastive
baselines are expressed with :class:`LARS`'s options: the trust ratio's denominator
(``trust_ratio``: the paper's, or the update's norm of the official BYOL, MoCo v3, Barlow
Twins and VICReg codes), the trust coefficient ``eta`` and solo-learn's ``clip_lr``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

import torch
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from contrastkit.cosine import cosine_anneal

__all__ = [
    "LARS",
    "TRUST_RATIOS",
    "build_optimizer",
    "param_groups",
    "resolve_warmup_epochs",
    "scaled_lr",
    "warmup_cosine",
    "warmup_cosine_scheduler",
]

_NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.modules.batchnorm._NormBase,
    nn.GroupNorm,
    nn.LayerNorm,
    nn.LocalResponseNorm,
)


def param_groups(
    model: nn.Module, weight_decay: float, exclude_bias_and_norm: bool = True
) -> list[dict[str, Any]]:
    """Split trainable parameters into a decayed group and an excluded group.

    A parameter is *excluded* (``weight_decay=0`` and ``lars_adapt=False``) when it is 1-D or
    0-D (biases, norm scales/shifts, scalars such as a learnable temperature) or belongs to
    a normalisation module (BatchNorm/GroupNorm/LayerNorm/...). Parameters with
    ``requires_grad=False`` are left out; shared parameters appear once.

    Args:
        model: module whose parameters are grouped.
        weight_decay: decay of the non-excluded group (>= 0).
        exclude_bias_and_norm: False puts every parameter in one decayed, adapted group.

    Returns:
        A list of non-empty param-group dicts with keys ``params``, ``weight_decay``,
        ``lars_adapt`` (and ``name``: ``"decay"`` or ``"no_decay"``).

    Raises:
        ValueError: if ``weight_decay`` is negative or the model has no trainable parameter.
    """
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    norm_params: set[int] = set()
    for module in model.modules():
        if isinstance(module, _NORM_TYPES):
            norm_params.update(id(p) for p in module.parameters(recurse=False))
    decay: list[Tensor] = []
    no_decay: list[Tensor] = []
    seen: set[int] = set()
    for p in model.parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        excluded = exclude_bias_and_norm and (p.ndim <= 1 or id(p) in norm_params)
        (no_decay if excluded else decay).append(p)
    if not seen:
        raise ValueError("model has no trainable parameters")
    groups = [
        {"params": decay, "weight_decay": weight_decay, "lars_adapt": True, "name": "decay"},
        {"params": no_decay, "weight_decay": 0.0, "lars_adapt": False, "name": "no_decay"},
    ]
    return [g for g in groups if g["params"]]


#: The denominators of the LARS trust ratio (:class:`LARS`'s ``trust_ratio``).
TRUST_RATIOS = ("paper", "update")
TrustRatio = Literal["paper", "update"]


def lars_direction(params: list[Tensor], grads: list[Tensor], group: dict[str, Any],
                   lr: float | Tensor) -> list[Tensor]:
    """:class:`LARS`'s step direction before momentum, ``d = g + wd w``, times the trust ratio
    of the group's ``trust_ratio`` per tensor (clipped with ``clip_lr``; 1 where a norm is 0)
    when the group sets ``lars_adapt``: multi-tensor operations, no value read on the host
    (new tensors; ``grads`` and ``params`` are not changed). ``lr`` is the group's learning
    rate at this step (a number, or a 0-d tensor in a captured step), read by ``clip_lr``."""
    wd, eta = group["weight_decay"], group["eta"]
    d = torch._foreach_add(grads, params, alpha=wd) if wd != 0 else torch._foreach_mul(
        grads, 1.0)
    if group["lars_adapt"]:
        w_norm = torch.stack(torch._foreach_norm(params))
        if group["trust_ratio"] == "update":  # the official codes: ||g + wd w||
            norm = torch.stack(torch._foreach_norm(d))
            denominator = norm
        else:  # You et al.: ||g|| + wd ||w||
            norm = torch.stack(torch._foreach_norm(grads))
            denominator = norm + wd * w_norm
        trust = eta * w_norm / denominator
        if group["clip_lr"]:  # lr * trust / lr, at most 1: the adapted lr is at most lr
            trust = torch.clamp(trust / lr, max=1.0)
        ok = (w_norm > 0) & (norm > 0)
        torch._foreach_mul_(d, list(torch.where(ok, trust, torch.ones_like(trust)).unbind(0)))
    return list(d)


class LARS(Optimizer):
    """Layer-wise Adaptive Rate Scaling (You, Gitman & Ginsburg, 2017, arXiv:1708.03888).

    For each parameter ``w`` with gradient ``g`` in a group with learning rate ``lr``,
    momentum ``m``, weight decay ``wd``, trust coefficient ``eta``::

        d = g + wd * w
        if group["lars_adapt"] and ||w|| > 0 and ||g|| > 0 (||g + wd w|| > 0 for "update"):
            t = eta * ||w|| / D                                # local lr (You et al. eq. 6)
            if group["clip_lr"]:
                t = min(t / lr, 1)                             # solo-learn's clip_lr
            d = d * t
        v = m * v + d                                         # v starts at 0 -> v_1 = d
        w = w - lr * v

    with ``D = ||g|| + wd ||w||`` (``trust_ratio="paper"``: You et al. 2017, eq. 6; solo-learn,
    SCE, NVIDIA Apex's LARC) or ``D = ||g + wd w||`` (``"update"``: the norm of the update, as
    the official BYOL, MoCo v3, Barlow Twins and VICReg codes and SimCLR's TensorFlow LARS
    compute it).

    ``clip_lr`` (solo-learn's ``solo/utils/lars.py``, after NVIDIA Apex's LARC in its clip
    mode): without it the step of an adapted tensor is ``lr * t * d``, its effective learning
    rate ``lr * t``, which exceeds ``lr`` wherever ``t > 1``, as happens on small datasets with
    solo-learn's ``eta`` 0.02. With it the scale is ``min(t / lr, 1)``, so the step is
    ``lr * min(t / lr, 1) * d = min(t, lr) * d``: the effective learning rate is
    ``min(t, lr)``, the trust ratio itself capped by the scheduled ``lr`` (the group's
    learning rate at this step, warm-up and decay included). solo-learn recommends it for
    CIFAR-10/100 and ImageNet-100 (https://github.com/vturrisi/solo-learn/issues/109).

    Norms are L2 over the whole tensor. Groups with ``lars_adapt=False`` (biases and
    normalisation parameters from :func:`param_groups`, which also get ``wd=0``) take a plain
    SGD-with-momentum step, as in SimCLR/BYOL/SCE and as the official Barlow Twins and VICReg
    codes and solo-learn's ``exclude_bias_n_norm`` do (no adaptation, no weight decay). The
    learning rate multiplies the momentum buffer (torch SGD convention), so an LR scheduler
    rescales the whole step and LARS with every group excluded is exactly
    ``torch.optim.SGD``. solo-learn adds 1e-8 to ``D``; this class does not.

    Args:
        params: parameters or param-group dicts (a group may set ``lars_adapt``).
        lr: learning rate (> 0).
        momentum: momentum factor in [0, 1).
        weight_decay: default weight decay (>= 0).
        eta: trust coefficient (default 0.001, as in SimCLR/BYOL/SCE; solo-learn's CIFAR and
            ImageNet-100 configs use 0.02).
        lars_adapt: default for groups that do not set it.
        clip_lr: cap each adapted learning rate ``lr * t`` at ``lr`` (see above).
        trust_ratio: ``paper`` or ``update``, the denominator ``D`` (see above).

    Raises:
        ValueError: on an out-of-range hyper-parameter.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        eta: float = 0.001,
        lars_adapt: bool = True,
        clip_lr: bool = False,
        trust_ratio: TrustRatio = "paper",
    ) -> None:
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        if not eta > 0:
            raise ValueError(f"eta must be > 0, got {eta}")
        if trust_ratio not in TRUST_RATIOS:
            raise ValueError(f"trust_ratio must be one of {TRUST_RATIOS}, got {trust_ratio!r}")
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "weight_decay": weight_decay,
            "eta": eta,
            "lars_adapt": lars_adapt,
            "clip_lr": clip_lr,
            "trust_ratio": trust_ratio,
        }
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """Perform one optimisation step (see the class docstring for the formula)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if any(p.grad.is_sparse for p in params):
                raise RuntimeError("LARS does not support sparse gradients")
            for same in _by_device_and_dtype(params):
                self._update(same, group)
        return loss

    def _update(self, params: list[Tensor], group: dict[str, Any]) -> None:
        """The step of the class docstring for ``params`` (one device and dtype), in
        multi-tensor (``torch._foreach_*``) operations: a few fused kernels on a GPU instead
        of about ten per parameter, and no value read on the host."""
        mom = group["momentum"]
        d = lars_direction(params, [p.grad for p in params], group, group["lr"])
        if mom != 0:
            kept = [i for i, p in enumerate(params) if "momentum_buffer" in self.state[p]]
            for p, step in zip(params, d, strict=True):  # v starts at 0, so v_1 = d
                self.state[p].setdefault("momentum_buffer", step)  # d is this step's own
            if kept:
                bufs = [self.state[params[i]]["momentum_buffer"] for i in kept]
                torch._foreach_mul_(bufs, mom)
                torch._foreach_add_(bufs, [d[i] for i in kept])
            d = [self.state[p]["momentum_buffer"] for p in params]
        torch._foreach_add_(params, d, alpha=-group["lr"])


def _by_device_and_dtype(params: list[Tensor]) -> list[list[Tensor]]:
    """``params`` split by device and dtype (order kept): one foreach call per list."""
    groups: dict[tuple[torch.device, torch.dtype], list[Tensor]] = {}
    for p in params:
        groups.setdefault((p.device, p.dtype), []).append(p)
    return list(groups.values())


def build_optimizer(
    name: str,
    params_or_model: nn.Module | Iterable[Tensor] | Iterable[dict[str, Any]],
    lr: float,
    weight_decay: float = 0.0,
    momentum: float = 0.9,
    *,
    exclude_bias_and_norm: bool = True,
    eta: float = 0.001,
    clip_lr: bool = False,
    trust_ratio: TrustRatio = "paper",
    nesterov: bool = False,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> Optimizer:
    """Build ``"sgd"`` (with momentum), ``"lars"``, ``"adamw"`` or ``"adam"``.

    Given an ``nn.Module``, parameters are grouped with :func:`param_groups` (biases and
    normalisation parameters get no decay, and no LARS adaptation); given parameters or
    groups, they are used as passed with ``weight_decay`` as the default.

    Args:
        name: ``"sgd"``, ``"lars"``, ``"adamw"`` or ``"adam"`` (case-insensitive; Adam's weight
            decay is the L2 term added to the gradient, AdamW's decoupled, as in torch).
        params_or_model: model, iterable of parameters, or iterable of param-group dicts.
        lr: learning rate (already scaled, e.g. with :func:`scaled_lr`).
        weight_decay: weight decay (AdamW's is decoupled, as in torch).
        momentum: SGD/LARS momentum (ignored by AdamW).
        exclude_bias_and_norm: passed to :func:`param_groups` when given a model.
        eta: LARS trust coefficient.
        clip_lr: LARS's ``clip_lr`` (the adapted learning rate capped at ``lr``).
        trust_ratio: LARS's trust-ratio denominator, ``paper`` or ``update``.
        nesterov: Nesterov momentum for SGD.
        betas: AdamW / Adam betas.
        eps: AdamW / Adam epsilon.

    Raises:
        ValueError: on an unknown ``name`` or invalid hyper-parameter.
    """
    key = name.lower() if isinstance(name, str) else name
    if isinstance(params_or_model, nn.Module):
        params: Any = param_groups(params_or_model, weight_decay, exclude_bias_and_norm)
    else:
        params = list(params_or_model)
    if key == "sgd":
        return torch.optim.SGD(
            params, lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov
        )
    if key == "lars":
        return LARS(params, lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta,
                    clip_lr=clip_lr, trust_ratio=trust_ratio)
    if key == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if key == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    raise ValueError(f"optimizer name must be 'sgd', 'lars', 'adamw' or 'adam', got {name!r}")


def scaled_lr(base_lr: float, global_batch: int, reference_batch: int = 256) -> float:
    """Linear scaling rule (Goyal et al., 2017): ``base_lr * global_batch / reference_batch``.

    Raises:
        ValueError: if ``global_batch`` or ``reference_batch`` is not a positive int.
    """
    for label, value in (("global_batch", global_batch), ("reference_batch", reference_batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{label} must be a positive int, got {value!r}")
    return base_lr * global_batch / reference_batch


#: Longest warm-up, as a share of the run, before it is clipped (a warm-up written for a long
#: run would otherwise take a short run whole: 5 warm-up epochs of 6 leave 1 to decay).
MAX_WARMUP_SHARE = 0.25


def resolve_warmup_epochs(
    warmup_epochs: float, warmup_fraction: float | None, max_epochs: int
) -> tuple[float, str | None]:
    """The warm-up length of a run of ``max_epochs`` epochs, and a notice when it was clipped.

    ``warmup_fraction`` (a share of the run in [0, 1)) replaces ``warmup_epochs`` when set;
    otherwise ``warmup_epochs`` longer than :data:`MAX_WARMUP_SHARE` of the run is clipped to
    that share, and the notice (one line) says so.

    Raises:
        ValueError: for a negative warm-up, a fraction outside [0, 1) or ``max_epochs`` < 1.
    """
    if max_epochs < 1:
        raise ValueError(f"trainer.max_epochs must be >= 1, got {max_epochs}")
    if warmup_fraction is not None:
        if not 0.0 <= warmup_fraction < 1.0:
            raise ValueError(f"optimizer.warmup_fraction must be in [0, 1), got {warmup_fraction}")
        return warmup_fraction * max_epochs, None
    if warmup_epochs < 0:
        raise ValueError(f"optimizer.warmup_epochs must be >= 0, got {warmup_epochs}")
    longest = MAX_WARMUP_SHARE * max_epochs
    if warmup_epochs <= longest:
        return float(warmup_epochs), None
    return longest, (f"optimizer.warmup_epochs {warmup_epochs:g} is more than a quarter of "
                     f"trainer.max_epochs {max_epochs}: warm-up clipped to {longest:g} epochs "
                     "(set optimizer.warmup_fraction to choose)")


def warmup_cosine(
    step: int | float,
    total_steps: int,
    warmup_steps: int,
    base_lr: float,
    final_lr: float = 0.0,
    start_lr: float = 0.0,
) -> float:
    """Linear warm-up then cosine decay without restart (Loshchilov & Hutter, 2017).

    With ``s = step`` (optimiser steps already taken, 0-based), ``W = warmup_steps`` and
    ``T = total_steps``::

        s <  W : lr = start_lr + (base_lr - start_lr) * s / W
        s >= W : lr = final_lr + (base_lr - final_lr) * (1 + cos(pi * p)) / 2,
                 p = min((s - W) / (T - W), 1)

    so ``lr(0) = start_lr``, ``lr(W) = base_lr``, ``lr(T) = final_lr``, and steps past ``T``
    stay at ``final_lr``. With ``W >= T`` the schedule is warm-up only (clamped at
    ``base_lr``).

    Raises:
        ValueError: if ``step``/``warmup_steps`` is negative or ``total_steps`` is not > 0.
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be > 0, got {total_steps}")
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if step < warmup_steps:
        return start_lr + (base_lr - start_lr) * step / warmup_steps
    if total_steps <= warmup_steps:
        return base_lr
    progress = min((step - warmup_steps) / (total_steps - warmup_steps), 1.0)
    return cosine_anneal(base_lr, final_lr, progress)


def warmup_cosine_scheduler(
    optimizer: Optimizer,
    total_steps: int,
    warmup_steps: int,
    final_ratio: float = 0.0,
    start_ratio: float = 0.0,
) -> LambdaLR:
    """Per-step ``LambdaLR`` following :func:`warmup_cosine` for every param group (the
    pretraining engine's schedule).

    Call ``scheduler.step()`` once after every ``optimizer.step()``; the learning rate used by
    optimiser step ``s`` (0-based) is ``warmup_cosine(s, ...)`` times the group's initial lr.
    ``final_ratio``/``start_ratio`` are ``final_lr``/``start_lr`` as fractions of it.
    """
    warmup_cosine(0, total_steps, warmup_steps, 1.0)  # validate eagerly

    def factor(step: int) -> float:
        return warmup_cosine(step, total_steps, warmup_steps, 1.0, final_ratio, start_ratio)

    return LambdaLR(optimizer, factor)
