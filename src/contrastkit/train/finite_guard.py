"""The training loss checked for NaN/Inf on the device, read back only every few steps.

``bool(torch.isfinite(loss))`` at every step would make a GPU wait for the whole step before the
next one is queued. :class:`FiniteGuard` instead keeps, on the loss's device, the first optimiser
step whose loss was not finite (``-1`` while none was), updated by one masked fill per step
(five small kernels in all: ``loss - loss`` is NaN exactly when the loss is NaN or infinite), and
the host reads it only when asked (:meth:`FiniteGuard.check`): every ``check_every`` steps and
before every checkpoint, so a checkpoint never holds weights updated with a NaN gradient and the
error still names the step, epoch and batch where the loss first went bad. Under DDP the
processes' flags are combined (the earliest step) at each check, so all of them stop together.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from contrastkit.distributed import is_distributed

__all__ = ["FiniteGuard", "NonFiniteLossError", "check_weights"]

#: What to try, printed with the error.
ADVICE = (
    "try a lower learning rate (model.optimizer.base_lr), a longer warm-up "
    "(model.optimizer.warmup_epochs), a higher temperature, or trainer.precision 32 if you "
    "train in 16-bit"
)


class NonFiniteLossError(FloatingPointError):
    """Raised when the training loss (or, before a checkpoint, a weight) becomes NaN or
    infinite."""


def _kept(last_checkpoint: str | None) -> str:
    return (f"the last checkpoint, {last_checkpoint}, was written before it and is intact"
            if last_checkpoint else "no checkpoint was written after it")


def check_weights(module: torch.nn.Module, step: int, epoch: int,
                  last_checkpoint: str | None = None) -> None:
    """Raise :class:`NonFiniteLossError` if a floating parameter or buffer of ``module`` holds
    NaN or Inf (one host read; called before each checkpoint).

    A huge learning rate can make the weights infinite one step before the loss shows it: the
    loss check alone would let such weights into a checkpoint.
    """
    tensors = [t for t in (*module.parameters(), *module.buffers()) if t.is_floating_point()]
    if not tensors:
        return
    finite = torch.stack([torch.isfinite(t).all() for t in tensors]).all()
    if not bool(finite):
        raise NonFiniteLossError(
            f"the weights became NaN or infinite by step {step} (epoch {epoch + 1}), before the "
            f"loss showed it; the run stops here and {_kept(last_checkpoint)}; {ADVICE}"
        )


class FiniteGuard:
    """Track the first non-finite loss of a run without reading the device at every step.

    Args:
        check_every: read the device flag every this many calls of :meth:`observe` (> 0).
    """

    def __init__(self, check_every: int = 50) -> None:
        if check_every < 1:
            raise ValueError(f"check_every must be >= 1, got {check_every}")
        self.check_every = check_every
        self._first_bad: Tensor | None = None  # (1,): first bad step, -1 while none
        self._where: dict[int, tuple[int, int]] = {}  # step -> (epoch, batch), since last check
        self._calls = 0

    def observe(self, loss: Tensor, step: int, epoch: int, batch: int) -> bool:
        """Record ``loss`` of optimiser step ``step`` (``epoch`` and ``batch`` counted from 0, as
        Lightning counts them; the message counts from 1); True when the caller should
        :meth:`check`.

        Five kernels on the loss's device (a subtraction and a NaN test, where ``isfinite``
        and its negation took five, then the masked fill's condition and the fill); nothing is
        read back.
        """
        flag = self.flag_on(loss.device)
        value = loss.detach().reshape(1)
        bad = torch.isnan(value - value)  # NaN - NaN, inf - inf: NaN; finite - finite: 0
        flag.masked_fill_(bad.logical_and_(flag < 0), step)
        return self.note(step, epoch, batch)

    def flag_on(self, device: torch.device) -> Tensor:
        """The device flag (``(1,)`` int64: the first bad step, -1 while none), on ``device``."""
        if self._first_bad is None or self._first_bad.device != device:
            self._first_bad = torch.full((1,), -1, dtype=torch.long, device=device)
        return self._first_bad

    def observe_on_device(self, loss: Tensor, step: Tensor) -> None:
        """The device half of :meth:`observe` with the step as a 0-d int64 device tensor (a
        captured step's counter): no host value enters, so a CUDA graph can replay it."""
        flag = self.flag_on(loss.device)
        value = loss.detach().reshape(1)
        bad = torch.isnan(value - value).logical_and_(flag < 0)
        flag.copy_(torch.where(bad, step, flag))

    def note(self, step: int, epoch: int, batch: int) -> bool:
        """The host half of :meth:`observe`: where step ``step`` was; True when the caller
        should :meth:`check`."""
        self._where.setdefault(step, (epoch, batch))
        self._calls += 1
        return self._calls % self.check_every == 0

    def check(self, last_checkpoint: str | None = None) -> None:
        """Read the flag (one host read) and raise :class:`NonFiniteLossError` if it is set.

        Args:
            last_checkpoint: path of the newest checkpoint on disk, named in the message.
        """
        if self._first_bad is None:
            return
        flag = self._first_bad
        if is_distributed():  # every process takes the same decision at the same check
            flag = torch.where(flag < 0, torch.iinfo(torch.long).max, flag)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            flag = torch.where(flag == torch.iinfo(torch.long).max, -1, flag)
        step = int(flag.item())
        if step < 0:
            self._where.clear()
            return
        epoch, batch = self._where.get(step, (-1, -1))
        # epochs and batches counted from 1, as the epoch lines count them
        where = f"step {step}" + (f" (epoch {epoch + 1}, batch {batch + 1})" if epoch >= 0
                                  else "")
        raise NonFiniteLossError(
            f"the training loss became NaN or infinite at {where}; the run stops here and "
            f"{_kept(last_checkpoint)}; {ADVICE}"
        )
