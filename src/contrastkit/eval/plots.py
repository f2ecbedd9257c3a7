"""Figures of ``contrastkit analyze``: the geometry of a model's embeddings, one panel (or
marker) per representation so that the pretrained model sits beside its random-init baseline
(matplotlib, Agg canvas: no display, no pyplot global state).

Each function writes one image atomically (temporary file in the same folder, then
``os.replace``) with a one-line caption computed from the data it draws (the caption is also
the PNG's ``Description``, :func:`contrastkit.figures.figure_caption`), and returns its path.
The format follows the suffix (``.png``, ``.pdf``, ...). A representation named in
``collapsed`` (its test embeddings nearly one vector; :func:`contrastkit.eval.analyze.collapsed`)
is labelled so, with its mean similarity, and the captions do not compare the model with it.
The line plots that pretraining draws
too (:func:`plot_curves`, :func:`plot_curve`) live in :mod:`contrastkit.figures`; the figures
for reproducing the papers in :mod:`contrastkit.eval.paper_figures`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from contrastkit.eval.metrics import local_separation_gap
from contrastkit.eval.report import format_signed
from contrastkit.figures import (
    PathLike,
    finite_array,
    new_figure,
    plot_curve,
    plot_curves,
    save_figure,
)

__all__ = [
    "plot_curve",
    "plot_curves",
    "plot_embedding_2d",
    "plot_local_separation",
    "plot_similarity_histograms",
    "plot_uniformity_alignment",
]

COLOURS = ("tab:red", "tab:gray", "tab:blue", "tab:purple")
METHOD_NAMES = {"tsne": "t-SNE", "umap": "UMAP"}


def _panels(items: Mapping[str, object], what: str) -> list[tuple[str, object]]:
    if not items:
        raise ValueError(f"{what} is empty: give at least one representation")
    return list(items.items())


#: Differences below this are "about equal" (half the last digit the captions print).
TIE = 5e-4


def compared(value: float, other: float, higher: str = "higher", lower: str = "lower") -> str:
    """``higher``, ``lower`` or ``about equal`` (within :data:`TIE`)."""
    if abs(value - other) < TIE:
        return "about equal"
    return higher if value > other else lower


def labelled(name: str, collapsed: Mapping[str, float]) -> str:
    """``random init (collapsed: mean similarity 0.99)`` for a name in ``collapsed``
    (``{name: mean pairwise cosine similarity}``), else ``name``."""
    if name not in collapsed:
        return name
    return f"{name} (collapsed: mean similarity {collapsed[name]:.2f})"


def _title(name: str, collapsed: Mapping[str, float], what: str) -> str:
    """A panel's title: ``name: what``, the collapsed label on a line of its own."""
    return f"{labelled(name, collapsed)}{chr(10) if name in collapsed else ': '}{what}"


def _versus(values: dict[str, float], higher: str, lower: str,
            collapsed: Mapping[str, float]) -> str:
    """`` (higher than random init's)`` comparing the first representation with the others
    (`` (random init collapsed: not compared)`` for a collapsed one)."""
    names = list(values)
    first = values[names[0]]
    parts = [f"{n} collapsed: not compared" if n in collapsed else
             f"{compared(first, values[n], higher, lower)} "
             f"{'to' if abs(first - values[n]) < TIE else 'than'} {n}'s" for n in names[1:]]
    return f" ({', '.join(parts)})" if parts else ""


def _side(value: float, positive: str, negative: str, zero: str) -> str:
    return positive if value > 0 else (negative if value < 0 else zero)


