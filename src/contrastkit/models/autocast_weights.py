"""Autocast's weight casts of an encoder, made by one multi-tensor copy each way.

Under ``torch.autocast`` every convolution and linear layer casts its float32 weight (and bias)
to the autocast dtype: one kernel per tensor in the forward and, for weights with a gradient,
one more in the backward (the bf16 gradient cast back to float32): 23 + 23 for a ResNet-18
with its projector, and 23 for its momentum copy, whose weights autocast never caches.
:class:`CastWeights` makes the same casts with one ``torch._foreach_copy_`` over all of them
(one multi-tensor kernel on a GPU, per 64 tensors) and the backward's with another, and runs
the encoder with the copies in place of the weights; autocast then finds them in its dtype and
casts nothing.

Nothing computed changes: a copy into a bfloat16/float16 tensor rounds as ``Tensor.to`` does
(the same conversion), the layers receive the same low-precision weights in the same memory
layout, and the gradient reaches each float32 weight as autocast's cast would send it (the
low-precision gradient, summed over the weight's uses first, converted once). Only the layers
whose own forward passes the weight and bias to the convolution or the product alone are
included (``nn.Conv1d/2d/3d`` and ``nn.Linear`` exactly, not subclasses), and only tensors
autocast would cast (float32/float16/bfloat16 in another dtype than autocast's; float64 it
leaves alone). The copies live for one :meth:`CastWeights.session` (one step of a method,
inside one autocast region), so a weight used by several views is cast once, as autocast's
cache does. In a multi-process (DDP) run the weights that take gradients are left to autocast,
so that DDP can still all-reduce each gradient bucket while the backward goes on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from contrastkit.distributed import is_distributed

__all__ = ["CastWeights"]

_LAYERS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
_CASTABLE = (torch.float32, torch.float16, torch.bfloat16)


class _Cast(torch.autograd.Function):
    """``[w.to(dtype) for w in weights]`` as one foreach copy; the gradients likewise back."""

    @staticmethod
    def forward(ctx, dtype: torch.dtype, *weights: Tensor) -> tuple[Tensor, ...]:
        ctx.set_materialize_grads(False)
        ctx.dtypes = [w.dtype for w in weights]
        copies = [torch.empty_like(w, dtype=dtype) for w in weights]
        torch._foreach_copy_(copies, list(weights))
        return tuple(copies)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads: Tensor | None) -> tuple[Tensor | None, ...]:
        given = [i for i, g in enumerate(grads) if g is not None]
        out: list[Tensor | None] = [None] * len(grads)
        if given:
            wide = [torch.empty_like(grads[i], dtype=ctx.dtypes[i]) for i in given]
            torch._foreach_copy_(wide, [grads[i] for i in given])
            for i, g in zip(given, wide, strict=True):
                out[i] = g
        return (None, *out)


def _gradients_all_reduced() -> bool:
    """True in a multi-process run, where the weight gradients are all-reduced as they come.

    DDP overlaps each gradient bucket's all-reduce with the rest of the backward; the one
    backward copy of :class:`_Cast` would hand over every weight gradient only at the end of
    the backward and take that overlap away, so with more than one process autocast casts each
    weight itself, as it would without this module.
    """
    return torch.is_grad_enabled() and is_distributed()


class CastWeights:
    """The conv/linear weights of some modules, cast for autocast in one copy (module docstring).

    The layers are found once, here: a conv/linear layer put into the modules later is left to
    autocast. Compiled modules (``nn.Module.compile``), and any code being compiled (a whole
    compiled step), are left to the compiler, which fuses the casts itself (swapping their
    weights would change what its graphs were traced with).

    Args:
        modules: the modules whose layers' weights are cast together (e.g. backbone and heads).
    """

    def __init__(self, *modules: nn.Module | None) -> None:
        self.roots = [module for module in modules if module is not None]
        self.slots = [(layer, name) for module in modules if module is not None
                      for layer in module.modules() if type(layer) in _LAYERS
                      for name in ("weight", "bias") if layer._parameters.get(name) is not None]
        self._cache: dict[tuple, tuple[Tensor, ...]] | None = None

    @contextmanager
    def session(self) -> Iterator[None]:
        """Share the copies between the calls inside (one autocast region, weights unchanged)."""
        outer, self._cache = self._cache, {}
        try:
            yield
        finally:
            self._cache = outer

    @contextmanager
    def applied(self, like: Tensor) -> Iterator[None]:
        """Run the layers with their weights cast to the autocast dtype of ``like``'s device.

        Outside autocast, or with nothing to cast, the layers keep their own weights.
        """
        device = like.device.type
        compiled = torch.compiler.is_compiling() or any(
            getattr(m, "_compiled_call_impl", None) is not None for m in self.roots)
        if compiled or not torch.is_autocast_enabled(device) or _gradients_all_reduced():
            yield
            return
        dtype = torch.get_autocast_dtype(device)
        chosen = [(layer, name) for layer, name in self.slots
                  if layer._parameters[name].dtype in _CASTABLE
                  and layer._parameters[name].dtype != dtype]
        if not chosen:
            yield
            return
        weights = [layer._parameters[name] for layer, name in chosen]
        key = (dtype, torch.is_grad_enabled(), *(id(w) for w in weights))
        copies = self._cache.get(key) if self._cache is not None else None
        if copies is None:
            copies = _Cast.apply(dtype, *weights)
            if self._cache is not None:
                self._cache[key] = copies
        try:
            for (layer, name), copy in zip(chosen, copies, strict=True):
                layer._parameters[name] = copy
            yield
        finally:
            for (layer, name), weight in zip(chosen, weights, strict=True):
                layer._parameters[name] = weight
