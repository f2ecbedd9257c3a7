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

================== ====== ==== ===== ===== ===== ===== ===== ===== ========
preset             jitter  b    c     s     h    gray   blur  solar  crop
================== ====== ==== ===== ===== ===== ===== ===== ===== ========
weak               0      -    -     -     -     0     0     0     0.2-1
strong             0.8    0.4  0.4   0.4   0.1   0.2   0.5   0     0.2-1
strong_alpha       0.8    0.4  0.4   0.2   0.1   0.2   1.0   0     0.2-1
strong_beta        0.8    0.4  0.4   0.2   0.1   0.2   0.1   0.2   0.2-1
strong_gamma       0.8    0.4  0.4   0.2   0.1   0.2   0.5   0.2   0.2-1
simclr             0.8    0.8s 0.8s  0.8s  0.2s  0.2   0.5   0     0.08-1
simclr_cifar       0.8    0.8s 0.8s  0.8s  0.2s  0.2   0     0     0.08-1
strong_alpha_cifar 0.8    0.4  0.4   0.2   0.1   0.2   0     0     0.08-1
strong_beta_cifar  0.8    0.4  0.4   0.2   0.1   0.2   0     0.2   0.08-1
vicreg_cifar       0.8    0.4  0.4   0.2   0.1   0.2   0     0.1   0.2-1
dino_local         0.8    0.4  0.4   0.2   0.1   0.2   0.5   0     0.2-1
================== ====== ==== ===== ===== ===== ===== ===== ===== ========

The three ``*_cifar`` presets after ``simclr_cifar`` are the 32 x 32 distributions of the
non-contrastive baselines, without blur: BYOL's two views with SimCLR's crop (0.08, 1)
(solo-learn's ``asymmetric.yaml`` CIFAR views, lightly's CIFAR-10 benchmark's
``BYOLView1Transform`` / ``BYOLView2Transform(gaussian_blur=0.0)`` and
``DINOTransform(gaussian_blur=(0, 0, 0))``) and solo-learn's VICReg CIFAR views (its
``vicreg.yaml``: solarization 0.1, crop (0.2, 1)); ``dino_local`` is DINO's local crops
(``DataAugmentationDINO.local_transfo``: BYOL's jitter, blur 0.5, no solarization; their crop
scale is set by the multi-crop views).

``jitter_strength`` is SimCLR's colour strength ``s`` (b = c = s_at = 0.8 s, h = 0.2 s). Table 1's
*strong* values are ``s = 0.5``, which is also the baseline of SCE's video study (Table 15:
strength 0.5 vs 0.75 vs 1.0), so the SCE presets default to ``jitter_strength=0.5`` and scale
their table values by ``jitter_strength / 0.5`` (1.0 doubles them). ``simclr`` defaults to
``s = 1.0`` (SimCLR ImageNet) and ``simclr_cifar`` to ``s = 0.5`` (SimCLR appendix B.9: CIFAR-10
uses crop scale (0.08, 1), strength 0.5 and no blur at 32x32). ``strong_alpha_cifar`` and
``strong_beta_cifar`` are BYOL's two views (strong-alpha/beta) as the CIFAR recipes of BYOL and
MoCo v3 use them: crop scale (0.08, 1), no blur (solo-learn's
``scripts/pretrain/cifar/augmentations/asymmetric.yaml``; lightly's CIFAR-10 benchmark,
``BYOLView1Transform`` / ``BYOLView2Transform`` with ``gaussian_blur=0.0``).

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
  ``tests/data/test_augment_device.py``). The colour jitter is fused into six blend rounds
  and one hue rotation whatever each sample's order (:mod:`._color`). kornia's
  functional API serves where it is exact and no dearer (the pad-crop-flip warp of
  ``eval_train``); the rest is batched torch: each private module says why, op by op. Not
  ``kornia.augmentation``: kornia 0.9's ``ColorJitter`` draws one order per *batch* (not per
  sample) and computes every op on the whole batch before blending by probability, and its
  modules measured slower than the equivalent torch expressions (``benchmarks/README.md``).
  :func:`kornia_preset` builds the same pipeline from
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

from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from ._base import BatchOp, Params
from ._color import RandomColorJitter, RandomGaussianBlur, RandomGrayscale, RandomSolarize
from ._geometry import (
    RandomCropPadFlip,
    RandomResizedCropFlip,
    ResizeCenterCrop,
    center_crop,
    resize,
)
from ._pipeline import (
    CHUNK_PIXELS,
    NORMALIZATION,
    Pipeline,
    check_batch,
    exact_float32,
    to_float_rgb,
)
from ._traced_draw import register_generator, register_ops, sample_params

__all__ = [
    "CHUNK_PIXELS",
    "NORMALIZATION",
    "PRESETS",
    "AugmentSpec",
    "Pipeline",
    "blur_kernel_size",
    "check_batch",
    "exact_float32",
    "kornia_preset",
    "preset",
    "preset_names",
    "register_generator",
    "register_ops",
    "sample_params",
    "to_float_rgb",
]

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

#: SCE Table 1 (weak, strong, strong-alpha/beta/gamma; crop scale (0.2, 1.0) of appendix D.1),
#: SimCLR (Chen et al., 2020: crop (0.08, 1), jitter 0.8 s, gray 0.2, blur 0.5; CIFAR: no blur),
#: the baselines' CIFAR views without blur (BYOL's two, crop (0.08, 1); solo-learn's VICReg)
#: and DINO's local crops.
PRESETS: dict[str, AugmentSpec] = {
    "weak": AugmentSpec(),
    "strong": replace(_STRONG, blur_p=0.5),
    "strong_alpha": replace(_BYOL, blur_p=1.0),
    "strong_beta": replace(_BYOL, blur_p=0.1, solarize_p=0.2),
    "strong_gamma": replace(_BYOL, blur_p=0.5, solarize_p=0.2),
    "simclr": _SIMCLR,
    "simclr_cifar": replace(_SIMCLR, blur_p=0.0),
    "strong_alpha_cifar": replace(_BYOL, crop_scale=(0.08, 1.0)),
    "strong_beta_cifar": replace(_BYOL, crop_scale=(0.08, 1.0), solarize_p=0.2),
    "vicreg_cifar": replace(_BYOL, solarize_p=0.1),
    "dino_local": replace(_BYOL, blur_p=0.5),
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
            ``strong_alpha_cifar``, ``strong_beta_cifar`` (BYOL's views on CIFAR),
            ``vicreg_cifar`` (solo-learn's VICReg CIFAR views), ``dino_local`` (DINO's local
            crops),
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
