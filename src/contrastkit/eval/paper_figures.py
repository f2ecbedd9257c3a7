"""Figures for reproducing the papers, drawn by ``contrastkit analyze --paper-references``: the
loss's weighting of negatives for given temperatures (DySTreSS, Manna et al. 2023, eq. 4 and
figs. 3-4), which does not depend on the checkpoint, and a checkpoint's uniformity and
alignment among the models of DySTreSS Table 13.

matplotlib's Agg canvas; each function writes one image atomically with a one-line caption
(:func:`contrastkit.figures.save_figure`) and returns its path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from contrastkit.eval.metrics import TemperatureLike, hardness_weights
from contrastkit.eval.paper_values import DYSTRESS_TABLE13
from contrastkit.figures import PathLike, finite_array, new_figure, save_figure

__all__ = ["plot_hardness_weights", "plot_temperature_functions",
           "plot_uniformity_alignment_papers"]


def _temperature_name(temperature: TemperatureLike) -> str:
    if callable(temperature):
        name = getattr(temperature, "__name__", type(temperature).__name__)
        return "callable" if name == "<lambda>" else name
    return f"t={temperature:g}"


def hardness_contrast(temperature: TemperatureLike, num_negatives: int = 4096) -> float:
    """``r(s = 1) / r(s = 0)`` of :func:`~contrastkit.eval.metrics.hardness_weights` over
    ``num_negatives`` similarities evenly spaced on [-1, 1] (interpolated at 0): how much more
    the hardest negative weighs than an orthogonal one."""
    sims = torch.linspace(-1.0, 1.0, num_negatives, dtype=torch.float64)
    weights = hardness_weights(sims, temperature)
    return float(weights[-1]) / float(np.interp(0.0, sims.numpy(), weights.numpy()))


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
    or callable mapping similarities to temperatures). The caption names the curve with the
    largest :func:`hardness_contrast`.

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
    contrast = {name: hardness_contrast(t, num_negatives) for name, t in items}
    steepest = max(contrast, key=contrast.__getitem__)
    return save_figure(fig, path, caption=(
        f"The loss's weight of a negative by its similarity (DySTreSS eq. 4; independent of "
        f"the checkpoint): {steepest} weighs the hardest negative (s = 1) "
        f"{contrast[steepest]:.3g} times an orthogonal one (s = 0), the most of these curves."))


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
    ranges = {}
    for name, fn in functions.items():
        temps = fn(sims)
        temps = temps if isinstance(temps, Tensor) else torch.as_tensor(temps)
        values = finite_array(temps.expand_as(sims), f"functions[{name!r}]")
        ax.plot(sims.numpy(), values, label=name)
        ranges[name] = (float(values.min()), float(values.max()))
    ax.set_xlabel("cosine similarity")
    ax.set_ylabel("temperature")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("Temperature functions")
    varying = [f"{n} {lo:.3g} to {hi:.3g}" for n, (lo, hi) in ranges.items() if hi > lo]
    caption = ("Temperature of a pair by its cosine similarity (independent of the "
               "checkpoint): " + ("; ".join(varying) if varying else "all constant")
               + (", the others constant." if varying and len(varying) < len(ranges) else "."))
    return save_figure(fig, path, caption=caption)


def plot_uniformity_alignment_papers(uniformity: float, alignment: float, path: PathLike, *,
                                     measured: str) -> Path:
    """This model's (alignment, uniformity) beside the models of DySTreSS Table 13 (Manna et al.
    2023; same definitions, eqs. 16-17), one marker per data set.

    Args:
        uniformity: :func:`contrastkit.eval.metrics.uniformity` of this model.
        alignment: :func:`contrastkit.eval.metrics.alignment` of this model.
        path: output image path.
        measured: where the two were measured, in words (the caption's: "this backbone's
            features", "the projector's output").
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
    where = "inside" if low_u <= ys[0] <= high_u and low_a <= xs[0] <= high_a else "outside"
    return save_figure(fig, path, caption=(
        f"DySTreSS Table 13 reports uniformity {low_u:.2f} to {high_u:.2f} and alignment "
        f"{low_a:.2f} to {high_a:.2f} (SimCLR, MoCo v2, DCL, DCLW, DySTreSS; ResNet-18 on CIFAR, "
        f"ResNet-50 on ImageNet-1K; which layer it measured is not stated); the star, "
        f"{measured} ({xs[0]:.2f}, {ys[0]:.2f}), lies {where} those ranges."))
