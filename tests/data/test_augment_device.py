"""The augmentations as a GPU runs them: parameters drawn on the device, a fixed small number of
dispatched operators, no host reads, autocast, and the same images for the same parameters."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
import torch
from float32_floor import CUDA_ATOL, float32_floor
from torch.profiler import ProfilerActivity, profile

from contrastkit.data import augment as A
from contrastkit.data.augment import views as V
from contrastkit.data.augment._base import check_generator
from contrastkit.data.augment._color import (
    ORDERS,
    RandomColorJitter,
    RandomGaussianBlur,
    RandomGrayscale,
)
from contrastkit.data.augment._geometry import RandomResizedCropFlip, crop_boxes_from_uniforms
from contrastkit.data.augment.views import build_train_views
from contrastkit.data.specs import ViewsSpec

pytestmark = pytest.mark.usefixtures("one_thread")


def sce_views() -> torch.nn.Module:
    """The SCE CIFAR views of the training engine: strong online, weak target, normalised."""
    return build_train_views(ViewsSpec(size=32, normalize="cifar10"), ("strong", "weak"))


def dispatched(fn) -> list[str]:
    """Every aten operator ``fn`` dispatches (nested ones included), as torch.profiler lists."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return [e.name for e in prof.events() if e.name.startswith("aten::")]


# ---------------------------------------------------------------- operator count, host reads
def test_sce_two_views_dispatch_at_most_300_operators() -> None:
    views = sce_views()
    x = torch.randint(0, 256, (256, 3, 32, 32), dtype=torch.uint8)
    views(x)  # constants are built on the first call
    ops = dispatched(lambda: views(x))
    assert len(ops) <= 300, Counter(ops).most_common(10)


#: Operators that read a device value back on the host (a synchronisation on a GPU).
HOST_READS = {"aten::_local_scalar_dense", "aten::item", "aten::nonzero", "aten::is_nonzero",
              "aten::equal", "aten::unique", "aten::_unique2", "aten::masked_select"}


@pytest.mark.parametrize("kind", ["sce", "simclr", "sce_imagenet", "multicrop"])
def test_views_never_read_device_values(kind: str) -> None:
    views = V.make_views(kind, 24, normalize="imagenet")
    x = torch.randint(0, 256, (16, 3, 28, 28), dtype=torch.uint8)
    views(x)
    assert not HOST_READS & set(dispatched(lambda: views(x)))


def test_parameters_are_drawn_in_one_call_per_op() -> None:
    pipe = A.preset("strong_gamma", 16)
    ops = dispatched(lambda: pipe.draw(8, 20, 20, torch.device("cpu")))
    assert ops.count("aten::rand") == len(pipe.steps)


# ---------------------------------------------------------------- autocast
@pytest.mark.parametrize("kind", ["sce", "simclr", "multicrop"])
def test_views_inside_bf16_autocast(kind: str) -> None:
    views = V.make_views(kind, 16, normalize="cifar10")
    x = torch.randint(0, 256, (6, 3, 20, 20), dtype=torch.uint8)
    torch.manual_seed(3)
    plain = views(x)
    torch.manual_seed(3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = views(x)
    for a, b in zip(plain, mixed, strict=True):
        assert b.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


# ---------------------------------------------------------------- generators
def test_pipeline_generator_reproduces_and_overrides_global_rng() -> None:
    x = torch.randint(0, 256, (8, 3, 24, 24), dtype=torch.uint8)
    a = A.preset("strong", 16, generator=torch.Generator().manual_seed(5))(x)
    torch.manual_seed(123)
    b = A.preset("strong", 16, generator=torch.Generator().manual_seed(5))(x)
    assert torch.equal(a, b)
    pipe = A.preset("strong", 16)
    pipe.generator = torch.Generator().manual_seed(5)
    assert torch.equal(pipe(x), a)


def test_generator_on_another_device_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="generator is on cpu but the batch is on cuda"):
        check_generator(torch.Generator(), torch.device("cuda", 0))
    check_generator(torch.Generator(), torch.device("cpu"))  # same device: fine


