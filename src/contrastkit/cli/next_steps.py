"""The last lines of a finished ``contrastkit pretrain``: what the run reached, where its results
are, the command that evaluates it and the one that trains it longer."""

from __future__ import annotations

import shlex
from pathlib import Path

import lightning as L

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
    values when it ran, the run folder's main files, what the monitors' passes cost when they
    ran, the ``eval knn --baselines`` command
    that answers "are these features useful?" (``docs/evaluation.md`` has the others), and
    the ``--extend-to`` command that trains the run longer."""
    done = (f"pretraining done: {trainer.current_epoch} epochs ({trainer.global_step} "
            "optimiser steps)")
    monitor = trainer.callback_metrics.get("val/knn_top1")
    if monitor is not None:
        done += f", kNN monitor top-1 {float(monitor):.4f}"
        best = next((c for c in trainer.checkpoint_callbacks
                     if getattr(c, "monitor", None) == "val/knn_top1"
                     and getattr(c, "best_model_score", None) is not None), None)
        if best is not None:
            done += f" (best {float(best.best_model_score):.4f}: checkpoints/best.ckpt)"
    checkpoint = output / "checkpoints" / "last.ckpt"
    figure = "loss and kNN monitor" if monitor is not None else "loss"
    files = [f"{checkpoint}", f"{output / SUMMARY_FIGURE} ({figure} per epoch)",
             f"{output / 'metrics.csv'}", f"{output / 'config.yaml'}"]
    lines = [done, "results: " + ", ".join(files)]
    cost = next((c.monitor_cost() for c in trainer.callbacks
                 if isinstance(c, EpochSummaryCallback)), None)
    if cost is not None:
        lines.append(cost)
    data = eval_data_args(datamodule)
    if data is not None:
        command = ["contrastkit", "eval", "knn", "--checkpoint", str(checkpoint), *data,
                   "--baselines", "--output", f"{output}-eval/knn"]
        lines.append(f"next:    {shlex.join(command)}")
        lines.append("         (against raw pixels and a random initialisation; "
                     "docs/evaluation.md has the other protocols)")
    if trainer.max_epochs and trainer.max_epochs > 0:
        lines.append(f"train longer: {how_to_extend(output, trainer.max_epochs)} (a stated new "
                     "schedule: docs/configs.md)")
    return "\n".join(lines)
