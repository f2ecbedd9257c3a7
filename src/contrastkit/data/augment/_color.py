"""Batched photometric augmentations with per-sample parameters (torchvision semantics).

Internal to :mod:`contrastkit.data.augment`. Inputs are float ``(B, 3, H, W)`` in [0, 1] that
the calling pipeline owns. Every op computes on the whole batch and keeps each sample's own
result by a blend or a ``torch.where`` mask, so nothing is read back on the host and the number
of dispatched operators does not depend on how many samples were selected. Parameters are drawn
on the batch's device, one ``torch.rand`` call per op (see :mod:`._base`);
``last_params`` keeps the last draw.

Colour jitter, fused (SCE Table 1, torchvision's ``ColorJitter`` with a random order per
sample). Brightness, contrast and saturation are the same blend
``clamp(f x + (1 - f) o, 0, 1)`` with ``o = 0``, the image's mean luma or the pixel's luma, so
one *round* ``clamp(lerp(a L + c mean(L), x, f), 0, 1)`` (``L`` the luma) performs, per sample,
any one of them or nothing (``f = 1``). The hue rotation is not a blend. A sample's order
places its hue shift after ``k`` of its three blends (``k`` from 0 to 3); the jitter therefore
runs three rounds holding each sample's blends *before* its hue (round ``r`` applies blend
``r`` when ``r < k``), one hue rotation, then three rounds holding the blends *after* it: six
rounds and one hue rotation for every possible order, instead of computing each of the four
operations at each of the four positions.

Other ops: grayscale (``where``), Gaussian blur as two batched matrix products with per-sample
banded matrices that fold in the reflect padding (exact float32 products, unlike cuDNN's TF32
convolutions), solarize (``where``). kornia's functional API is not used for these any more:
each of its calls dispatched several times the operators of the expressions here, which is what
a GPU pays for at 32x32 (``benchmarks/augment_ops.py``).
"""

from __future__ import annotations

import itertools

import torch
from torch import Tensor

from ._base import CONSTANTS, BatchOp, Params, draw, f64

#: ITU-R 601-2 luma weights of R, G, B (PIL's "L" conversion, torchvision's rgb_to_grayscale).
LUMA = (0.299, 0.587, 0.114)


def _luma_weights(x: Tensor) -> Tensor:
    return CONSTANTS.get(("luma",), x, lambda: f64(LUMA).view(1, 3, 1, 1))


def gray(x: Tensor) -> Tensor:
    """Luma ``0.299 R + 0.587 G + 0.114 B`` of ``(B, 3, H, W)`` as ``(B, 1, H, W)``."""
    return (x * _luma_weights(x)).sum(dim=1, keepdim=True)


def _col(f: Tensor | float, x: Tensor) -> Tensor:
    """A per-sample value as a ``(B, 1, 1, 1)`` tensor in ``x``'s dtype (a number: every sample)."""
    if not isinstance(f, Tensor):
        return x.new_full((x.shape[0], 1, 1, 1), float(f))
    return f.to(dtype=x.dtype).view(-1, 1, 1, 1)


# One adjustment alone, for comparisons and tests; the jitter runs them as blend rounds.
def adjust_brightness(x: Tensor, f: Tensor) -> Tensor:
    """``clamp(f x, 0, 1)`` per sample (:func:`blend_round` with nothing to blend with)."""
    return blend_round(x, _col(f, x), _col(0.0, x), _col(0.0, x))


def adjust_contrast(x: Tensor, f: Tensor) -> Tensor:
    """Blend with the mean luma of each image (:func:`blend_round`)."""
    return blend_round(x, _col(f, x), _col(0.0, x), _col(1.0 / (x.shape[-2] * x.shape[-1]), x))


def adjust_saturation(x: Tensor, f: Tensor) -> Tensor:
    """Blend with the per-pixel luma (:func:`blend_round`)."""
    return blend_round(x, _col(f, x), _col(1.0, x), _col(0.0, x))


