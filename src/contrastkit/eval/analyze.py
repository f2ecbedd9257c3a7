"""Embedding diagnostics and figures of a frozen checkpoint beside its random initialisation
(:func:`analyze`, the function under ``contrastkit analyze``).

Alignment and uniformity (Manna et al. 2023, eqs. 16-17, after Wang & Isola 2020), tolerance
and local separation (Wang & Liu 2021), the target-noise margin and the KL bound of SINCERE
(Feeney & Hughes 2023, Table 1 and Thm. 11), a 2-D map of the embedding; the formulas are in
:mod:`contrastkit.eval.metrics`. Every number and figure that depends on the model is given for
the checkpoint and for the same architecture randomly initialised (:mod:`.baselines`), which is
what one's own data can be judged against; the report ends with the verdict of
:mod:`.answer` (kNN and linear probe against the baselines), and the reading of the margin
says whether it agrees with it.

A random init whose test embeddings are collapsed (mean pairwise cosine similarity at least
:data:`COLLAPSED_SIMILARITY`: nearly one vector, so its alignment, margin and separation are
near 0 by construction) is no bar for the geometry: the report, the table and the figures
label it collapsed and give its values without comparing ours to them. The verdict does not
read the geometry: it compares accuracies, which a collapsed random init still has.

With ``paper_references``: the values the papers report beside ours, and the figures for
reproducing them (hardness weights and temperature functions, DySTreSS eq. 4 and figs. 3-4,
which do not depend on the checkpoint; uniformity and alignment among DySTreSS Table 13's
models; :mod:`.paper_figures`).
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
from contrastkit.eval.baselines import RANDOM_INIT, baseline_setups
from contrastkit.eval.paper_values import DYSTRESS_TABLE13, reference_notes, reference_range
from contrastkit.eval.protocols import verdict_of
from contrastkit.eval.report import format_signed
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
from contrastkit.eval.verdict import Verdict
from contrastkit.outputs import staged_folder

PRETRAINED = "pretrained"

#: A representation whose test embeddings have a mean pairwise cosine similarity at least this
#: is collapsed (the study's threshold for a collapsed run's two views,
#: ``studies.repro.verdicts.COLLAPSE_SIMILARITY``).
COLLAPSED_SIMILARITY = 0.95


@dataclass(frozen=True)
class AnalyzeOptions:
    """The options of ``contrastkit analyze`` beyond the request's (same names).

    Attributes:
        views: augmentation preset(s) of the two views (None: the pretraining run's, else
            ``simclr``).
        paper_references: also the papers' values beside ours and the paper figures
            (hardness weights, temperature functions, uniformity and alignment against
            DySTreSS Table 13); implied by ``temperatures`` other than the default or by
            ``dystress`` (:attr:`papers`).
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
    paper_references: bool = False
    temperatures: Sequence[float] = (0.05, 0.1, 0.2, 0.5)
    dystress: Sequence[float] | None = None
    embedding: Literal["none", "tsne", "umap"] = "none"
    embedding_samples: int = 2000
    max_samples: int = 10000
    neighbors: int = 10
    loss_value: float | None = None
    num_noise: int | None = None

    @property
    def papers(self) -> bool:
        """Whether the paper references and figures are wanted: asked for, or implied by
        the options that only they use (``temperatures`` other than the default,
        ``dystress``)."""
        return self.paper_references or self.dystress is not None or \
            tuple(self.temperatures) != AnalyzeOptions.temperatures


@dataclass
class Geometry:
    """The diagnostics of one representation on the analysed test images."""

    metrics: dict
    separation: dict[str, Tensor]
    target_sims: Tensor
    noise_sims: Tensor
    features: Tensor
    labels: Tensor


# --- diagnostics --------------------------------------------------------------------------------
def _analysis_subset(n: int, limit: int, seed: int) -> Tensor:
    if limit < 2:
        raise ValueError(f"--max-samples must be >= 2, got {limit}")
    if n <= limit:
        return torch.arange(n)
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:limit].sort().values


