"""Lightning plumbing: atomic checkpoints, RNG state in checkpoints, pre-flight checks, plots."""

from __future__ import annotations

import csv
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint

from contrastkit.outputs import temp_file_beside
from contrastkit.train.progress import EpochClock, time_left


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write each checkpoint to a temporary file in the target folder, then ``os.replace`` it.

    A crash, a full disk or a kill during the write leaves the previous checkpoint untouched:
    a file at the checkpoint's path is always complete.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike,
                        storage_options: Any | None = None) -> None:
        """Save ``checkpoint`` at ``path`` atomically."""
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO does not take storage_options")
        path = Path(path)
        fd, tmp = temp_file_beside(path)
        try:
            with os.fdopen(fd, "wb") as handle:
                torch.save(checkpoint, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _numpy_state_to_safe(state: tuple) -> tuple:
    """NumPy's legacy RNG state with its key array as a tensor (loadable with weights_only)."""
    name, keys, pos, has_gauss, cached = state
    return (name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached))


def _numpy_state_from_safe(state: tuple) -> tuple:
    name, keys, pos, has_gauss, cached = state
    return (name, keys.numpy().astype(np.uint32), pos, has_gauss, cached)


class RNGStateCallback(L.Callback):
    """Store the Python, NumPy and torch (CPU and CUDA) RNG states in every checkpoint and
    restore them on resume, so augmentations after a resume draw the same numbers as an
    uninterrupted run."""

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        checkpoint["rng_states"] = {
            "python": random.getstate(),
            "numpy": _numpy_state_to_safe(np.random.get_state()),  # noqa: NPY002
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        states = checkpoint.get("rng_states")
        if states is None:
            return
        random.setstate(states["python"])
        np.random.set_state(_numpy_state_from_safe(states["numpy"]))  # noqa: NPY002
        torch.set_rng_state(states["torch"])
        if states["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(states["cuda"])


def check_output_dir(path: str | os.PathLike, required_bytes: int) -> None:
    """Fail before training when ``path`` cannot hold the checkpoints.

    Raises:
        PermissionError: when the folder cannot be created or written.
        OSError: when the free space is below ``required_bytes``.
    """
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-", delete=True)
        probe.write(b"x")
        probe.close()
    except OSError as err:
        raise PermissionError(f"output folder {folder} is not writable: {err}") from err
    free = shutil.disk_usage(folder).free
    if free < required_bytes:
        raise OSError(
            f"output folder {folder} has {free / 2**20:.0f} MiB free; the checkpoints of this "
            f"run need about {required_bytes / 2**20:.0f} MiB"
        )


def checkpoint_bytes(module: torch.nn.Module) -> int:
    """Rough checkpoint size: state plus optimiser moments (3x the state), twice (last, best)."""
    state = sum(t.numel() * t.element_size() for t in module.state_dict().values())
    return 2 * 3 * state


class PreflightCallback(L.Callback):
    """Check the output folder's writability and free space before the first step."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit" and trainer.is_global_zero:
            check_output_dir(trainer.default_root_dir, checkpoint_bytes(pl_module))


def read_metrics_csv(path: str | os.PathLike, key: str) -> tuple[list[int], list[float]]:
    """Steps and values of column ``key`` of a Lightning ``metrics.csv``."""
    steps, values = [], []
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get(key):
                steps.append(int(row["step"]))
                values.append(float(row[key]))
    return steps, values


class LossCurveCallback(L.Callback):
    """At the end of fitting, plot ``train/loss`` from the CSV logger into ``loss_curve.png``."""

    def __init__(self, key: str = "train/loss", filename: str = "loss_curve.png") -> None:
        self.key = key
        self.filename = filename

    def on_fit_end(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero:
            return
        for logger in trainer.loggers:
            if isinstance(logger, L.pytorch.loggers.CSVLogger):
                logger.save()
                metrics = Path(logger.log_dir) / "metrics.csv"
                if metrics.is_file():
                    _, values = read_metrics_csv(metrics, self.key)
                    if values:
                        from contrastkit.figures import plot_curves

                        plot_curves({self.key: values},
                                    Path(trainer.default_root_dir) / self.filename,
                                    xlabel=f"logged point (every {trainer.log_every_n_steps} "
                                    "optimiser steps)", ylabel="loss",
                                    title="pretraining loss")
                return


class EpochSummaryCallback(L.Callback):
    """With the progress bar off, print one line per epoch (after its validation): the epoch,
    its wall time and the last logged values of the loss and of the monitors."""

    KEYS = ("train/loss", "val/knn_top1", "val/online_linear_top1")

    def __init__(self) -> None:
        self.clock = EpochClock()

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.clock.start()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        elapsed = self.clock.stop()
        if trainer.progress_bar_callback is not None or not trainer.is_global_zero:
            return
        metrics = trainer.callback_metrics
        values = [f"{k} {float(metrics[k]):.4f}" for k in self.KEYS if k in metrics]
        total = f"/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0 else ""
        left = time_left(self.clock.seconds, trainer.current_epoch + 1, trainer.max_epochs)
        print(f"epoch {trainer.current_epoch + 1}{total} (step {trainer.global_step}, "
              f"{elapsed:.1f} s{', ' + left if left else ''}): " + ", ".join(values),
              flush=True)


class BestCheckpoint(ModelCheckpoint):
    """Keep the checkpoint with the best ``monitor`` value (``best.ckpt``); does nothing in
    runs that never log the monitored metric (no validation split)."""

    def __init__(self, dirpath: str, monitor: str = "val/knn_top1", mode: str = "max") -> None:
        super().__init__(dirpath=dirpath, monitor=monitor, mode=mode, save_top_k=1,
                         filename="best", enable_version_counter=False)

    def _save_topk_checkpoint(self, trainer, monitor_candidates) -> None:
        if self.monitor in monitor_candidates:
            super()._save_topk_checkpoint(trainer, monitor_candidates)


def latest_checkpoint(dirpath: str) -> ModelCheckpoint:
    """Checkpoint at every epoch end, keeping only the latest (``latest.ckpt``) and
    ``last.ckpt`` (what ``--resume last`` reads)."""
    return ModelCheckpoint(dirpath=dirpath, save_top_k=1, monitor=None, save_last=True,
                           filename="latest", enable_version_counter=False)
