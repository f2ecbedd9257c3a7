"""Tests of contrastkit.data.augment: SCE Table 1 / appendix D presets, per-sample parameters."""

from __future__ import annotations

import colorsys
import math

import pytest
import torch
import torch.nn.functional as F
from float32_floor import CUDA_ATOL

from contrastkit.data import augment as A
from contrastkit.data.augment._color import (
    RandomColorJitter,
    RandomGaussianBlur,
    RandomGrayscale,
    RandomSolarize,
    adjust_hue,
    blur,
    gaussian_kernels,
    gray,
)
from contrastkit.data.augment._geometry import RandomCropPadFlip, RandomResizedCropFlip, resize

pytestmark = pytest.mark.usefixtures("one_thread")


N = 4000  # large batches of tiny images for the frequency checks


def binomial_ok(count: float, n: int, p: float) -> bool:
    """Within 5 standard deviations of a Binomial(n, p) mean."""
    return abs(count - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1e-9


def step(pipe: A.Pipeline, cls: type) -> torch.nn.Module | None:
    found = [s for s in pipe.steps if isinstance(s, cls)]
    return found[0] if found else None


def coord_image(batch: int, height: int, width: int) -> torch.Tensor:
    """Channel 0 = column / (W - 1), channel 1 = row / (H - 1), channel 2 = 0.5."""
    cols = torch.arange(width, dtype=torch.float32) / (width - 1)
    rows = torch.arange(height, dtype=torch.float32) / (height - 1)
    img = torch.stack(
        [cols.expand(height, width), rows[:, None].expand(height, width),
         torch.full((height, width), 0.5)]
    )
    return img.expand(batch, 3, height, width).contiguous()


def colourful(batch: int, size: int = 8) -> torch.Tensor:
    """Random images whose channels differ everywhere (never gray)."""
    g = torch.Generator().manual_seed(1)
    base = torch.tensor([0.85, 0.15, 0.5]).view(1, 3, 1, 1)
    return (base + 0.05 * torch.rand(batch, 3, size, size, generator=g)).clamp(0, 1)


# ---------------------------------------------------------------- shapes, dtypes, names, options
@pytest.mark.parametrize("name", A.preset_names())
@pytest.mark.parametrize("size", [32, 64])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_shape_dtype_range(name: str, size: int, dtype: torch.dtype) -> None:
    x = torch.randint(0, 256, (6, 3, 48, 40), dtype=torch.uint8)
    if dtype != torch.uint8:
        x = x.to(dtype) / 255
    before = x.clone()
    out = A.preset(name, size)(x)
    assert out.shape == (6, 3, size, size)
    assert out.dtype == torch.float32
    assert out.min() >= 0 and out.max() <= 1
    assert torch.equal(x, before), "the caller's batch must not be modified"


def test_the_baselines_cifar_presets_are_their_references_without_blur() -> None:
    """BYOL's two views without blur and with SimCLR's crop (0.08, 1) (solo-learn's asymmetric
    CIFAR views, lightly's CIFAR-10 benchmark) and solo-learn's VICReg CIFAR views: the ops each
    pipeline runs."""
    from dataclasses import replace

    P = A.PRESETS
    assert P["strong_alpha_cifar"] == replace(P["strong_alpha"], blur_p=0.0, crop_scale=(0.08, 1))
    assert P["strong_beta_cifar"] == replace(P["strong_beta"], blur_p=0.0, crop_scale=(0.08, 1))
    assert P["vicreg_cifar"] == replace(P["strong_beta"], blur_p=0.0, solarize_p=0.1)
    for name, solarize in (("strong_alpha_cifar", None), ("strong_beta_cifar", 0.2),
                           ("vicreg_cifar", 0.1)):
        ops = {type(op).__name__: op for op in A.preset(name, 32).steps}
        assert "RandomGaussianBlur" not in ops
        assert (ops["RandomSolarize"].p if "RandomSolarize" in ops else None) == solarize
        assert ops["RandomColorJitter"].strengths == (0.4, 0.4, 0.2, 0.1)


def test_one_channel_is_replicated() -> None:
    x = torch.randint(0, 256, (5, 1, 32, 32), dtype=torch.uint8)
    for name in ("weak", "strong_gamma", "eval"):
        out = A.preset(name, 16)(x)
        assert out.shape == (5, 3, 16, 16)
        assert torch.allclose(out[:, 0], out[:, 1], atol=1e-6)
        assert torch.allclose(out[:, 0], out[:, 2], atol=1e-6)


def test_unknown_name_lists_allowed() -> None:
    with pytest.raises(ValueError, match="strong_gamma") as err:
        A.preset("stronk", 32)
    assert "stronk" in str(err.value) and "eval_train" in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"size": 0}, "size"),
        ({"size": 32, "jitter_strength": -1.0}, "jitter_strength"),
        ({"size": 32, "crop_scale": (0.5, 0.2)}, "crop_scale"),
        ({"size": 32, "crop_scale": 0.5}, "crop_scale"),
        ({"size": 32, "normalize": "mnist-ish"}, "normalize"),
        ({"size": 32, "normalize": ((0.5,), (0.0,))}, "normalize"),
        ({"size": 32, "small": True}, "small"),
        ({"size": 32, "colour": 1.0}, "colour"),
        ({"size": 32, "generator": 3}, "generator"),
    ],
)
def test_bad_options_name_the_option(kwargs: dict, word: str) -> None:
    size = kwargs.pop("size")
    with pytest.raises(ValueError, match=word):
        A.preset("strong", size, **kwargs)


