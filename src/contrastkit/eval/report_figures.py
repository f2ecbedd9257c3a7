"""Figures of ``contrastkit eval`` reports, each with a one-line caption of what to look for
(matplotlib, Agg canvas; written atomically, see :mod:`contrastkit.figures`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from contrastkit.eval.report import format_signed
from contrastkit.figures import PathLike, finite_array, new_figure, save_figure

__all__ = ["plot_per_class_accuracy", "plot_probe_accuracy"]


def plot_probe_accuracy(train_top1: Sequence[float], test_top1: Sequence[float],
                        path: PathLike, validation: Sequence[float] | None = None,
                        kept_epoch: int | None = None) -> Path:
    """Top-1 (%) of the linear probe on its training features, the held-out validation
    features (when it has them) and the test features after each epoch; ``kept_epoch``: the
    epoch early stopping kept (1-based), marked.

    Raises:
        ValueError: for empty or non-finite curves, or curves of different lengths.
    """
    curves = {"train": 100 * finite_array(train_top1, "train_top1")}
    if validation is not None:
        curves["validation"] = 100 * finite_array(validation, "validation")
    curves["test"] = 100 * finite_array(test_top1, "test_top1")
    train, test = curves["train"], curves["test"]
    if any(c.shape != train.shape for c in curves.values()):
        raise ValueError(f"train_top1 has {train.size} epochs, test_top1 {test.size}")
    epochs = np.arange(1, train.size + 1)
    fig = new_figure(7.0, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    for name, values in curves.items():
        ax.plot(epochs, values, marker="o" if values.size < 30 else None, label=name)
    low = float(min(c.min() for c in curves.values()))
    high = float(max(c.max() for c in curves.values()))
    pad = max(1.0, 0.05 * (high - low))
    ax.set_ylim(max(0.0, low - pad), min(100.0, high + pad))
    last = train.size if kept_epoch is None else kept_epoch
    if kept_epoch is not None:
        ax.axvline(kept_epoch, color="tab:gray", linestyle=":", label=f"kept: epoch {kept_epoch}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("top-1 (%)")
    ax.set_title("Linear probe accuracy")
    ax.legend(loc="best")
    gap = train[last - 1] - test[last - 1]
    if kept_epoch is None:
        caption = (f"Final train {train[-1]:.1f}%, test {test[-1]:.1f}%: a gap that grows over "
                   f"the epochs (here {format_signed(gap)} points) means the probe overfits the "
                   "training features.")
    else:
        kept = curves["validation"][last - 1]
        caption = (f"Epoch {kept_epoch} (best validation top-1, {kept:.1f}%) is kept: train "
                   f"{train[last - 1]:.1f}%, test {test[last - 1]:.1f}% "
                   f"(gap {format_signed(gap)} points; a larger gap means the probe overfits).")
    return save_figure(fig, path, caption=caption)


def plot_per_class_accuracy(pred: np.ndarray, labels: np.ndarray, path: PathLike,
                            class_names: Sequence[str] | None = None,
                            title: str = "kNN accuracy per class") -> Path:
    """Bar chart of the per-class recall (%) with the overall accuracy and chance lines.

    Raises:
        ValueError: for empty inputs or inputs of different lengths.
    """
    pred, labels = np.asarray(pred), np.asarray(labels)
    if labels.size == 0 or pred.shape != labels.shape:
        raise ValueError(f"pred {pred.shape} and labels {labels.shape} must be equal, non-empty")
    classes = np.unique(labels)
    recall = np.array([100 * np.mean(pred[labels == c] == c) for c in classes])
    names = [str(class_names[c]) if class_names is not None and c < len(class_names) else str(c)
             for c in classes]
    overall, chance = 100 * float(np.mean(pred == labels)), 100 / len(classes)
    fig = new_figure(max(6.0, 0.35 * len(classes) + 2), 4.5)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(np.arange(len(classes)), recall, color="tab:blue")
    ax.axhline(overall, color="tab:green", linestyle="--", label=f"overall {overall:.1f}%")
    ax.axhline(chance, color="tab:red", linestyle=":", label=f"chance {chance:.1f}%")
    ax.set_xticks(np.arange(len(classes)), names, rotation=60 if len(classes) > 8 else 0,
                  ha="right" if len(classes) > 8 else "center", fontsize=8)
    ax.set_ylim(0, min(100.0, max(recall.max(), overall) + 10))
    ax.set_ylabel("top-1 within the class (%)")
    ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    worst = names[int(np.argmin(recall))]
    caption = (f"Classes near the red chance line are not recognised at all; the weakest here "
               f"is {worst} ({recall.min():.1f}%).")
    return save_figure(fig, path, caption=caption)


def plot_embedding_map(xy: np.ndarray, labels: np.ndarray | None, classes: Sequence[str],
                       path: PathLike) -> Path:
    """Scatter of a 2-D t-SNE map, one colour per class (one colour without labels)."""
    fig = new_figure(7.5, 6.5)
    ax = fig.add_subplot(1, 1, 1)
    if labels is None:
        ax.scatter(xy[:, 0], xy[:, 1], s=8, color="tab:blue")
        caption = ("t-SNE of the L2-normalised embeddings (unlabelled): groups of nearby points "
                   "are images the backbone finds alike; distances between groups mean little.")
    else:
        cmap = "tab10" if len(classes) <= 10 else "tab20"
        for c in np.unique(labels):
            name = classes[c] if c < len(classes) else str(c)
            ax.scatter(xy[labels == c, 0], xy[labels == c, 1], s=8, label=name,
                       color=_colour(cmap, int(c), len(classes)))
        if len(classes) <= 20:
            ax.legend(title="class", fontsize="small", loc="best", markerscale=2)
        caption = ("t-SNE of the L2-normalised embeddings: one-colour islands mean the classes "
                   "separate without labels; distances between islands mean little.")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"Embeddings of {xy.shape[0]} images (t-SNE)")
    return save_figure(fig, path, caption=caption)


def _colour(cmap: str, index: int, count: int) -> object:
    from matplotlib import colormaps

    colours = colormaps[cmap]
    return colours(index % colours.N) if count <= colours.N else colours(index / max(1, count))


def plot_lowshot(table: dict[str, dict], path: PathLike) -> Path:
    """Low-shot top-1 (%) against the labelled images per class, mean +- std over the seeds
    (``table``: ``{shots: {"mean", "std", ...}}`` as in ``eval lowshot``'s results)."""
    if not table:
        raise ValueError("table is empty")
    names = list(table)
    mean = 100 * np.array([float(table[n]["mean"]) for n in names])
    std = 100 * np.array([float(table[n]["std"]) for n in names])
    fig = new_figure(6.5, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    ax.errorbar(np.arange(len(names)), mean, yerr=std, marker="o", capsize=4)
    ax.set_xticks(np.arange(len(names)), names)
    low, high = float((mean - std).min()), float((mean + std).max())
    pad = max(1.0, 0.1 * (high - low))
    ax.set_ylim(max(0.0, low - pad), min(100.0, high + pad))
    ax.set_xlabel("labelled images per class")
    ax.set_ylabel("top-1 (%), mean +- std over seeds")
    ax.set_title("Low-shot linear probes")
    return save_figure(fig, path, caption=(
        "Top-1 should rise with the labels per class; good features reach most of the "
        "all-labels accuracy with few labels."))


def plot_recall_at_k(recalls: dict[str, float], path: PathLike) -> Path:
    """Bar chart of recall@k (%) (``recalls``: ``{"recall@k": fraction}``)."""
    if not recalls:
        raise ValueError("recalls is empty")
    names = list(recalls)
    values = 100 * finite_array([recalls[n] for n in names], "recalls")
    fig = new_figure(6.0, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(np.arange(len(names)), values, color="tab:blue")
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylim(0, min(100.0, float(values.max()) + 10))
    ax.set_ylabel("recall (%)")
    ax.set_title("Retrieval")
    return save_figure(fig, path, caption=(
        "Recall@k: share of test images with an image of their class among their k nearest "
        "training images; it rises with k."))
