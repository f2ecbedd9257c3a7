"""A Lightning callback that records each training step's loss and stops after ``steps``
steps: the first steps of a real run, without changing its schedule (``max_steps`` or
``limit_train_batches`` would change the learning-rate schedule's length)."""

from __future__ import annotations

from typing import ClassVar

import lightning.pytorch as pl


class StopAfter(pl.Callback):
    """Keep ``losses`` (one float per step) and stop the trainer after ``steps`` steps."""

    losses: ClassVar[list[float]] = []  # the last instance's, read by the test in-process

    def __init__(self, steps: int = 3) -> None:
        self.steps = steps
        StopAfter.losses = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        StopAfter.losses.append(float(loss))
        if len(StopAfter.losses) >= self.steps:
            trainer.should_stop = True
