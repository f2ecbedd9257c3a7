"""The random resized crops of the views, drawn from each full image in the loader worker.

SCE (Denize et al. 2023, Table 1, after BYOL) and DySTreSS (Manna et al. 2023, after SimCLR)
take every view's random resized crop from the whole image: area fraction uniform in
``scale``, log aspect ratio uniform in ``log ratio`` (3/4, 4/3), torchvision's sampler. With
:class:`LoaderCrops` the loader worker, per image:

1. reads the file's header (its size, turned upright by its EXIF orientation: width and
   height swap for a photo taken sideways) and draws one box per view (:func:`crop_box`, the
   arithmetic of :func:`~contrastkit.data.augment._geometry.crop_boxes_from_uniforms` for one
   image, on uniforms hashed from ``(seed, epoch, index)``: :func:`keyed_uniforms`);
2. decodes a JPEG (``simplejpeg``'s libjpeg-turbo binding when installed, else Pillow's
   libjpeg) at the smallest DCT scale (1/2, 1/4, 1/8: libjpeg's scaled decode) at which
   every box still has at least its view's side in both directions, so no view is upsampled
   by the reduction (``fast_decode``: libjpeg's fast inverse DCT, off by default; other
   formats, and JPEGs the direct path rejects, through
   :func:`~contrastkit.data.decode.images.decode_scaled` with the same factor: Pillow's
   reduced JPEG decode, or the whole PNG / WebP box-averaged right after decoding), and
   turns the decoded pixels upright (a view of them, no copy);
3. crops each box and resizes it to its view's side on the uint8 pixels (antialiased
   bilinear, the filter of torchvision's ``RandomResizedCrop`` on a PIL image), in the
   channels-last layout the decoder writes (:func:`crop_views`).

The item is ``([view_1, ..., view_V], label)`` with ``view_v`` a uint8 ``(3, S_v, S_v)``
tensor; the flip and the colour, blur and solarisation steps stay batched on the device
(:meth:`contrastkit.data.augment.views.TwoViews.from_crops`). The draws are a pure function of the
seed, the epoch and the sample index, not of the worker that reads it, so a resumed run, or a
run with another number of workers or processes, crops every image exactly as an
uninterrupted one.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset, Sampler

from contrastkit.data.decode.images import (
    decode_scaled,
    jpeg_header,
    jpeg_orientation,
    orient,
    oriented_size,
    pillow,
)

__all__ = [
    "CropSpec",
    "EpochKeys",
    "FileReader",
    "LoaderCrops",
    "SampleReader",
    "ViewCrops",
    "crop_box",
    "crop_views",
    "decode_reduced",
    "encoded_reader",
    "keyed_uniforms",
]

#: Candidate boxes per view before the fallback (torchvision: 10).
ATTEMPTS = 10
DEFAULT_RATIO = (3.0 / 4.0, 4.0 / 3.0)


@dataclass(frozen=True)
class CropSpec:
    """One view's random resized crop: output side, area-fraction range and aspect-ratio range."""

    size: int
    scale: tuple[float, float]
    ratio: tuple[float, float] = DEFAULT_RATIO