def adjust_hue(x: Tensor, shift: Tensor) -> Tensor:
    """Rotate the HSV hue by ``shift`` turns (in [-0.5, 0.5]); value and saturation unchanged.

    RGB -> hue ``h`` in sixths of a turn: ``(G - B) / d`` where R is the maximum, ``(B - R) / d
    + 2`` where G is, ``(R - G) / d + 4`` where B is (``d = max - min``; the first maximum
    wins ties, as ``colorsys``); ``h' = h + 6 shift``; then the closed HSV -> RGB form
    ``c_n = V - d clamp(min(k, 4 - k), 0, 1)``, ``k = (n + h') mod 6``, ``n = 5, 3, 1`` for R, G,
    B, with ``V = max``. Gray pixels (``d = 0``) stay as they are. Same result as torchvision's
    ``adjust_hue``.

    Args:
        x: ``(B, 3, H, W)`` in [0, 1].
        shift: ``(B,)`` shifts in turns (or anything viewable as ``(B, 1, 1, 1)``).
    """
    maxc, argmax = x.max(dim=1, keepdim=True)
    delta = maxc - x.amin(dim=1, keepdim=True)
    lead = CONSTANTS.get(("hue_lead",), x, lambda: f64([1, 2, 0]), torch.long)
    lag = CONSTANTS.get(("hue_lag",), x, lambda: f64([2, 0, 1]), torch.long)
    sector = CONSTANTS.get(("hue_sector",), x,
                           lambda: f64([0.0, 2.0, 4.0]).view(1, 3, 1, 1))
    # (G - B, B - R, R - G) / d + (0, 2, 4): the hue for each possible maximum channel.
    diffs = x.index_select(1, lead).sub_(x.index_select(1, lag))
    hue = diffs.div_(delta.clamp_min(torch.finfo(x.dtype).tiny)).add_(sector).gather(1, argmax)
    hue.add_(shift.view(-1, 1, 1, 1) if shift.dim() != 4 else shift, alpha=6.0)
    offsets = CONSTANTS.get(("hue_offsets",), x,
                            lambda: f64([5.0, 3.0, 1.0]).view(1, 3, 1, 1))
    six = CONSTANTS.get(("six",), x, lambda: f64(6.0))
    four = CONSTANTS.get(("four",), x, lambda: f64(4.0))
    k = torch.remainder(hue + offsets, six)
    w = torch.minimum(k, torch.sub(four, k)).clamp_(*_unit_bounds(x))
    return torch.addcmul(maxc, delta, w, value=-1.0)


def blend_round(x: Tensor, f: Tensor, saturation: Tensor, contrast: Tensor) -> Tensor:
    """One jitter round: ``clamp(lerp(s L + c sum(L), x, f), 0, 1)`` per sample.

    ``L`` is the pixel luma and ``sum(L)`` its sum over the image. With ``(s, c) = (0, 0)`` this
    is brightness ``f``; ``(0, 1 / (H W))`` contrast ``f`` (the blend with the mean luma);
    ``(1, 0)`` saturation ``f``; ``f = 1`` leaves the sample unchanged (exactly: ``lerp``
    returns its end point at weight 1). Arguments are ``(B, 1, 1, 1)`` in ``x``'s dtype.
    """
    luma = gray(x)
    other = torch.addcmul(luma.sum(dim=(2, 3), keepdim=True).mul_(contrast), luma, saturation)
    return torch.lerp(other, x, f).clamp_(*_unit_bounds(x))


def _unit_bounds(x: Tensor) -> tuple[Tensor, Tensor]:
    return (CONSTANTS.get(("zero",), x, lambda: f64(0.0)),
            CONSTANTS.get(("one",), x, lambda: f64(1.0)))


#: Adjustment codes of :class:`RandomColorJitter`: positions in ``factors`` and in an order
#: (``NONE``: the slot of a round that changes nothing).
BRIGHTNESS, CONTRAST, SATURATION, HUE, NONE = 0, 1, 2, 3, 4

#: The 24 orders of the four adjustments (row ``i``: the adjustment at each position).
ORDERS: tuple[tuple[int, ...], ...] = tuple(itertools.permutations(range(4)))