# ---------------------------------------------------------------- distributions
def torchvision_box(u: list[float], height: int, width: int, scale: tuple[float, float],
                    ratio: tuple[float, float], attempts: int = 10) -> tuple[float, ...]:
    """torchvision's RandomResizedCrop.get_params written as a loop, reading the same uniforms:
    u[a] the area fraction, u[A + a] the log ratio of attempt a, u[2A], u[2A + 1] the offsets."""
    area = height * width
    for a in range(attempts):
        target = area * (scale[0] + (scale[1] - scale[0]) * u[a])
        log_r = math.log(ratio[0]) + (math.log(ratio[1]) - math.log(ratio[0])) * u[attempts + a]
        aspect = math.exp(log_r)
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            x0 = math.floor(u[2 * attempts] * (width - w + 1))
            y0 = math.floor(u[2 * attempts + 1] * (height - h + 1))
            return (x0, y0, w, h)
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, round(width / min(ratio))
    elif in_ratio > max(ratio):
        w, h = round(height * max(ratio)), height
    else:
        w, h = width, height
    return ((width - w) // 2, (height - h) // 2, w, h)


@pytest.mark.parametrize(("height", "width", "scale"), [(32, 32, (0.2, 1.0)), (40, 90, (0.08, 1.0)),
                                                        (100, 30, (0.9, 1.0)), (7, 5, (0.2, 1.0))])
def test_crop_boxes_equal_torchvision_loop(height: int, width: int,
                                           scale: tuple[float, float]) -> None:
    ratio = (3 / 4, 4 / 3)
    u = torch.rand(500, 22, generator=torch.Generator().manual_seed(height), dtype=torch.float64)
    boxes = crop_boxes_from_uniforms(u, height, width, scale, ratio)
    for row, box in zip(u.tolist(), boxes.tolist(), strict=True):
        assert tuple(box) == pytest.approx(torchvision_box(row, height, width, scale, ratio))


def test_crop_fallback_is_reached_and_centred() -> None:
    # a very wide image: no attempt of ratio <= 4/3 at scale >= 0.9 fits, every box falls back
    u = torch.rand(50, 22, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    boxes = crop_boxes_from_uniforms(u, 10, 100, (0.9, 1.0), (3 / 4, 4 / 3))
    assert torch.equal(boxes, torch.tensor([[43.0, 0.0, 13.0, 10.0]]).expand(50, 4))


def test_jitter_order_is_uniform_over_the_24_permutations() -> None:
    op = RandomColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8)
    n = 24_000
    params = op.sample(n, 4, 4, generator=torch.Generator().manual_seed(1))
    counts = torch.bincount(params["perm"], minlength=24)
    assert len(counts) == 24 and counts.sum() == n
    # each count is Binomial(n, 1/24): within 5 standard deviations of 1000
    assert (counts - n / 24).abs().max() <= 5 * math.sqrt(n / 24 * 23 / 24)
    orders = RandomColorJitter.order(params)
    assert {tuple(o) for o in orders.tolist()} == set(ORDERS)
    f = params["factors"]
    assert f[:, :3].min() >= 0.6 and f[:, :3].max() <= 1.4 and f[:, 3].abs().max() <= 0.1
    for column, (lo, hi) in enumerate([(0.6, 1.4)] * 3 + [(-0.1, 0.1)]):
        mean = f[:, column].mean().item()  # uniform: mean (lo + hi) / 2, sd (hi - lo) / sqrt(12 n)
        assert abs(mean - (lo + hi) / 2) <= 5 * (hi - lo) / math.sqrt(12 * n)
    assert torch.equal(f[:, 4], torch.ones(n, dtype=f.dtype))


def test_blur_sigma_is_uniform_on_its_range() -> None:
    n = 20_000
    params = RandomGaussianBlur(3, (0.1, 2.0), p=0.5).sample(
        n, 8, 8, generator=torch.Generator().manual_seed(2))
    sigma = params["sigma"]
    assert sigma.min() >= 0.1 and sigma.max() < 2.0
    hist = torch.histc(sigma, bins=10, min=0.1, max=2.0)
    assert (hist - n / 10).abs().max() <= 5 * math.sqrt(n / 10)


# ---------------------------------------------------------------- same parameters, same images
def test_fused_two_views_equal_separate_pipelines_for_the_same_parameters() -> None:
    views = sce_views()
    x = torch.randint(0, 256, (12, 3, 40, 40), dtype=torch.uint8)
    torch.manual_seed(4)
    fused = views(x)
    for view, pipe in zip(fused, (views.online, views.target), strict=True):
        params = [op.last_params for op in pipe.steps]
        alone = pipe.apply_params(x, params)
        torch.testing.assert_close(view, alone, rtol=0, atol=1e-6)


def test_fused_crops_follow_the_separate_distribution() -> None:
    views = sce_views()
    x = torch.randint(0, 256, (4000, 3, 8, 8), dtype=torch.uint8)
    views(x)
    online, target = (p.steps[0].last_params for p in (views.online, views.target))
    assert not torch.equal(online["boxes"], target["boxes"])  # independent draws per view
    for prm in (online, target):
        area = prm["boxes"][:, 2:].prod(1) / 64
        assert area.min() >= 0.2 - 0.1 and area.max() <= 1.0
        flips = prm["flip"].sum().item()
        assert abs(flips - 2000) <= 5 * math.sqrt(1000)


@pytest.mark.parametrize("name", A.preset_names())
def test_parameters_move_between_devices_unchanged(name: str) -> None:
    """Given the same parameters, a pipeline gives the same images whatever drew them (here:
    parameters drawn by one generator, applied by another pipeline object)."""
    x = torch.randint(0, 256, (10, 3, 36, 36), dtype=torch.uint8)
    pipe = A.preset(name, 32, normalize="cifar10", generator=torch.Generator().manual_seed(7))
    out = pipe(x)
    params = [op.last_params for op in pipe.steps]
    other = A.preset(name, 32, normalize="cifar10")
    torch.testing.assert_close(other.apply_params(x, params), out, rtol=0, atol=0)


@pytest.mark.parametrize("name", A.preset_names())
def test_float32_floor_is_below_half_the_cuda_tolerance(name: str) -> None:
    """The CUDA tests' tolerance is justified by the float32 floor (float32_floor.py)."""
    x = torch.randint(0, 256, (32, 3, 40, 40), dtype=torch.uint8,
                      generator=torch.Generator().manual_seed(0))
    floor = float32_floor(name, x)
    assert 0 < floor <= CUDA_ATOL / 2, floor


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", A.preset_names())
def test_same_parameters_same_views_on_cuda(name: str) -> None:
    x = torch.randint(0, 256, (32, 3, 40, 40), dtype=torch.uint8)
    pipe = A.preset(name, 32, normalize="cifar10")
    params = pipe.draw(32, 40, 40, torch.device("cpu"))
    cpu = pipe.apply_params(x, params)
    moved = [{k: v.cuda() for k, v in p.items()} for p in params]
    gpu = pipe.cuda().apply_params(x.cuda(), moved)
    assert gpu.device.type == "cuda" and gpu.dtype == torch.float32
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=0, atol=CUDA_ATOL)  # float32_floor.py
    with torch.no_grad():  # and the draw itself runs on the GPU, from a CUDA generator
        pipe.generator = torch.Generator(device="cuda").manual_seed(0)
        assert pipe(x.cuda()).device.type == "cuda"


