"""Figures are written atomically as valid, non-trivial PNG files."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("matplotlib")
pytest.importorskip("sklearn")

from contrastkit.eval import local_separation, target_noise_margin
from contrastkit.eval.plots import (
    plot_curve,
    plot_curves,
    plot_embedding_2d,
    plot_hardness_weights,
    plot_local_separation,
    plot_similarity_histograms,
    plot_temperature_functions,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"




def assert_png(path, tmp_path):
    assert path.parent == tmp_path
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 5_000
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no leftovers


def clusters(n=120, dim=8, classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % classes
    return 3 * torch.randn(classes, dim, generator=g)[y] + torch.randn(n, dim, generator=g), y


def test_plot_local_separation(tmp_path):
    z, _ = clusters()
    sep = local_separation(z, z + 0.3 * torch.randn_like(z), k=10)
    assert_png(plot_local_separation(sep, tmp_path / "sep.png"), tmp_path)
    with pytest.raises(ValueError, match="positive"):
        plot_local_separation({"negatives": sep["negatives"]}, tmp_path / "x.png")


def test_plot_similarity_histograms(tmp_path):
    z, y = clusters()
    _, same, other = target_noise_margin(z[:80], y[:80], z[80:], y[80:])
    assert_png(plot_similarity_histograms(same, other, tmp_path / "hist.png"), tmp_path)


def test_plot_hardness_and_temperature_functions(tmp_path):
    def cosine_temp(s):
        return 0.1 + 0.05 * (1 + torch.cos(torch.pi * s))

    path = plot_hardness_weights([0.07, 0.2, 1.0, cosine_temp], tmp_path / "hard.png")
    assert_png(path, tmp_path)
    path = plot_temperature_functions(
        {"cosine": cosine_temp, "constant 0.2": lambda s: torch.full_like(s, 0.2)},
        tmp_path / "temps.png",
    )
    assert_png(path, tmp_path)


def test_plot_embedding_2d_tsne(tmp_path):
    z, y = clusters(n=80)
    assert_png(plot_embedding_2d(z, y, tmp_path / "tsne.png", method="tsne"), tmp_path)
    with pytest.raises(ValueError, match="labels has 79 labels"):
        plot_embedding_2d(z, y[:-1], tmp_path / "bad.png")


def test_plot_curves(tmp_path):
    steps = torch.arange(200, dtype=torch.float64)
    loss = 5 * torch.exp(-steps / 50) + 0.1 * torch.sin(steps)
    assert_png(plot_curve(loss, tmp_path / "loss.png", title="training loss"), tmp_path)
    path = plot_curves({"train": loss, "val": loss + 0.5}, tmp_path / "curves.png", log_y=True)
    assert_png(path, tmp_path)
    with pytest.raises(ValueError, match="NaN"):
        plot_curve([1.0, float("nan")], tmp_path / "nan.png")
    with pytest.raises(ValueError, match="suffix"):
        plot_curve([1.0, 2.0], tmp_path / "noext")