def test_eval_option_checks() -> None:
    with pytest.raises(ValueError, match="jitter_strength"):
        A.preset("eval", 32, jitter_strength=1.0)
    with pytest.raises(ValueError, match="small"):
        A.preset("eval", 32, small="yes")


def test_bad_batch() -> None:
    pipe = A.preset("weak", 16)
    with pytest.raises(ValueError, match="batch"):
        pipe(torch.rand(3, 16, 16))
    with pytest.raises(ValueError, match="dtype"):
        pipe(torch.ones(2, 3, 16, 16, dtype=torch.int32))


# ---------------------------------------------------------------- Table 1 parameters
TABLE1 = {  # jitter p, b, c, s, h, gray, blur, solarize (SCE Table 1)
    "weak": (0.0, 0, 0, 0, 0, 0.0, 0.0, 0.0),
    "strong": (0.8, 0.4, 0.4, 0.4, 0.1, 0.2, 0.5, 0.0),
    "strong_alpha": (0.8, 0.4, 0.4, 0.2, 0.1, 0.2, 1.0, 0.0),
    "strong_beta": (0.8, 0.4, 0.4, 0.2, 0.1, 0.2, 0.1, 0.2),
    "strong_gamma": (0.8, 0.4, 0.4, 0.2, 0.1, 0.2, 0.5, 0.2),
    "simclr": (0.8, 0.8, 0.8, 0.8, 0.2, 0.2, 0.5, 0.0),
    "simclr_cifar": (0.8, 0.4, 0.4, 0.4, 0.1, 0.2, 0.0, 0.0),
    # BYOL's views on CIFAR (solo-learn's asymmetric.yaml, lightly's benchmark): no blur
    "strong_alpha_cifar": (0.8, 0.4, 0.4, 0.2, 0.1, 0.2, 0.0, 0.0),
    "strong_beta_cifar": (0.8, 0.4, 0.4, 0.2, 0.1, 0.2, 0.0, 0.2),
    "dino_local": (0.8, 0.4, 0.4, 0.2, 0.1, 0.2, 0.5, 0.0),  # DINO's local crops
}


def pipeline_table(pipe: A.Pipeline) -> tuple[float, ...]:
    jit, gray = step(pipe, RandomColorJitter), step(pipe, RandomGrayscale)
    blur, sol = step(pipe, RandomGaussianBlur), step(pipe, RandomSolarize)
    strengths = jit.strengths if jit else (0, 0, 0, 0)
    return (jit.p if jit else 0.0, *strengths, gray.p if gray else 0.0,
            blur.p if blur else 0.0, sol.p if sol else 0.0)


@pytest.mark.parametrize("name", list(TABLE1))
def test_table1_parameters(name: str) -> None:
    pipe = A.preset(name, 224)
    assert pipeline_table(pipe) == pytest.approx(TABLE1[name])
    crop = pipe.steps[0]
    assert isinstance(crop, RandomResizedCropFlip)
    assert crop.flip_p == 0.5
    small = name.startswith("simclr") or name.endswith("_cifar")
    assert crop.scale == ((0.08, 1.0) if small else (0.2, 1.0))
    blur = step(pipe, RandomGaussianBlur)
    if blur is not None:
        assert blur.kernel_size == 23 and blur.sigma == (0.1, 2.0)
    sol = step(pipe, RandomSolarize)
    if sol is not None:
        assert sol.threshold == 0.5