def _round_table(with_hue: bool) -> Tensor:
    """``(24, R + 1)``: for each order, the slot each blend round runs (0-2: a blend, 4: none),
    then 3 (the hue slot, whose factor is the hue shift).

    Without hue, R = 3 rounds hold the three blends in order. With hue, R = 6: rounds 0-2 hold
    the blends placed before the hue shift, rounds 3-5 those after it (module docstring).
    """
    rows = []
    for order in ORDERS:
        blends = [a for a in order if a != HUE]
        if with_hue:
            k = order.index(HUE)
            blends = blends[:k] + [NONE] * (3 - k) + [NONE] * k + blends[k:]
        rows.append([*blends, HUE])
    return torch.tensor(rows, dtype=torch.long)


class RandomColorJitter(BatchOp):
    """Colour jitter applied with probability ``p``, factors and order drawn per sample.

    As torchvision's ``ColorJitter``: brightness, contrast and saturation factors ~
    ``U[max(0, 1 - v), 1 + v]``, hue shift ~ ``U[-hue, hue]``, the four adjustments applied in a
    random order, each followed by a clamp to [0, 1]. Unlike kornia's ``ColorJitter`` (one order
    per call, shared by the whole batch) the order is drawn **per sample**, uniformly among the
    24 permutations (:data:`ORDERS`, index ``perm``). See the module docstring for how every
    order runs as six blend rounds and one hue rotation.
    ``last_params``: ``applied`` ``(B,)``, ``factors`` ``(B, 5)`` (brightness, contrast,
    saturation, hue shift, then a constant 1), ``perm`` ``(B,)`` (``order(params)`` gives the
    ``(B, 4)`` orders).
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
        super().__init__(generator)
        self.strengths = (brightness, contrast, saturation, hue)
        self.p = p

    def sample(self, batch, height, width, *, device="cpu", generator=None) -> Params:
        u = draw(batch, 7, torch.device(device), generator)
        b, c, s, h = self.strengths
        # columns 1-5 of u: brightness, contrast, saturation, hue shift, and a constant 1 (the
        # "no adjustment" slot of round_parameters, drawn in the same call)
        low = CONSTANTS.get(("jitter_low", *self.strengths), u, lambda: f64(
            [max(0.0, 1.0 - b), max(0.0, 1.0 - c), max(0.0, 1.0 - s), -h, 1.0]))
        span = CONSTANTS.get(("jitter_span", *self.strengths), u, lambda: f64(
            [1.0 + b - max(0.0, 1.0 - b), 1.0 + c - max(0.0, 1.0 - c),
             1.0 + s - max(0.0, 1.0 - s), 2.0 * h, 0.0]))
        orders = CONSTANTS.get(("jitter_count",), u, lambda: f64(float(len(ORDERS))))
        factors = torch.addcmul(low, u[:, 1:6], span)
        perm = torch.mul(u[:, 6], orders).long()  # uniform over the 24 orders
        return {"applied": u[:, 0] < self.p, "factors": factors, "perm": perm}

    @staticmethod
    def order(params: Params) -> Tensor:
        """``(B, 4)``: the adjustment at each position of every sample's order."""
        table = CONSTANTS.get(("jitter_orders",), params["perm"], lambda: torch.tensor(ORDERS))
        return table[params["perm"]]

    def round_parameters(self, params: Params, pixels: int, dtype: torch.dtype) -> list[Tensor]:
        """``(f, s, c)`` of every blend round (:func:`blend_round`), ``(B, 1, 1, 1)`` each.

        Rounds that run no blend of a sample (:func:`_round_table`), adjustments of strength 0
        and samples not selected get ``f = 1`` (no change). With hue the list ends with the
        hue shifts, ``(B, 1, 1, 1)``.
        """
        applied, factors, perm = params["applied"], params["factors"], params["perm"]
        use_hue = self.strengths[3] > 0
        table = CONSTANTS.get(("jitter_rounds", use_hue), perm, lambda: _round_table(use_hue))
        which = table[perm]  # (B, R + 1): slot of each round (4: none), then 3 (the hue shift)
        # Per sample, five "slots" (brightness, contrast, saturation, hue, none) with a factor:
        # the drawn one where the sample is jittered and the adjustment has a strength, else 1
        # (no change); for the hue slot the shift, else 0; for "none" 1.
        strengths = self.strengths
        active = CONSTANTS.get(("jitter_active", *strengths), factors, lambda: torch.tensor(
            [v > 0 for v in strengths[:3]] + [True, False]), torch.bool)
        fill = CONSTANTS.get(("jitter_fill",), factors, lambda: f64([1.0, 1.0, 1.0, 0.0, 1.0]))
        f = torch.where(applied.unsqueeze(1) & active, factors, fill)
        # (f, s, c) of each slot: brightness (f, 0, 0), contrast (f, 0, 1 / HW), saturation
        # (f, 1, 0), hue (shift, 0, 0), none (1, 0, 0).
        basis = CONSTANTS.get(("blend_basis", pixels), factors, lambda: f64(
            [[0.0, 0.0, 0.0], [0.0, 0.0, 1.0 / pixels], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0],
             [0.0, 0.0, 0.0]]))
        first = CONSTANTS.get(("blend_first",), factors, lambda: f64([1.0, 0.0, 0.0]))
        triples = torch.addcmul(basis, f.unsqueeze(2), first)  # (B, 5, 3)
        per_round = triples.gather(1, which.unsqueeze(2).expand(-1, -1, 3))  # (B, R + 1, 3)
        # one (B, 1, 1, 1) view per column of the (B, K) block: as_strided views cost one
        # operator each where indexing costs two.
        flat = per_round.view(per_round.shape[0], -1).to(dtype)
        batch, width = flat.shape
        count = width - 2 if use_hue else width - 3
        return [flat.as_strided((batch, 1, 1, 1), (width, 1, 1, 1), i) for i in range(count)]

    def apply(self, x: Tensor, params: Params) -> Tensor:
        coeffs = self.round_parameters(params, x.shape[-2] * x.shape[-1], x.dtype)
        for i in range(0, 9, 3):
            x = blend_round(x, *coeffs[i : i + 3])
        if len(coeffs) > 9:
            # every sample is rotated: a shift of 0 is the identity (to float rounding) for
            # the samples without jitter
            x = adjust_hue(x, coeffs[18])
            for i in range(9, 18, 3):
                x = blend_round(x, *coeffs[i : i + 3])
        return x


