"""Files skipped while training reads its data, listed in the run folder.

Images are checked when the data is opened (``data.skip_corrupt``), so the list of the skipped
ones is known before the first step. A corrupt video is found only when a ``DataLoader`` worker
decodes it, in another process: each such process appends it to ``RUN/.skipped_files.log``
(:func:`contrastkit.outputs.record_skipped`), and :class:`SkippedFilesCallback` merges that log
into ``RUN/skipped_files.txt`` at every epoch end and when the run ends, with one warning
counting the files that are new; once the run has ended (finished, stopped or failed) and the
log is merged, the log is removed: the run folder keeps ``skipped_files.txt`` alone.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import lightning as L

from contrastkit.outputs import SKIPPED_FILES, merge_skipped

__all__ = ["SKIP_LOG", "SkippedFilesCallback"]

#: The log the reading processes append skipped files to (in the run folder).
SKIP_LOG = ".skipped_files.log"


def _datasets(dataset: object) -> list[object]:
    """``dataset`` and the datasets it wraps (``.dataset`` of wrappers and subsets)."""
    found = []
    while dataset is not None and dataset not in found:
        found.append(dataset)
        dataset = getattr(dataset, "dataset", None)
    return found


class SkippedFilesCallback(L.Callback):
    """Point the datasets that skip files while they are read (:attr:`skip_log`) at the run
    folder's log, and list what they skipped in ``skipped_files.txt``."""

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        log = str(Path(trainer.default_root_dir) / SKIP_LOG)
        datamodule = getattr(trainer, "datamodule", None)
        for name in ("train_set", "bank_set", "val_set"):
            for dataset in _datasets(getattr(datamodule, name, None)):
                if hasattr(dataset, "skip_log"):
                    dataset.skip_log = log

    def merge(self, trainer: L.Trainer, last: bool = False) -> None:
        """Add the newly skipped files to ``skipped_files.txt`` (main process only); ``last``
        (the run has ended, its readers with it): then remove the merged log."""
        folder = Path(trainer.default_root_dir)
        if not trainer.is_global_zero or not (folder / SKIP_LOG).is_file():
            return
        new = merge_skipped(folder, folder / SKIP_LOG)
        if new:
            warnings.warn(f"skipped {len(new)} unreadable file(s) while reading the data "
                          f"(first: {new[0]}): listed in {folder / SKIPPED_FILES}",
                          stacklevel=2)
        if last:
            (folder / SKIP_LOG).unlink(missing_ok=True)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.merge(trainer)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule,
                     exception: BaseException) -> None:
        self.merge(trainer, last=True)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.merge(trainer, last=True)