def test_jitter_strength_scales_table_values() -> None:
    jit = step(A.preset("strong_alpha", 32, jitter_strength=1.0), RandomColorJitter)
    assert jit.strengths == pytest.approx((0.8, 0.8, 0.4, 0.2))
    jit = step(A.preset("simclr", 32, jitter_strength=0.5), RandomColorJitter)
    assert jit.strengths == pytest.approx((0.4, 0.4, 0.4, 0.1))
    assert step(A.preset("strong", 32, jitter_strength=0.0), RandomColorJitter) is None


@pytest.mark.parametrize(("size", "k"), [(224, 23), (32, 3), (64, 7), (96, 9), (8, 3), (160, 17)])
def test_blur_kernel_size(size: int, k: int) -> None:
    assert A.blur_kernel_size(size) == k


# ---------------------------------------------------------------- probabilities (per sample)
@pytest.mark.parametrize("name", ["strong", "strong_alpha", "strong_beta", "strong_gamma"])
def test_probabilities_respected(name: str) -> None:
    torch.manual_seed(0)
    pipe = A.preset(name, 4)
    pipe(colourful(N, 4))
    jp, *_, gp, bp, sp = TABLE1[name]
    for cls, p in ((RandomColorJitter, jp), (RandomGrayscale, gp),
                   (RandomGaussianBlur, bp), (RandomSolarize, sp)):
        op = step(pipe, cls)
        if p in (0.0,):
            assert op is None
            continue
        applied = op.last_params["applied"]
        assert applied.shape == (N,)
        assert binomial_ok(applied.sum().item(), N, p), (cls.__name__, applied.float().mean())
    assert binomial_ok(pipe.steps[0].last_params["flip"].sum().item(), N, 0.5)


def test_grayscale_detected_matches_params() -> None:
    torch.manual_seed(1)
    pipe = A.preset("strong", 8)
    out = pipe(colourful(N))
    is_gray = (out[:, 0] == out[:, 1]).all(dim=(1, 2)) & (out[:, 1] == out[:, 2]).all(dim=(1, 2))
    assert torch.equal(is_gray, step(pipe, RandomGrayscale).last_params["applied"])
    assert binomial_ok(is_gray.sum().item(), N, 0.2)


