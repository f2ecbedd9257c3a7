"""The training step's hot path: checks that would make a GPU wait are deferred.

A check such as ``bool(torch.isfinite(x).all())`` reads a device value back on the host: on a
GPU the Python thread then waits for every kernel queued so far, and the next kernels are not
queued meanwhile. Called once per loss per step, such reads cost more than the loss itself. The
training engine therefore runs each step inside :func:`hot_path`, where

* the losses skip their NaN/Inf scans of the embeddings and the value checks of tensor
  temperatures (shapes, dtypes and Python-number arguments are still checked: that reads
  nothing back);
* the collectives of :mod:`contrastkit.distributed` trust that every process holds the same
  number of rows (the engine's samplers drop the last incomplete batch) instead of exchanging
  sizes first;
* warnings that depend on tensor values (e.g. a supervised batch without any positive pair) are
  not emitted.

What replaces them is the engine's own deferred check: the loss is tested for finiteness on the
device and the result is read every few steps and before every checkpoint, so a NaN still stops
the run with the step it appeared at (:class:`contrastkit.train.module.PretrainModule`).
Outside this context (user code, tests, evaluation) every check runs as usual.

The flag is a plain module attribute, not a ``ContextVar``: ``torch.compile`` reads it as a
constant (a ``ContextVar.get`` was a graph break at every check), which is what lets a whole
training step compile as one graph (:mod:`contrastkit.train.captured_step`). It is set for the
process: the training step is the only code that sets it, from the thread that trains.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["hot_path", "in_hot_path"]

_active = False


@contextmanager
def hot_path() -> Iterator[None]:
    """Run the enclosed code with the checks that read device values deferred (see above)."""
    global _active
    outer, _active = _active, True
    try:
        yield
    finally:
        _active = outer


def in_hot_path() -> bool:
    """Whether the caller runs inside :func:`hot_path`."""
    return _active
