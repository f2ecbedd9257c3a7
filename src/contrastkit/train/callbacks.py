"""Lightning plumbing: atomic checkpoints (one full write per epoch), RNG state in checkpoints,
pre-flight checks, plots, SIGINT / SIGTERM as a stop at the next batch end (the same one on
every process)."""

from __future__ import annotations

import csv
import os
import random
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_info

from contrastkit.checkpoints import (
    WEIGHTS_SHA256,
    load_checkpoint_file,
    verify_weights,
    weights_digest,
)
from contrastkit.distributed import is_distributed, max_over_processes
from contrastkit.outputs import FolderLock, temp_file_beside
from contrastkit.train.progress import EpochClock, epoch_label, time_left


class _WriteErrorRecorder:
    """File wrapper that keeps the ``OSError`` of a failed ``write`` (``torch.save`` replaces it
    by a long ``RuntimeError`` that no longer says "no space left on device")."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.error: OSError | None = None

    def write(self, data) -> int:
        try:
            return self.handle.write(data)
        except OSError as err:
            self.error = err
            raise

    def flush(self) -> None:
        self.handle.flush()


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write each checkpoint to a temporary file in the target folder, then ``os.replace`` it;
    read checkpoints with ``weights_only=True``.

    A crash, a full disk or a kill during the write leaves the previous checkpoint untouched:
    a file at the checkpoint's path is always complete. The SHA-256 of the weights is stored
    in the checkpoint's ``contrastkit`` entry (:func:`contrastkit.checkpoints.weights_digest`),
    checked when it is read. A write that fails (a full disk, a quota) raises ``OSError`` naming
    the file and the OS error, and leaves no temporary file. Another name for a checkpoint
    just written is a link to it (:meth:`link`) instead of a second write.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike,
                        storage_options: Any | None = None) -> None:
        """Save ``checkpoint`` at ``path`` atomically."""
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO does not take storage_options")
        path = Path(path)
        if isinstance(checkpoint.get("contrastkit"), dict) and "state_dict" in checkpoint:
            checkpoint["contrastkit"][WEIGHTS_SHA256] = weights_digest(checkpoint["state_dict"])
        recorder = None
        try:
            fd, tmp = temp_file_beside(path)
        except OSError as err:
            raise OSError(err.errno, f"checkpoint {path} could not be written: "
                          f"{err.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as handle:
                recorder = _WriteErrorRecorder(handle)
                torch.save(checkpoint, recorder)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException as err:
            Path(tmp).unlink(missing_ok=True)
            cause = recorder.error if recorder is not None and recorder.error else err
            if isinstance(cause, OSError):
                raise OSError(cause.errno, f"checkpoint {path} could not be written: "
                              f"{cause.strerror or cause}") from None
            raise

    def link(self, source: Path, path: str | os.PathLike) -> None:
        """Make ``path`` another name of ``source`` (a hard link, replacing ``path``
        atomically; a copy where the file system has no hard links)."""
        path = Path(path)
        fd, tmp = temp_file_beside(path)
        os.close(fd)
        os.unlink(tmp)
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
        os.replace(tmp, path)

    def load_checkpoint(self, path: str | os.PathLike, map_location: Any | None = None,
                        weights_only: bool | None = None) -> dict[str, Any]:
        """Read the checkpoint at ``path`` with ``weights_only=True`` (tensors and plain values
        only) and check its weights' SHA-256."""
        checkpoint = load_checkpoint_file(path)
        verify_weights(checkpoint, path)
        return checkpoint


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
        self.write(trainer)

    def write(self, trainer: L.Trainer) -> None:
        """Plot the curve logged so far (also called when a run is interrupted)."""
        metrics = saved_metrics_file(trainer)
        if metrics is None:
            return
        _, values = read_metrics_csv(metrics, self.key)
        if values:
            from contrastkit.figures import plot_curves

            plot_curves({self.key: values}, Path(trainer.default_root_dir) / self.filename,
                        xlabel=f"logged point (every {trainer.log_every_n_steps} optimiser "
                        "steps)", ylabel="loss", title="pretraining loss")


def saved_metrics_file(trainer: L.Trainer) -> Path | None:
    """On the main process, flush the CSV logger and return its ``metrics.csv`` (None on the
    other processes, without a CSV logger, or before anything was logged)."""
    if not trainer.is_global_zero:
        return None
    for logger in trainer.loggers:
        if isinstance(logger, L.pytorch.loggers.CSVLogger):
            logger.save()
            metrics = Path(logger.log_dir) / "metrics.csv"
            return metrics if metrics.is_file() else None
    return None