def test_flip_and_crop_box_from_coordinates() -> None:
    torch.manual_seed(2)
    size, height, width = 16, 60, 80
    pipe = A.preset("weak", size)
    out = pipe(coord_image(N, height, width)).double()
    boxes = pipe.steps[0].last_params["boxes"]
    flip = pipe.steps[0].last_params["flip"]
    detected = out[:, 0, :, -1].mean(1) < out[:, 0, :, 0].mean(1)
    assert torch.equal(detected, flip)
    assert binomial_ok(flip.sum().item(), N, 0.5)
    out = torch.where(flip[:, None, None, None], out.flip(-1), out)
    # interior sample positions are exact linear functions of the box: x = x0 + (u + .5) w / S - .5
    u1, u2 = size // 4, 3 * size // 4
    x1, x2 = out[:, 0, size // 2, u1] * (width - 1), out[:, 0, size // 2, u2] * (width - 1)
    w = (x2 - x1) * size / (u2 - u1)
    x0 = x1 + 0.5 - (u1 + 0.5) * w / size
    y1, y2 = out[:, 1, u1, size // 2] * (height - 1), out[:, 1, u2, size // 2] * (height - 1)
    h = (y2 - y1) * size / (u2 - u1)
    assert torch.allclose(w, boxes[:, 2], atol=1e-3)
    assert torch.allclose(h, boxes[:, 3], atol=1e-3)
    assert torch.allclose(x0, boxes[:, 0], atol=1e-3)
    area = boxes[:, 2] * boxes[:, 3] / (height * width)
    assert area.min() >= 0.2 - 0.02 and area.max() <= 1.0
    assert area.min() < 0.25 and area.max() > 0.9  # the whole range is used
    ratio = boxes[:, 2] / boxes[:, 3]
    assert ratio.min() >= 0.75 - 0.05 and ratio.max() <= 4 / 3 + 0.05
    assert (boxes[:, 0] >= 0).all() and (boxes[:, 0] + boxes[:, 2] <= width).all()
    assert (boxes[:, 1] >= 0).all() and (boxes[:, 1] + boxes[:, 3] <= height).all()


def test_crop_scale_option() -> None:
    crop = RandomResizedCropFlip(4, (0.08, 0.1))
    crop(torch.rand(N, 1, 60, 60))
    boxes = crop.last_params["boxes"]
    area = boxes[:, 2] * boxes[:, 3] / 3600
    assert area.min() >= 0.08 - 0.01 and area.max() <= 0.1 + 0.01


# ---------------------------------------------------------------- ops against brute force
def test_hue_matches_colorsys() -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.rand(4, 3, 5, 5, generator=g, dtype=torch.float64)
    x[0, :, 0, 0] = 0.3  # gray pixel
    shift = torch.tensor([0.1, -0.1, 0.45, -0.3], dtype=torch.float64)
    out = adjust_hue(x, shift)
    for b in range(4):
        for i in range(5):
            for j in range(5):
                h, s, v = colorsys.rgb_to_hsv(*x[b, :, i, j].tolist())
                ref = colorsys.hsv_to_rgb((h + shift[b].item()) % 1.0, s, v)
                assert out[b, :, i, j].tolist() == pytest.approx(ref, abs=1e-9)


def reference_jitter(img: torch.Tensor, order: list[int], f: list[float]) -> torch.Tensor:
    """One image, torchvision formulas, written out step by step."""
    def luma(t: torch.Tensor) -> torch.Tensor:
        return 0.299 * t[0] + 0.587 * t[1] + 0.114 * t[2]

    for o in order:
        if o == 0:
            img = (img * f[0]).clamp(0, 1)
        elif o == 1:
            img = (f[1] * img + (1 - f[1]) * luma(img).mean()).clamp(0, 1)
        elif o == 2:
            img = (f[2] * img + (1 - f[2]) * luma(img)[None]).clamp(0, 1)
        else:
            img = adjust_hue(img[None], torch.tensor([f[3]], dtype=img.dtype))[0]
    return img


def test_jitter_per_sample_order_and_factors() -> None:
    torch.manual_seed(4)
    x = torch.rand(64, 3, 6, 6, dtype=torch.float64)
    jit = RandomColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8)
    out = jit(x.clone())
    prm = jit.last_params
    order = RandomColorJitter.order(prm)
    orders = {tuple(o) for o in order.tolist()}
    assert len(orders) > 10, "the order must be drawn per sample"
    assert all(sorted(o) == [0, 1, 2, 3] for o in orders)
    f = prm["factors"]
    assert (f[:, :3] >= 0.6).all() and (f[:, :3] <= 1.4).all() and (f[:, 3].abs() <= 0.1).all()
    for b in range(64):
        if prm["applied"][b]:
            ref = reference_jitter(x[b], order[b].tolist(), f[b].tolist())
        else:
            ref = x[b]
        assert torch.allclose(out[b], ref, atol=1e-10), b


def test_blur_matches_loop_and_only_selected() -> None:
    torch.manual_seed(5)
    x = torch.rand(16, 3, 9, 9, dtype=torch.float64)
    op = RandomGaussianBlur(5, (0.1, 2.0), p=0.5)
    out = op(x.clone())
    applied, sigma = op.last_params["applied"], op.last_params["sigma"]
    assert len(set(sigma.tolist())) == 16 and sigma.min() >= 0.1 and sigma.max() <= 2.0
    assert 0 < applied.sum() < 16
    for b in range(16):
        if not applied[b]:
            assert torch.equal(out[b], x[b])
            continue
        k = [math.exp(-0.5 * ((i - 2) / sigma[b].item()) ** 2) for i in range(5)]
        k = torch.tensor(k, dtype=torch.float64) / sum(k)
        assert torch.allclose(gaussian_kernels(sigma[b : b + 1], 5)[0], k)
        padded = F.pad(x[b : b + 1], (2, 2, 2, 2), mode="reflect")[0]
        ref = torch.zeros(3, 9, 9, dtype=torch.float64)
        for i in range(9):
            for j in range(9):
                patch = padded[:, i : i + 5, j : j + 5]
                ref[:, i, j] = (patch * (k[:, None] * k[None, :])).sum(dim=(1, 2))
        assert torch.allclose(out[b], ref, atol=1e-10)


def test_solarize_threshold_half() -> None:
    torch.manual_seed(6)
    x = torch.rand(N, 3, 4, 4)
    x[:, 0, 0, 0] = 0.5
    op = RandomSolarize(p=0.2)
    out = op(x.clone())
    applied = op.last_params["applied"]
    expected = torch.where(applied[:, None, None, None] & (x >= 0.5), 1 - x, x)
    assert torch.equal(out, expected)
    assert binomial_ok(applied.sum().item(), N, 0.2)


def test_grayscale_luma() -> None:
    x = torch.rand(10, 3, 4, 4)
    op = RandomGrayscale(p=1.0)
    out = op(x.clone())
    luma = 0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]
    assert torch.allclose(out, luma[:, None].expand_as(x), atol=1e-6)


