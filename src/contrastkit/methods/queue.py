"""FIFO memory queue of embeddings (MoCo, ReSSL, SCE memory buffer; NNCLR's support set;
SwAV's feature queues).

The memory buffer of MoCo (He et al., CVPR 2020) and of SCE/ReSSL (Denize et al., appendix
D.1, Table 21 "memory buffer") stores the most recent ``size`` target embeddings of the
whole (multi-process) batch; they serve as negatives / relational targets for the next
steps. NNCLR looks up nearest neighbours in one, SwAV adds one per global crop to the codes.

Choices (documented and tested in ``tests/methods/test_queue.py``):

* **Initial state.** ``init="empty"`` (default): the queue starts empty and
  :meth:`MemoryQueue.negatives` returns only the rows written so far, so no random vector
  ever acts as a negative; ``is_ready`` is False until the first enqueue and the warm-up
  is over when ``num_valid == size``. Losses must therefore accept a bank of ``K >= 0`` rows, or
  the method must skip the queue term while ``not is_ready``. ``init="random"`` reproduces
  MoCo: the queue starts full of L2-normalised Gaussian vectors (``seed`` makes them
  reproducible).
* **FIFO semantics.** ``enqueue(keys)`` is equivalent to writing the rows one by one at
  ``ptr`` (wrapping to 0 after ``size - 1``): writes that cross the end are split, so any
  ``size`` works, including sizes that are not a multiple of the global batch; a batch with
  more than ``size`` rows leaves exactly its newest ``size`` rows.
* **Multi-process.** The caller gathers keys from all ranks (``gather_no_grad``) before
  ``enqueue``, or constructs the queue with ``gather=True``; either way every rank then
  holds an identical queue.
* **Gradient accumulation.** ``enqueue`` writes immediately. For accumulation over ``k``
  micro-batches, call :meth:`MemoryQueue.stage` after each micro-batch and
  :meth:`MemoryQueue.commit` after the optimiser step: the queue seen by every micro-batch
  of one step is then the same, and the committed state equals one ``enqueue`` of the
  concatenated micro-batches (the ``k * b`` large-batch equivalent). Staged keys are not
  part of the ``state_dict``: checkpoint at optimiser-step boundaries.
* **Captured steps.** :meth:`MemoryQueue.write_at_pointer` writes the staged keys at the
  position held by the ``ptr`` buffer itself and moves ``ptr`` and ``filled`` on the device,
  so a CUDA graph that replays it writes each step where an eager step would (a write that
  read the host copy of the pointer would bake one position into the graph); the caller keeps
  the host copies in step with :meth:`MemoryQueue.advance_host_copies`.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.distributed import gather_no_grad
from contrastkit.precision import at_least_float32

__all__ = ["MemoryQueue"]


class MemoryQueue(nn.Module):
    """Fixed-size FIFO queue of key embeddings, stored as checkpointed buffers.

    Buffers (all in ``state_dict``): ``keys`` of shape ``(size, dim)``, ``ptr`` (next row to
    write, long scalar) and ``filled`` (number of valid rows, long scalar, ``<= size``). The
    module keeps host copies of ``ptr`` and ``filled`` (refreshed when a state dict is loaded),
    so writing and reading the queue never reads a value back from the device.

    Args:
        size: number of rows ``K`` kept (> 0).
        dim: embedding dimension (> 0).
        normalize: L2-normalise keys on enqueue (and the random initial keys).
        init: ``"empty"`` (start with no valid rows) or ``"random"`` (MoCo: start full of
            L2-normalised Gaussian vectors).
        gather: gather keys from all processes with ``gather_no_grad`` inside ``enqueue`` and
            ``stage``; leave False when the caller passes already-gathered keys.
        seed: seed for ``init="random"`` (None uses the global generator).
        dtype: storage dtype of ``keys``; enqueued keys are cast to it.

    Raises:
        ValueError: on a non-positive ``size``/``dim`` or an unknown ``init``.
    """

    keys: Tensor
    ptr: Tensor
    filled: Tensor

    def __init__(
        self,
        size: int,
        dim: int,
        *,
        normalize: bool = True,
        init: Literal["empty", "random"] = "empty",
        gather: bool = False,
        seed: int | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive int, got {size!r}")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if init not in ("empty", "random"):
            raise ValueError(f"init must be 'empty' or 'random', got {init!r}")
        self.size = size
        self.dim = dim
        self.normalize = normalize
        self.gather = gather
        if init == "random":
            generator = torch.Generator().manual_seed(seed) if seed is not None else None
            keys = torch.randn(size, dim, generator=generator, dtype=torch.float64)
            keys = F.normalize(keys, dim=1) if normalize else keys
            filled = size
        else:
            keys = torch.zeros(size, dim, dtype=torch.float64)
            filled = 0
        self.register_buffer("keys", keys.to(dtype))
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))
        self.register_buffer("filled", torch.tensor(filled, dtype=torch.long))
        # Host copies of ``ptr`` and ``filled``: the buffers are what a checkpoint holds, these
        # are what the training step reads, so it never waits on the device for them.
        self._ptr, self._filled = 0, filled
        self._staged: list[Tensor] = []

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._ptr, self._filled = int(self.ptr), int(self.filled)  # once, at load time

    def extra_repr(self) -> str:
        return f"size={self.size}, dim={self.dim}, normalize={self.normalize}"

    @property
    def num_valid(self) -> int:
        """Number of valid rows returned by :meth:`negatives` (``<= size``)."""
        return self._filled

    @property
    def is_ready(self) -> bool:
        """True when at least one valid key is stored."""
        return self.num_valid > 0

    def negatives(self) -> Tensor:
        """Valid keys, shape ``(num_valid, dim)``, in storage order (not chronological).

        Rows are filled from index 0 upward, so while warming up the valid rows are the first
        ``num_valid``. A clone is returned, so a later in-place ``enqueue`` cannot invalidate
        a graph that used the result.
        """
        return self.keys[: self.num_valid].clone()

    def _prepare(self, keys: Tensor) -> Tensor:
        if not isinstance(keys, Tensor) or keys.dim() != 2 or keys.shape[1] != self.dim:
            shape = tuple(keys.shape) if isinstance(keys, Tensor) else type(keys).__name__
            raise ValueError(f"keys must have shape (batch, {self.dim}), got {shape}")
        keys = keys.detach()
        if self.gather:
            keys = gather_no_grad(keys)
        if self.normalize and keys.shape[0] > 0:
            keys = F.normalize(at_least_float32(keys), dim=1)
        return keys.to(device=self.keys.device, dtype=self.keys.dtype)

    @torch.no_grad()
    def _write(self, keys: Tensor) -> None:
        n = keys.shape[0]
        if n == 0:
            return
        ptr = self._ptr
        if n >= self.size:
            # Writing n rows one by one would leave the newest `size` rows, starting at the
            # slot the (n - size)-th row lands in.
            start = (ptr + n - self.size) % self.size
            keys = keys[n - self.size :]
        else:
            start = ptr
        m = keys.shape[0]
        first = min(m, self.size - start)
        self.keys[start : start + first] = keys[:first]
        if m > first:
            self.keys[: m - first] = keys[first:]
        self._ptr, self._filled = (ptr + n) % self.size, min(self._filled + n, self.size)
        self.ptr.fill_(self._ptr)
        self.filled.fill_(self._filled)

    @torch.no_grad()
    def enqueue(self, keys: Tensor) -> None:
        """Write ``keys`` (shape ``(batch, dim)``, detached) at ``ptr``, FIFO, immediately.

        Raises:
            ValueError: if ``keys`` does not have shape ``(batch, dim)``.
        """
        self._write(self._prepare(keys))

    @torch.no_grad()
    def stage(self, keys: Tensor) -> None:
        """Hold ``keys`` until :meth:`commit` (gradient accumulation); queue unchanged."""
        self._staged.append(self._prepare(keys))

    @torch.no_grad()
    def take_staged(self) -> Tensor:
        """The staged keys as one batch (staging order), unstaged; the queue is unchanged."""
        keys = self._staged[0] if len(self._staged) == 1 else torch.cat(self._staged, dim=0)
        self._staged.clear()
        return keys

    @torch.no_grad()
    def write_at_pointer(self, keys: Tensor) -> None:
        """Write ``keys`` (prepared: gathered, normalised) at the device pointer ``ptr``, FIFO,
        and move ``ptr`` and ``filled`` on the device; nothing is read on the host.

        The same rows as :meth:`commit` writes (of a batch larger than the queue, its newest
        ``size`` rows); the host copies of ``ptr`` and ``filled`` are left to
        :meth:`advance_host_copies`.
        """
        n = keys.shape[0]
        skipped = max(n - self.size, 0)
        rows = torch.arange(n - skipped, device=self.keys.device).add_(self.ptr)
        self.keys.index_copy_(0, rows.add_(skipped).remainder_(self.size), keys[skipped:])
        self.ptr.add_(n).remainder_(self.size)
        self.filled.add_(n).clamp_(max=self.size)

    def advance_host_copies(self, n: int) -> None:
        """Move the host copies of ``ptr`` and ``filled`` as a write of ``n`` rows moves the
        buffers (:meth:`write_at_pointer` moved those on the device)."""
        self._ptr, self._filled = (self._ptr + n) % self.size, min(self._filled + n, self.size)

    @torch.no_grad()
    def commit(self) -> int:
        """Enqueue every staged batch, in staging order, as one write; return rows written."""
        if not self._staged:
            return 0
        keys = torch.cat(self._staged, dim=0)
        self._staged.clear()
        self._write(keys)
        return keys.shape[0]


