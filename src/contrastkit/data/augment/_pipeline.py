"""The augmentation pipeline: uint8 (or float) batch -> ordered batched ops -> normalisation.

Internal to :mod:`contrastkit.data.augment`, which builds pipelines from the papers' presets.
:class:`Pipeline` draws every op's parameters on the batch's device (one ``torch.rand`` per op),
then applies them (chunked on the CPU, whole batch elsewhere), in float32 even inside an
autocast region and with TF32 off (:func:`exact_float32`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from ._base import CONSTANTS, BatchOp, Params, check_generator, f64
from ._traced_draw import sample_params

__all__ = ["CHUNK_PIXELS", "NORMALIZATION", "Pipeline", "check_batch", "exact_float32",
           "normalization", "to_float_rgb"]

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


def to_float_rgb(x: Tensor) -> Tensor:
    """uint8 -> float32 /255 (float kept as is), 1 channel -> 3; checks the ``(B, C, H, W)``
    shape."""
    check_batch(x)
    if x.dtype == torch.uint8:
        scale = CONSTANTS.get(("u8_scale",), x, lambda: f64(255.0), torch.float32)
        x = torch.div(x, scale)  # float32: the bytes converted in the division's own kernel
    return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x


def normalization(normalize: object) -> tuple[Tensor, Tensor] | None:
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
#: the allocator instead of being mapped afresh (faster: ``benchmarks/README.md``). The
#: parameters are drawn for the whole batch first, so the chunking never changes the result.
CHUNK_PIXELS = 1 << 18


@contextmanager
def exact_float32() -> Iterator[None]:
    """Full float32 products inside (no TF32 or bf16 for matmuls and convolutions).

    The colour jitter and the blur are matrix products and an identity kernel must leave a
    pixel exactly as it is; with TF32 (e.g. ``torch.set_float32_matmul_precision("high")``) a
    GPU would round every product to 10 mantissa bits. Only host flags are touched.

    The guard reads, sets and restores the per-backend ``fp32_precision`` settings (the API of
    torch >= 2.9) and never the legacy ``allow_tf32`` flags: mixing the two leaves a state in
    which ``torch.get_float32_matmul_precision()`` raises. Each setting gets back exactly the
    value it had, whichever API the user set it with. On an older torch, which has only the
    legacy flags, those are saved and restored instead.

    Inside ``torch.compile`` nothing is touched (the compiler cannot trace these settings): a
    compiled step keeps the process's own, IEEE float32 for matmuls unless the user changed it.
    """
    if torch.compiler.is_compiling():
        yield
        return
    if not hasattr(torch.backends.cudnn, "conv"):  # torch < 2.9: the legacy flags only
        matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
        return
    saved = [(setting, setting.fp32_precision) for setting in _fp32_settings()]
    for setting, _ in saved:
        setting.fp32_precision = "ieee"
    try:
        yield
    finally:
        for setting, value in saved:
            setting.fp32_precision = value


def _fp32_settings() -> tuple[object, ...]:
    """The settings :func:`exact_float32` pins to IEEE float32: cuBLAS matmuls and cuDNN
    convolutions (TF32 on Ampere and later), oneDNN matmuls and convolutions (bf16 or TF32 on
    CPUs that have them, e.g. after ``set_float32_matmul_precision("medium")``)."""
    backends = torch.backends
    return backends.cuda.matmul, backends.cudnn.conv, backends.mkldnn.matmul, backends.mkldnn.conv


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
    """``to_float_rgb`` -> ``steps`` (in order) -> clamp to [0, 1] -> optional normalisation.

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
        #: the output's memory layout (``torch.channels_last`` for a channels-last backbone)
        self.memory_format = torch.contiguous_format
        norm = normalization(normalize)
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
            op.last_params = sample_params(op, batch, height, width, device, generator)
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
                    out = torch.empty((batch, *y.shape[1:]), dtype=y.dtype, device=y.device,
                                      memory_format=self.memory_format)
                out[first : first + chunk] = y
            assert out is not None
            return out

    def _run(self, x: Tensor, params: Sequence[Params], start: int) -> Tensor:
        y = to_float_rgb(x) if start == 0 else x
        for op, prm in zip(self.steps[start:], params, strict=True):
            y = op.apply(y, prm)
        # blur and grayscale are weighted sums whose weights add up to 1 only up to rounding:
        # the clamp keeps [0, 1] exact and writes the layout the backbone wants in one kernel
        if torch.compiler.is_compiling():  # one fused pass (no out= in a compiled graph)
            y = torch.clamp(y, 0, 1).contiguous(memory_format=self.memory_format)
        else:
            y = torch.clamp(y, 0, 1, out=torch.empty_like(y, memory_format=self.memory_format))
        if self.mean is not None:
            mean, std = self.mean, self.std
            if mean.dtype != y.dtype or mean.device != y.device:  # module not moved: a copy
                mean, std = mean.to(y.device, y.dtype), std.to(y.device, y.dtype)
            y = y.sub_(mean).div_(std)
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