# ---------------------------------------------------------------- kornia ops vs the former formulas
# The pixel ops on kornia's functional API are checked against the plain-torch formulas they
# replaced (written out again here), on random inputs, in float64 and float32.
TOL = {torch.float64: 1e-9, torch.float32: 1e-5}


def former_gray(x: torch.Tensor) -> torch.Tensor:
    r, g, b = x.unbind(1)
    return (0.299 * r + 0.587 * g + 0.114 * b).unsqueeze(1)


def former_blur(x: torch.Tensor, sigma: torch.Tensor, k: int) -> torch.Tensor:
    """Grouped separable conv2d, float64 kernels, reflect padding (the former implementation)."""
    n, ch, height, width = x.shape
    pos = torch.arange(k, dtype=torch.float64) - (k - 1) / 2
    ker = torch.exp(-0.5 * (pos[None, :] / sigma[:, None]) ** 2)
    ker = (ker / ker.sum(dim=1, keepdim=True)).to(x.dtype).repeat_interleave(ch, dim=0)
    flat, p, grp = x.reshape(1, n * ch, height, width), k // 2, n * ch
    flat = F.conv2d(F.pad(flat, (p, p, 0, 0), mode="reflect"), ker[:, None, None, :], groups=grp)
    flat = F.conv2d(F.pad(flat, (0, 0, p, p), mode="reflect"), ker[:, None, :, None], groups=grp)
    return flat.view(n, ch, height, width)


