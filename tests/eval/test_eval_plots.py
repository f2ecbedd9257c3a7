"""Figures are written atomically as valid, non-trivial PNG files, and each caption says what
the data it draws shows (issue 37, item 7: the local-separation caption claimed an order the
plot did not show)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("matplotlib")
pytest.importorskip("sklearn")

from contrastkit.eval import local_separation, local_separation_gap, target_noise_margin
from contrastkit.eval.paper_figures import (
    hardness_contrast,
    plot_hardness_weights,
    plot_temperature_functions,
    plot_uniformity_alignment_papers,
)
from contrastkit.eval.plots import (
    plot_curve,
    plot_curves,
    plot_embedding_2d,
    plot_local_separation,
    plot_similarity_histograms,
    plot_uniformity_alignment,
)
from contrastkit.eval.report import format_signed
from contrastkit.figures import figure_caption

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path, tmp_path):
    assert path.parent == tmp_path
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 5_000
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no leftovers


def clusters(n=120, dim=8, classes=4, seed=0, spread=3.0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % classes
    return spread * torch.randn(classes, dim, generator=g)[y] + torch.randn(n, dim, generator=g), y


def test_local_separation_caption_states_the_plotted_order(tmp_path):
    z, _ = clusters()
    g = torch.Generator().manual_seed(1)
    tight = local_separation(z, z + 0.05 * torch.randn(z.shape, generator=g), k=5)
    loose = local_separation(z, torch.randn(z.shape, generator=g), k=5)
    assert local_separation_gap(tight) > 0 > local_separation_gap(loose)
    path = plot_local_separation({"pretrained": loose, "random init": tight}, tmp_path / "s.png")
    assert_png(path, tmp_path)
    caption = figure_caption(path)
    # the caption's claim is the medians' order in the plotted data
    pos, nearest = loose["positive"].numpy(), loose["negatives"][:, 0].numpy()
    assert np.median(pos) < np.median(nearest)
    assert caption.startswith("pretrained: the two views of an image (green) sit below")
    gap = format_signed(local_separation_gap(loose), 3)
    assert f"median gap {gap} (lower than random init's)" in caption
    flipped = figure_caption(plot_local_separation({"pretrained": tight, "random init": loose},
                                                   tmp_path / "t.png"))
    assert "sit above" in flipped and "(higher than random init's)" in flipped
    with pytest.raises(ValueError, match="positive"):
        plot_local_separation({"x": {"negatives": tight["negatives"]}}, tmp_path / "x.png")


def test_similarity_histogram_caption_states_the_margins(tmp_path):
    z, y = clusters()
    noise, _ = clusters(spread=0.0, seed=3)
    sims = {}
    for name, feats in (("pretrained", z), ("random init", noise)):
        margin, same, other = target_noise_margin(feats[:80], y[:80], feats[80:], y[80:])
        sims[name] = (same, other, margin)
    path = plot_similarity_histograms({k: v[:2] for k, v in sims.items()}, tmp_path / "h.png")
    assert_png(path, tmp_path)
    caption = figure_caption(path)
    margin, other = sims["pretrained"][2], sims["random init"][2]
    assert margin > 0 and margin > other
    assert caption.startswith("pretrained: the median same-class similarity (blue dotted) lies "
                              "right of the other-class one")
    assert f"margin {format_signed(margin, 3)} (higher than random init's)" in caption


def test_uniformity_alignment_caption_compares_the_two_points(tmp_path):
    path = plot_uniformity_alignment({"pretrained": (0.4, -2.5), "random init": (0.2, -0.8)},
                                     tmp_path / "ua.png")
    assert_png(path, tmp_path)
    caption = figure_caption(path)
    assert "spreads its embeddings more evenly than random init (uniformity -2.500 vs -0.800)" \
        in caption
    assert "two views of an image farther apart (alignment 0.400 vs 0.200)" in caption


def test_paper_figures_have_true_captions(tmp_path):
    def cosine_temp(s):
        return 0.1 + 0.05 * (1 + torch.cos(torch.pi * s))

    path = plot_hardness_weights([0.07, 0.2, 1.0, cosine_temp], tmp_path / "hard.png")
    assert_png(path, tmp_path)
    contrast = {t: hardness_contrast(t) for t in (0.07, 0.2, 1.0)}
    assert contrast[0.07] > contrast[0.2] > contrast[1.0]  # exp(1/t) on the grid
    assert contrast[0.2] == pytest.approx(np.exp(1 / 0.2), rel=1e-3)
    assert f"t=0.07 weighs the hardest negative (s = 1) {contrast[0.07]:.3g} times" in \
        figure_caption(path)
    path = plot_temperature_functions(
        {"cosine": cosine_temp, "constant 0.2": lambda s: torch.full_like(s, 0.2)},
        tmp_path / "temps.png",
    )
    assert_png(path, tmp_path)
    assert "cosine 0.1 to 0.2, the others constant" in figure_caption(path)
    path = plot_uniformity_alignment_papers(-1.5, 1.9, tmp_path / "ua.png",
                                            measured="the projector's output")
    caption = figure_caption(path)
    assert "uniformity -3.08 to -2.19 and alignment 1.44 to 1.63" in caption
    assert "the star, the projector's output (1.90, -1.50), lies outside those ranges" in caption


def test_plot_embedding_2d_tsne(tmp_path):
    z, y = clusters(n=80)
    path = plot_embedding_2d({"pretrained": (z, y), "random init": (torch.randn(80, 8), y)},
                             tmp_path / "tsne.png", method="tsne")
    assert_png(path, tmp_path)
    assert "pretrained beside random init" in figure_caption(path)
    with pytest.raises(ValueError, match="labels has 79 labels"):
        plot_embedding_2d({"x": (z, y[:-1])}, tmp_path / "bad.png")


def test_plot_curves(tmp_path):
    steps = torch.arange(200, dtype=torch.float64)
    loss = 5 * torch.exp(-steps / 50) + 0.1 * torch.sin(steps)
    assert_png(plot_curve(loss, tmp_path / "loss.png", title="training loss"), tmp_path)
    path = plot_curves({"train": loss, "val": loss + 0.5}, tmp_path / "curves.png", log_y=True)
    assert_png(path, tmp_path)
