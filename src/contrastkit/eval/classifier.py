"""The one training loop of every classifier the evaluation protocols train: the linear probe on
cached features and on augmented images (SCE, Denize et al. 2023, appendix D.1-D.3), the
fine-tuning of a clip backbone (appendix D.3) and of an image backbone (DySTreSS, Manna et al.
2023, appendix A.2).

:class:`LinearProtocol` holds the recipe (SGD with momentum and weight decay, the learning rate
and its schedule per iteration); the fine-tuning protocols extend it with what they add
(dropout, colour strength; a binary learning rate, the image size). :func:`train_classifier`
runs it: for every epoch, every batch ``(inputs, labels)``::

    lr = protocol.lr_at(epoch + step / steps_per_epoch)
    loss = loss_fn(model(inputs), labels)        # finite, or a one-line error
    optimizer.zero_grad(); loss.backward(); optimizer.step()

What differs between the protocols is what the batches hold (cached features, frozen-backbone
features of augmented images, augmented images or clips), the model and the loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.cosine import cosine_anneal

__all__ = ["ClassifierTraining", "LinearProtocol", "MappedBatches", "sgd", "train_classifier"]


@dataclass(frozen=True)
class LinearProtocol:
    """Hyper-parameters of training a classifier (SGD + cross-entropy).

    Attributes:
        epochs: training epochs.
        lr: base learning rate (before linear scaling).
        momentum: SGD momentum.
        weight_decay: SGD weight decay.
        batch_size: training batch size.
        schedule: ``"step"`` (multiply by ``gamma`` at each of ``milestones``) or ``"cosine"``
            (per-iteration cosine decay to 0 without restart, after the warm-up).
        milestones: epochs of the step decays.
        gamma: step decay factor.
        warmup_epochs: linear warm-up from 0 to the learning rate (0 = none).
        lr_reference_batch: when set, the learning rate follows the linear scaling rule
            ``lr * batch_size / lr_reference_batch`` (Goyal et al. 2017).
    """

    epochs: int = 100
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 0.0
    batch_size: int = 256
    schedule: str = "cosine"
    milestones: tuple[int, ...] = (60, 80)
    gamma: float = 0.1
    warmup_epochs: float = 0.0
    lr_reference_batch: int | None = None

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be finite and > 0, got {self.lr}")
        if self.schedule not in ("step", "cosine"):
            raise ValueError(f"schedule must be 'step' or 'cosine', got {self.schedule!r}")
        if self.momentum < 0 or self.weight_decay < 0 or self.warmup_epochs < 0:
            raise ValueError("momentum, weight_decay and warmup_epochs must be >= 0")
        if not 0 < self.gamma <= 1:
            raise ValueError(f"gamma must lie in (0, 1], got {self.gamma}")
        if self.lr_reference_batch is not None and self.lr_reference_batch < 1:
            raise ValueError(f"lr_reference_batch must be >= 1, got {self.lr_reference_batch}")

    @property
    def scaled_lr(self) -> float:
        """Peak learning rate after the linear scaling rule (``lr`` when no reference batch)."""
        if self.lr_reference_batch is None:
            return self.lr
        return self.lr * self.batch_size / self.lr_reference_batch

    def lr_at(self, epoch: float) -> float:
        """Learning rate at (fractional) ``epoch`` in ``[0, epochs)``.

        Step: ``scaled_lr * gamma ** #{m in milestones: m <= floor(epoch)}``. Cosine:
        ``scaled_lr * (1 + cos(pi * (epoch - warmup) / (epochs - warmup))) / 2``. During the
        warm-up (``epoch < warmup_epochs``): ``scaled_lr * epoch / warmup_epochs``.
        """
        peak = self.scaled_lr
        if epoch < self.warmup_epochs:
            return peak * epoch / self.warmup_epochs
        if self.schedule == "step":
            decays = sum(1 for m in self.milestones if m <= math.floor(epoch))
            return peak * self.gamma**decays
        span = max(self.epochs - self.warmup_epochs, 1e-12)
        progress = min(max((epoch - self.warmup_epochs) / span, 0.0), 1.0)
        return cosine_anneal(peak, 0.0, progress)


def sgd(parameters: Iterable[nn.Parameter], protocol: LinearProtocol) -> torch.optim.SGD:
    """The protocol's optimiser: SGD at ``scaled_lr`` with its momentum and weight decay."""
    return torch.optim.SGD(parameters, lr=protocol.scaled_lr, momentum=protocol.momentum,
                           weight_decay=protocol.weight_decay)


