"""Line plots that pretraining and evaluation both draw, and the figure helpers under them.

matplotlib's Agg canvas (no display, no pyplot global state). Each function writes one image
atomically (temporary file in the same folder, then ``os.replace``) and returns its path; the
format follows the suffix (``.png``, ``.pdf``, ...). The analysis figures are in
:mod:`contrastkit.eval.plots`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from torch import Tensor

from contrastkit.outputs import temp_file_beside

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PathLike", "figure_caption", "finite_array", "new_figure", "plot_curve", "plot_curves",
           "save_figure"]

PathLike = str | os.PathLike


def new_figure(width: float = 7.0, height: float = 4.5) -> Figure:
    """An empty ``width`` x ``height`` inch figure on an Agg canvas (120 dpi)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install 'contrastkit[eval]'") from exc
    fig = Figure(figsize=(width, height), dpi=120)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: PathLike, caption: str | None = None) -> Path:
    """Write ``fig`` to ``path`` atomically, in the format of its suffix; returns the path.
    ``caption``: one line under the axes saying what to look for (a PNG also holds it as its
    ``Description`` text, which :func:`figure_caption` reads back)."""
    path = Path(path)
    if path.suffix == "":
        raise ValueError(f"path must have an image suffix such as .png, got {str(path)!r}")
    if caption:  # wrapped to the figure's width (about 15 characters per inch at 8 points)
        import textwrap

        text = textwrap.fill(caption, width=int(fig.get_figwidth() * 15))
        height = (0.08 + 0.16 * (text.count("\n") + 1)) / fig.get_figheight()
        fig.tight_layout(rect=(0, height, 1, 1))
        fig.text(0.5, 0.04 / fig.get_figheight(), text, ha="center", va="bottom", fontsize=8)
    else:
        fig.tight_layout()
    fd, tmp = temp_file_beside(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            fmt = path.suffix.lstrip(".").lower()
            metadata = {"Description": caption} if caption and fmt == "png" else None
            fig.savefig(handle, format=fmt, metadata=metadata)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def figure_caption(path: PathLike) -> str | None:
    """The caption :func:`save_figure` stored in a PNG (None when it has none)."""
    from PIL import Image

    with Image.open(path) as image:
        return image.info.get("Description")


def finite_array(x: Tensor | np.ndarray | Sequence[float], name: str) -> np.ndarray:
    """``x`` as a float64 array; ``ValueError`` naming ``name`` when empty or not finite."""
    arr = x.detach().cpu().double().numpy() if isinstance(x, Tensor) else np.asarray(x, float)
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or Inf values")
    return arr


def plot_curves(
    curves: Mapping[str, Sequence[float] | Tensor], path: PathLike, *, xlabel: str = "step",
    ylabel: str = "loss", title: str | None = None, log_y: bool = False,
) -> Path:
    """Line plot of one or more curves (e.g. training loss per step), x = 0, 1, 2, ...

    Args:
        curves: ``{label: values}``.
        path: output image path.
        xlabel, ylabel, title: axis labels and title.
        log_y: logarithmic y axis.
    """
    if not curves:
        raise ValueError("curves is empty")
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    for name, values in curves.items():
        ax.plot(finite_array(values, f"curves[{name!r}]"), label=name)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return save_figure(fig, path)


def plot_curve(
    values: Sequence[float] | Tensor, path: PathLike, *, label: str = "loss", **kwargs: object
) -> Path:
    """Single-curve shortcut of :func:`plot_curves` (``kwargs`` are passed on)."""
    return plot_curves({label: values}, path, **kwargs)  # type: ignore[arg-type]