class RandomGrayscale(BatchOp):
    """Replace a sample by its luma on all 3 channels with probability ``p`` (colour dropping)."""

    def __init__(self, p: float, generator: torch.Generator | None = None) -> None:
        super().__init__(generator)
        self.p = p

    def sample(self, batch, height, width, *, device="cpu", generator=None) -> Params:
        return {"applied": draw(batch, 1, torch.device(device), generator)[:, 0] < self.p}

    def apply(self, x: Tensor, params: Params) -> Tensor:
        return torch.where(params["applied"].view(-1, 1, 1, 1), gray(x), x)


def gaussian_kernels(sigma: Tensor, kernel_size: int) -> Tensor:
    """Normalised 1-D Gaussian kernels ``(n, kernel_size)`` for ``n`` sigmas, in sigma's dtype:
    taps ``exp(-t^2 / (2 sigma^2))``, ``t = -K//2 .. K//2``, divided by their sum."""
    half = (kernel_size - 1) / 2.0
    exponents = CONSTANTS.get(
        ("blur_exponents", kernel_size), sigma,
        lambda: (torch.arange(kernel_size, dtype=torch.float64) - half) ** 2 * -0.5)
    k = torch.mul(torch.mul(sigma, sigma).reciprocal_().unsqueeze(1), exponents).exp_()
    return k / k.sum(dim=1, keepdim=True)


def _reflect_taps(size: int, kernel_size: int) -> Tensor:
    """``(K, size * size)``: tap ``t`` of output pixel ``i`` reads input ``j`` (row ``i``, col
    ``j``), with reflect padding (``-1 -> 1``, ``size -> size - 2``), as a one-hot placement."""
    half = kernel_size // 2
    taps = torch.zeros(kernel_size, size, size, dtype=torch.float64)
    for t in range(kernel_size):
        for i in range(size):
            j = i + t - half
            j = -j if j < 0 else (2 * (size - 1) - j if j >= size else j)
            taps[t, i, j] += 1.0
    return taps.view(kernel_size, size * size)


