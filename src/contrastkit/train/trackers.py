"""Experiment trackers (Weights & Biases, MLflow) as the config's loggers, and the same tracker
run continued by ``contrastkit pretrain --resume``.

A tracker is one more entry of ``trainer.logger`` (LightningCLI ``class_path``:
``lightning.pytorch.loggers.WandbLogger`` or ``lightning.pytorch.loggers.MLFlowLogger``, see
``docs/integrations.md``). Then:

* every checkpoint records each tracker's run id under ``checkpoint["tracker_runs"]``
  (``{"wandb": id, "mlflow": run_id}``; :class:`TrackerRunIds`);
* a resumed run gives each tracker logger of its config the recorded id
  (:func:`continue_tracker_runs`): W&B's ``id`` (Lightning's ``WandbLogger`` resumes a run of
  that id: ``resume="allow"``), MLflow's ``run_id``; an id the config gives itself is kept.
  The metrics logged after the checkpoint by the interrupted run stay in the tracker (a
  tracker's history cannot be cut); the resumed run logs those steps again;
* a ``WandbLogger`` writes its files into the run folder (``wandb/``, an offline run's files
  included), as the CSV and TensorBoard loggers do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import lightning as L

__all__ = ["TRACKER_RUNS", "TrackerRunIds", "continue_tracker_runs", "tracker_run_ids"]

#: Checkpoint key of the trackers' run ids.
TRACKER_RUNS = "tracker_runs"
#: The run folder entry of W&B's files.
WANDB_FOLDER = "wandb"


def _kind(logger: Any) -> str | None:
    """``wandb`` or ``mlflow`` for a tracker logger (instance or config class_path)."""
    name = getattr(logger, "class_path", None) or type(logger).__name__
    if str(name).endswith("WandbLogger"):
        return "wandb"
    if str(name).endswith("MLFlowLogger"):
        return "mlflow"
    return None


def tracker_run_ids(loggers: Iterable[Any]) -> dict[str, str]:
    """``{"wandb": run id, "mlflow": run id}`` of the tracker loggers among ``loggers`` (on
    the process that logs; the others' loggers have no run)."""
    ids: dict[str, str] = {}
    for logger in loggers:
        kind = _kind(logger)
        run = (getattr(logger.experiment, "id", None) if kind == "wandb" else
               logger.run_id if kind == "mlflow" else None)
        if kind is not None and isinstance(run, str) and run:
            ids[kind] = run
    return ids


class TrackerRunIds(L.Callback):
    """Record the trackers' run ids in every checkpoint (module doc)."""

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           checkpoint: dict) -> None:
        ids = tracker_run_ids(trainer.loggers)
        if ids:
            checkpoint[TRACKER_RUNS] = ids


def continue_tracker_runs(loggers: Iterable[Any], recorded: dict | None,
                          output_dir: str) -> None:
    """Set the tracker loggers of a parsed config (``class_path`` + ``init_args``) to continue
    the ``recorded`` runs of a resumed checkpoint (None: a fresh run); W&B loggers write their
    files into ``output_dir``."""
    recorded = recorded if isinstance(recorded, dict) else {}
    for logger in loggers:
        kind, init = _kind(logger), getattr(logger, "init_args", None)
        if kind is None or init is None:
            continue
        if kind == "wandb":
            init.save_dir, init.dir = output_dir, None
            if "wandb" in recorded and not (getattr(init, "id", None)
                                             or getattr(init, "version", None)):
                init.id = recorded["wandb"]
        elif "mlflow" in recorded and not getattr(init, "run_id", None):
            init.run_id = recorded["mlflow"]