def _view_features(s: Setup, dataset: object, idx: Tensor, presets: Sequence[str]) -> tuple[
        Tensor, Tensor]:
    """Backbone features of two augmented views of the samples ``idx`` (seeded by --seed: the
    same views for every representation)."""
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


def geometry(s: Setup, presets: Sequence[str], idx: Tensor, neighbors: int) -> Geometry:
    """The diagnostics of ``s``'s features on the test images ``idx`` (train split: the bank)."""
    from contrastkit.eval import metrics as m

    r = s.request
    xtr, ytr = split_features(s, r.train_split)
    xte_all, yte_all = split_features(s, r.test_split)
    xte, yte = xte_all[idx], yte_all[idx]
    z1, z2 = _view_features(s, open_split(s, r.test_split), idx, presets)
    separation = m.local_separation(z1, z2, k=min(neighbors, 2 * len(idx) - 2))
    margin, target_sims, noise_sims = m.target_noise_margin(xtr, ytr, xte, yte)
    metrics = {
        "alignment": float(m.alignment(z1, z2)),
        "uniformity": float(m.uniformity(xte)),
        "mean_pairwise_similarity": float(m.mean_pairwise_similarity(xte)),
        "tolerance": float(m.tolerance(xte, yte)),
        "interclass_uniformity": float(m.interclass_uniformity(xte, yte)),
        "target_noise_margin": float(margin),
        "target_similarity_median": float(target_sims.median()),
        "noise_similarity_median": float(noise_sims.median()),
        "positive_similarity_mean": float(separation["positive"].mean()),
        "nearest_negative_similarity_mean": float(separation["negatives"][:, 0].mean()),
        "local_separation_gap": m.local_separation_gap(separation),
    }
    return Geometry(metrics, separation, target_sims, noise_sims, xte, yte)


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


def _check(s: Setup, a: AnalyzeOptions) -> tuple[str, ...]:
    """The views' presets, after the options' checks."""
    if is_video(s):
        raise ValueError(f"analyze supports image datasets only, not --data {s.request.data}")
    for t in a.temperatures:
        if not t > 0:
            raise ValueError(f"--temperatures must be > 0, got {t}")
    if (a.loss_value is None) != (a.num_noise is None):
        raise ValueError("--loss-value and --num-noise must be given together (SINCERE Thm. 11)")
    presets = tuple(a.views or s.run.views or ("simclr",))
    if len(presets) > 2:
        raise ValueError(f"--views takes one or two presets, got {len(presets)}")
    return presets


def diagnostics(s: Setup, a: AnalyzeOptions) -> tuple[dict[str, Geometry], dict]:
    """The diagnostics of ``contrastkit analyze`` for the checkpoint and its random init.

    Returns:
        ``({"pretrained": Geometry, "random init": Geometry}, config)``.
    """
    r = s.request
    presets = _check(s, a)
    temps = _temperature_functions(a)
    idx = _analysis_subset(len(split_features(s, r.test_split)[1]), a.max_samples, r.seed)
    shown = {PRETRAINED: geometry(s, presets, idx, a.neighbors),
             RANDOM_INIT: geometry(baseline_setups(s)[RANDOM_INIT], presets, idx, a.neighbors)}
    if a.loss_value is not None:
        from contrastkit.eval.metrics import sincere_kl_bound

        shown[PRETRAINED].metrics["sincere_kl_bound"] = float(
            sincere_kl_bound(a.loss_value, a.num_noise))
    config = {"views": list(presets), "num_samples": len(idx),
              "neighbors": min(a.neighbors, 2 * len(idx) - 2), "embedding": a.embedding,
              "seed": r.seed, "loss_value": a.loss_value, "num_noise": a.num_noise,
              "paper_references": a.papers,
              "temperatures": list(temps) if a.papers else None}
    return shown, config


