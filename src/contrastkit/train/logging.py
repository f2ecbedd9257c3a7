"""A CSV logger that continues ``metrics.csv`` when a run is resumed.

Lightning's CSV writer deletes an existing ``metrics.csv`` in its folder; a resumed run would
then lose the metrics of the part before the interruption. This writer appends instead,
keeping the columns already in the file. ``contrastkit pretrain --resume`` first drops the rows
logged after the checkpoint (:func:`contrastkit.train.resume.truncate_metrics`), so a replayed step
is not logged twice; a fresh run starts in an empty folder, so it never appends to another run.
"""

from __future__ import annotations

import csv

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
