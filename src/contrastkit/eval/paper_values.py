"""What the papers report for the diagnostics of ``contrastkit analyze``, each value cited.

Only numbers printed in the papers' tables or stated in their text are here (read from the
papers' text as the project keeps it); where a paper only plots a quantity, the reference says
so and gives no number. Each metric's definition was checked against
:mod:`contrastkit.eval.metrics`:

* DySTreSS (Manna et al. 2023), section 5.7, Table 13: uniformity (eq. 16,
  ``log E_pairs exp(-2 ||x_i - x_j||^2)``), alignment (eq. 17, ``E_pos ||x_i - x_j||^2``) and
  inter-class uniformity (eq. 18, eq. 16 on the class centroids): the definitions of
  :func:`~contrastkit.eval.metrics.uniformity`, :func:`~contrastkit.eval.metrics.alignment`
  (``alpha = 2``) and :func:`~contrastkit.eval.metrics.interclass_uniformity`. ResNet-18 on
  CIFAR-10/100 after 200 epochs, ResNet-50 on ImageNet-1K after 100; the paper does not say
  which layer's features nor which views it measured (``analyze`` measures the backbone's
  features: uniformity on the test images, alignment on two augmented views of them).
* SINCERE (Feeney & Hughes 2023), Table 1: target-noise margin, "the difference between each
  distribution's median cosine similarity" of each test image's nearest training image of its
  class and of another class (:func:`~contrastkit.eval.metrics.target_noise_margin`);
  ResNet-50 trained with labels (SupCon, SINCERE) on 32x32 images. Section 4.1 states Fig. 2's
  ranges on CIFAR-10 in words.
* Wang & Liu 2021 (CVPR): tolerance (mean cosine similarity of samples sharing a class) and
  uniformity are plotted against the temperature in the main paper, which is not among the
  project's papers; its supplement gives linear-probe accuracies (Tables 1-2) and plots local
  separation (Figs. 1-7) without numbers. DySTreSS plots tolerance too (Figs. 5 and 7) without
  stating values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "DYSTRESS_IMAGENET100_INTERCLASS",
    "DYSTRESS_TABLE13",
    "REFERENCES",
    "SINCERE_TABLE1",
    "PaperReference",
    "reference_notes",
    "reference_range",
]

#: DySTreSS (Manna et al. 2023) Table 13: ``{data set: {method: (uniformity, alignment,
#: inter-class uniformity, 200-NN top-1 %)}}`` as printed.
DYSTRESS_TABLE13: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "CIFAR-10": {
        "SimCLR": (-2.2135, 1.5784, -0.5194, 83.65),
        "MoCov2": (-2.1929, 1.47393, -0.5094, 83.67),
        "DCLW": (-2.5482, 1.5632, -0.5349, 84.02),
        "DCL": (-2.7717, 1.6181, -0.5524, 84.47),
        "DySTreSS": (-2.8430, 1.6310, -0.5797, 85.83),
    },
    "CIFAR-100": {
        "SimCLR": (-2.2556, 1.4661, -0.5246, 52.32),
        "MoCov2": (-2.2202, 1.4444, -0.5364, 54.01),
        "DCLW": (-2.6865, 1.5425, -0.6405, 55.87),
        "DCL": (-2.8314, 1.5723, -0.6792, 56.02),
        "DySTreSS": (-2.8169, 1.5408, -0.7657, 56.72),
    },
    "ImageNet-1K": {
        "SimCLR": (-2.9084, 1.5253, -0.8739, 63.2),
        "DCLW": (-3.0137, 1.5295, -0.9544, 64.2),
        "DCL": (-3.0786, 1.5335, -1.0053, 65.1),
        "DySTreSS": (-3.0596, 1.5278, -1.0015, 65.2),
    },
}

#: DySTreSS section 5.8: inter-class uniformity of its four ImageNet-100 temperature ranges
#: (Table 14), stated in the text.
DYSTRESS_IMAGENET100_INTERCLASS = (-0.6584, -0.7202, -0.7422, -0.7710)

#: SINCERE (Feeney & Hughes 2023) Table 1: ``{loss: {data set: margin}}``.
SINCERE_TABLE1: dict[str, dict[str, float]] = {
    "SupCon": {"CIFAR-2": 0.410, "CIFAR-10": 0.270, "CIFAR-100": 0.438, "ImageNet-100": 0.026},
    "SINCERE": {"CIFAR-2": 0.972, "CIFAR-10": 0.854, "CIFAR-100": 0.454, "ImageNet-100": 0.154},
}

_TABLE13_COLUMN = {"uniformity": 0, "alignment": 1, "interclass_uniformity": 2}


@dataclass(frozen=True)
class PaperReference:
    """One metric's reported values: ``values`` (short, for a table cell) and ``source`` (paper,
    table or figure, data sets, models)."""

    values: str
    source: str


def reference_range(metric: str, dataset: str) -> tuple[float, float]:
    """``(lowest, highest)`` of ``metric`` over the methods of DySTreSS Table 13 on ``dataset``.

    Raises:
        ValueError: for a metric or data set that Table 13 does not report.
    """
    if metric not in _TABLE13_COLUMN:
        raise ValueError(f"metric must be one of {sorted(_TABLE13_COLUMN)}, got {metric!r}")
    if dataset not in DYSTRESS_TABLE13:
        raise ValueError(f"dataset must be one of {sorted(DYSTRESS_TABLE13)}, got {dataset!r}")
    values = [row[_TABLE13_COLUMN[metric]] for row in DYSTRESS_TABLE13[dataset].values()]
    return min(values), max(values)


def _span(low: float, high: float) -> str:
    """``low to high`` with 2 decimals, 3 where 2 would print the same number twice."""
    digits = 2 if f"{low:.2f}" != f"{high:.2f}" else 3
    return f"{low:.{digits}f} to {high:.{digits}f}"


def _table13_values(metric: str) -> str:
    return ", ".join(f"{name} {_span(*reference_range(metric, name))}"
                     for name in DYSTRESS_TABLE13)


_TABLE13 = ("DySTreSS (Manna et al. 2023) Table 13, over SimCLR, MoCo v2, DCL, DCLW and DySTreSS "
            "(ResNet-18 on CIFAR, 200 epochs; ResNet-50 on ImageNet-1K, 100 epochs); same "
            "definition (eqs. 16-18), layer not stated")
_SINCERE = ("SINCERE (Feeney & Hughes 2023) Table 1 (ResNet-50 trained with labels, 32x32 "
            "images) and section 4.1 on Fig. 2; same definition")
_WANG_LIU = ("Wang & Liu 2021 (tolerance: mean cosine similarity of same-class pairs, as ours): "
             "plotted against the temperature in the main paper (not among the project's "
             "papers) and in DySTreSS Figs. 5 and 7, no numbers stated")
_LOCAL = ("Wang & Liu 2021 supplement Figs. 1-7 (CIFAR-10, SVHN, ImageNet-100; hard loss also "
          "CIFAR-100): box plots, no numbers stated")

_IN100 = DYSTRESS_IMAGENET100_INTERCLASS
REFERENCES: dict[str, PaperReference] = {
    "uniformity": PaperReference(_table13_values("uniformity"), _TABLE13),
    "alignment": PaperReference(_table13_values("alignment"), _TABLE13),
    "interclass_uniformity": PaperReference(
        _table13_values("interclass_uniformity")
        + f", ImageNet-100 {_span(min(_IN100), max(_IN100))} (section 5.8)", _TABLE13),
    "tolerance": PaperReference("shown in plots only", _WANG_LIU),
    "target_noise_margin": PaperReference(
        ", ".join(f"{loss} " + "/".join(f"{v:.3f}" for v in row.values())
                  for loss, row in SINCERE_TABLE1.items())
        + " on CIFAR-2/CIFAR-10/CIFAR-100/ImageNet-100, all positive", _SINCERE),
    "target_similarity_median": PaperReference("CIFAR-10: near 1 for both losses", _SINCERE),
    "noise_similarity_median": PaperReference("CIFAR-10 histograms: 0 to 0.25 (SINCERE), 0.7 "
                                              "to 0.85 (SupCon)", _SINCERE),
    "positive_similarity_mean": PaperReference("shown in plots only", _LOCAL),
    "nearest_negative_similarity_mean": PaperReference("shown in plots only", _LOCAL),
}


def reference_notes(metrics: Mapping[str, object]) -> tuple[dict[str, str], list[str]]:
    """The "paper reference" cell of each metric in ``metrics`` and the numbered sources.

    Returns:
        ``({metric: "values [n]"}, ["[n] source", ...])``; metrics without a reported value
        get no cell.
    """
    cells: dict[str, str] = {}
    sources: list[str] = []
    for name in metrics:
        ref = REFERENCES.get(name)
        if ref is None:
            continue
        if ref.source not in sources:
            sources.append(ref.source)
        cells[name] = f"{ref.values} [{sources.index(ref.source) + 1}]"
    return cells, [f"[{i}] {source}" for i, source in enumerate(sources, 1)]
