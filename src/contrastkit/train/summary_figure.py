"""``summary.png`` of a pretraining run: the training loss averaged per epoch on an epoch axis
beside the kNN monitor's top-1, with a one-line caption (drawn from ``metrics.csv`` at the end
of fitting); a run trained longer (``--extend-to``) shows both parts, a dashed line between."""

from __future__ import annotations

import csv
import itertools
import os
from collections.abc import Sequence
from pathlib import Path

import lightning as L

from contrastkit.train.callbacks import saved_metrics_file
from contrastkit.train.extend import extensions

SUMMARY_FIGURE = "summary.png"


def per_epoch(path: str | os.PathLike, key: str) -> dict[int, float]:
    """Mean of column ``key`` of a Lightning ``metrics.csv`` per epoch (0-based epochs)."""
    sums: dict[int, list[float]] = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get(key) and row.get("epoch"):
                sums.setdefault(int(float(row["epoch"])), []).append(float(row[key]))
    return {epoch: sum(v) / len(v) for epoch, v in sorted(sums.items())}


def plot_run_summary(metrics_csv: str | os.PathLike, path: str | os.PathLike,
                     knn_k: int | None = None, num_classes: int = 0,
                     extended: Sequence[tuple[int, int, int]] = ()) -> Path | None:
    """Draw the summary of the run whose ``metrics.csv`` is ``metrics_csv`` into ``path``;
    None (nothing drawn) when no training loss was logged. ``extended``: the run's extensions
    (:func:`contrastkit.train.extend.extensions`), each a dashed line where it starts."""
    from matplotlib.ticker import MaxNLocator

    from contrastkit.figures import new_figure, save_figure

    loss = per_epoch(metrics_csv, "train/loss")
    if not loss:
        return None
    knn = per_epoch(metrics_csv, "val/knn_top1")
    fig = new_figure(10.0 if knn else 6.0, 4.2)
    ax = fig.add_subplot(1, 2 if knn else 1, 1)
    epochs = [e + 1 for e in loss]
    ax.plot(epochs, list(loss.values()), marker="o" if len(loss) < 40 else None)
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("training loss (mean of the epoch)")
    ax.set_title("Pretraining loss")
    caption = "Loss: mean of the logged training losses of each epoch"
    if knn:
        ax2 = fig.add_subplot(1, 2, 2)
        values = [100 * v for v in knn.values()]
        ax2.plot([e + 1 for e in knn], values, marker="o" if len(knn) < 40 else None,
                 color="tab:green", label="kNN top-1")
        if num_classes > 1:
            ax2.axhline(100 / num_classes, color="tab:red", linestyle=":",
                        label=f"chance {100 / num_classes:.1f}%")
        ax2.set_xlabel("epoch")
        ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax2.set_ylabel("top-1 (%)")
        ax2.set_title(f"kNN monitor (k={knn_k})" if knn_k else "kNN monitor")
        ax2.legend(loc="best", fontsize="small")
        gaps = {b - a for a, b in itertools.pairwise(knn)}
        when = f"every {gaps.pop()} epochs" if len(gaps) == 1 and min(gaps) > 1 else "each epoch"
        caption += (f"; kNN: top-1 on the held-out split, scored after {when}, which should "
                    "rise while the loss falls (a falling loss with a flat kNN learns nothing "
                    "useful).")
    for axis in fig.axes:
        for epoch, then, now in extended:
            axis.axvline(epoch + 0.5, color="tab:gray", linestyle="--", linewidth=1,
                         label=f"extended {then} -> {now} epochs")
        if extended:
            axis.legend(loc="best", fontsize="small")
    if extended:
        caption += (" Dashed: the run was extended (--extend-to), from there on with the "
                    "schedules of the longer run.")
    return save_figure(fig, path, caption=caption)


class RunSummaryCallback(L.Callback):
    """At the end of fitting, draw :data:`SUMMARY_FIGURE` into the run folder from the CSV
    logger's ``metrics.csv``."""

    def on_fit_end(self, trainer, pl_module) -> None:
        self.write(trainer)

    def write(self, trainer: L.Trainer) -> None:
        """Draw the summary of what was logged so far (also called when a run is interrupted);
        nothing when no training loss was logged."""
        metrics = saved_metrics_file(trainer)
        if metrics is not None:
            pl_module = trainer.lightning_module
            spec = getattr(pl_module, "online_spec", None)
            run = Path(trainer.default_root_dir)
            plot_run_summary(metrics, run / SUMMARY_FIGURE, getattr(spec, "knn_k", None),
                             int(getattr(pl_module, "num_classes", 0) or 0), extensions(run))
