"""Checkpoints written in the background: the epoch end no longer waits for the disk.

Writing a checkpoint (the weights' SHA-256, ``torch.save``, ``fsync``) took 0.58 s of every
epoch on an H100 run of 7 s per epoch (``benchmarks/README.md``), time in which the device
waited. :class:`BackgroundCheckpointIO` copies the checkpoint's tensors at the epoch end (to
host memory: the training goes on changing the weights in place) and leaves the rest of the
write, unchanged (:class:`~contrastkit.train.callbacks.AtomicCheckpointIO`: a temporary file,
``fsync``, ``os.replace``), to one background thread while the next epoch trains.

What ``docs/reliability.md`` promises holds:

* one write at a time, in order: a write waits for the previous one to end; a link
  (``best.ckpt``), a removal or a read of a checkpoint waits for the pending write first;
* a file named ``*.ckpt`` is always complete; a kill in the middle of a background write
  leaves the previous checkpoint and a ``.tmp`` file, as before;
* a failed write (a full disk) ends the run with its one-line ``OSError``: at the next
  checkpoint, link or removal, or when training ends (Lightning's teardown waits for the
  pending write), so at most one epoch later than a write in the loop would, and the
  previous checkpoint is intact;
* training never ends, normally or by a signal, before the pending write is on disk.
"""

from __future__ import annotations

import copy
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from contrastkit.train.callbacks import AtomicCheckpointIO

__all__ = ["BackgroundCheckpointIO", "detached_copy"]


def detached_copy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """``value`` with every tensor copied to host memory and every container rebuilt, so
    that nothing in it changes when the training goes on (a tensor that appears twice is
    copied once)."""
    memo = {} if memo is None else memo
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, torch.Tensor):
        copied = value.detach().to("cpu", copy=True)
    elif isinstance(value, dict):
        copied = type(value)((k, detached_copy(v, memo)) for k, v in value.items())
    elif isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        copied = type(value)(detached_copy(v, memo) for v in value)
    else:
        copied = copy.deepcopy(value)
    memo[id(value)] = copied
    return copied


class BackgroundCheckpointIO(AtomicCheckpointIO):
    """:class:`~contrastkit.train.callbacks.AtomicCheckpointIO` whose writes run on a
    background thread (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._writer: ThreadPoolExecutor | None = None
        self._pending: Future | None = None

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike,
                        storage_options: Any | None = None) -> None:
        """Copy ``checkpoint``'s tensors now; write it at ``path`` in the background."""
        self.wait()
        snapshot = detached_copy(checkpoint)
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
        write = super().save_checkpoint
        self._pending = self._writer.submit(write, snapshot, path, storage_options)

    def wait(self) -> None:
        """Wait for the pending write; raise its error, if it failed."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def link(self, source, path: str | os.PathLike) -> None:
        self.wait()
        super().link(source, path)

    def remove_checkpoint(self, path: str | os.PathLike) -> None:
        self.wait()
        super().remove_checkpoint(path)

    def load_checkpoint(self, path: str | os.PathLike, map_location: Any | None = None,
                        weights_only: bool | None = None) -> dict[str, Any]:
        self.wait()
        return super().load_checkpoint(path, map_location, weights_only)

    def teardown(self) -> None:
        """Wait for the pending write (raising its error); stop the thread."""
        try:
            self.wait()
        finally:
            if self._writer is not None:
                self._writer.shutdown(wait=True)
                self._writer = None