def blur_matrices(kernels: Tensor, size: int, like: Tensor) -> Tensor:
    """``(B, size, size)`` in ``like``'s dtype: row ``i`` holds the weights output pixel ``i``
    gives each input pixel (the kernel centred on ``i``, reflect padding folded in)."""
    taps = CONSTANTS.get(("blur_taps", size, kernels.shape[1]), kernels,
                         lambda: _reflect_taps(size, kernels.shape[1]))
    return torch.mm(kernels, taps).view(-1, size, size).to(like.dtype)


def blur(x: Tensor, sigma: Tensor, kernel_size: int) -> Tensor:
    """Separable Gaussian blur, one sigma per sample, reflect padding (torchvision semantics).

    Taps ``exp(-n^2 / (2 sigma^2))``, ``n = -K//2 .. K//2``, normalised to sum 1
    (:func:`gaussian_kernels`), applied along W then H as two batched matrix products with the
    banded matrices of :func:`blur_matrices`: ``out = M_H x M_W^T`` per sample and channel.
    The result is a ``(B, C, H, W)`` view of an ``(B, H, C, W)`` buffer.
    """
    batch, channels, height, width = x.shape
    kernels = gaussian_kernels(sigma, kernel_size)
    m_w = blur_matrices(kernels, width, x)
    m_h = m_w if height == width else blur_matrices(kernels, height, x)
    rows = torch.bmm(x.reshape(batch, channels * height, width), m_w.transpose(1, 2))
    by_row = rows.view(batch, channels, height, width).transpose(1, 2)  # (B, H, C, W)
    out = torch.bmm(m_h, by_row.reshape(batch, height, channels * width))
    return out.view(batch, height, channels, width).transpose(1, 2)


class RandomGaussianBlur(BatchOp):
    """Gaussian blur with probability ``p``, ``sigma ~ U[sigma_range]`` per sample, odd kernel."""

    def __init__(
        self,
        kernel_size: int,
        sigma: tuple[float, float] = (0.1, 2.0),
        p: float = 0.5,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(generator)
        if kernel_size % 2 != 1:
            raise ValueError(f"kernel_size must be odd, got {kernel_size}")
        self.kernel_size, self.sigma, self.p = kernel_size, sigma, p

    def sample(self, batch, height, width, *, device="cpu", generator=None) -> Params:
        u = draw(batch, 2, torch.device(device), generator)
        lo, hi = self.sigma
        return {"applied": u[:, 0] < self.p, "sigma": u[:, 1].mul(hi - lo).add_(lo)}

    def apply(self, x: Tensor, params: Params) -> Tensor:
        if min(x.shape[-2:]) <= self.kernel_size // 2:
            raise ValueError(
                f"RandomGaussianBlur: kernel_size={self.kernel_size} too large for {tuple(x.shape)}"
            )
        blurred = blur(x, params["sigma"], self.kernel_size)
        return torch.where(params["applied"].view(-1, 1, 1, 1), blurred, x)


class RandomSolarize(BatchOp):
    """With probability ``p``, ``x -> 1 - x`` where ``x >= threshold`` (BYOL / SCE: 0.5)."""

    def __init__(
        self, p: float, threshold: float = 0.5, generator: torch.Generator | None = None
    ) -> None:
        super().__init__(generator)
        self.p, self.threshold = p, threshold

    def sample(self, batch, height, width, *, device="cpu", generator=None) -> Params:
        return {"applied": draw(batch, 1, torch.device(device), generator)[:, 0] < self.p}

    def apply(self, x: Tensor, params: Params) -> Tensor:
        one = _unit_bounds(x)[1]
        flip = (x >= self.threshold).logical_and_(params["applied"].view(-1, 1, 1, 1))
        return torch.where(flip, torch.sub(one, x), x)
