"""``contrastkit eval knn|linear|lowshot --baselines``: the same protocol on raw pixels and on
the checkpoint's backbone randomly initialised, beside the pretrained one, with the paired
bootstrap interval of each accuracy difference (the one ``contrastkit compare`` computes;
Feeney & Hughes 2023, appendix M).

Both baselines see exactly the checkpoint's evaluation images (same splits, same evaluation
transform), so a difference is the representation's:

* **raw pixels**: the evaluation view (resized, normalised) flattened into a vector;
* **random init**: the checkpoint's architecture with weights drawn with ``torch.manual_seed
  (--seed)``, in evaluation mode (batch-norm statistics at their initial 0 / 1).

``lowshot`` compares at every shot count, each interval from the predictions of all its seeds
(the same class-balanced draws for every representation: per test image, the share of seeds
that got it right, paired across the representations).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from contrastkit.checkpoints import random_projector
from contrastkit.eval import report
from contrastkit.eval.bootstrap import significance_verdict
from contrastkit.eval.setup import Setup
from contrastkit.eval.verdict import CONFIDENCE, Comparison, compare_with_baselines
from contrastkit.models.factory import BackboneSpec, build_backbone

#: Protocols that take ``--baselines``.
PROTOCOLS = ("knn", "linear", "lowshot")

RAW_PIXELS = "raw pixels"
RANDOM_INIT = "random init"


def baseline_setups(s: Setup) -> dict[str, Setup]:
    """The setup of each baseline: ``s`` with another feature extractor (and a cache key of
    its own), the opened datasets shared."""
    seed = int(s.request.seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        random_backbone = build_backbone(BackboneSpec(**s.spec)).eval()
        if s.projector is not None:  # --space projector: a random projector of the same spec
            head = random_projector(s.projector, random_backbone.out_dim)
            random_backbone = nn.Sequential(random_backbone, head).eval()
    return {
        RAW_PIXELS: replace(s, backbone=nn.Flatten(), spec={"name": "raw_pixels"},
                            sha256=f"raw-pixels-{s.size}"),
        RANDOM_INIT: replace(s, backbone=random_backbone, spec={**s.spec, "init": "random",
                                                                "seed": seed},
                             sha256=f"random-init-{seed}-{s.sha256}"),
    }


def _entry(c: Comparison) -> dict:
    return {"difference": c.difference, "ci_low": c.low, "ci_high": c.high,
            "confidence": CONFIDENCE, "verdict": significance_verdict(c.low, c.high)}


def run_baselines(s: Setup, runner: Callable[[Setup, Path | None], object],
                  pretrained: object) -> dict:
    """Run ``runner`` (a protocol of :mod:`.protocols`) on each baseline and compare its test
    predictions with the pretrained model's (``pretrained``, an ``Outcome``).

    Returns:
        ``{name: {"metrics", "difference", "ci_low", "ci_high", "confidence", "verdict"}}``,
        differences as fractions (pretrained minus baseline), 95% intervals from 1,000 paired
        resamples seeded with ``--seed``; for ``lowshot`` the comparison of each shot count
        under ``"shots"`` instead.
    """
    seed, labels = int(s.request.seed), pretrained.labels  # type: ignore[attr-defined]
    shot_pred = getattr(pretrained, "shot_pred", {})
    results: dict = {}
    for name, setup in baseline_setups(s).items():
        outcome = runner(setup, None)
        entry: dict = {"metrics": outcome.metrics}  # type: ignore[attr-defined]
        if shot_pred:
            entry["shots"] = {
                shot: _entry(compare_with_baselines(
                    pred, {name: outcome.shot_pred[shot]}, labels, seed)[0])  # type: ignore[attr-defined]
                for shot, pred in shot_pred.items()}
        else:
            entry.update(_entry(compare_with_baselines(
                pretrained.pred, {name: outcome.pred}, labels, seed)[0]))  # type: ignore[attr-defined]
        results[name] = entry
    return results


def comparisons(baselines: dict) -> tuple[Comparison, ...]:
    """The :class:`~contrastkit.eval.verdict.Comparison` s of :func:`run_baselines`' result
    (``lowshot``: one per shot count and baseline)."""
    out = []
    for name, b in baselines.items():
        for shot, c in (b["shots"].items() if "shots" in b else [("", b)]):
            setting = "" if not shot else ("all labels" if shot == "all" else f"{shot} shots")
            out.append(Comparison(name, c["difference"], c["ci_low"], c["ci_high"], setting))
    return tuple(out)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _diff(c: dict) -> str:
    low, high = (report.format_signed(100 * c[k]) for k in ("ci_low", "ci_high"))
    return f"{report.format_signed(100 * c['difference'])} [{low}, {high}]"


def baselines_markdown(pretrained_metrics: dict, baselines: dict) -> str:
    """Top-1 (%) of each representation and the difference pretrained minus it in points with
    its 95% paired bootstrap interval; ``lowshot``: one row per shot count."""
    if "shots" in pretrained_metrics:
        header = ["shots", "pretrained top-1 (%)"]
        for name in baselines:
            header += [f"{name} top-1 (%)", f"pretrained - {name} (points, 95% interval)"]
        rows = []
        for shot, row in pretrained_metrics["shots"].items():
            cells = [shot, _pct(row["mean"])]
            for b in baselines.values():
                cells += [_pct(b["metrics"]["shots"][shot]["mean"]), _diff(b["shots"][shot])]
            rows.append(cells)
        note = ("top-1: mean over the seeds; each interval pairs the test images' predictions "
                "of all seeds (1,000 resamples).")
    else:
        header = ["representation", "top-1 (%)", "pretrained - this (points, 95% interval)"]
        rows = [["pretrained", _pct(pretrained_metrics["top1"]), "-"]]
        rows += [[name, _pct(b["metrics"]["top1"]), _diff(b)] for name, b in baselines.items()]
        note = "Intervals: paired bootstrap over the test images (1,000 resamples)."
    return "\n## Baselines\n\n" + report.markdown_table(header, rows) + "\n" + note + "\n"