def crop_box(u: Sequence[float], height: int, width: int, spec: CropSpec,
             attempts: int = ATTEMPTS) -> tuple[int, int, int, int]:
    """``(x0, y0, w, h)`` of one random resized crop from ``2 attempts + 2`` uniforms.

    The same arithmetic as the batched device sampler
    (:func:`~contrastkit.data.augment._geometry.crop_boxes_from_uniforms`), for one image in
    float64 Python scalars: attempt ``a`` has target area ``t = H W (lo + (hi - lo) u[a])`` and
    log ratio ``log r = log r_lo + (log r_hi - log r_lo) u[A + a]``; ``w = round(sqrt(t) e^{log
    r / 2})``, ``h = round(sqrt(t) e^{-log r / 2})`` (half to even); the first attempt with
    ``0 < w <= W`` and ``0 < h <= H`` is placed at ``x0 = floor(u[2A] (W - w + 1))``, ``y0 =
    floor(u[2A + 1] (H - h + 1))``; if none fits, the whole image clipped to the ratio range,
    centred.
    """
    area = float(height * width)
    lo, hi = spec.scale
    log_lo, log_hi = math.log(spec.ratio[0]), math.log(spec.ratio[1])
    for a in range(attempts):
        target = area * lo + u[a] * (area * (hi - lo))
        log_r = log_lo + u[attempts + a] * (log_hi - log_lo)
        root = math.sqrt(target)
        w = float(round(math.exp(0.5 * log_r) * root))
        h = float(round(math.exp(-0.5 * log_r) * root))
        if 1.0 <= w <= width and 1.0 <= h <= height:
            x0 = math.floor(u[2 * attempts] * (width + 1.0 - w))
            y0 = math.floor(u[2 * attempts + 1] * (height + 1.0 - h))
            return int(x0), int(y0), int(w), int(h)
    in_ratio = width / height
    if in_ratio < min(spec.ratio):
        w, h = float(width), float(round(width / min(spec.ratio)))
    elif in_ratio > max(spec.ratio):
        w, h = float(round(height * max(spec.ratio))), float(height)
    else:
        w, h = float(width), float(height)
    return int((width - w) // 2), int((height - h) // 2), int(w), int(h)


def dct_reduction(boxes: Sequence[tuple[int, int, int, int]], specs: Sequence[CropSpec]) -> int:
    """The largest JPEG DCT scale denominator ``s`` in (1, 2, 4, 8) at which every box keeps at
    least its view's side in both directions (``min(w, h) / s >= size``)."""
    room = min(min(b[2], b[3]) / spec.size for b, spec in zip(boxes, specs, strict=True))
    for s in (8, 4, 2):
        if room >= s:
            return s
    return 1


def decode_reduced(data: bytes, scale: int, fast: bool = False) -> np.ndarray | None:
    """``(ceil(H / scale), ceil(W / scale), 3)`` uint8 of a gray or 3-component JPEG decoded
    at ``1 / scale`` by libjpeg's DCT scaling (``simplejpeg`` when installed, else Pillow's
    decoder), as stored (before its EXIF orientation); ``None`` when the direct path does not
    apply (as for ``decode_image``'s fast path), so that the general path decides.

    With ``fast`` (through ``simplejpeg`` only), libjpeg's fast integer inverse DCT
    (``JDCT_IFAST``; the chroma upsampling stays the accurate one): about 1 grey level from
    the accurate decode on average (``benchmarks/README.md``, "Loader crops"). Pillow's
    decoder has no such switch alone (its draft flag also replaces the chroma interpolation by
    repetition, up to 6 grey levels off on average at sharp colour edges), so without
    ``simplejpeg`` the decode is the accurate one whatever ``fast`` says.
    """
    header = jpeg_header(data)
    if header is None or header[2] not in (1, 3) or 0 in header[:2]:
        return None
    image_mod = pillow()
    height, width, components = header
    if height * width > (image_mod.MAX_IMAGE_PIXELS or height * width):
        return None  # the general path applies Pillow's decompression-bomb limit
    out_h, out_w = -(-height // scale), -(-width // scale)
    try:
        import simplejpeg
    except ImportError:
        simplejpeg = None
    try:
        if simplejpeg is not None:
            # the largest libjpeg reduction whose output is at least (out_h, out_w): 1 / scale
            return simplejpeg.decode_jpeg(data, "RGB", fastdct=fast, min_height=out_h,
                                          min_width=out_w)
        mode = "L" if components == 1 else "RGB"
        array = np.asarray(image_mod.frombytes(mode, (out_w, out_h), data, "jpeg", mode, "",
                                               scale))
    except (OSError, ValueError, SyntaxError):
        return None
    return np.repeat(array[..., None], 3, axis=2) if array.ndim == 2 else array


def crop_views(data: bytes, name: str, specs: Sequence[CropSpec],
               uniforms: Sequence[Sequence[float]], fast_decode: bool = False) -> list[Tensor]:
    """Decode one encoded image and cut one random resized crop per view from it.

    The boxes are drawn on the image's upright size and cut from the decoded (possibly
    DCT-reduced) image turned upright by its EXIF orientation, at the nearest whole pixels, and
    each is resized to its view's side by ``torch.nn.functional.interpolate`` on the uint8
    pixels (bilinear, antialiased: the triangle filter of Pillow's ``resize``, within a grey
    level).
    The cut is copied once into a dense channels-last block (torch's vectorised uint8 resize
    path), and the view is returned in the channels-last layout the resize writes (a
    ``(3, size, size)`` tensor with strides ``(1, 3 size, 3)``; collation stacks it into a
    contiguous batch), so no pass is spent on a layout change.

    Args:
        data: the encoded file.
        name: the file's name, for error messages.
        specs: one :class:`CropSpec` per view.
        uniforms: ``(len(specs), 2 ATTEMPTS + 2)`` uniforms in [0, 1), a row per view.
        fast_decode: decode JPEGs with libjpeg's fast inverse DCT (:func:`decode_reduced`):
            cheaper, about 1 grey level off on average.

    Returns:
        One uint8 ``(3, size, size)`` tensor per view.

    Raises:
        UnreadableImageError: (from ``decode_scaled``) when the file cannot be decoded,
            naming it.
    """
    rows = uniforms.tolist() if isinstance(uniforms, np.ndarray) else uniforms
    header = jpeg_header(data)
    array, boxes = None, []

    def reduction(h: int, w: int) -> int:  # the boxes on the full size, then their reduction
        boxes[:] = [crop_box(u, h, w, s) for u, s in zip(rows, specs, strict=True)]
        return dct_reduction(boxes, specs)

    if header is not None:  # boxes on the upright image; the stored pixels turned to it
        turn = jpeg_orientation(data)
        height, width = oriented_size(*header[:2], turn)
        array = decode_reduced(data, reduction(height, width), fast_decode)
        array = None if array is None else orient(array, turn)
    if array is None:
        chw, (height, width) = decode_scaled(data, name, reduction)
        array = chw.transpose(1, 2, 0)
    fx, fy = array.shape[1] / width, array.shape[0] / height
    views = []
    for (x0, y0, w, h), spec in zip(boxes, specs, strict=True):
        left, top = round(x0 * fx), round(y0 * fy)
        right = max(left + 1, round((x0 + w) * fx))
        bottom = max(top + 1, round((y0 + h) * fy))
        # (1, 3, h, w) over a dense (h, w, 3) copy of the cut: channels-last strides
        crop = torch.from_numpy(np.ascontiguousarray(array[None, top:bottom, left:right])
                                ).permute(0, 3, 1, 2)
        if crop.shape[-2:] != (spec.size, spec.size):
            crop = torch.nn.functional.interpolate(
                crop, size=(spec.size, spec.size), mode="bilinear", align_corners=False,
                antialias=True)
        views.append(crop[0])
    return views


def keyed_uniforms(key: str, rows: int, cols: int) -> list[list[float]]:
    """``rows x cols`` uniforms in [0, 1), a pure function of ``key``: SHAKE-128 of the key's
    UTF-8 bytes read as little-endian 64-bit words ``x``, each giving ``(x >> 11) 2^-53`` (the
    53-bit grid of a float64, every value equally likely)."""
    words = memoryview(hashlib.shake_128(key.encode()).digest(8 * rows * cols)).cast("Q")
    return [[(x >> 11) * 2.0**-53 for x in words[r * cols:(r + 1) * cols]]
            for r in range(rows)]


class SampleReader(Protocol):
    """Random access to encoded images: ``len``, ``read(i) -> (bytes, name, label)``,
    ``classes`` and ``targets``."""

    classes: list[str]
    targets: list[int]

    def __len__(self) -> int: ...

    def read(self, index: int) -> tuple[bytes, str, int]: ...


class FileReader:
    """Encoded images from ``(path, label)`` pairs (an image folder's samples)."""

    def __init__(self, samples: Sequence[tuple[str, int]], classes: Sequence[str]) -> None:
        self.samples = [(str(p), int(y)) for p, y in samples]
        self.classes = list(classes)
        self.targets = [y for _, y in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def read(self, index: int) -> tuple[bytes, str, int]:
        path, label = self.samples[index]
        with open(path, "rb", buffering=0) as f:  # one read of the whole file, no buffer
            return f.readall(), path, label


class IndexedReader:
    """Items ``indices`` of another reader, with their own ``labels``."""

    def __init__(self, base: SampleReader, indices: list[int], labels: list[int],
                 classes: Sequence[str]) -> None:
        self.base, self.indices = base, indices
        self.targets, self.classes = labels, list(classes)

    def __len__(self) -> int:
        return len(self.indices)

    def read(self, index: int) -> tuple[bytes, str, int]:
        data, name, _ = self.base.read(self.indices[index])
        return data, name, self.targets[index]


def _unwrap(dataset: Any) -> tuple[SampleReader, list[int], list[int]] | None:
    """``(base reader, indices into it, labels)`` of the items of ``dataset``."""
    reader = getattr(dataset, "reader", None)
    if reader is None and hasattr(dataset, "samples") and hasattr(dataset, "fingerprint"):
        reader = FileReader(dataset.samples, dataset.classes)  # image files
    if reader is not None:
        return reader, list(range(len(reader))), list(reader.targets)
    inner_ds, indices = getattr(dataset, "dataset", None), getattr(dataset, "indices", None)
    inner = None if inner_ds is None or indices is None else _unwrap(inner_ds)
    if inner is None:
        return None
    base, inner_indices, labels = inner
    mapping = getattr(dataset, "mapping", None)
    kept = [labels[i] for i in indices]
    return (base, [inner_indices[i] for i in indices],
            [mapping[y] for y in kept] if mapping is not None else kept)


def encoded_reader(dataset: Any) -> SampleReader:
    """A reader of the encoded images of ``dataset``, item for item: image files or shards,
    seen through the class selection and subsets of :mod:`contrastkit.data.sources.wrappers` and
    :mod:`contrastkit.data.sources.images.longtail`.

    Raises:
        ValueError: when ``dataset`` holds no encoded images (arrays, resized squares).
    """
    found = _unwrap(dataset)
    if found is None:
        raise ValueError(
            f"crops in the loader need image files or shards (dataset folder, imagenet100, "
            f"tinyimagenet, shards), not {type(dataset).__name__}: set data.crops: device")
    base, indices, labels = found
    return IndexedReader(base, indices, labels, getattr(dataset, "classes", []))


class ViewCrops:
    """The views' crops of one encoded image, keyed by ``(seed, epoch, index)`` (module doc):
    ``crops(data, name, index, epoch) -> [view crops]``.

    Args:
        specs: one :class:`CropSpec` per view, in view order.
        seed: the run's data seed.
        fast_decode: decode JPEGs with libjpeg's fast inverse DCT (:func:`decode_reduced`).
    """

    def __init__(self, specs: Sequence[CropSpec], seed: int = 0,
                 fast_decode: bool = False) -> None:
        if not specs:
            raise ValueError("loader crops need at least one view")
        self.specs, self.seed, self.fast_decode = list(specs), int(seed), bool(fast_decode)

    def uniforms(self, index: int, epoch: int) -> list[list[float]]:
        """The ``(views, 2 ATTEMPTS + 2)`` uniforms of sample ``index`` in ``epoch``:
        :func:`keyed_uniforms` of the key ``"seed,epoch,index"`` (a hash, not a generator
        object: a fifth of the CPU time of seeding a NumPy generator per image)."""
        return keyed_uniforms(f"{self.seed},{int(epoch)},{int(index)}", len(self.specs),
                              2 * ATTEMPTS + 2)

    def __call__(self, data: bytes, name: str, index: int, epoch: int) -> list[Tensor]:
        return crop_views(data, name, self.specs, self.uniforms(index, epoch), self.fast_decode)


class LoaderCrops(Dataset):
    """Items ``([view crops], label)`` of encoded images, cropped in the loader (module doc).

    Args:
        reader: the encoded images (:func:`encoded_reader`).
        specs: one :class:`CropSpec` per view, in view order.
        seed: the run's data seed.
        fast_decode: decode JPEGs with libjpeg's fast inverse DCT (:func:`decode_reduced`).

    ``ds[(index, epoch)]`` (keys from :class:`EpochKeys`) draws the view boxes from uniforms
    keyed by ``(seed, epoch, index)`` (:meth:`ViewCrops.uniforms`); ``ds[index]`` is epoch 0.
    """

    def __init__(self, reader: SampleReader, specs: Sequence[CropSpec], seed: int = 0,
                 fast_decode: bool = False) -> None:
        self.crops = ViewCrops(specs, seed, fast_decode)
        self.reader, self.specs, self.seed = reader, self.crops.specs, self.crops.seed
        self.fast_decode = self.crops.fast_decode
        self.classes = list(reader.classes)
        self.targets = list(reader.targets)
        self.uniforms = self.crops.uniforms

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, key: int | tuple[int, int]) -> tuple[list[Tensor], int]:
        index, epoch = key if isinstance(key, tuple) else (key, 0)
        data, name, label = self.reader.read(index)
        return self.crops(data, name, index, epoch), label


class EpochKeys(Sampler[tuple[int, int]]):
    """Wrap an index sampler with ``set_epoch``: yields ``(index, epoch)`` keys for
    :class:`LoaderCrops` (the workers do not see the main process's epoch otherwise)."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select ``epoch`` (forwarded to the wrapped sampler)."""
        self.epoch = epoch
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self):
        epoch = self.epoch
        return ((int(i), epoch) for i in self.sampler)

    def __len__(self) -> int:
        return len(self.sampler)
