"""Batched photometric augmentations with per-sample parameters (torchvision semantics).

Internal to :mod:`contrastkit.data.augment`. Inputs are float ``(B, 3, H, W)`` in [0, 1] that
the calling pipeline owns: ops write the transformed samples back **in place** (only the selected
samples are computed, gathered by indexing and written with ``index_copy_``).
Parameters are drawn on the CPU (``generator`` or torch's global CPU RNG), so they do not depend
on the device; ``last_params`` keeps the last draw.

kornia's functional API, op by op (kornia 0.9 vs the plain-torch formula, one thread, same run,
``benchmarks/data_views.py --ops``; 64x3x224x224 / 256x3x32x32; figures in benchmarks/README.md):

* kornia.color.rgb_to_grayscale: used (grayscale, and the luma that contrast and saturation blend
  with; measured 13.8 ms vs 28.6 ms and 0.30 ms vs 0.34 ms).
* kornia.filters.gaussian_blur2d: used, one sigma per sample as a ``(B, 2)`` tensor, reflect
  border (718 ms vs 724 ms and 25.5 ms vs 23.4 ms: within noise).
* kornia.enhance.solarize: used, ``thresholds=0.5``, no addition (113 ms vs 109 ms and 4.4 ms
  vs 4.2 ms).
* kornia.enhance.adjust_brightness: not used because it adds ``f`` (torchvision multiplies);
  kornia.enhance.adjust_brightness_accumulative (``clamp(f x)``) is equivalent but slower
  (55 ms vs 11.5 ms and 0.33 ms vs 0.22 ms: a second full-size tensor for the clamp).
* kornia.enhance.adjust_contrast: not used because it is ``f x`` (a brightness);
  kornia.enhance.adjust_contrast_with_mean_subtraction is equivalent but slower (70 ms vs 39 ms
  and 0.76 ms vs 0.61 ms), so the blend is kept, around kornia's grayscale.
* kornia.enhance.adjust_saturation: not used because it scales the HSV saturation (factor 0
  gives ``max(R, G, B)``, not the luma); kornia.enhance.adjust_saturation_with_gray_subtraction is
  equivalent but slower (140 ms vs 57 ms and 0.92 ms vs 0.67 ms), so the blend is kept.
* kornia.enhance.adjust_hue: not used because slower (measured 600-1645 ms vs 560-1070 ms, median
  ratio 2.2, and 34.6 ms vs 16.0 ms: RGB -> HSV -> RGB with stacked planes); same result with
  ``factor = 2 pi shift`` (radians, where ``shift`` here is in turns).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ._augment_geometry import BatchOp, Params, bernoulli, kornia_module, uniform


def gray(x: Tensor) -> Tensor:
    """Luma ``0.299 R + 0.587 G + 0.114 B`` (ITU-R 601-2, as PIL "L") as ``(B, 1, H, W)``.

    kornia's ``rgb_to_grayscale`` (default weights).
    """
    return kornia_module("color").rgb_to_grayscale(x)


def _col(f: Tensor, x: Tensor) -> Tensor:
    return f.to(device=x.device, dtype=x.dtype).view(-1, 1, 1, 1)


def adjust_brightness(x: Tensor, f: Tensor) -> Tensor:
    """``clamp(f x, 0, 1)`` per sample."""
    return x.mul(_col(f, x)).clamp_(0.0, 1.0)


def _blend(x: Tensor, other: Tensor, f: Tensor) -> Tensor:
    """``clamp(f x + (1 - f) other, 0, 1)`` (torchvision's ``_blend``)."""
    fc = _col(f, x)
    return (x * fc).add_(other * (1.0 - fc)).clamp_(0.0, 1.0)


def adjust_contrast(x: Tensor, f: Tensor) -> Tensor:
    """Blend with the mean luma of each image."""
    return _blend(x, gray(x).mean(dim=(1, 2, 3), keepdim=True), f)


def adjust_saturation(x: Tensor, f: Tensor) -> Tensor:
    """Blend with the per-pixel luma."""
    return _blend(x, gray(x), f)


def adjust_hue(x: Tensor, shift: Tensor) -> Tensor:
    """Rotate the HSV hue by ``shift`` turns (in [-0.5, 0.5]); value and saturation unchanged.

    RGB -> hue ``h`` (six sectors), ``h' = (h + shift) mod 1``, then the closed HSV -> RGB form
    ``c_n = V - (V - m) clamp(min(k, 4 - k), 0, 1)``, ``k = (n + 6 h') mod 6``, ``n = 5, 3, 1``
    for R, G, B, with ``V = max``, ``m = min``. Same result as torchvision's ``adjust_hue``.
    """
    r, g, b = x.unbind(1)
    maxc, argmax = x.max(dim=1)
    minc = x.amin(dim=1)
    delta = maxc - minc
    safe = torch.where(delta > 0, delta, torch.ones_like(delta))
    h_gb = torch.where(argmax == 1, (b - r) / safe + 2.0, (r - g) / safe + 4.0)
    h = torch.where(argmax == 0, (g - b) / safe, h_gb)
    h = h + 6.0 * _col(shift, x).squeeze(1)  # in sixths of a turn
    n = torch.tensor([5.0, 3.0, 1.0], device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    k = torch.remainder(h.unsqueeze(1) + n, 6.0)
    w = torch.minimum(k, 4.0 - k).clamp_(0.0, 1.0)
    return maxc.unsqueeze(1) - delta.unsqueeze(1) * w


_STEPS = (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue)


def apply_to(x: Tensor, mask: Tensor, fn: Callable[..., Tensor], *params: Tensor) -> Tensor:
    """Apply ``fn(x[mask], *params[mask])`` and write the result back into ``x`` in place."""
    idx = mask.nonzero().squeeze(1)
    if idx.numel() == 0:
        return x
    sub = [p[idx] for p in params]
    if idx.numel() == x.shape[0]:
        x.copy_(fn(x, *sub))
        return x
    dev_idx = idx.to(x.device)
    x.index_copy_(0, dev_idx, fn(x[dev_idx], *sub))  # x[idx]: index_select is slow on CPU
    return x


class RandomColorJitter(BatchOp):
    """Colour jitter applied with probability ``p``, factors and order drawn per sample.

    As torchvision's ``ColorJitter``: brightness, contrast and saturation factors ~
    ``U[max(0, 1 - v), 1 + v]``, hue shift ~ ``U[-hue, hue]``, the four adjustments applied in a
    random order, each followed by a clamp to [0, 1]. Unlike kornia's ``ColorJitter`` (one order
    per call, shared by the whole batch) the order is drawn **per sample**: round ``k`` applies,
    to each selected sample, the adjustment in position ``k`` of its own permutation.
    ``last_params``: ``applied`` ``(B,)``, ``factors`` ``(B, 4)``, ``order`` ``(B, 4)``.
    """

    def __init__(
        self,
        brightness: float,
        contrast: float,
        saturation: float,
        hue: float,
        p: float,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.strengths = (brightness, contrast, saturation, hue)
        self.p, self.generator = p, generator

    def sample(self, batch: int, height: int, width: int) -> Params:
        gen = self.generator
        applied = bernoulli(batch, self.p, gen)
        b, c, s, h = self.strengths
        factors = torch.stack(
            [
                uniform(batch, max(0.0, 1.0 - b), 1.0 + b, gen),
                uniform(batch, max(0.0, 1.0 - c), 1.0 + c, gen),
                uniform(batch, max(0.0, 1.0 - s), 1.0 + s, gen),
                uniform(batch, -h, h, gen),
            ],
            dim=1,
        )
        order = torch.rand(batch, 4, generator=gen).argsort(dim=1)
        return {"applied": applied, "factors": factors, "order": order}

    def apply(self, x: Tensor, params: Params) -> Tensor:
        applied, factors, order = params["applied"], params["factors"], params["order"]
        active = [v > 0 for v in self.strengths]
        for position in range(4):
            for step in range(4):
                if active[step]:
                    mask = applied & (order[:, position] == step)
                    apply_to(x, mask, _STEPS[step], factors[:, step])
        return x


class RandomGrayscale(BatchOp):
    """Replace a sample by its luma on all 3 channels with probability ``p`` (colour dropping)."""

    def __init__(self, p: float, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.p, self.generator = p, generator

    def sample(self, batch: int, height: int, width: int) -> Params:
        return {"applied": bernoulli(batch, self.p, self.generator)}

    def apply(self, x: Tensor, params: Params) -> Tensor:
        return apply_to(x, params["applied"], lambda t: gray(t).expand_as(t))


def blur(x: Tensor, sigma: Tensor, kernel_size: int) -> Tensor:
    """Separable Gaussian blur, one sigma per sample, reflect padding (torchvision semantics).

    kornia's ``gaussian_blur2d``: taps ``exp(-n^2 / (2 sigma^2))``, ``n = -K//2 .. K//2``,
    normalised to sum 1, along W then H; ``sigma`` ``(n,)`` on any device.
    """
    sig = sigma.to(dtype=x.dtype).view(-1, 1).repeat(1, 2)  # (sigma_y, sigma_x) per sample
    return kornia_module("filters").gaussian_blur2d(
        x, (kernel_size, kernel_size), sig, border_type="reflect"
    )


class RandomGaussianBlur(BatchOp):
    """Gaussian blur with probability ``p``, ``sigma ~ U[sigma_range]`` per sample, odd kernel."""

    def __init__(
        self,
        kernel_size: int,
        sigma: tuple[float, float] = (0.1, 2.0),
        p: float = 0.5,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if kernel_size % 2 != 1:
            raise ValueError(f"kernel_size must be odd, got {kernel_size}")
        self.kernel_size, self.sigma, self.p, self.generator = kernel_size, sigma, p, generator

    def sample(self, batch: int, height: int, width: int) -> Params:
        applied = bernoulli(batch, self.p, self.generator)
        return {"applied": applied, "sigma": uniform(batch, *self.sigma, self.generator)}

    def apply(self, x: Tensor, params: Params) -> Tensor:
        applied, sigma = params["applied"], params["sigma"]
        if min(x.shape[-2:]) <= self.kernel_size // 2:
            raise ValueError(
                f"RandomGaussianBlur: kernel_size={self.kernel_size} too large for {tuple(x.shape)}"
            )
        return apply_to(x, applied, lambda t, s: blur(t, s, self.kernel_size), sigma)


class RandomSolarize(BatchOp):
    """With probability ``p``, ``x -> 1 - x`` where ``x >= threshold`` (BYOL / SCE: 0.5).

    kornia's ``solarize`` (no addition) on the selected samples.
    """

    def __init__(
        self, p: float, threshold: float = 0.5, generator: torch.Generator | None = None
    ) -> None:
        super().__init__()
        self.p, self.threshold, self.generator = p, threshold, generator

    def sample(self, batch: int, height: int, width: int) -> Params:
        return {"applied": bernoulli(batch, self.p, self.generator)}

    def apply(self, x: Tensor, params: Params) -> Tensor:
        solarize, thr = kornia_module("enhance").solarize, float(self.threshold)
        return apply_to(x, params["applied"], lambda t: solarize(t, thresholds=thr))
