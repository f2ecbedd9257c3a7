"""``contrastkit eval knn|linear|lowshot --baselines``: the same protocol on raw pixels and on
the checkpoint's backbone randomly initialised, beside the pretrained one, with the paired
bootstrap interval of each accuracy difference (the one ``contrastkit compare`` computes;
Feeney & Hughes 2023, appendix M).

Both baselines see exactly the checkpoint's evaluation images (same splits, same evaluation
transform), so a difference is the representation's:

* **raw pixels**: the evaluation view (resized, normalised) flattened into a vector;
* **random init**: the checkpoint's architecture with weights drawn with ``torch.manual_seed
  (--seed)``, in evaluation mode (batch-norm statistics at their initial 0 / 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from contrastkit.eval import report
from contrastkit.eval.bootstrap import bootstrap_accuracy_difference, significance_verdict
from contrastkit.eval.setup import Setup
from contrastkit.models.factory import BackboneSpec, HeadSpec, build_backbone, build_head

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
            head = build_head(HeadSpec(**s.projector), random_backbone.out_dim)
            random_backbone = nn.Sequential(random_backbone, head).eval()
    return {
        RAW_PIXELS: replace(s, backbone=nn.Flatten(), spec={"name": "raw_pixels"},
                            sha256=f"raw-pixels-{s.size}"),
        RANDOM_INIT: replace(s, backbone=random_backbone, spec={**s.spec, "init": "random",
                                                                "seed": seed},
                             sha256=f"random-init-{seed}-{s.sha256}"),
    }


def _top1(metrics: dict) -> float | None:
    """Top-1 of a protocol's metrics (lowshot: of the last shot setting, the predictions')."""
    if "shots" in metrics:
        last = list(metrics["shots"].values())[-1]
        return float(last["mean"])
    return float(metrics["top1"]) if "top1" in metrics else None


def run_baselines(s: Setup, runner: Callable[[Setup, Path | None], object],
                  pretrained: object) -> dict:
    """Run ``runner`` (a protocol of :mod:`.eval`) on each baseline and compare its test
    predictions with the pretrained model's (``pretrained``, an ``Outcome``).

    Returns:
        ``{name: {"metrics", "difference", "ci_low", "ci_high", "confidence", "verdict"}}``,
        differences as fractions (pretrained minus baseline), 95% intervals from 1,000 paired
        resamples seeded with ``--seed``.
    """
    results: dict = {}
    for name, setup in baseline_setups(s).items():
        outcome = runner(setup, None)
        diff, low, high = bootstrap_accuracy_difference(
            pretrained.pred, outcome.pred, pretrained.labels,  # type: ignore[attr-defined]
            n_resamples=1000, confidence=0.95, seed=int(s.request.seed))
        results[name] = {"metrics": outcome.metrics, "difference": diff,  # type: ignore[attr-defined]
                         "ci_low": low, "ci_high": high, "confidence": 0.95,
                         "verdict": significance_verdict(low, high)}
    return results


def baselines_markdown(pretrained_metrics: dict, baselines: dict) -> str:
    """Table of top-1 per representation with the intervals, and one sentence per baseline on
    whether pretraining beat it significantly."""
    rows = [["pretrained", _top1(pretrained_metrics), "-", "-"]]
    sentences = []
    for name, b in baselines.items():
        interval = f"[{100 * b['ci_low']:+.1f}, {100 * b['ci_high']:+.1f}]"
        rows.append([name, _top1(b["metrics"]), f"{100 * b['difference']:+.1f}", interval])
        if b["ci_low"] > 0:
            verdict = "beat"
        elif b["ci_high"] < 0:
            verdict = "did worse than"
        else:
            verdict = "did not significantly beat"
        sentences.append(f"Pretraining {verdict} {name} ({100 * b['difference']:+.1f} points, "
                         f"95% paired bootstrap interval {interval}).")
    if "shots" in pretrained_metrics:
        sentences.append("(top1: mean over seeds at the last shot setting; intervals: its "
                         "first seed's predictions.)")
    header = ["representation", "top1", "pretrained - this (points)", "95% interval"]
    return ("\n## Baselines\n\n" + report.markdown_table(header, rows) + "\n"
            + " ".join(sentences) + "\n")
