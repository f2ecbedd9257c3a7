"""Embedding diagnostics and figures of a frozen checkpoint (:func:`analyze`, the function under
``contrastkit analyze``).

Alignment and uniformity (Manna et al. 2023, eqs. 16-17, after Wang & Isola 2020), tolerance
and local separation (Wang & Liu 2021), the target-noise margin and the KL bound of SINCERE
(Feeney & Hughes 2023, Table 1 and Thm. 11), hardness weights and temperature functions
(DySTreSS, Manna et al. 2023, eq. 4), a 2-D map of the embedding; the formulas are in
:mod:`contrastkit.eval.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

from contrastkit.data import augment
from contrastkit.data.decode.images import collate_images
from contrastkit.eval import report
from contrastkit.eval.paper_values import DYSTRESS_TABLE13, reference_notes, reference_range
from contrastkit.eval.results import (
    Evaluation,
    check_output,
    data_context,
    header,
    write_outputs,
)
from contrastkit.eval.setup import (
    EvalRequest,
    Setup,
    is_video,
    open_split,
    setup,
    split_features,
)
from contrastkit.outputs import staged_folder


@dataclass(frozen=True)
class AnalyzeOptions:
    """The options of ``contrastkit analyze`` beyond the request's (same names).

    Attributes:
        views: augmentation preset(s) of the two views (None: the pretraining run's, else
            ``simclr``).
        temperatures: temperatures of the hardness-weight and temperature figures.
        dystress: DySTreSS temperature ``(t_min, t_max[, shift, scale])`` drawn beside them.
        embedding: 2-D map of the test embeddings: ``none``, ``tsne`` or ``umap``.
        embedding_samples: test samples in the 2-D map.
        max_samples: test samples used (a seeded random subset when larger).
        neighbors: negatives in the local separation.
        loss_value, num_noise: final SINCERE loss (nats) and ``|N|`` of its Thm. 11, for the
            KL bound (both or neither).
    """

    views: Sequence[str] | None = None
    temperatures: Sequence[float] = (0.05, 0.1, 0.2, 0.5)
    dystress: Sequence[float] | None = None
    embedding: Literal["none", "tsne", "umap"] = "none"
    embedding_samples: int = 2000
    max_samples: int = 10000
    neighbors: int = 10
    loss_value: float | None = None
    num_noise: int | None = None


# --- diagnostics --------------------------------------------------------------------------------
def _analysis_subset(n: int, limit: int, seed: int) -> Tensor:
    if limit < 2:
        raise ValueError(f"--max-samples must be >= 2, got {limit}")
    if n <= limit:
        return torch.arange(n)
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:limit].sort().values


def _view_features(s: Setup, dataset: object, idx: Tensor, presets: Sequence[str]) -> tuple[
        Tensor, Tensor]:
    """Backbone features of two augmented views of the samples ``idx`` (seeded by --seed)."""
    online, target = (presets[0], presets[-1])
    make = [augment.preset(p, s.size, normalize=s.normalize).to(s.device) for p in (online, target)]
    backbone = s.backbone.to(s.device).eval()
    z1, z2 = [], []
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(s.request.seed)
        for start in range(0, len(idx), s.request.batch_size):
            chunk = idx[start : start + s.request.batch_size].tolist()
            images = collate_images([dataset[i] for i in chunk])[0].to(s.device)  # type: ignore[index]
            z1.append(backbone(make[0](images)).float().cpu())
            z2.append(backbone(make[1](images)).float().cpu())
    return torch.cat(z1), torch.cat(z2)


def _temperature_functions(a: AnalyzeOptions) -> dict[str, object]:
    """``{label: float or callable}`` of --temperatures and --dystress."""
    temps: dict[str, object] = {f"t={t:g}": t for t in a.temperatures}
    if a.dystress is not None:
        from contrastkit.losses import DySTreSSTemperature

        if len(a.dystress) not in (2, 4):
            raise ValueError("--dystress takes T_MIN T_MAX or T_MIN T_MAX SHIFT SCALE, got "
                             f"{len(a.dystress)} values")
        fn = DySTreSSTemperature(*a.dystress)
        temps["DySTreSS(" + ", ".join(f"{v:g}" for v in a.dystress) + ")"] = fn
    return temps


def _constant(t: float) -> Callable[[Tensor], Tensor]:
    return lambda s: torch.full_like(s, t)


def diagnostics(s: Setup, a: AnalyzeOptions, out: Path | None) -> tuple[dict, dict, list[str]]:
    """Compute the diagnostics of ``contrastkit analyze`` and write its figures to ``out``.

    Returns:
        ``(metrics, config, figure file names)``.
    """
    from contrastkit.eval import metrics as m

    r = s.request
    if is_video(s):
        raise ValueError(f"analyze supports image datasets only, not --data {r.data}")
    for t in a.temperatures:
        if not t > 0:
            raise ValueError(f"--temperatures must be > 0, got {t}")
    if (a.loss_value is None) != (a.num_noise is None):
        raise ValueError("--loss-value and --num-noise must be given together (SINCERE Thm. 11)")
    temps = _temperature_functions(a)
    presets = tuple(a.views or s.run.views or ("simclr",))
    if len(presets) > 2:
        raise ValueError(f"--views takes one or two presets, got {len(presets)}")
    xtr, ytr = split_features(s, r.train_split)
    xte_all, yte_all = split_features(s, r.test_split)
    idx = _analysis_subset(len(yte_all), a.max_samples, r.seed)
    xte, yte = xte_all[idx], yte_all[idx]
    z1, z2 = _view_features(s, open_split(s, r.test_split), idx, presets)
    k = min(a.neighbors, 2 * len(idx) - 2)
    separation = m.local_separation(z1, z2, k=k)
    margin, target_sims, noise_sims = m.target_noise_margin(xtr, ytr, xte, yte)
    metrics: dict = {
        "alignment": float(m.alignment(z1, z2)),
        "uniformity": float(m.uniformity(xte)),
        "tolerance": float(m.tolerance(xte, yte)),
        "interclass_uniformity": float(m.interclass_uniformity(xte, yte)),
        "target_noise_margin": float(margin),
        "target_similarity_median": float(target_sims.median()),
        "noise_similarity_median": float(noise_sims.median()),
        "positive_similarity_mean": float(separation["positive"].mean()),
        "nearest_negative_similarity_mean": float(separation["negatives"][:, 0].mean()),
    }
    if a.loss_value is not None:
        metrics["sincere_kl_bound"] = float(m.sincere_kl_bound(a.loss_value, a.num_noise))
    config = {"views": list(presets), "num_samples": len(idx), "neighbors": k,
              "temperatures": list(temps), "embedding": a.embedding, "seed": r.seed,
              "loss_value": a.loss_value, "num_noise": a.num_noise}
    figures = [] if out is None else _analysis_figures(out, a, r.seed, metrics, separation,
                                                        target_sims, noise_sims, temps, xte, yte)
    return metrics, config, figures


def _analysis_figures(out: Path, a: AnalyzeOptions, seed: int, metrics: dict,
                      separation: dict, target_sims: Tensor, noise_sims: Tensor, temps: dict,
                      xte: Tensor, yte: Tensor) -> list[str]:
    from contrastkit.eval import plots

    plots.plot_uniformity_alignment(metrics["uniformity"], metrics["alignment"],
                                    out / "uniformity_alignment.png")
    plots.plot_local_separation(separation, out / "local_separation.png")
    plots.plot_similarity_histograms(target_sims, noise_sims, out / "similarity_histograms.png")
    plots.plot_hardness_weights(temps, out / "hardness_weights.png")  # type: ignore[arg-type]
    functions = {k: (v if callable(v) else _constant(float(v)))  # type: ignore[arg-type]
                 for k, v in temps.items()}
    plots.plot_temperature_functions(functions, out / "temperature_functions.png")
    names = ["uniformity_alignment.png", "local_separation.png", "similarity_histograms.png",
             "hardness_weights.png", "temperature_functions.png"]
    if a.embedding != "none":
        n = min(len(yte), a.embedding_samples)
        name = f"embedding_{a.embedding}.png"
        plots.plot_embedding_2d(xte[:n], yte[:n], out / name, method=a.embedding, seed=seed)
        names.append(name)
    return names


def _against_table13(metrics: dict, name: str, space: str) -> str:
    """Where ``metrics[name]`` lies against the models of DySTreSS Table 13 (all data sets),
    measured in ``space`` (``backbone`` or ``projector``)."""
    ranges = [reference_range(name, dataset) for dataset in DYSTRESS_TABLE13]
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    value = metrics[name]
    where = "within" if low <= value <= high else ("below" if value < low else "above")
    measured = "the projector's output" if space == "projector" else "this backbone's features"
    return (f"{value:.3f} is {where} the {low:.2f} to {high:.2f} of DySTreSS Table 13 "
            f"({measured}; the paper does not say which layer it measured)")


def reading(metrics: dict, space: str = "backbone") -> list[str]:
    """What the diagnostics say, one line each: the direction that is better, and a flagged
    negative target-noise margin (Feeney & Hughes 2023, Fig. 2); ``space``: where the
    features were measured (``--space``)."""
    margin = metrics["target_noise_margin"]
    lines = [
        f"target_noise_margin {margin:+.3f}: "
        + ("NEGATIVE, test images are nearer to training images of other classes than of "
           "their own: the classes do not separate" if margin <= 0 else
           "positive, same-class training images are nearer (larger is better)"),
        "alignment (Manna et al. 2023, eq. 17): >= 0, lower means the two views of an image "
        "embed closer; " + _against_table13(metrics, "alignment", space),
        "uniformity (Manna et al. 2023, eq. 16, t = 2): <= 0, lower means the embeddings spread "
        "more evenly on the sphere; " + _against_table13(metrics, "uniformity", space),
        "hardness_weights.png and temperature_functions.png show the loss's weighting for "
        "--temperatures: they do not depend on the checkpoint",
    ]
    return lines


# --- one call -----------------------------------------------------------------------------------
def analyze(request: EvalRequest, options: AnalyzeOptions | None = None,
            argv: Sequence[str] | None = None) -> Evaluation:
    """The embedding diagnostics of ``request``'s checkpoint on its test split, with figures in
    ``request.output`` when set (the function under ``contrastkit analyze``; ``argv``: the
    command line it came from, None from Python)."""
    options = AnalyzeOptions() if options is None else options
    out, earlier = check_output(request.output, request.overwrite)
    s = setup(request)
    with staged_folder(out, earlier) as stage:
        metrics, config, figures = diagnostics(s, options, stage)
        results = {**header("analyze", argv), **s.record(), "config": config,
                   "metrics": metrics, "figures": figures}
        context = {"checkpoint": s.checkpoint.name, "sha256": s.sha256[:16],
                   "data": request.data, "split": request.test_split,
                   "views": " ".join(config["views"]), **data_context(s)}
        cells, sources = reference_notes(metrics)
        results["paper_references"] = {"values": cells, "sources": sources}
        text = report.metrics_markdown("contrastkit analyze", metrics, context, cells)
        text += "\nPaper references (numbers as printed in the papers):\n"
        text += "".join(f"{source}\n" for source in sources)
        text += "\n" + "\n".join(f"* {line}" for line in reading(metrics, request.space)) + "\n"
        if stage is not None:
            write_outputs(stage, s, results, text)
    return Evaluation(results, text)