class MappedBatches:
    """``fn(batch)`` of every batch of ``batches`` (re-iterable, with its length when it has
    one): the step from what a loader yields to what the classifier trains on."""

    def __init__(self, batches: Iterable, fn: Callable[[object], tuple[Tensor, Tensor]]) -> None:
        self.batches, self.fn = batches, fn

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        return (self.fn(batch) for batch in self.batches)

    def __len__(self) -> int:
        return len(self.batches)  # type: ignore[arg-type]


@dataclass
class ClassifierTraining:
    """What :func:`train_classifier` did: the mean training loss of each epoch, the learning
    rate of each step and the number of steps."""

    loss_curve: list[float] = field(default_factory=list)
    lr_curve: list[float] = field(default_factory=list)
    steps: int = 0


def train_classifier(
    model: nn.Module,
    batches: Iterable[tuple[Tensor, Tensor]],
    protocol: LinearProtocol,
    *,
    loss_fn: Callable[[Tensor, Tensor], Tensor] = F.cross_entropy,
    optimizer: torch.optim.Optimizer | None = None,
    start_epoch: int = 0,
    stop_epoch: int | None = None,
    max_steps: int | None = None,
    epoch_end: Callable[[int, float], None] | None = None,
) -> ClassifierTraining:
    """Train ``model`` on ``batches`` with ``protocol`` (module docstring).

    Args:
        model: the trained module (a linear layer, or a backbone with its classifier); put in
            training mode.
        batches: ``(inputs, labels)`` batches, iterated once per epoch; when it has a length
            the learning rate changes every step, else every epoch.
        protocol: the recipe.
        loss_fn: ``loss_fn(model(inputs), labels)``.
        optimizer: an optimiser to continue (a resumed run); default: :func:`sgd`.
        start_epoch, stop_epoch: the epochs ``[start_epoch, stop_epoch)`` run (default: all of
            ``protocol.epochs``).
        max_steps: stop after this many steps; the schedule is compressed to span them.
        epoch_end: called with the epoch and its mean loss after each epoch.

    Raises:
        ValueError: for an epoch without a batch, or a loss that is not finite (the message
            says the epoch and step and to lower the learning rate).
    """
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    optimizer = sgd(model.parameters(), protocol) if optimizer is None else optimizer
    try:
        steps: int | None = len(batches)  # type: ignore[arg-type]
    except TypeError:
        steps = None
    stop = protocol.epochs if stop_epoch is None else min(stop_epoch, protocol.epochs)
    total = protocol.epochs * steps if steps else None
    compressed = max_steps is not None and total is not None and max_steps < total
    run = ClassifierTraining()
    model.train()
    for epoch in range(start_epoch, stop):
        if max_steps is not None and run.steps >= max_steps:
            break
        summed, seen = 0.0, 0
        for step, (inputs, labels) in enumerate(batches):
            if max_steps is not None and run.steps >= max_steps:
                break
            if compressed:
                position = protocol.epochs * run.steps / max_steps  # type: ignore[operator]
            else:
                position = epoch + (step / steps if steps else 0.0)
            lr = protocol.lr_at(position)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = loss_fn(model(inputs), labels)
            value = float(loss.detach())
            if not math.isfinite(value):
                raise ValueError(f"the classifier's training loss is {value} in epoch {epoch}, "
                                 f"step {step}: it diverged; lower the learning rate (--lr)")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            run.lr_curve.append(lr)
            run.steps += 1
            summed += value * labels.shape[0]
            seen += labels.shape[0]
        if seen == 0:
            if max_steps is not None and run.steps >= max_steps:
                break
            raise ValueError("the training batches are empty")
        run.loss_curve.append(summed / seen)
        if epoch_end is not None:
            epoch_end(epoch, run.loss_curve[-1])
    return run
