"""Batched, on-device image augmentations: SCE Table 1 presets, SimCLR, evaluation transforms.

A preset is an ``nn.Module`` that maps a batch ``(B, C, H, W)`` (uint8, or float in [0, 1]) on
any device to a float batch ``(B, 3, size, size)`` on the same device, so the loader only
decodes and the accelerator augments. Every random parameter is drawn **per sample**.

Pretraining pipeline (SCE, Denize et al., Table 1; appendix D.1/D.2), in this order:

1. random resized crop to ``size`` (scale (0.2, 1.0) for SCE pretraining, ratio (3/4, 4/3)) and
   horizontal flip with probability 0.5, done together by one batched ``grid_sample``, so every
   later op runs on ``size x size`` images;
2. colour jitter with probability 0.8 and the table's brightness / contrast / saturation / hue,
   in a random order drawn per sample (torchvision semantics);
3. grayscale ("colour dropping") with probability 0.2;
4. Gaussian blur with the table's probability, ``sigma ~ U[0.1, 2.0]``, kernel ``int(0.1 size)``
   rounded up to odd (at least 3);
5. solarization with the table's probability: ``x -> 1 - x`` where ``x >= 0.5``;
6. optional normalisation (:data:`NORMALIZATION`).

============ ====== ==== ===== ===== ===== ===== ===== ===== ========
preset       jitter  b    c     s     h    gray   blur  solar  crop
============ ====== ==== ===== ===== ===== ===== ===== ===== ========
weak         0      -    -     -     -     0     0     0     0.2-1
strong       0.8    0.4  0.4   0.4   0.1   0.2   0.5   0     0.2-1
strong_alpha 0.8    0.4  0.4   0.2   0.1   0.2   1.0   0     0.2-1
strong_beta  0.8    0.4  0.4   0.2   0.1   0.2   0.1   0.2   0.2-1
strong_gamma 0.8    0.4  0.4   0.2   0.1   0.2   0.5   0.2   0.2-1
simclr       0.8    0.8s 0.8s  0.8s  0.2s  0.2   0.5   0     0.08-1
simclr_cifar 0.8    0.8s 0.8s  0.8s  0.2s  0.2   0     0     0.08-1
============ ====== ==== ===== ===== ===== ===== ===== ===== ========

``jitter_strength`` is SimCLR's colour strength ``s`` (b = c = s_at = 0.8 s, h = 0.2 s). Table 1's
*strong* values are ``s = 0.5``, which is also the baseline of SCE's video study (Table 15:
strength 0.5 vs 0.75 vs 1.0), so the SCE presets default to ``jitter_strength=0.5`` and scale
their table values by ``jitter_strength / 0.5`` (1.0 doubles them). ``simclr`` defaults to
``s = 1.0`` (SimCLR ImageNet) and ``simclr_cifar`` to ``s = 0.5`` (SimCLR appendix B.9: CIFAR-10
uses crop scale (0.08, 1), strength 0.5 and no blur at 32x32).

Evaluation transforms (SCE appendix D.1/D.2): ``eval`` (validation) resizes the shorter side to
``round(size * 256 / 224)`` and centre-crops ``size`` (256 -> 224) for large datasets, and
resizes to ``size`` for ``small=True``; ``eval_train`` is a random resized crop scale
(0.08, 1.0) + flip for large datasets and a random crop with zero padding 4 + flip for
``small=True`` (supplement D; the resize-to-resolution of D.1 is applied first when needed).

Implementation choices:

* Parameters are contrastkit's own (drawn per sample, colour-jitter order included), drawn on
  the batch's device in one call per op; every op computes on the whole batch and keeps each
  sample's own result by a blend or a mask, so a step never reads a value back on the host
  and dispatches a fixed, small number of operators (a kernel launch each on a GPU; the SCE
  two views of a 256-image 32x32 batch dispatch about 250, counted in
  ``tests/data/test_augment_dispatch.py``). The colour jitter is fused into six blend rounds
  and one hue rotation whatever each sample's order (:mod:`._augment_color`). kornia's
  functional API serves where it is exact and no dearer (the pad-crop-flip warp of
  ``eval_train``); the rest is batched torch: each private module says why, op by op. Not
  ``kornia.augmentation``: kornia 0.9's ``ColorJitter`` draws one order per *batch* (not per
  sample) and computes every op on the whole batch before blending by probability; on the
  2-core CPU here its modules were 10-25x slower than the equivalent torch expressions (see
  ``benchmarks/README.md``). :func:`kornia_preset` builds the same pipeline from
  ``kornia.augmentation`` ops for comparison (``RandomSolarize(thresholds=0.0,
  additions=0.0)`` gives exactly threshold 0.5, no addition).
* Reproducibility: parameters come from the pipeline's ``generator`` (a ``torch.Generator`` on
  the batch's device; the training engine gives each process its own) or, when None, from the
  device's default generator, so ``torch.manual_seed(s)`` before a call reproduces CPU views
  exactly. CPU and CUDA draw different random streams; given the same parameters
  (``Pipeline.draw`` / ``apply_params``) both give the same images within float tolerance.
* The pipeline works in float32 even inside an autocast region (it disables autocast itself).
* 1-channel batches are replicated to 3 channels first (the colour ops are then no-ops except
  brightness/contrast/solarize, which act on the gray image as on any image), so backbones
  always see RGB.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from ._augment_color import RandomColorJitter, RandomGaussianBlur, RandomGrayscale, RandomSolarize
from ._augment_geometry import (
    CONSTANTS,
    BatchOp,
    Params,
    RandomCropPadFlip,
    RandomResizedCropFlip,
    ResizeCenterCrop,
    center_crop,
    check_generator,
    f64,
    resize,
)

__all__ = [
    "NORMALIZATION",
    "PRESETS",
    "AugmentSpec",
    "Pipeline",
    "blur_kernel_size",
    "kornia_preset",
    "preset",
    "preset_names",
    "to_float_rgb",
]

#: Per-dataset channel mean and std of the [0, 1] training images (commonly published values;
#: ``digits`` is computed here from scikit-learn's 8x8 digits scaled as
#: :class:`contrastkit.data.Digits` does: ``round(v * 255 / 16) / 255``, gray on 3 channels).
NORMALIZATION: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "stl10": ((0.4467, 0.4398, 0.4066), (0.2603, 0.2566, 0.2713)),
    "svhn": ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970)),
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "digits": ((0.3053, 0.3053, 0.3053), (0.3759, 0.3759, 0.3759)),
}


@dataclass(frozen=True)
class AugmentSpec:
    """One pretraining distribution of SCE Table 1 (or SimCLR), before ``jitter_strength``.

    ``brightness``..``hue`` are the maximal intensities at ``base_strength``; the preset scales
    them by ``jitter_strength / base_strength``.
    """

    crop_scale: tuple[float, float] = (0.2, 1.0)
    flip_p: float = 0.5
    jitter_p: float = 0.0
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    hue: float = 0.0
    gray_p: float = 0.0
    blur_p: float = 0.0
    solarize_p: float = 0.0
    base_strength: float = 0.5


_STRONG = AugmentSpec(
    jitter_p=0.8, brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1, gray_p=0.2
)
_BYOL = replace(_STRONG, saturation=0.2)
_SIMCLR = replace(
    _STRONG, crop_scale=(0.08, 1.0), brightness=0.8, contrast=0.8, saturation=0.8, hue=0.2,
    blur_p=0.5, base_strength=1.0,
)

#: SCE Table 1 (weak, strong, strong-alpha/beta/gamma; crop scale (0.2, 1.0) of appendix D.1)
#: and SimCLR (Chen et al., 2020: crop (0.08, 1), jitter 0.8 s, gray 0.2, blur 0.5; CIFAR: no blur).
PRESETS: dict[str, AugmentSpec] = {
    "weak": AugmentSpec(),
    "strong": replace(_STRONG, blur_p=0.5),
    "strong_alpha": replace(_BYOL, blur_p=1.0),
    "strong_beta": replace(_BYOL, blur_p=0.1, solarize_p=0.2),
    "strong_gamma": replace(_BYOL, blur_p=0.5, solarize_p=0.2),
    "simclr": _SIMCLR,
    "simclr_cifar": replace(_SIMCLR, blur_p=0.0),
}
_DEFAULT_STRENGTH = {"simclr": 1.0}
_EVAL = ("eval", "eval_train")


def preset_names() -> tuple[str, ...]:
    """All names accepted by :func:`preset`."""
    return (*PRESETS, *_EVAL)


def blur_kernel_size(size: int) -> int:
    """``int(0.1 * size)`` made odd (+1 if even), at least 3: 23 for 224, 3 for 32 (SimCLR)."""
    k = int(0.1 * size)
    k += 1 - k % 2
    return max(3, k)


def to_float_rgb(x: Tensor) -> Tensor:
    """uint8 -> float32 /255 (float kept as is), 1 channel -> 3; checks the ``(B, C, H, W)``
    shape."""
    check_batch(x)
    if x.dtype == torch.uint8:
        scale = CONSTANTS.get(("u8_scale",), x, lambda: f64(255.0), torch.float32)
        x = x.to(torch.float32).div_(scale)
    return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x


def _normalization(normalize: object) -> tuple[Tensor, Tensor] | None:
    if normalize is None:
        return None
    if isinstance(normalize, str):
        if normalize not in NORMALIZATION:
            raise ValueError(
                f"normalize={normalize!r} is unknown; use one of {sorted(NORMALIZATION)}, "
                "a (mean, std) pair or None"
            )
        normalize = NORMALIZATION[normalize]
    try:
        mean, std = (torch.as_tensor(v, dtype=torch.float32).reshape(-1) for v in normalize)
    except (TypeError, ValueError) as err:
        raise ValueError(f"normalize must be a name, a (mean, std) pair or None: {err}") from err
    if mean.numel() not in (1, 3) or std.numel() not in (1, 3) or bool((std <= 0).any()):
        raise ValueError(f"normalize: need 1 or 3 means and positive stds, got {normalize!r}")
    return mean.expand(3).clone(), std.expand(3).clone()


#: On the CPU a batch is processed in chunks of about this many pixels per image plane
#: (e.g. 5 images at 224x224, 256 at 32x32): temporaries then stay in cache and are reused by
#: the allocator instead of being mapped afresh (measured 2-4x faster on a 2-core CPU). The
#: parameters are drawn for the whole batch first, so the chunking never changes the result.
CHUNK_PIXELS = 1 << 18


@contextmanager
def exact_float32() -> Iterator[None]:
    """Full float32 products inside (TF32 off for matmuls and cuDNN, restored after).

    The colour jitter and the blur are matrix products and an identity kernel must leave a
    pixel exactly as it is; with TF32 (e.g. ``torch.set_float32_matmul_precision("high")``) a
    GPU would round every product to 10 mantissa bits. Only host flags are touched.
    """
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def check_batch(x: object) -> None:
    """Raise ``ValueError`` unless ``x`` is a ``(B, 1|3, H, W)`` uint8 or float tensor.

    Reads only the shape and dtype (no operator is dispatched).
    """
    if not isinstance(x, Tensor) or x.dim() != 4 or x.shape[1] not in (1, 3):
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"batch must be a (B, 1 or 3, H, W) tensor, got {shape}")
    if x.dtype != torch.uint8 and not x.is_floating_point():
        raise ValueError(f"batch must be uint8 or float in [0, 1], got dtype {x.dtype}")


class Pipeline(nn.Module):
    """``to_float_rgb`` -> ``steps`` (in order) -> optional normalisation.

    Every step's parameters are drawn for the whole batch first (in step order, one
    ``torch.rand`` call per step, on the batch's device), then applied chunk by chunk on the CPU
    (``chunk_pixels``; None or 0: whole batch) and to the whole batch on other devices. The
    random numbers come from ``generator`` when set (a ``torch.Generator`` on the batch's
    device, e.g. one per training process), else from each step's own generator, else from the
    device's default generator (so ``torch.manual_seed`` reproduces CPU views). The pipeline
    runs in float32 (or the input's float dtype) even inside an autocast region. The first step
    always returns a new tensor, so the caller's batch is never modified. ``steps[i].last_params``
    holds the last draw.
    """

    def __init__(
        self,
        steps: Sequence[BatchOp],
        size: int,
        normalize: object = None,
        chunk_pixels: int | None = CHUNK_PIXELS,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.steps = nn.ModuleList(steps)
        self.size, self.chunk_pixels = size, chunk_pixels
        self.generator = generator
        norm = _normalization(normalize)
        self.register_buffer("mean", None if norm is None else norm[0].view(1, 3, 1, 1))
        self.register_buffer("std", None if norm is None else norm[1].view(1, 3, 1, 1))

    def step_generator(self, index: int) -> torch.Generator | None:
        """The generator step ``index`` draws from: the pipeline's, else the step's own."""
        return self.generator if self.generator is not None else self.steps[index].generator

    def draw(
        self, batch: int, height: int, width: int, device: torch.device, start: int = 0
    ) -> list[Params]:
        """The parameters of steps ``start:`` for a ``(batch, C, height, width)`` input of step
        ``start`` on ``device``."""
        params = []
        for index in range(start, len(self.steps)):
            op, generator = self.steps[index], self.step_generator(index)
            check_generator(generator, device)
            op.last_params = op.sample(batch, height, width, device=device, generator=generator)
            params.append(op.last_params)
            height, width = op.output_hw(height, width)
        return params

    def apply_params(self, x: Tensor, params: Sequence[Params], start: int = 0) -> Tensor:
        """Run steps ``start:`` on ``x`` with ``params`` from :meth:`draw` (chunked on the CPU).

        ``x`` is the raw batch for ``start == 0``, else the float output of step ``start - 1``.
        """
        check_batch(x)
        batch, pixels = x.shape[0], x.shape[-2] * x.shape[-1]
        with torch.autocast(x.device.type, enabled=False), exact_float32():
            chunk = batch
            if x.device.type == "cpu" and self.chunk_pixels:
                pixels = max(pixels, self.size * self.size)
                chunk = max(1, self.chunk_pixels // pixels)
            if chunk >= batch:
                return self._run(x, params, start)
            out = None
            for first in range(0, batch, chunk):
                part = [{k: v[first : first + chunk] for k, v in p.items()} for p in params]
                y = self._run(x[first : first + chunk], part, start)
                if out is None:
                    out = y.new_empty((batch, *y.shape[1:]))
                out[first : first + chunk] = y
            assert out is not None
            return out

    def _run(self, x: Tensor, params: Sequence[Params], start: int) -> Tensor:
        y = to_float_rgb(x) if start == 0 else x
        for op, prm in zip(self.steps[start:], params, strict=True):
            y = op.apply(y, prm)
        if self.mean is not None:
            mean, std = self.mean, self.std
            if mean.dtype != y.dtype or mean.device != y.device:  # module not moved: a copy
                mean, std = mean.to(y.device, y.dtype), std.to(y.device, y.dtype)
            y = y.sub(mean).div_(std)
        return y

    def forward(self, x: Tensor) -> Tensor:
        check_batch(x)
        params = self.draw(x.shape[0], x.shape[-2], x.shape[-1], x.device)
        return self.apply_params(x, params)

    def forward_clips(self, clips: Tensor) -> Tensor:
        """Augment clips ``(B, T, C, H, W)`` with one draw per clip shared by its ``T`` frames.

        Returns ``(B, T, 3, size, size)``. The frames are processed as one batch of ``B T``
        images whose parameters repeat each clip's draw ``T`` times, so a static video stays
        static and per-image statistics (the contrast's mean luma) are taken per frame.
        """
        if not isinstance(clips, Tensor) or clips.dim() != 5:
            shape = tuple(clips.shape) if isinstance(clips, Tensor) else type(clips).__name__
            raise ValueError(f"clips must have shape (B, T, C, H, W), got {shape}")
        batch, frames = clips.shape[:2]
        params = self.draw(batch, clips.shape[-2], clips.shape[-1], clips.device)
        shared = [{k: v.repeat_interleave(frames, dim=0) for k, v in p.items()} for p in params]
        out = self.apply_params(clips.flatten(0, 1), shared)
        return out.view(batch, frames, *out.shape[1:])


def _check_scale(name: str, scale: object) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in scale)  # type: ignore[union-attr]
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a (min, max) pair, got {scale!r}") from err
    if not 0.0 < lo <= hi <= 1.0:
        raise ValueError(f"{name} must satisfy 0 < min <= max <= 1, got {scale!r}")
    return lo, hi


def _check_size(size: object) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int, got {size!r}")
    return size


def pretrain_steps(
    spec: AugmentSpec,
    size: int,
    jitter_strength: float,
    crop_scale: tuple[float, float],
) -> list[BatchOp]:
    """The ordered ops of a pretraining preset (zero-probability ops are left out)."""
    steps: list[BatchOp] = [RandomResizedCropFlip(size, crop_scale, flip_p=spec.flip_p)]
    k = jitter_strength / spec.base_strength
    if spec.jitter_p > 0 and k > 0:
        steps.append(
            RandomColorJitter(
                spec.brightness * k, spec.contrast * k, spec.saturation * k, min(0.5, spec.hue * k),
                p=spec.jitter_p,
            )
        )
    if spec.gray_p > 0:
        steps.append(RandomGrayscale(spec.gray_p))
    if spec.blur_p > 0:
        steps.append(RandomGaussianBlur(blur_kernel_size(size), p=spec.blur_p))
    if spec.solarize_p > 0:
        steps.append(RandomSolarize(spec.solarize_p))
    return steps


class _Resize(BatchOp):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def output_hw(self, height: int, width: int) -> tuple[int, int]:
        return self.size, self.size

    def apply(self, x: Tensor, params: Params) -> Tensor:
        out = resize(x, self.size)
        if out.shape[-1] != out.shape[-2]:
            out = center_crop(out, self.size).contiguous()
        return out


def eval_steps(name: str, size: int, small: bool, crop_scale: tuple[float, float]) -> list[BatchOp]:
    """SCE appendix D.1/D.2 evaluation transforms (see the module docstring)."""
    if name == "eval":
        return [_Resize(size)] if small else [ResizeCenterCrop(round(size * 256 / 224), size)]
    if small:
        return [RandomCropPadFlip(size, padding=4)]
    return [RandomResizedCropFlip(size, crop_scale)]


_OPTIONS = {
    "jitter_strength", "crop_scale", "normalize", "generator", "small",
}


def preset(name: str, size: int, **options: object) -> Pipeline:
    """Build the augmentation pipeline ``name`` producing ``size x size`` float views.

    Args:
        name: one of :func:`preset_names`: ``weak``, ``strong``, ``strong_alpha``,
            ``strong_beta``, ``strong_gamma`` (SCE Table 1), ``simclr``, ``simclr_cifar``,
            ``eval`` (validation), ``eval_train`` (linear-evaluation training).
        size: output side in pixels.
        **options: ``jitter_strength`` (float >= 0, SimCLR strength ``s``; default 0.5 for SCE
            presets = Table 1, 1.0 for ``simclr``, 0.5 for ``simclr_cifar``); ``crop_scale``
            ((min, max) area fraction; default (0.2, 1.0) for SCE presets per appendix D.1,
            (0.08, 1.0) for ``simclr*`` and ``eval_train``); ``normalize`` (a key of
            :data:`NORMALIZATION`, a ``(mean, std)`` pair, or None, the default);
            ``generator`` (a ``torch.Generator`` on the batches' device; default: the
            device's default generator); ``small`` (bool,
            eval presets only: small-dataset protocol of SCE appendix D.1; default False).

    Returns:
        A :class:`Pipeline` mapping ``(B, 1|3, H, W)`` uint8/float to float ``(B, 3, size, size)``.

    Raises:
        ValueError: unknown name or option, or a bad option value (the message names it).
    """
    if name not in preset_names():
        raise ValueError(f"unknown augmentation preset {name!r}; allowed: {list(preset_names())}")
    size = _check_size(size)
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)} for preset {name!r}; allowed: "
                         f"{sorted(_OPTIONS)}")
    generator = options.get("generator")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {generator!r}")
    normalize = options.get("normalize")
    if name in _EVAL:
        if "jitter_strength" in options:
            raise ValueError(f"jitter_strength does not apply to preset {name!r}")
        small = options.get("small", False)
        if not isinstance(small, bool):
            raise ValueError(f"small must be True or False, got {small!r}")
        scale = _check_scale("crop_scale", options.get("crop_scale", (0.08, 1.0)))
        return Pipeline(eval_steps(name, size, small, scale), size, normalize, generator=generator)
    if "small" in options:
        raise ValueError(f"small applies only to the eval presets, not {name!r}")
    spec = PRESETS[name]
    strength = options.get("jitter_strength", _DEFAULT_STRENGTH.get(name, 0.5))
    if isinstance(strength, bool) or not isinstance(strength, int | float) or strength < 0:
        raise ValueError(f"jitter_strength must be a float >= 0, got {strength!r}")
    scale = _check_scale("crop_scale", options.get("crop_scale", spec.crop_scale))
    steps = pretrain_steps(spec, size, float(strength), scale)
    return Pipeline(steps, size, normalize, generator=generator)


def kornia_preset(name: str, size: int, jitter_strength: float | None = None) -> nn.Module:
    """The same pretraining pipeline built from ``kornia.augmentation`` ops (for comparison).

    Differences with :func:`preset`: kornia's ``ColorJitter`` draws one adjustment order per
    call (shared by the batch); every op is computed on the whole batch and blended by its
    probability. Input: float ``(B, 3, H, W)`` in [0, 1].
    """
    try:
        import kornia.augmentation as K
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("kornia_preset needs kornia: pip install 'contrastkit[data]'") from err
    if name not in PRESETS:
        raise ValueError(f"unknown augmentation preset {name!r}; allowed: {list(PRESETS)}")
    spec = PRESETS[name]
    s = _DEFAULT_STRENGTH.get(name, 0.5) if jitter_strength is None else jitter_strength
    k = s / spec.base_strength
    ops: list[nn.Module] = [
        K.RandomResizedCrop((size, size), scale=spec.crop_scale),
        K.RandomHorizontalFlip(p=spec.flip_p),
    ]
    if spec.jitter_p > 0:
        ops.append(K.ColorJitter(spec.brightness * k, spec.contrast * k, spec.saturation * k,
                                 spec.hue * k, p=spec.jitter_p))
    if spec.gray_p > 0:
        ops.append(K.RandomGrayscale(p=spec.gray_p))
    if spec.blur_p > 0:
        kernel = blur_kernel_size(size)
        ops.append(K.RandomGaussianBlur((kernel, kernel), (0.1, 2.0), p=spec.blur_p))
    if spec.solarize_p > 0:
        ops.append(K.RandomSolarize(thresholds=0.0, additions=0.0, p=spec.solarize_p))
    return nn.Sequential(*ops)