class EpochSummaryCallback(L.Callback):
    """What the online monitors cost, and with the progress bar off one line per epoch.

    At the start of fitting, one line says which monitors run, on how many images and how often
    (:func:`monitors_line`). Every validation pass (the monitors' pass) is timed; with the
    progress bar off, each epoch prints one line (after its validation): the epoch, its wall
    time and the monitors' share of it, the time left and the last logged values of the loss
    and of the monitors. :meth:`monitor_cost` sums the passes up for the run's last lines.
    An epoch end without its start (a resumed run ending once more the epoch its checkpoint
    was written in, at the validation's end) prints nothing.
    """

    KEYS = ("train/loss", "val/knn_top1", "val/online_linear_top1")

    def __init__(self) -> None:
        self.clock = EpochClock()
        self.monitor_clock = EpochClock()
        self._passes_before_epoch = 0

    def on_fit_start(self, trainer, pl_module) -> None:
        line = monitors_line(trainer, pl_module)
        if line and trainer.is_global_zero:
            rank_zero_info(line)

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.clock.start()
        self._passes_before_epoch = len(self.monitor_clock.seconds)

    def on_validation_epoch_start(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self.monitor_clock.start()

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self.monitor_clock.stop()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if not self.clock.running:
            return
        elapsed = self.clock.stop()
        if trainer.progress_bar_callback is not None or not trainer.is_global_zero:
            return
        metrics = trainer.callback_metrics
        values = [f"{k} {float(metrics[k]):.4f}" for k in self.KEYS if k in metrics]
        left = time_left(self.clock.seconds, trainer.current_epoch + 1, trainer.max_epochs)
        passes = self.monitor_clock.seconds[self._passes_before_epoch:]
        monitor = f" of which monitors {sum(passes):.1f} s" if passes else ""
        print(f"{epoch_label(trainer.current_epoch, trainer.max_epochs)} (step "
              f"{trainer.global_step}, "
              f"{elapsed:.1f} s{monitor}{', ' + left if left else ''}): " + ", ".join(values),
              flush=True)

    def monitor_cost(self) -> str | None:
        """``"monitors: N passes, S s each on average (T s of this command's W s of epochs)"``;
        None when no monitor ran."""
        passes = self.monitor_clock.seconds
        if not passes:
            return None
        total = sum(passes)
        return (f"monitors: {len(passes)} pass{'es' if len(passes) > 1 else ''}, "
                f"{total / len(passes):.1f} s each on average ({total:.0f} s of this "
                f"command's {sum(self.clock.seconds):.0f} s of epochs)")


def monitors_line(trainer: L.Trainer, pl_module: L.LightningModule) -> str | None:
    """The start line of the online monitors: which run, on which images and how often
    (``trainer.check_val_every_n_epoch``), or that none runs (no validation pass); None for a
    module that does not say which splits its monitors read (no ``monitor_splits``)."""
    monitor_splits = getattr(pl_module, "monitor_splits", None)
    if monitor_splits is None:
        return None
    datamodule = getattr(trainer, "datamodule", None)
    bank, queries = (getattr(datamodule, name, None) for name in ("bank_set", "val_set"))
    splits = monitor_splits() if bank is not None and queries is not None else ()
    spec = pl_module.online_spec
    if not splits:
        labelled = bank is not None and queries is not None and pl_module.num_classes > 0
        why = ("model.online_eval.knn and model.online_eval.linear are false" if labelled
               else "no labelled held-out split to score: data.val_split null, or no labels")
        return f"online monitors: none runs ({why}): no validation pass"
    names = []
    if "bank" in splits:
        names.append(f"kNN (k {spec.knn_k}, bank of {len(bank)} images)")
    if getattr(pl_module, "classifier", None) is not None:
        names.append("online linear classifier (trained every step)")
    every = trainer.check_val_every_n_epoch
    when = (f"every {every} epochs" if every and every > 1 else "every epoch") + \
        " (trainer.check_val_every_n_epoch)"
    return (f"online monitors: {' and '.join(names)}, scored on the {len(queries)} images of "
            f"data.val_split {getattr(datamodule, 'val_split', None)} {when}; the epoch lines "
            "give each pass's seconds")


class MovableCheckpoint(ModelCheckpoint):
    """A ``ModelCheckpoint`` whose state survives a moved or copied run folder.

    Lightning restores its best score and best paths only when the checkpoint folder has the
    path it had when they were saved; a run copied elsewhere and resumed would forget its best
    score, and its first epoch, however bad, would replace ``best.ckpt``. Here the saved paths
    under the old folder are moved to the new one, and the scores are restored wherever the
    folder lives.
    """

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        then = state_dict.get("dirpath")
        if then and self.dirpath and str(then) != str(self.dirpath):
            state_dict = _rebased(state_dict, str(then), str(self.dirpath))
        super().load_state_dict(state_dict)


def _rebased(state: dict[str, Any], then: str, now: str) -> dict[str, Any]:
    """``state`` of a ``ModelCheckpoint`` with the paths under ``then`` moved under ``now``."""
    def move(path: Any) -> Any:
        if not isinstance(path, str) or not path:
            return path
        inside = os.path.relpath(path, then)
        return path if inside.startswith("..") else os.path.join(now, inside)

    moved = {**state, "dirpath": now}
    for key in ("best_model_path", "kth_best_model_path", "last_model_path"):
        if key in moved:
            moved[key] = move(moved[key])
    if isinstance(moved.get("best_k_models"), dict):
        moved["best_k_models"] = {move(k): v for k, v in moved["best_k_models"].items()}
    return moved


class BestCheckpoint(MovableCheckpoint):
    """Keep the checkpoint with the best ``monitor`` value (``best.ckpt``); does nothing in
    runs that never log the monitored metric (no validation split).

    When ``last.ckpt`` was just written at the same step (:func:`last_checkpoint`, which runs
    first), ``best.ckpt`` becomes a hard link to it instead of a second full write.
    """

    def __init__(self, dirpath: str, monitor: str = "val/knn_top1", mode: str = "max") -> None:
        super().__init__(dirpath=dirpath, monitor=monitor, mode=mode, save_top_k=1,
                         filename="best", enable_version_counter=False)
        self._fit_trainer: L.Trainer | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self._fit_trainer = trainer

    def state_dict(self) -> dict[str, Any]:
        """The state, this epoch's score included when it is the best.

        ``last.ckpt`` is written (and ``best.ckpt`` linked to it) just before this callback
        takes the epoch's score: without this, every checkpoint would hold the best score of
        the epochs before its own, and a run resumed from it would let its next epoch, however
        bad, replace ``best.ckpt``. The decision is the one :meth:`_save_topk_checkpoint` takes
        next (the monitor's value is the same on every process).
        """
        state = super().state_dict()
        trainer = self._fit_trainer
        current = None if trainer is None else trainer.callback_metrics.get(self.monitor)
        if current is None or not self._improves(current):
            return state
        path = self.format_checkpoint_name(self._monitor_candidates(trainer))
        current = current.detach().clone().cpu()
        return {**state, "best_model_score": current, "best_model_path": path,
                "current_score": current, "best_k_models": {path: current},
                "kth_best_model_path": path, "kth_value": current}

    def _improves(self, current: torch.Tensor) -> bool:
        if not self.best_k_models:
            return True
        better = torch.gt if self.mode == "max" else torch.lt
        return bool(better(current.detach().cpu(),
                           torch.as_tensor(self.best_k_models[self.kth_best_model_path]).cpu()))

    def _save_topk_checkpoint(self, trainer, monitor_candidates) -> None:
        if self.monitor in monitor_candidates:
            super()._save_topk_checkpoint(trainer, monitor_candidates)

    def _save_checkpoint(self, trainer, filepath: str) -> None:
        # Every process takes the same branch (saving is collective): the decision rests on
        # the last-checkpoint callback's state, which all processes share.
        last = next((c for c in trainer.checkpoint_callbacks if c is not self
                     and c._last_global_step_saved == trainer.global_step
                     and Path(c._last_checkpoint_saved).name == "last.ckpt"), None)
        io = trainer.strategy.checkpoint_io
        if last is None or not isinstance(io, AtomicCheckpointIO):
            super()._save_checkpoint(trainer, filepath)
            return
        if trainer.is_global_zero:
            io.link(Path(last._last_checkpoint_saved), filepath)
        trainer.strategy.barrier("BestCheckpoint.link")
        self._last_global_step_saved = trainer.global_step
        self._last_checkpoint_saved = filepath


class EveryEpochCheckpoint(MovableCheckpoint):
    """Write ``last.ckpt`` at every epoch end, validation or not.

    Lightning's own choice saves at the training epoch's end only when validation runs every
    epoch; with ``check_val_every_n_epoch: 5`` it saves every 5 epochs, and a stop loses up to
    5 epochs. Here an epoch that validates is saved at the validation's end (as before, after
    its last batch), any other at the training epoch's end: one full write per epoch.
    """

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if not self._should_skip_saving_checkpoint(trainer):  # skips a step saved already
            self._save_topk_checkpoint(trainer, self._monitor_candidates(trainer))


def last_checkpoint(dirpath: str) -> ModelCheckpoint:
    """Checkpoint at every epoch end into ``last.ckpt`` (what ``--resume last`` reads)."""
    return EveryEpochCheckpoint(dirpath=dirpath, save_top_k=1, monitor=None, save_last=False,
                                filename="last", enable_version_counter=False)


class ReleaseAfterFit(L.Callback):
    """Release the run folder's lock (:class:`contrastkit.outputs.FolderLock`) when fitting has
    ended normally; :func:`contrastkit.cli.pretrain.pretrain` releases it on the other paths."""

    def __init__(self, lock: FolderLock) -> None:
        self.lock = lock

    def teardown(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit":
            self.lock.release()


class StopRequested(Exception):
    """Raised at a batch end after SIGINT or SIGTERM (``signum``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class SignalStop(L.Callback):
    """Turn SIGINT (Ctrl-C) and SIGTERM into :class:`StopRequested` at a training batch end,
    the same one on every process of the run, so that a checkpoint being written is finished
    first and no traceback is printed. A second Ctrl-C stops at once (Python's default).

    The handler only records the signal. At each training batch end the processes agree on
    whether to stop: ``max_r signum_r`` over the processes (0: none), one all-reduce of one
    integer per step (:func:`contrastkit.distributed.max_over_processes`; nothing in one
    process), so every process stops after the same step whichever of them got the signal
    (a launcher's process alone, or every process as SLURM and torchrun send it). Lightning's
    own SIGTERM handler forwards the signal to the processes it started and runs a collective
    inside the handler, wherever the process then is (a hang, or a mismatched collective):
    this handler replaces it as soon as Lightning installs it. In one process a signal also
    stops validation at its next batch end; with several, the processes' validation shards
    may have unequal batches, and the stop waits for the next training batch end.
    """

    def __init__(self) -> None:
        self.signum: int | None = None

    def _request(self, signum: int, frame: object) -> None:
        self.signum = self.signum or signum
        signal.signal(signal.SIGINT, signal.default_int_handler)

    @contextmanager
    def installed(self) -> Iterator[SignalStop]:
        """Handle the two signals meanwhile (main thread only; elsewhere nothing changes)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.signal(sig, self._request)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def setup(self, trainer, pl_module, stage: str) -> None:
        """Keep this handler for SIGTERM once Lightning installs its own (after this hook, at
        the start of fitting; Lightning restores this one when fitting ends)."""
        if stage != "fit" or threading.current_thread() is not threading.main_thread():
            return
        connector = trainer._signal_connector
        register = connector.register_signal_handlers

        def register_then_keep_ours() -> None:
            register()
            signal.signal(signal.SIGTERM, self._request)

        connector.register_signal_handlers = register_then_keep_ours

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        signum = max_over_processes(self.signum or 0, trainer.strategy.root_device)
        if signum:
            self.signum = signum  # the run's one decision, on a process the signal missed too
            if is_distributed():
                _settle_checkpoint(trainer)
            raise StopRequested(signum)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx,
                                dataloader_idx: int = 0) -> None:
        if self.signum is not None and not is_distributed():
            raise StopRequested(self.signum)


def _settle_checkpoint(trainer: L.Trainer) -> None:
    """Every process waits until the checkpoint being written (by global rank 0, behind the
    training) is on disk, so that each one's closing line names the same checkpoint; a failed
    write is raised after the wait, on the process that wrote it."""
    wait = getattr(trainer.strategy.checkpoint_io, "wait", None)  # BackgroundCheckpointIO
    failed = None
    try:
        if wait is not None:
            wait()
    except Exception as err:  # raised below, once every process is here
        failed = err
    trainer.strategy.barrier("SignalStop")
    if failed is not None:
        raise failed