def plot_local_separation(separations: Mapping[str, Mapping[str, Tensor]], path: PathLike, *,
                          collapsed: Mapping[str, float] | None = None) -> Path:
    """Box plots of the positive similarity and the 1st..k-th nearest-negative similarities,
    one panel per representation on a shared axis (like Wang & Liu 2021, supplement, figs.
    1-7).

    Args:
        separations: ``{representation: output of
            contrastkit.eval.metrics.local_separation}`` (``{"positive": (N,), "negatives":
            (N, k)}``), the model first.
        path: output image path.
        collapsed: ``{representation: mean pairwise similarity}`` of the collapsed ones.
    """
    collapsed = collapsed or {}
    panels = _panels(separations, "separations")
    data = {}
    for name, sep in panels:
        if "positive" not in sep or "negatives" not in sep:  # type: ignore[operator]
            raise ValueError("each separation must have keys 'positive' and 'negatives'")
        pos = finite_array(sep["positive"], "separation['positive']")  # type: ignore[index]
        neg = finite_array(sep["negatives"], "separation['negatives']")  # type: ignore[index]
        if neg.ndim != 2:
            raise ValueError(f"separation['negatives'] must be (N, k), got shape {neg.shape}")
        data[name] = (pos, neg)
    fig = new_figure(5.0 * len(data) + 1.0, 4.5)
    gaps, axes, ends = {}, [], []
    for i, (name, (pos, neg)) in enumerate(data.items()):
        ax = fig.add_subplot(1, len(data), i + 1)
        box = ax.boxplot([pos] + [neg[:, j] for j in range(neg.shape[1])], patch_artist=True,
                         showfliers=False)
        labels = ["pos"] + [f"{j + 1}" for j in range(neg.shape[1])]
        ax.set_xticks(range(1, len(labels) + 1), labels)
        for j, patch in enumerate(box["boxes"]):
            patch.set_facecolor("tab:green" if j == 0 else "tab:blue")
            patch.set_alpha(0.6)
        ax.set_xlabel("two views / k-th nearest other image")
        ax.set_ylabel("cosine similarity")
        ax.grid(alpha=0.3)
        axes.append(ax)
        ends += [float(v) for line in box["whiskers"] for v in line.get_ydata()]
        gaps[name] = local_separation_gap({"positive": torch.from_numpy(pos),
                                           "negatives": torch.from_numpy(neg)})
        ax.set_title(_title(name, collapsed, f"median gap {format_signed(gaps[name], 3)}"))
    low, high = min(ends), max(ends)
    pad = max(0.02, 0.05 * (high - low))
    for ax in axes:  # one range for every panel: the whiskers' (no outliers are drawn)
        ax.set_ylim(max(-1.05, low - pad), min(1.05, high + pad))
    first = next(iter(gaps))
    where = _side(gaps[first], "above", "below", "level with")
    return save_figure(fig, path, caption=(
        f"{first}: the two views of an image (green) sit {where} its nearest other image "
        f"(first blue box), median gap {format_signed(gaps[first], 3)}"
        f"{_versus(gaps, 'higher', 'lower', collapsed)}; "
        "a higher gap tells each image from its neighbours better."))


def plot_similarity_histograms(sims: Mapping[str, tuple[Tensor, Tensor]], path: PathLike, *,
                               bins: int = 50, collapsed: Mapping[str, float] | None = None
                               ) -> Path:
    """Histograms of each test image's similarity to its nearest same-class ("target") and
    nearest other-class ("noise") training image with their medians (Feeney & Hughes 2023,
    Fig. 2), one panel per representation on a shared axis.

    Args:
        sims: ``{representation: (target_sims, noise_sims)}``, each ``(N,)``, the model first.
        path: output image path.
        bins: number of histogram bins over the range of the values.
        collapsed: as :func:`plot_local_separation`.
    """
    collapsed = collapsed or {}
    panels = _panels(sims, "sims")
    data = {name: (finite_array(t, "target_sims"), finite_array(n, "noise_sims"))  # type: ignore[misc]
            for name, (t, n) in panels}  # type: ignore[misc]
    low = min(min(t.min(), n.min()) for t, n in data.values())
    high = max(max(t.max(), n.max()) for t, n in data.values())
    pad = max(0.01, 0.02 * (high - low))
    edges = np.linspace(low - pad, high + pad, bins + 1)  # the data's range, not [-1, 1]
    fig = new_figure(5.0 * len(data) + 1.0, 4.5)
    margins = {}
    for i, (name, (target, noise)) in enumerate(data.items()):
        ax = fig.add_subplot(1, len(data), i + 1)
        for values, label, color in ((target, "same class", "tab:blue"),
                                     (noise, "other class", "tab:orange")):
            ax.hist(values, bins=edges, alpha=0.6, color=color, label=label)
            ax.axvline(float(np.median(values)), color=color, linestyle=":", linewidth=2)
        margins[name] = float(np.median(target) - np.median(noise))
        ax.set_xlabel("cosine similarity to the nearest training image")
        ax.set_ylabel("test images")
        ax.legend()
        ax.set_title(_title(name, collapsed, f"margin {format_signed(margins[name], 3)}"))
    first = next(iter(margins))
    side = _side(margins[first], "right of", "left of", "on")
    return save_figure(fig, path, caption=(
        f"{first}: the median same-class similarity (blue dotted) lies {side} the "
        f"other-class one (orange), margin {format_signed(margins[first], 3)}"
        f"{_versus(margins, 'higher', 'lower', collapsed)}; a higher margin puts same-class images "
        "nearer."))