def former_crop_pad_flip(x: torch.Tensor, offsets: torch.Tensor, flip: torch.Tensor, size: int,
                         pad: int) -> torch.Tensor:
    """Zero padding + one advanced-indexing gather (the former implementation)."""
    padded = F.pad(x, (pad, pad, pad, pad))
    ar = torch.arange(size)
    cols = offsets[:, :1] + ar[None, :]
    cols = torch.where(flip[:, None], cols.flip(1), cols)
    rows = offsets[:, 1:] + ar[None, :]
    b = torch.arange(x.shape[0])[:, None, None]
    return padded[b, :, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_kornia_gray_matches_former_formula(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(11)
    x = torch.rand(7, 3, 9, 11, generator=g, dtype=torch.float64).to(dtype)
    out = gray(x)
    assert out.shape == (7, 1, 9, 11) and out.dtype == dtype
    torch.testing.assert_close(out, former_gray(x), atol=TOL[dtype], rtol=0)
    op = RandomGrayscale(p=0.5, generator=torch.Generator().manual_seed(0))
    got = op(x.clone())
    applied = op.last_params["applied"]
    assert 0 < applied.sum() < 7
    ref = torch.where(applied[:, None, None, None], former_gray(x).expand_as(x), x)
    torch.testing.assert_close(got, ref, atol=TOL[dtype], rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("k", "size"), [(3, 8), (5, 9), (7, 16), (23, 24)])
def test_kornia_blur_matches_former_formula(dtype: torch.dtype, k: int, size: int) -> None:
    g = torch.Generator().manual_seed(k)
    x = torch.rand(6, 3, size, size + 3, generator=g, dtype=torch.float64).to(dtype)
    sigma = 0.1 + 1.9 * torch.rand(6, generator=g, dtype=torch.float64)
    torch.testing.assert_close(blur(x, sigma, k), former_blur(x, sigma, k), atol=TOL[dtype], rtol=0)
    op = RandomGaussianBlur(k, p=0.5, generator=torch.Generator().manual_seed(1))
    got = op(x.clone())
    applied, sig = op.last_params["applied"], op.last_params["sigma"]
    assert 0 < applied.sum() < 6
    ref = torch.where(applied[:, None, None, None], former_blur(x, sig, k), x)
    torch.testing.assert_close(got, ref, atol=TOL[dtype], rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_kornia_solarize_matches_former_formula(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(12)
    x = torch.rand(64, 3, 5, 5, generator=g, dtype=torch.float64).to(dtype)
    x[:, :, 0, 0] = 0.5  # on the threshold: solarized
    for thr in (0.5, 0.3):
        op = RandomSolarize(p=0.5, threshold=thr, generator=torch.Generator().manual_seed(2))
        got = op(x.clone())
        applied = op.last_params["applied"]
        ref = torch.where(applied[:, None, None, None] & (x >= thr), 1.0 - x, x)
        assert torch.equal(got, ref)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("shape", "size", "pad"), [((12, 12), 12, 4), ((20, 15), 15, 4),
                                                     ((32, 40), 16, 3), ((9, 9), 9, 6)])
def test_kornia_crop_pad_flip_matches_former_gather(
    dtype: torch.dtype, shape: tuple[int, int], size: int, pad: int
) -> None:
    g = torch.Generator().manual_seed(13)
    x = torch.rand(40, 3, *shape, generator=g, dtype=torch.float64).to(dtype)
    op = RandomCropPadFlip(size, padding=pad, generator=torch.Generator().manual_seed(3))
    got = op(x)
    offsets, flip = op.last_params["offsets"], op.last_params["flip"]
    assert 0 < flip.sum() < 40 and offsets.min() == 0 and offsets.max() == 2 * pad
    resized = x if min(shape) == size else resize(x, size)
    assert got.shape == (40, 3, size, size) and got.dtype == dtype
    assert torch.equal(got, former_crop_pad_flip(resized, offsets, flip, size, pad))


# ---------------------------------------------------------------- reproducibility and devices
def test_seed_reproduces_views() -> None:
    x = torch.randint(0, 256, (16, 3, 32, 32), dtype=torch.uint8)
    pipe = A.preset("strong_gamma", 24)
    torch.manual_seed(7)
    a = pipe(x)
    torch.manual_seed(7)
    b = pipe(x)
    c = pipe(x)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


@pytest.mark.parametrize("name", ["strong_gamma", "eval_train", "simclr"])
def test_chunking_does_not_change_views(name: str) -> None:
    x = torch.randint(0, 256, (23, 3, 20, 20), dtype=torch.uint8)
    whole = A.preset(name, 16, normalize="imagenet")
    whole.chunk_pixels = None
    chunked = A.preset(name, 16, normalize="imagenet")
    chunked.chunk_pixels = 5 * 20 * 20  # chunks of 5 images
    torch.manual_seed(10)
    a = whole(x)
    torch.manual_seed(10)
    b = chunked(x)
    assert torch.equal(a, b)


def test_generator_option() -> None:
    x = torch.randint(0, 256, (16, 3, 32, 32), dtype=torch.uint8)
    a = A.preset("strong", 24, generator=torch.Generator().manual_seed(3))(x)
    torch.manual_seed(99)
    b = A.preset("strong", 24, generator=torch.Generator().manual_seed(3))(x)
    c = A.preset("strong", 24, generator=torch.Generator().manual_seed(4))(x)
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", A.preset_names())
def test_same_views_on_cuda(name: str) -> None:
    """The parameters are drawn once (the CPU call) and applied again on CUDA: the devices'
    generators differ, so seeding both alike would not give the same draws."""
    x = torch.randint(0, 256, (32, 3, 40, 40), dtype=torch.uint8)
    pipe = A.preset(name, 32, normalize="cifar10", generator=torch.Generator().manual_seed(8))
    cpu = pipe(x)
    drawn = [{k: v.cuda() for k, v in op.last_params.items()} for op in pipe.steps]
    gpu = pipe.cuda().apply_params(x.cuda(), drawn)
    assert gpu.device.type == "cuda" and gpu.dtype == torch.float32
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=0, atol=CUDA_ATOL)  # float32_floor.py


# ---------------------------------------------------------------- evaluation transforms
def test_eval_large_resize_centre_crop() -> None:
    x = torch.randint(0, 256, (3, 3, 256, 256), dtype=torch.uint8)
    pipe = A.preset("eval", 224)
    out = pipe(x)
    assert torch.equal(out, x[:, :, 16:240, 16:240].float() / 255)
    y = torch.rand(2, 3, 300, 400)
    out = pipe(y)
    resized = F.interpolate(y, size=(256, 341), mode="bilinear", antialias=True)
    assert torch.allclose(out, resized[:, :, 16:240, 58:282], atol=1e-6)
    assert torch.equal(pipe(y), out)  # deterministic


def test_eval_small_resize_only() -> None:
    x = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8)
    assert torch.equal(A.preset("eval", 32, small=True)(x), x.float() / 255)
    y = torch.rand(4, 3, 64, 64)
    out = A.preset("eval", 32, small=True)(y)
    assert torch.allclose(out, F.interpolate(y, size=(32, 32), mode="bilinear", antialias=True))


def test_eval_train_small_pad_crop_flip() -> None:
    torch.manual_seed(9)
    x = torch.rand(N, 3, 12, 12)
    pipe = A.preset("eval_train", 12, small=True)
    out = pipe(x)
    op = pipe.steps[0]
    assert isinstance(op, RandomCropPadFlip)
    offsets, flip = op.last_params["offsets"], op.last_params["flip"]
    assert offsets.min() == 0 and offsets.max() == 8
    assert binomial_ok(flip.sum().item(), N, 0.5)
    padded = F.pad(x, (4, 4, 4, 4))
    for b in range(0, N, 97):
        ox, oy = offsets[b].tolist()
        ref = padded[b, :, oy : oy + 12, ox : ox + 12]
        assert torch.equal(out[b], ref.flip(-1) if flip[b] else ref)


def test_eval_train_large_crop_scale() -> None:
    pipe = A.preset("eval_train", 16)
    pipe(torch.rand(N, 3, 50, 50))
    crop = pipe.steps[0]
    assert crop.scale == (0.08, 1.0) and len(pipe.steps) == 1
    area = crop.last_params["boxes"][:, 2:].prod(1) / 2500
    assert area.min() < 0.1 and area.min() >= 0.07


# ---------------------------------------------------------------- normalisation
def test_normalization_values() -> None:
    assert set(A.NORMALIZATION) == {"cifar10", "cifar100", "stl10", "svhn", "imagenet", "digits"}
    assert A.NORMALIZATION["imagenet"] == ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    x = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    mean, std = A.NORMALIZATION["cifar10"]
    out = A.preset("eval", 8, small=True, normalize="cifar10")(x)
    ref = (x.float() / 255 - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(-1, 1, 1)
    assert torch.allclose(out, ref, atol=1e-6)
    out = A.preset("eval", 8, small=True, normalize=((0.5,) * 3, (0.25,) * 3))(x)
    assert torch.allclose(out, (x.float() / 255 - 0.5) / 0.25, atol=1e-6)


def test_digits_normalization_matches_data() -> None:
    datasets = pytest.importorskip("sklearn.datasets")
    d = torch.from_numpy(datasets.load_digits().images)
    d = torch.round(d * 255 / 16).clamp(0, 255) / 255
    mean, std = A.NORMALIZATION["digits"]
    assert mean[0] == pytest.approx(d.mean().item(), abs=1e-4)
    assert std[0] == pytest.approx(d.std(unbiased=False).item(), abs=1e-4)


# ---------------------------------------------------------------- the kornia composition
def test_kornia_preset_and_solarize_semantics() -> None:
    K = pytest.importorskip("kornia.augmentation")
    out = A.kornia_preset("strong_gamma", 16)(torch.rand(8, 3, 20, 20))
    assert out.shape == (8, 3, 16, 16)
    x = torch.rand(4, 3, 8, 8)
    x[:, :, 0, 0] = 0.5
    sol = K.RandomSolarize(thresholds=0.0, additions=0.0, p=1.0)
    assert torch.allclose(sol(x), torch.where(x >= 0.5, 1 - x, x))
    with pytest.raises(ValueError, match="allowed"):
        A.kornia_preset("eval", 16)


def test_uint8_views_convert_inside_the_division_exactly() -> None:
    from contrastkit.data.augment._pipeline import to_float_rgb

    x = torch.arange(256, dtype=torch.uint8).view(1, 1, 16, 16).expand(1, 3, 16, 16)
    got = to_float_rgb(x.contiguous())
    assert got.dtype == torch.float32
    assert torch.equal(got, x.to(torch.float32).div_(torch.tensor(255.0)))  # the former two ops
