"""The augmentations' random parameters inside ``torch.compile``: those of the eager code.

``torch.compile`` cannot trace ``torch.rand(..., generator=g)`` (a ``torch.Generator`` is not
something a graph can hold: each such draw was a graph break), and the augmentation generator of
a training process (:mod:`contrastkit.train.augment_rng`) must stay the one its checkpoints
save. Compiling the parameters' arithmetic would not do either: a crop box is rounded to whole
pixels from float64 logarithms and square roots, and the compiler's float64 functions, one unit
in the last place away from the eager ones, move a box by a pixel now and then.

So, inside compiled code, each op's parameters are drawn by :func:`sample_`, a custom operator
that the compiler keeps as one opaque call: it runs the op's own ``sample`` (``torch.rand`` on
the registered generator, then the eager kernels of its arithmetic) and hands the parameters
back packed in one float64 tensor (exact for floats, flags and small integers), so they and the
generator's state afterwards are the eager code's, draw for draw; :func:`uniform_` does the same
for a bare draw. Every such call also adds 1 to its generator's ``counter`` tensor, which the
operators declare they mutate: the compiler then keeps them in program order (two draws
reordered would swap their numbers). Inside a CUDA graph they are captured like any eager
kernels (the generator must be registered with the graph:
``torch.cuda.CUDAGraph.register_generator_state``).
"""

from __future__ import annotations

import math
import weakref

import torch
from torch import Tensor, nn

__all__ = ["register_generator", "register_ops", "sample_", "sample_params", "uniform_"]

_GENERATORS: weakref.WeakValueDictionary[int, torch.Generator] = weakref.WeakValueDictionary()
_COUNTERS: dict[int, Tensor] = {}
_OPS: weakref.WeakValueDictionary[int, nn.Module] = weakref.WeakValueDictionary()
#: per op, its parameters as packed by :func:`sample_`: (name, shape after the batch, dtype)
_LAYOUTS: dict[int, list[tuple[str, tuple[int, ...], torch.dtype]]] = {}


def register_generator(generator: torch.Generator) -> int:
    """Make ``generator`` usable by compiled draws; return its key (idempotent)."""
    key = id(generator)
    if _GENERATORS.get(key) is not generator:
        _GENERATORS[key] = generator
        _COUNTERS[key] = torch.zeros((), dtype=torch.int64, device=generator.device)
    return key


def register_ops(module: nn.Module) -> int:
    """Make every augmentation op (every submodule with a ``sample`` method: the ``BatchOp`` s)
    inside ``module`` drawable inside compiled code; return how many."""
    ops = [m for m in module.modules() if callable(getattr(m, "sample", None))]
    for op in ops:
        _OPS[id(op)] = op
        # the layout of its parameters (a throwaway draw), known before compiled code reads it
        params = op.sample(2, 32, 32, device=torch.device("cpu"),
                           generator=torch.Generator().manual_seed(0))
        _LAYOUTS[id(op)] = [(k, tuple(params[k].shape[1:]), params[k].dtype)
                            for k in sorted(params)]
    return len(ops)


def _counter(key: int) -> Tensor:
    try:
        return _COUNTERS[key]
    except KeyError:
        raise ValueError(
            "an augmentation generator used inside torch.compile was not registered: call "
            "contrastkit.train.augment_rng.install_generator (or data.augment's "
            "register_generator) first"
        ) from None


def sample_params(op: nn.Module, batch: int, height: int, width: int, device: torch.device,
                  generator: torch.Generator | None) -> dict[str, Tensor]:
    """``op.sample(...)``, through :func:`sample_` inside compiled code (module docstring)."""
    if generator is None or not torch.compiler.is_compiling():
        return op.sample(batch, height, width, device=device, generator=generator)
    key, op_key = id(generator), id(op)
    packed = sample_(_counter(key), key, op_key, batch, height, width)
    params, start = {}, 0
    for name, shape, dtype in _LAYOUTS[op_key]:
        columns = math.prod(shape)
        params[name] = packed[:, start:start + columns].reshape(batch, *shape).to(dtype)
        start += columns
    return params


@torch.library.custom_op("contrastkit::sample_", mutates_args=("counter",))
def sample_(counter: Tensor, key: int, op_key: int, batch: int, height: int,
            width: int) -> Tensor:
    """The parameters of the op registered under ``op_key``, drawn from the generator under
    ``key`` on the counter's device, packed as float64 columns (by name, each flattened)."""
    op, generator = _OPS.get(op_key), _GENERATORS.get(key)
    if op is None or generator is None:
        raise ValueError("the augmentation op or generator of a compiled draw was not "
                         "registered (contrastkit.data.augment.register_generator)")
    counter.add_(1)
    params = op.sample(batch, height, width, device=counter.device, generator=generator)
    return torch.cat([params[name].reshape(batch, -1).to(_PACKED)
                      for name, _, _ in _LAYOUTS[op_key]], dim=1)


@sample_.register_fake
def _(counter: Tensor, key: int, op_key: int, batch: int, height: int, width: int) -> Tensor:
    columns = sum(math.prod(shape) for _, shape, _ in _LAYOUTS[op_key])
    return counter.new_empty((batch, columns), dtype=_PACKED)


_PACKED = torch.float64  # every parameter (float64, bool, small ints) exactly


@torch.library.custom_op("contrastkit::uniform_", mutates_args=("counter",))
def uniform_(counter: Tensor, key: int, batch: int, columns: int, dtype: torch.dtype) -> Tensor:
    """``torch.rand(batch, columns, generator=<key's generator>)`` on the counter's device."""
    generator = _GENERATORS.get(key)
    if generator is None:
        raise ValueError("the augmentation generator of a compiled draw no longer exists")
    counter.add_(1)
    return torch.rand(batch, columns, generator=generator, device=counter.device, dtype=dtype)


@uniform_.register_fake
def _(counter: Tensor, key: int, batch: int, columns: int, dtype: torch.dtype) -> Tensor:
    return counter.new_empty((batch, columns), dtype=dtype)


def uniform(batch: int, columns: int, generator: torch.Generator, dtype: torch.dtype) -> Tensor:
    """:func:`uniform_` for the generator itself (compiled code only)."""
    key = id(generator)
    return uniform_(_counter(key), key, batch, columns, dtype)