def collapsed(shown: dict[str, Geometry]) -> dict[str, float]:
    """``{name: mean pairwise similarity}`` of the representations in ``shown`` whose test
    embeddings are collapsed (at least :data:`COLLAPSED_SIMILARITY`)."""
    return {name: g.metrics["mean_pairwise_similarity"] for name, g in shown.items()
            if g.metrics["mean_pairwise_similarity"] >= COLLAPSED_SIMILARITY}


def figures(out: Path, a: AnalyzeOptions, seed: int, shown: dict[str, Geometry],
            space: str = "backbone") -> dict[str, str]:
    """Write the figures of ``contrastkit analyze`` into ``out``; ``{file name: caption}``
    (a collapsed representation labelled so, and not compared; ``space``: where the features
    were measured, ``--space``)."""
    from contrastkit.eval import plots
    from contrastkit.figures import figure_caption

    flat = collapsed(shown)
    paths = [
        plots.plot_local_separation({k: g.separation for k, g in shown.items()},
                                    out / "local_separation.png", collapsed=flat),
        plots.plot_similarity_histograms({k: (g.target_sims, g.noise_sims)
                                          for k, g in shown.items()},
                                         out / "similarity_histograms.png", collapsed=flat),
        plots.plot_uniformity_alignment({k: (g.metrics["alignment"], g.metrics["uniformity"])
                                         for k, g in shown.items()},
                                        out / "uniformity_alignment.png", collapsed=flat),
    ]
    if a.embedding != "none":
        n = min(len(shown[PRETRAINED].labels), a.embedding_samples)
        paths.append(plots.plot_embedding_2d(
            {plots.labelled(k, flat): (g.features[:n], g.labels[:n]) for k, g in shown.items()},
            out / f"embedding_{a.embedding}.png", method=a.embedding, seed=seed))
    if a.papers:
        from contrastkit.eval import paper_figures

        temps = _temperature_functions(a)
        functions = {k: (v if callable(v) else _constant(float(v)))  # type: ignore[arg-type]
                     for k, v in temps.items()}
        pre = shown[PRETRAINED].metrics
        paths += [
            paper_figures.plot_hardness_weights(temps, out / "hardness_weights.png"),  # type: ignore[arg-type]
            paper_figures.plot_temperature_functions(functions,
                                                     out / "temperature_functions.png"),
            paper_figures.plot_uniformity_alignment_papers(
                pre["uniformity"], pre["alignment"], out / "uniformity_alignment_papers.png",
                measured=measured_in(space)),
        ]
    return {Path(p).name: figure_caption(p) or "" for p in paths}


# --- reading ------------------------------------------------------------------------------------
def _against_table13(metrics: dict, name: str, space: str) -> str:
    """Where ``metrics[name]`` lies against the models of DySTreSS Table 13 (all data sets),
    measured in ``space`` (``backbone`` or ``projector``)."""
    ranges = [reference_range(name, dataset) for dataset in DYSTRESS_TABLE13]
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    value = metrics[name]
    where = "within" if low <= value <= high else ("below" if value < low else "above")
    return (f"{value:.3f} is {where} the {low:.2f} to {high:.2f} of DySTreSS Table 13 "
            f"({measured_in(space)}; the paper does not say which layer it measured)")


def measured_in(space: str) -> str:
    """Where features of ``space`` (``--space``) were measured, in words."""
    return "the projector's output" if space == "projector" else "this backbone's features"


def paper_reading(metrics: dict, space: str = "backbone") -> list[str]:
    """Where alignment and uniformity fall against DySTreSS Table 13 (``space``: where the
    features were measured, ``--space``)."""
    return [
        "alignment (Manna et al. 2023, eq. 17): " + _against_table13(metrics, "alignment", space),
        "uniformity (Manna et al. 2023, eq. 16, t = 2): "
        + _against_table13(metrics, "uniformity", space),
    ]


