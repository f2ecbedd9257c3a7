"""Batched photometric augmentations with per-sample parameters (torchvision semantics).

Internal to :mod:`contrastkit.data.augment`. Inputs are float ``(B, 3, H, W)`` in [0, 1] that
the calling pipeline owns: ops write the transformed samples back **in place** (only the selected
samples are computed, gathered by indexing and written with ``index_copy_``).
Parameters are drawn on the CPU (``generator`` or torch's global CPU RNG), so they do not depend
on the device; ``last_params`` keeps the last draw.

kornia's functional API, op by op. Measured: kornia vs plain torch, CPU ms, one thread, same
run, all samples selected, 64x3x224x224 then 256x3x32x32 (``benchmarks/data_views.py --ops``,
2026-11-21, shared 2-core EPYC; rule: used if same semantics and at most 1.25x the torch op):

* kornia.color.rgb_to_grayscale: used for grayscale and for the luma that contrast and saturation
  blend with (measured 4.97 vs 7.63 ms, 0.24 vs 0.25 ms).
* kornia.filters.filter2d_separable: used for the blur, with the float64 kernels of
  :func:`gaussian_kernels` (measured 223 vs 224 ms, 2.39 vs 2.04 ms: median ratio 1.11).
* kornia.filters.gaussian_blur2d: not used because its per-call kernel building and checks cost
  ~0.5 ms of CPU (measured 203 vs 219 ms, but 2.84 vs 2.21 ms: median ratio 1.31 at 32x32).
* kornia.enhance.solarize: used, ``thresholds=threshold``, no addition (measured 101 vs 101 ms,
  3.96 vs 3.92 ms).
* kornia.enhance.adjust_brightness: not used because it adds ``f`` (torchvision multiplies);
  its multiplicative twin adjust_brightness_accumulative is slower (measured 55.1 vs 29.1 ms,
  0.21 vs 0.17 ms: a second full-size tensor for the clamp).
* kornia.enhance.adjust_contrast: not used because it is ``f x`` (a brightness);
  adjust_contrast_with_mean_subtraction has torchvision's semantics but is slower (measured
  91.3 vs 19.0 ms, 0.64 vs 0.51 ms), so the in-place blend stays, around kornia's grayscale.
* kornia.enhance.adjust_saturation: not used because it scales the HSV saturation (factor 0
  gives ``max(R, G, B)``, not the luma); adjust_saturation_with_gray_subtraction has
  torchvision's semantics but is slower (measured 69.5 vs 16.7 ms, 0.62 vs 0.53 ms).
* kornia.enhance.adjust_hue (rgb_to_hsv / hsv_to_rgb): not used because slower (measured 356 vs
  179 ms, 19.3 vs 9.8 ms); same result with ``factor = 2 pi shift`` (radians; ``shift`` here is
  in turns).
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


def gaussian_kernels(sigma: Tensor, kernel_size: int) -> Tensor:
    """Normalised 1-D Gaussian kernels ``(n, kernel_size)`` for ``n`` sigmas (float64, CPU)."""
    half = (kernel_size - 1) / 2.0
    pos = torch.arange(kernel_size, dtype=torch.float64) - half
    k = torch.exp(-0.5 * (pos[None, :] / sigma.cpu().to(torch.float64)[:, None]) ** 2)
    return k / k.sum(dim=1, keepdim=True)


def blur(x: Tensor, sigma: Tensor, kernel_size: int) -> Tensor:
    """Separable Gaussian blur, one sigma per sample, reflect padding (torchvision semantics).

    Taps ``exp(-n^2 / (2 sigma^2))``, ``n = -K//2 .. K//2``, normalised to sum 1
    (:func:`gaussian_kernels`), correlated along W then H by kornia's ``filter2d_separable``.
    """
    k = gaussian_kernels(sigma, kernel_size).to(device=x.device, dtype=x.dtype)
    return kornia_module("filters").filter2d_separable(x, k, k, border_type="reflect")


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
