"""Figures of the analysis (matplotlib, Agg canvas: no display, no pyplot global state).

Each function writes one image atomically (temporary file in the same folder, then
``os.replace``) and returns its path. The format follows the suffix (``.png``, ``.pdf``, ...).
The line plots that pretraining draws too (:func:`plot_curves`, :func:`plot_curve`) live in
:mod:`contrastkit.figures` and are importable from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from contrastkit.eval.metrics import TemperatureLike, hardness_weights
from contrastkit.eval.paper_values import DYSTRESS_TABLE13, SINCERE_TABLE1
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
    "plot_hardness_weights",
    "plot_local_separation",
    "plot_similarity_histograms",
    "plot_temperature_functions",
    "plot_uniformity_alignment",
]


def plot_local_separation(
    separation: Mapping[str, Tensor], path: PathLike, *, title: str | None = None
) -> Path:
    """Box plots of the positive similarity and the 1st..k-th nearest-negative similarities.

    Like the local-separation figures of Wang & Liu 2021 (supplement, figs. 1-7).

    Args:
        separation: output of :func:`contrastkit.eval.metrics.local_separation`
            (``{"positive": (N,), "negatives": (N, k)}``).
        path: output image path.
        title: optional title.
    """
    if "positive" not in separation or "negatives" not in separation:
        raise ValueError("separation must have keys 'positive' and 'negatives'")
    pos = finite_array(separation["positive"], "separation['positive']")
    neg = finite_array(separation["negatives"], "separation['negatives']")
    if neg.ndim != 2:
        raise ValueError(f"separation['negatives'] must be (N, k), got shape {neg.shape}")
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    data = [pos] + [neg[:, j] for j in range(neg.shape[1])]
    labels = ["pos"] + [f"{j + 1}" for j in range(neg.shape[1])]
    box = ax.boxplot(data, patch_artist=True, showfliers=False)
    ax.set_xticks(range(1, len(labels) + 1), labels)
    for j, patch in enumerate(box["boxes"]):
        patch.set_facecolor("tab:green" if j == 0 else "tab:blue")
        patch.set_alpha(0.6)
    ax.set_xlabel("positive / k-th nearest negative")
    ax.set_ylabel("cosine similarity")
    low, high = min(float(pos.min()), float(neg.min())), max(float(pos.max()), float(neg.max()))
    pad = max(0.02, 0.05 * (high - low))
    ax.set_ylim(max(-1.05, low - pad), min(1.05, high + pad))  # the data's range, not [-1, 1]
    ax.grid(alpha=0.3)
    ax.set_title(title or "Local separation")
    gap = float(np.median(pos) - np.median(neg[:, 0]))
    return save_figure(fig, path, caption=(
        "The green box (two views of an image) should sit above the blue ones (its nearest "
        f"other images); median gap to the nearest: {gap:+.3f}. Wang & Liu 2021 (supplement, "
        "Figs. 1-7) show this plot for CIFAR-10, SVHN and ImageNet-100: no numbers stated."))


def plot_similarity_histograms(
    target_sims: Tensor, noise_sims: Tensor, path: PathLike, *, bins: int = 50,
    title: str | None = None,
) -> Path:
    """Histograms of nearest-target and nearest-noise similarities with medians (Feeney & Hughes
    2023, Fig. 2).

    Args:
        target_sims: ``(N,)`` similarity of each test sample to its nearest same-class sample.
        noise_sims: ``(N,)`` similarity to its nearest other-class sample.
        path: output image path.
        bins: number of histogram bins over the range of the values.
        title: optional title (default shows the margin between medians).
    """
    target = finite_array(target_sims, "target_sims")
    noise = finite_array(noise_sims, "noise_sims")
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    low, high = min(target.min(), noise.min()), max(target.max(), noise.max())
    pad = max(0.01, 0.02 * (high - low))
    edges = np.linspace(low - pad, high + pad, bins + 1)  # the data's range, not [-1, 1]
    for values, name, color in ((target, "Target", "tab:blue"), (noise, "Noise", "tab:orange")):
        ax.hist(values, bins=edges, alpha=0.6, color=color, label=name)
        ax.axvline(float(np.median(values)), color=color, linestyle=":", linewidth=2)
    margin = float(np.median(target) - np.median(noise))
    ax.set_xlabel("cosine similarity to nearest training sample")
    ax.set_ylabel("count")
    ax.legend()
    ax.set_title(title or f"Target-noise separation (margin {margin:.3f})")
    verdict = ("NEGATIVE: other-class images are nearer than same-class ones, the classes do "
               "not separate" if margin <= 0 else "positive: same-class images are nearer")
    margins = [v for row in SINCERE_TABLE1.values() for v in row.values()]
    return save_figure(fig, path, caption=(
        f"Medians (dotted): blue should lie right of orange; margin {margin:+.3f} is {verdict}. "
        f"SINCERE Table 1 reports {min(margins):.3f} to {max(margins):.3f} (ResNet-50 trained "
        "with labels; CIFAR-10 nearest-noise similarities 0 to 0.25 with SINCERE, 0.7 to 0.85 "
        "with SupCon, section 4.1)."))


def plot_uniformity_alignment(uniformity: float, alignment: float, path: PathLike) -> Path:
    """This model's (alignment, uniformity) beside the models of DySTreSS Table 13 (Manna et al.
    2023; same definitions, eqs. 16-17), one marker per data set.

    Args:
        uniformity: :func:`contrastkit.eval.metrics.uniformity` of this model.
        alignment: :func:`contrastkit.eval.metrics.alignment` of this model.
        path: output image path.
    """
    point = finite_array(torch.tensor([alignment, uniformity]), "alignment and uniformity")
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    xs, ys = [float(point[0])], [float(point[1])]
    for (dataset, rows), marker in zip(DYSTRESS_TABLE13.items(), "osD", strict=True):
        x = [row[1] for row in rows.values()]
        y = [row[0] for row in rows.values()]
        ax.scatter(x, y, marker=marker, alpha=0.7, label=f"{dataset} (Table 13)")
        xs += x
        ys += y
    ax.scatter([xs[0]], [ys[0]], marker="*", s=200, color="tab:red", label="this checkpoint")
    pad_x = max(0.02, 0.05 * (max(xs) - min(xs)))
    pad_y = max(0.02, 0.05 * (max(ys) - min(ys)))
    ax.set_xlim(min(xs) - pad_x, max(xs) + pad_x)  # the points' range, not the metrics' bounds
    ax.set_ylim(min(ys) - pad_y, max(ys) + pad_y)
    ax.set_xlabel("alignment (eq. 17; lower: views embed closer)")
    ax.set_ylabel("uniformity (eq. 16; lower: more spread)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    ax.set_title("Uniformity and alignment against DySTreSS Table 13")
    low_u, high_u = min(ys[1:]), max(ys[1:])
    low_a, high_a = min(xs[1:]), max(xs[1:])
    return save_figure(fig, path, caption=(
        f"DySTreSS Table 13 reports uniformity {low_u:.2f} to {high_u:.2f} and alignment "
        f"{low_a:.2f} to {high_a:.2f} (SimCLR, MoCo v2, DCL, DCLW, DySTreSS; ResNet-18 on CIFAR, "
        "ResNet-50 on ImageNet-1K; which layer it measured is not stated); the star is this "
        "backbone's features: far above the cloud means the embeddings crowd together."))


def _temperature_name(temperature: TemperatureLike) -> str:
    if callable(temperature):
        name = getattr(temperature, "__name__", type(temperature).__name__)
        return "callable" if name == "<lambda>" else name
    return f"t={temperature:g}"


def plot_hardness_weights(
    temperatures: Sequence[TemperatureLike] | Mapping[str, TemperatureLike],
    path: PathLike,
    *,
    num_negatives: int = 4096,
    log_scale: bool = True,
) -> Path:
    """Relative penalty ``r(s)`` (Manna et al. 2023, eq. 4) versus similarity per temperature.

    The anchor's negatives are ``num_negatives`` similarities evenly spaced on [-1, 1]; each curve
    is :func:`contrastkit.eval.metrics.hardness_weights` on that set for one temperature (float
    or callable mapping similarities to temperatures).

    Args:
        temperatures: list of temperatures or ``{label: temperature}``.
        path: output image path.
        num_negatives: number of negatives on the grid.
        log_scale: logarithmic y axis.
    """
    items = (list(temperatures.items()) if isinstance(temperatures, Mapping)
             else [(_temperature_name(t), t) for t in temperatures])
    if not items:
        raise ValueError("temperatures is empty")
    sims = torch.linspace(-1.0, 1.0, num_negatives, dtype=torch.float64)
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    for name, temperature in items:
        weights = hardness_weights(sims, temperature)
        ax.plot(sims.numpy(), weights.numpy(), label=name)
    if log_scale:
        ax.set_yscale("log")
    ax.set_xlabel("cosine similarity s of a negative")
    ax.set_ylabel("relative penalty r(s)")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"Hardness weights over {num_negatives} negatives on [-1, 1]")
    return save_figure(fig, path)


def plot_temperature_functions(
    functions: Mapping[str, Callable[[Tensor], Tensor]], path: PathLike, *,
    num_points: int = 401,
) -> Path:
    """Temperature versus cosine similarity, like Manna et al. 2023, figs. 3-4.

    Args:
        functions: ``{label: fn}`` with ``fn`` mapping a tensor of similarities in [-1, 1] to
            temperatures of the same shape (e.g. ``contrastkit.losses.dystress`` functions).
        path: output image path.
        num_points: grid size on [-1, 1].
    """
    if not functions:
        raise ValueError("functions is empty")
    sims = torch.linspace(-1.0, 1.0, num_points, dtype=torch.float64)
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    for name, fn in functions.items():
        temps = fn(sims)
        temps = temps if isinstance(temps, Tensor) else torch.as_tensor(temps)
        values = finite_array(temps.expand_as(sims), f"functions[{name!r}]")
        ax.plot(sims.numpy(), values, label=name)
    ax.set_xlabel("cosine similarity")
    ax.set_ylabel("temperature")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("Temperature functions")
    return save_figure(fig, path)


def plot_embedding_2d(
    z: Tensor, labels: Tensor, path: PathLike, *, method: str = "tsne",
    perplexity: float = 30.0, seed: int = 0, title: str | None = None,
) -> Path:
    """2-D map of embeddings coloured by class: t-SNE (scikit-learn) or UMAP (``umap-learn``).

    Args:
        z: ``(N, D)`` embeddings (L2-normalised before the projection).
        labels: ``(N,)`` integer labels.
        path: output image path.
        method: ``"tsne"``, ``"umap"`` (needs ``umap``) or ``"auto"`` (UMAP when installed).
        perplexity: t-SNE perplexity (capped at ``(N - 1) / 3``).
        seed: random state of the projection.
        title: optional title.
    """
    from contrastkit.checks import check_features, check_labels

    check_features("z", z)
    check_labels("labels", labels, z.shape[0], "z")
    if method not in ("tsne", "umap", "auto"):
        raise ValueError(f"method must be 'tsne', 'umap' or 'auto', got {method!r}")
    if z.shape[0] < 5:
        raise ValueError(f"z needs at least 5 samples for a 2-D map, got {z.shape[0]}")
    x = torch.nn.functional.normalize(z.detach().double(), dim=1).cpu().numpy()
    if method in ("umap", "auto"):
        try:
            import umap
        except ImportError:
            if method == "umap":
                raise ImportError("method='umap' needs umap: pip install umap-learn") from None
            method = "tsne"
        else:
            xy = umap.UMAP(n_components=2, random_state=seed).fit_transform(x)
            method = "umap"
    if method == "tsne":
        try:
            from sklearn.manifold import TSNE
        except ImportError as exc:  # pragma: no cover
            raise ImportError("t-SNE needs scikit-learn: pip install 'contrastkit[eval]'") from exc
        perp = min(perplexity, max(1.0, (x.shape[0] - 1) / 3))
        xy = TSNE(n_components=2, perplexity=perp, init="pca", random_state=seed).fit_transform(x)
    y = labels.cpu().numpy()
    fig = new_figure(6.0, 6.0)
    ax = fig.add_subplot(1, 1, 1)
    points = ax.scatter(xy[:, 0], xy[:, 1], c=y, cmap="tab10" if y.max() < 10 else "tab20", s=8)
    if y.max() < 20:
        ax.legend(*points.legend_elements(), title="class", fontsize="small", loc="best")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title or f"Embedding ({method.upper()})")
    return save_figure(fig, path)