def _knn_against(verdict: Verdict | None, baseline: str) -> int | None:
    """The sign of the verdict's kNN comparison with ``baseline`` (None: it has none)."""
    for e in verdict.evidence if verdict is not None else ():
        for c in e.comparisons:
            if e.protocol == "knn" and c.baseline == baseline:
                return c.sign
    return None


def margin_reading(margin: float, baseline: float, classes: int,
                   verdict: Verdict | None = None, baseline_collapsed: bool = False) -> str:
    """The target-noise margin (Feeney & Hughes 2023, Table 1, Fig. 2) against random init's,
    and whether it agrees with the verdict's kNN comparison with random init (both read the
    neighbourhoods of the test images; the margin only the nearest image of each kind); a
    collapsed random init (``baseline_collapsed``) is not compared."""
    from contrastkit.eval.plots import compared

    relation = compared(margin, baseline)
    state = ", collapsed" if baseline_collapsed else ""
    text = (f"target_noise_margin {format_signed(margin, 3)} (random init "
            f"{format_signed(baseline, 3)}{state}): median similarity of a test image to its "
            "nearest same-class training image minus that to its nearest other-class one; "
            "larger is better.")
    if margin <= 0:
        text += (f" Negative: for most test images an image of another class is the nearest;"
                 f" usual with {classes} classes (the other {classes - 1} supply most "
                 "candidates), so " + ("read it against the verdict rather than against 0." if
                                       baseline_collapsed else
                                       "compare it with random init rather than with 0."))
    if baseline_collapsed:
        return text + " Not compared with random init's: a collapsed margin is no bar."
    than = {"higher": "Higher than", "lower": "Lower than", "about equal": "About equal to"}[
        relation]
    knn = _knn_against(verdict, RANDOM_INIT)
    if knn is None:
        return f"{text} {than} random init's."
    if relation == "higher" and knn > 0:
        agreement = (f"{than} random init's, as kNN found in the verdict: pretraining brought "
                     "images of a class closer together.")
    elif relation == "higher":
        agreement = (f"{than} random init's, but kNN did not beat random init significantly: "
                     "the nearest image improved, not enough of the k neighbours kNN votes with.")
    elif knn > 0:
        agreement = (f"{than} random init's although kNN beat it in the verdict: the margin "
                     "compares the single nearest images, kNN votes over its k neighbours; for "
                     "whether the features are useful, keep kNN's reading.")
    else:
        agreement = (f"{than} random init's, and kNN did not beat random init either: both say "
                     "pretraining did not bring images of a class closer.")
    return f"{text} {agreement}"


def collapse_line(name: str, similarity: float) -> str:
    """That ``name``'s test embeddings are collapsed, with the number (and, for a baseline,
    that its geometry is no bar)."""
    text = (f"{name} is collapsed: its test embeddings have a mean pairwise cosine similarity "
            f"of {similarity:.3f} ({COLLAPSED_SIMILARITY} or more counts as collapsed), nearly "
            "one vector, so its alignment, margin and separation are near 0 whatever the images")
    if name == PRETRAINED:
        return text + "."
    return (text + f"; they are no bar to beat, and the lines below give {name}'s without "
            "comparing. The verdict compares accuracies, which it still has (kNN ranks its "
            "neighbours, the linear probe standardises its features).")


