"""Tests of contrastkit.data.augment.views: two-view and multi-crop generators (SCE appendix
D.2)."""

from __future__ import annotations

import pytest
import torch

from contrastkit.data import augment as A
from contrastkit.data.augment import views as V
from contrastkit.data.augment._color import RandomColorJitter, RandomSolarize

pytestmark = pytest.mark.usefixtures("one_thread")


def batch(n: int = 4, size: int = 32) -> torch.Tensor:
    return torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8)


def test_sce_two_views_strong_online_weak_target() -> None:
    gen = V.make_views("sce", 32)
    assert isinstance(gen, V.TwoViews)
    out = gen(batch())
    assert len(out) == 2 and all(v.shape == (4, 3, 32, 32) for v in out)
    assert all(v.dtype == torch.float32 for v in out)
    assert any(isinstance(s, RandomColorJitter) for s in gen.online.steps)  # strong
    assert len(gen.target.steps) == 1  # weak: crop + flip only
    assert not torch.equal(out[0], out[1])


def test_two_views_accepts_modules_and_names() -> None:
    weak = A.preset("weak", 16)
    gen = V.TwoViews("strong_beta", weak, size=16, normalize="cifar10")
    assert gen.target is weak
    assert any(isinstance(s, RandomSolarize) for s in gen.online.steps)
    assert gen.online.mean is not None
    with pytest.raises(ValueError, match="size"):
        V.TwoViews("strong", "weak")


def test_multicrop_sce_defaults() -> None:
    gen = V.MultiCrop()
    out = gen(batch(2, 16))
    assert [v.shape[-1] for v in out] == [224, 224, 192, 160, 128, 96]
    assert all(v.shape[:2] == (2, 3) for v in out)
    views = [*gen.global_views, *gen.local_views]
    scales = [v.steps[0].scale for v in views]
    assert scales == [(0.2, 1.0), (0.2, 1.0), (0.172, 0.86), (0.143, 0.715), (0.114, 0.571),
                      (0.086, 0.429)]
    for v in views:  # strong-gamma: saturation 0.2, solarization 0.2
        jit = next(s for s in v.steps if isinstance(s, RandomColorJitter))
        assert jit.strengths[2] == pytest.approx(0.2)
        assert any(isinstance(s, RandomSolarize) and s.p == 0.2 for s in v.steps)


def test_multicrop_configurable_for_small_images() -> None:
    gen = V.make_views("multicrop", 32)
    assert [v.shape[-1] for v in gen(batch())] == [32, 32, 27, 23, 18, 14]
    gen = V.make_views("multicrop", 32, num_global=3, local_sizes=(16, 8),
                       local_scales=((0.1, 0.5), (0.05, 0.2)))
    out = gen(batch())
    assert [v.shape[-1] for v in out] == [32, 32, 32, 16, 8]
    assert gen.local_views[1].steps[0].scale == (0.05, 0.2)
    gen = V.MultiCrop(32, local_sizes=(), local_scales=(),
                      global_presets=("strong_alpha", "strong_beta"))
    assert len(gen(batch())) == 2
    assert not any(isinstance(s, RandomSolarize) for s in gen.global_views[0].steps)
    assert any(isinstance(s, RandomSolarize) for s in gen.global_views[1].steps)


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"local_sizes": (16,), "local_scales": ()}, "local_scales"),
        ({"num_global": 0}, "num_global"),
        ({"global_presets": ("weak",)}, "global_presets"),
        ({"crop_scale": (0.1, 1.0)}, "crop_scale"),
        ({"preset": "nope"}, "strong_gamma"),
    ],
)
def test_multicrop_bad_args(kwargs: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word):
        V.MultiCrop(32, **kwargs)


def test_make_views_kinds_and_errors() -> None:
    for kind in V.VIEW_KINDS:
        out = V.make_views(kind, 16)(batch(2, 20))
        assert all(v.shape[:2] == (2, 3) for v in out) and len(out) >= 2
    with pytest.raises(ValueError, match="simclr"):
        V.make_views("swav", 32)


def test_views_reproducible_with_seed() -> None:
    gen = V.make_views("sce_imagenet", 24)
    x = batch(8)
    torch.manual_seed(0)
    a = gen(x)
    torch.manual_seed(0)
    b = gen(x)
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_views_on_cuda() -> None:
    gen = V.make_views("multicrop", 32).cuda()
    out = gen(batch().cuda())
    assert all(v.device.type == "cuda" for v in out)