def plot_uniformity_alignment(points: Mapping[str, tuple[float, float]], path: PathLike, *,
                              collapsed: Mapping[str, float] | None = None) -> Path:
    """Each representation's (alignment, uniformity) (Manna et al. 2023, eqs. 16-17): lower
    alignment, two views of an image embed closer; lower uniformity, the embeddings spread more
    evenly on the sphere.

    Args:
        points: ``{representation: (alignment, uniformity)}``, the model first.
        path: output image path.
        collapsed: as :func:`plot_local_separation`.
    """
    collapsed = collapsed or {}
    panels = _panels(points, "points")
    values = {name: finite_array(torch.tensor(list(p)), f"points[{name!r}]")  # type: ignore[arg-type]
              for name, p in panels}
    fig = new_figure(6.0, 4.8)
    ax = fig.add_subplot(1, 1, 1)
    for (name, (x, y)), colour, marker in zip(values.items(), COLOURS, "*os^", strict=False):
        ax.scatter([x], [y], marker=marker, s=220 if marker == "*" else 90, color=colour,
                   label=f"{labelled(name, collapsed)} ({x:.3f}, {y:.3f})")
    xs = [float(v[0]) for v in values.values()]
    ys = [float(v[1]) for v in values.values()]
    pad_x = max(0.02, 0.1 * (max(xs) - min(xs)))
    pad_y = max(0.02, 0.1 * (max(ys) - min(ys)))
    ax.set_xlim(min(xs) - pad_x, max(xs) + pad_x)
    ax.set_ylim(min(ys) - pad_y, max(ys) + pad_y)
    ax.set_xlabel("alignment (eq. 17; lower: views embed closer)")
    ax.set_ylabel("uniformity (eq. 16; lower: more spread)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    ax.set_title("Uniformity and alignment")
    names = list(values)
    first = names[0]
    if len(names) > 1 and names[1] in collapsed:
        caption = (f"{first}: uniformity {ys[0]:.3f}, alignment {xs[0]:.3f}; lower is better "
                   f"on both axes. {labelled(names[1], collapsed)} is not compared: its "
                   "embeddings are nearly one vector, so its alignment is near 0 and its "
                   "uniformity near 0 whatever the images.")
    elif len(names) > 1:
        other = names[1]
        spread = "more" if ys[0] < ys[1] else "less"
        views = "closer" if xs[0] < xs[1] else "farther apart"
        caption = (f"{first} spreads its embeddings {spread} evenly than {other} (uniformity "
                   f"{ys[0]:.3f} vs {ys[1]:.3f}) and embeds two views of an image {views} "
                   f"(alignment {xs[0]:.3f} vs {xs[1]:.3f}); lower is better on both axes.")
    else:
        caption = (f"{first}: uniformity {ys[0]:.3f}, alignment {xs[0]:.3f}; lower is better "
                   "on both axes.")
    return save_figure(fig, path, caption=caption)


def plot_embedding_2d(
    maps: Mapping[str, tuple[Tensor, Tensor]], path: PathLike, *, method: str = "tsne",
    perplexity: float = 30.0, seed: int = 0,
) -> Path:
    """2-D map of embeddings coloured by class, one panel per representation: t-SNE
    (scikit-learn) or UMAP (``umap-learn``).

    Args:
        maps: ``{representation: (z, labels)}``: ``(N, D)`` embeddings (L2-normalised before
            the projection) and ``(N,)`` integer labels.
        path: output image path.
        method: ``"tsne"``, ``"umap"`` (needs ``umap``) or ``"auto"`` (UMAP when installed).
        perplexity: t-SNE perplexity (capped at ``(N - 1) / 3``).
        seed: random state of the projection.
    """
    from contrastkit.checks import check_features, check_labels

    panels = _panels(maps, "maps")
    if method not in ("tsne", "umap", "auto"):
        raise ValueError(f"method must be 'tsne', 'umap' or 'auto', got {method!r}")
    projected = {}
    for name, (z, labels) in panels:  # type: ignore[misc]
        check_features("z", z)
        check_labels("labels", labels, z.shape[0], "z")
        if z.shape[0] < 5:
            raise ValueError(f"z needs at least 5 samples for a 2-D map, got {z.shape[0]}")
        x = torch.nn.functional.normalize(z.detach().double(), dim=1).cpu().numpy()
        xy, used = _project(x, method, perplexity, seed)
        projected[name] = (xy, labels.cpu().numpy())
    fig = new_figure(6.0 * len(projected), 6.0)
    for i, (name, (xy, y)) in enumerate(projected.items()):
        ax = fig.add_subplot(1, len(projected), i + 1)
        points = ax.scatter(xy[:, 0], xy[:, 1], c=y, cmap="tab10" if y.max() < 10 else "tab20",
                            s=8)
        if y.max() < 20:
            ax.legend(*points.legend_elements(), title="class", fontsize="small", loc="best")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"{name} ({METHOD_NAMES[used]})")
    return save_figure(fig, path, caption=(
        f"{METHOD_NAMES[used]} of the L2-normalised test embeddings, one colour per class, "
        f"{' beside '.join(projected)}: one-colour islands mean the classes separate without "
        "labels; distances between islands mean little."))


def _project(x: np.ndarray, method: str, perplexity: float, seed: int) -> tuple[np.ndarray, str]:
    """``(N, 2)`` map of ``x`` and the method used."""
    if method in ("umap", "auto"):
        try:
            import umap
        except ImportError:
            if method == "umap":
                raise ImportError("method='umap' needs umap: pip install umap-learn") from None
        else:
            return umap.UMAP(n_components=2, random_state=seed).fit_transform(x), "umap"
    try:
        from sklearn.manifold import TSNE
    except ImportError as exc:  # pragma: no cover
        raise ImportError("t-SNE needs scikit-learn: pip install 'contrastkit[eval]'") from exc
    perp = min(perplexity, max(1.0, (x.shape[0] - 1) / 3))
    xy = TSNE(n_components=2, perplexity=perp, init="pca", random_state=seed).fit_transform(x)
    return xy, "tsne"
