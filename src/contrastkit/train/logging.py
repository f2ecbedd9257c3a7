"""A CSV logger that continues ``metrics.csv`` when a run is resumed, and a progress bar
refreshed on logging steps only.

Lightning's CSV writer deletes an existing ``metrics.csv`` in its folder; a resumed run would
then lose the metrics of the part before the interruption. This writer appends instead,
keeping the columns already in the file. ``contrastkit pretrain --resume`` first drops the rows
logged after the checkpoint (:func:`contrastkit.train.resume.truncate_metrics`), so a replayed step
is not logged twice; a fresh run starts in an empty folder, so it never appends to another run.
"""

from __future__ import annotations

import csv
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter


class _AppendingWriter(ExperimentWriter):
    def _check_log_dir_exists(self) -> None:
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as handle:
                header = next(csv.reader(handle), [])
            self.metrics_keys = sorted(set(self.metrics_keys) | set(header))


class ResumableCSVLogger(CSVLogger):
    """``CSVLogger`` whose ``metrics.csv`` survives a resume (rows are appended)."""

    @property
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _AppendingWriter(log_dir=self.log_dir)
        return self._experiment


class LoggingStepProgressBar(TQDMProgressBar):
    """A TQDM bar whose training bar refreshes on the steps Lightning writes logs.

    Refreshing reads the logged loss from the device (a synchronisation on a GPU). Lightning's
    bar refreshes every ``refresh_rate`` batches counted from each epoch's start, which drifts
    off the logging steps (``trainer.log_every_n_steps``, counted over the whole run) after the
    first epoch whenever an epoch's length is not a multiple of it; this one refreshes exactly
    on the logging steps (the loss was read there anyway) and at each epoch's end.
    """

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        bar = self.train_progress_bar
        connector = getattr(trainer, "_logger_connector", None)
        if bar is None or bar.disable or not getattr(connector, "should_update_logs", True):
            return
        bar.n = batch_idx + 1
        bar.set_postfix(self.get_metrics(trainer, pl_module))  # refreshes the bar
