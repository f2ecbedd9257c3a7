"""The last lines of a finished ``contrastkit pretrain``: what the run reached, where its results
are, the command that evaluates it and the one that trains it longer."""

from __future__ import annotations

import shlex
from pathlib import Path

import lightning as L

from contrastkit.outputs import evaluations_folder
from contrastkit.train.callbacks import EpochSummaryCallback
from contrastkit.train.extend import how_to_extend
from contrastkit.train.summary_figure import SUMMARY_FIGURE


def eval_data_args(datamodule: object) -> list[str] | None:
    """The ``--data``/``--root``/``--skip-corrupt`` options of ``contrastkit eval`` for the data a
    run was pretrained on (the split, load size and view size come from the checkpoint); None
    for data that ``eval knn`` does not take (a run without labelled test split, sentences)."""
    name = getattr(datamodule, "dataset_name", None)
    if name is None or getattr(datamodule, "val_split", None) is None:
        return None
    args = ["--data", str(name)]
    if getattr(datamodule, "root", None):
        args += ["--root", str(datamodule.root)]  # type: ignore[attr-defined]
    if getattr(datamodule, "skip_corrupt", False):
        args.append("--skip-corrupt")
    return args


def finished_lines(trainer: L.Trainer, datamodule: object, output: Path) -> str:
    """What a finished run prints last: epochs and steps done, the kNN monitor's last and best
    values when it ran, the run folder's main files (those written), what the monitors'
    passes cost when they ran, the ``eval knn --baselines`` command that answers "are these
    features useful?" (``docs/evaluation.md`` has the others; into a new folder, so that it
    runs as printed), and the ``--extend-to`` command that trains the run longer (the last two
    when the run has a checkpoint)."""
    done = (f"pretraining done: {trainer.current_epoch} epochs ({trainer.global_step} "
            "optimiser steps)")
    monitor = trainer.callback_metrics.get("val/knn_top1")
    if monitor is not None:
        done += f", kNN monitor top-1 {float(monitor):.4f}"
        best = next((c for c in trainer.checkpoint_callbacks
                     if getattr(c, "monitor", None) == "val/knn_top1"
                     and getattr(c, "best_model_score", None) is not None), None)
        if best is not None:
            score = f"best {float(best.best_model_score):.4f}"
            done += (f" ({score}: checkpoints/best.ckpt)" if Path(best.best_model_path).is_file()
                     else f" ({score}, before the resume: its checkpoint is not in this folder)")
    checkpoint = output / "checkpoints" / "last.ckpt"
    figure = "loss and kNN monitor" if monitor is not None else "loss"
    files = [(checkpoint, ""), (output / SUMMARY_FIGURE, f" ({figure} per epoch)"),
             (output / "metrics.csv", ""), (output / "config.yaml", "")]
    written = [f"{path}{what}" for path, what in files if path.is_file()]
    lines = [done, "results: " + (", ".join(written) or "nothing written")]
    cost = next((c.monitor_cost() for c in trainer.callbacks
                 if isinstance(c, EpochSummaryCallback)), None)
    if cost is not None:
        lines.append(cost)
    if not checkpoint.is_file():
        return "\n".join(lines)
    data = eval_data_args(datamodule)
    if data is not None:
        command = ["contrastkit", "eval", "knn", "--checkpoint", str(checkpoint), *data,
                   "--baselines", "--output", str(_free_folder(evaluations_folder(output) / "knn"))]
        lines.append(f"next:    {shlex.join(command)}")
        lines.append("         (against raw pixels and a random initialisation; "
                     "docs/evaluation.md has the other protocols)")
    if trainer.max_epochs and trainer.max_epochs > 0:
        lines.append(f"train longer: {how_to_extend(output, trainer.max_epochs)} (a stated new "
                     "schedule: docs/configs.md)")
    return "\n".join(lines)


def _free_folder(folder: Path) -> Path:
    """``folder``, or the first of ``folder-2``, ``folder-3``, ... that is new or empty: where an
    evaluation may write without ``--overwrite`` (an earlier one, of a run since trained
    longer, keeps its results)."""
    candidate, number = folder, 1
    while (candidate.is_dir() and any(candidate.iterdir())) or candidate.is_file():
        number += 1
        candidate = folder.with_name(f"{folder.name}-{number}")
    return candidate
