"""How long a pretraining run has left: an estimate from the epochs already done, shown by the
progress bar (``left`` beside the loss) and by the one-line-per-epoch summary."""

from __future__ import annotations

import time
from collections.abc import Sequence

from lightning.pytorch.callbacks.progress.tqdm_progress import Tqdm, convert_inf

from contrastkit.train.logging import LoggingStepProgressBar


def time_left(epoch_seconds: Sequence[float], epochs_done: int, max_epochs: int | None) -> str:
    """``"~N min left"`` for the ``max_epochs - epochs_done`` epochs still to run, at the mean
    duration of the last (up to) three epochs measured; ``""`` when nothing is measured or
    nothing is left.

    The first epoch of a run also holds its start-up (data loading, compilation), so the
    estimate is rough after one epoch and settles after three.
    """
    if not epoch_seconds or not max_epochs or max_epochs <= 0 or epochs_done >= max_epochs:
        return ""
    recent = list(epoch_seconds)[-3:]
    seconds = sum(recent) / len(recent) * (max_epochs - epochs_done)
    minutes = seconds / 60
    if minutes < 1:
        return "<1 min left"
    return f"~{round(minutes)} min left"


class EpochClock:
    """Wall time of each training epoch (validation included), measured on this process."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._start: float | None = None

    def start(self) -> None:
        self._start = time.perf_counter()

    @property
    def running(self) -> bool:
        """Whether an epoch was started and not stopped. A run resumed from a checkpoint written
        at a validation's end (before Lightning's own epoch end) ends that epoch once more
        without starting it: nothing to measure or report then."""
        return self._start is not None

    def stop(self) -> float:
        """End the epoch; returns its duration (0 when it was never started)."""
        if self._start is None:
            return 0.0
        elapsed = time.perf_counter() - self._start
        self.seconds.append(elapsed)
        self._start = None
        return elapsed


class ProgressBarWithTimeLeft(LoggingStepProgressBar):
    """The progress bar refreshed on the logging steps, labelled ``epoch N/MAX`` (counted from
    1, as the one-line-per-epoch summary), with ``left: ~N min`` (the run's time left, from the
    second epoch on) beside the logged values. The kNN monitor's pass has no bar of its own:
    its result shows beside the loss."""

    def __init__(self, refresh_rate: int = 1) -> None:
        super().__init__(refresh_rate=refresh_rate)
        self.clock = EpochClock()

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        # Lightning's own, with the label counted from 1 (it would show "Epoch 0" first)
        if self._leave:
            self.train_progress_bar = self.init_train_tqdm()
        bar = self.train_progress_bar
        bar.reset()
        bar.total, bar.initial = convert_inf(self.total_train_batches), 0
        bar.set_description(epoch_label(trainer.current_epoch, trainer.max_epochs))
        self.clock.start()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if not self.clock.running:  # the resumed end of an epoch already trained
            return
        self.clock.stop()
        bar = self.train_progress_bar
        if bar is not None and bar.total is not None and bar.n < bar.total:
            bar.n = bar.total  # the epoch is done: the bar says so between logging steps too
        super().on_train_epoch_end(trainer, pl_module)

    def init_validation_tqdm(self) -> Tqdm:
        return Tqdm(disable=True)

    def get_metrics(self, trainer, pl_module) -> dict:
        metrics = super().get_metrics(trainer, pl_module)
        left = time_left(self.clock.seconds, len(self.clock.seconds), trainer.max_epochs)
        if left:
            metrics["left"] = left.removesuffix(" left")
        return metrics


def epoch_label(current_epoch: int, max_epochs: int | None) -> str:
    """``epoch N/MAX`` for Lightning's 0-based ``current_epoch`` (``epoch N`` without a
    maximum)."""
    total = f"/{max_epochs}" if max_epochs and max_epochs > 0 else ""
    return f"epoch {current_epoch + 1}{total}"
