"""A collapsed random init is no bar for the geometry (issue 52, item 11): on one's own data
``analyze`` said "worse than random init" on 3 of 4 geometry metrics when random init's
embeddings were nearly one vector (every similarity about 0.99) and the verdict said yes. The
reading, the table header and the figures now say it is collapsed, with its mean similarity,
and compare nothing with it; a random init that is not collapsed is compared as before."""

from __future__ import annotations

import pytest
import torch

from contrastkit.eval import metrics as m
from contrastkit.eval.analyze import (
    COLLAPSED_SIMILARITY,
    PRETRAINED,
    AnalyzeOptions,
    Geometry,
    collapsed,
    figures,
    reading,
)
from contrastkit.eval.baselines import RANDOM_INIT

CLASSES, DIM = 20, 16


def _geometry(xtr, ytr, xte, yte, z1, z2) -> Geometry:
    """The diagnostics analyze computes (:func:`contrastkit.eval.analyze.geometry`), here of
    given features and views."""
    separation = m.local_separation(z1, z2, k=10)
    margin, target, noise = m.target_noise_margin(xtr, ytr, xte, yte)
    metrics = {
        "alignment": float(m.alignment(z1, z2)),
        "uniformity": float(m.uniformity(xte)),
        "mean_pairwise_similarity": float(m.mean_pairwise_similarity(xte)),
        "tolerance": float(m.tolerance(xte, yte)),
        "target_noise_margin": float(margin),
        "local_separation_gap": m.local_separation_gap(separation),
    }
    return Geometry(metrics, separation, target, noise, xte, yte)


def _shown(random_spread: float) -> dict[str, Geometry]:
    """Pretrained: 20 weak, noisy class clusters (as on the issue's photos, a negative margin
    and gap). Random init: one common vector plus noise of ``random_spread`` (0.1: every
    similarity about 0.99, collapsed)."""
    g = torch.Generator().manual_seed(0)
    centres = 2.0 * torch.randn(CLASSES, DIM, generator=g)
    ytr, yte = torch.arange(400) % CLASSES, torch.arange(200) % CLASSES

    def pretrained(y):
        return centres[y] + 4.0 * torch.randn(len(y), DIM, generator=g)

    common = torch.ones(DIM)

    def random_init(y):
        return common + random_spread * torch.randn(len(y), DIM, generator=g)

    shown = {}
    for name, embed, view_noise in ((PRETRAINED, pretrained, 3.5),
                                    (RANDOM_INIT, random_init, 0.1 * random_spread)):
        xtr, xte = embed(ytr), embed(yte)
        z1 = xte + view_noise * torch.randn(xte.shape, generator=g)
        z2 = xte + view_noise * torch.randn(xte.shape, generator=g)
        shown[name] = _geometry(xtr, ytr, xte, yte, z1, z2)
    return shown


def test_a_collapsed_random_init_is_said_so_and_not_compared(tmp_path):
    pytest.importorskip("matplotlib")
    from contrastkit.figures import figure_caption

    shown = _shown(random_spread=0.1)
    similarity = shown[RANDOM_INIT].metrics["mean_pairwise_similarity"]
    assert similarity > 0.98 and shown[PRETRAINED].metrics["mean_pairwise_similarity"] < 0.5
    assert collapsed(shown) == {RANDOM_INIT: similarity}
    # on paper random init's geometry is the better on 3 of 4 (all near 0; ours is not)
    rand, pre = shown[RANDOM_INIT].metrics, shown[PRETRAINED].metrics
    assert rand["alignment"] < pre["alignment"]
    assert rand["target_noise_margin"] > pre["target_noise_margin"] + 0.05
    assert rand["local_separation_gap"] > pre["local_separation_gap"] + 0.01

    lines = reading(shown)
    assert lines[0].startswith(
        f"random init is collapsed: its test embeddings have a mean pairwise cosine similarity "
        f"of {similarity:.3f} ({COLLAPSED_SIMILARITY} or more counts as collapsed)")
    assert "no bar to beat" in lines[0]
    assert "The verdict compares accuracies" in lines[0]
    text = "\n".join(lines[1:])
    assert len(lines) == 5
    assert "than random init" not in text and "to random init" not in text
    assert "random init's," not in text  # no margin agreement read off a collapsed margin
    assert "Not compared with random init's: a collapsed margin is no bar." in lines[1]
    for name in ("local_separation_gap", "alignment", "uniformity"):
        assert f"{name} {pre[name]:.3f} (random init {rand[name]:.3f}, collapsed)" in text

    captions = figures(tmp_path, AnalyzeOptions(), 0, shown)
    label = f"random init (collapsed: mean similarity {similarity:.2f})"
    assert "(random init collapsed: not compared)" in captions["local_separation.png"]
    assert "(random init collapsed: not compared)" in captions["similarity_histograms.png"]
    assert f"{label} is not compared" in captions["uniformity_alignment.png"]
    for name, caption in captions.items():
        assert "than random init" not in caption, name
        assert figure_caption(tmp_path / name) == caption


def test_a_random_init_that_is_not_collapsed_is_compared():
    shown = _shown(random_spread=3.0)
    assert shown[RANDOM_INIT].metrics["mean_pairwise_similarity"] < COLLAPSED_SIMILARITY
    assert collapsed(shown) == {}
    lines = reading(shown)
    assert len(lines) == 4 and not any("collapsed:" in line for line in lines)
    assert all("random init" in line and ("than" in line or "equal" in line)
               for line in lines[1:])


def test_a_collapsed_pretrained_model_is_said_so_and_still_compared():
    """The check reads every representation: collapsed pretrained embeddings are named first,
    and a random init that is not collapsed stays the bar."""
    flat, spread = _shown(random_spread=0.1), _shown(random_spread=3.0)
    shown = {PRETRAINED: flat[RANDOM_INIT], RANDOM_INIT: spread[RANDOM_INIT]}
    assert list(collapsed(shown)) == [PRETRAINED]
    lines = reading(shown)
    assert lines[0].startswith("pretrained is collapsed: ") and lines[0].endswith("images.")
    assert "alignment" in lines[3] and "than random init" in lines[3]