def reading(shown: dict[str, Geometry], verdict: Verdict | None = None) -> list[str]:
    """What the diagnostics say against random init, one line each (the direction that is
    better, and the margin's agreement with ``verdict``); a collapsed representation said
    first, and a collapsed random init not compared."""
    from contrastkit.eval.plots import compared

    pre, rand = shown[PRETRAINED].metrics, shown[RANDOM_INIT].metrics
    classes = int(shown[PRETRAINED].labels.max()) + 1
    flat = collapsed(shown)
    bar = RANDOM_INIT not in flat

    def compare(name: str, lower_better: bool) -> str:
        if not bar:
            return f"{name} {pre[name]:.3f} (random init {rand[name]:.3f}, collapsed)"
        word = compared(pre[name], rand[name], *(("worse", "better") if lower_better
                                                 else ("better", "worse")))
        return (f"{name} {pre[name]:.3f} (random init {rand[name]:.3f}): {word} "
                f"{'to' if word == 'about equal' else 'than'} random init")

    return [collapse_line(name, value) for name, value in flat.items()] + [
        margin_reading(pre["target_noise_margin"], rand["target_noise_margin"], classes,
                       verdict, baseline_collapsed=not bar),
        compare("local_separation_gap", False) + " (median similarity of the two views of an "
        "image minus that of its nearest other image; higher tells images apart better).",
        compare("alignment", True) + " (lower: two views of an image embed closer; a collapsed "
        "encoder also scores 0).",
        compare("uniformity", True) + " (lower: the embeddings spread more evenly).",
    ]


# --- one call -----------------------------------------------------------------------------------
def _markdown(s: Setup, shown: dict[str, Geometry], config: dict,
              references: tuple[dict, list[str]] | None) -> str:
    r = s.request
    context = {"checkpoint": s.checkpoint.name, "sha256": s.sha256[:16], "data": r.data,
               "split": r.test_split, "views": " ".join(config["views"]),
               "random init": f"the same architecture, weights drawn with seed {r.seed}",
               **data_context(s)}
    from contrastkit.eval.plots import labelled

    flat = collapsed(shown)
    header_row = ["metric", labelled(PRETRAINED, flat), labelled(RANDOM_INIT, flat)]
    rows = [[k, v, shown[RANDOM_INIT].metrics.get(k)]
            for k, v in shown[PRETRAINED].metrics.items()]
    if references is not None:
        header_row.append("paper reference")
        rows = [[*row, references[0].get(row[0])] for row in rows]
    text = ("# contrastkit analyze\n\n" + report.markdown_table(["setting", "value"],
                                                               list(context.items()))
            + "\n" + report.markdown_table(header_row, rows))
    if references is not None:
        text += "\nPaper references (numbers as printed in the papers):\n"
        text += "".join(f"{source}\n" for source in references[1])
    return text


def analyze(request: EvalRequest, options: AnalyzeOptions | None = None,
            argv: Sequence[str] | None = None) -> Evaluation:
    """The embedding diagnostics of ``request``'s checkpoint on its test split beside its
    random initialisation, the verdict of :func:`~contrastkit.eval.protocols.verdict_of`
    and, with ``request.output`` set, the figures (the function under ``contrastkit analyze``;
    ``argv``: the command line it came from, None from Python)."""
    options = AnalyzeOptions() if options is None else options
    out, earlier = check_output(request.output, request.overwrite)
    s = setup(request)
    with staged_folder(out, earlier) as stage:
        shown, config = diagnostics(s, options)
        verdict = verdict_of(s)
        captions = {} if stage is None else figures(stage, options, request.seed, shown,
                                                    request.space)
        metrics = shown[PRETRAINED].metrics
        results = {**header("analyze", argv), **s.record(), "config": config,
                   "metrics": metrics,
                   "baseline_metrics": {RANDOM_INIT: shown[RANDOM_INIT].metrics},
                   "collapsed": collapsed(shown),
                   "figures": list(captions), "captions": captions,
                   "verdict": verdict.record()}
        references = reference_notes(metrics) if options.papers else None
        if references is not None:
            results["paper_references"] = {"values": references[0], "sources": references[1]}
        text = _markdown(s, shown, config, references)
        lines = reading(shown, verdict)
        if options.papers:
            lines += paper_reading(metrics, request.space)
        text += "\n## Reading\n\n" + "\n".join(f"* {line}" for line in lines) + "\n"
        text += verdict.markdown()
        if captions:
            text += "\n## Figures\n\n" + "\n".join(f"* `{name}`: {caption}"
                                                   for name, caption in captions.items()) + "\n"
        if stage is not None:
            write_outputs(stage, s, results, text)
    return Evaluation(results, text)