def test_grayscale_and_jitter_keep_untouched_samples_exactly() -> None:
    x = torch.rand(64, 3, 6, 6, generator=torch.Generator().manual_seed(8))
    gray = RandomGrayscale(0.5)
    out = gray(x)
    kept = ~gray.last_params["applied"]
    assert torch.equal(out[kept], x[kept])
    jitter = RandomColorJitter(0.4, 0.4, 0.4, 0.0, p=0.5)  # no hue: blends only, exact identity
    out = jitter(x)
    kept = ~jitter.last_params["applied"]
    assert torch.equal(out[kept], x[kept])


def test_random_resized_crop_shares_torchvision_distribution_in_practice() -> None:
    """Monte-Carlo: the op's mean box area matches the torchvision loop's on the same size."""
    rng = random.Random(0)
    ref = [torchvision_box([rng.random() for _ in range(22)], 30, 50, (0.2, 1.0), (0.75, 4 / 3))
           for _ in range(4000)]
    op = RandomResizedCropFlip(16, (0.2, 1.0))
    boxes = op.sample(4000, 30, 50, generator=torch.Generator().manual_seed(9))["boxes"]
    ours = (boxes[:, 2] * boxes[:, 3]).mean().item() / 1500
    theirs = sum(w * h for _, _, w, h in ref) / len(ref) / 1500
    assert abs(ours - theirs) < 0.02
