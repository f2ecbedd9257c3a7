"""Decoding of image files into uint8 ``(C, H, W)`` arrays with Pillow, upright.

The still-image formats read (:data:`IMAGE_EXTENSIONS`): JPEG, PNG, WebP, GIF, TIFF, BMP and
PNM; a multi-frame file (an animated GIF or WebP, a TIFF of several pages) is read as its first
frame. Every image is turned upright by its EXIF orientation (tag 274, as
``PIL.ImageOps.exif_transpose`` applies it: :func:`exif_orientation`, :func:`orient`), on every
path (Pillow's, libjpeg's directly, reduced or not), so a phone photo taken sideways is read as
it is shown.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

#: The extensions (case-insensitive) of the image files that folders are read for; a file with
#: another extension is not read (and is counted: ``ImageFiles.not_images``).
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".webp", ".gif", ".tif", ".tiff",
                    ".bmp", ".pbm", ".pgm", ".ppm", ".pnm")

#: The formats of :data:`IMAGE_EXTENSIONS`, for messages.
FORMATS = "JPEG/PNG/WebP/GIF/TIFF/BMP/PNM"

#: How image files are decoded for a smaller output (:func:`decode_scaled`): a JPEG at a DCT
#: scale of 1/2, 1/4 or 1/8, another format box-averaged right after decoding, by the largest
#: such factor the output allows. It is part of the feature cache key of ``contrastkit eval``
#: (features cached from whole decodes are not reused): change it when decoding changes pixels.
DECODE_MODE = "reduced:jpeg-dct-scale,box-average;1-8;exif-orientation"


class UnreadableImageError(ValueError):
    """An image file could not be decoded; the message names the file."""


class MixedImageSizesError(ValueError):
    """Images of different sizes met where one size is needed (a batch, an array cache)."""


def collate_images(batch: list[tuple[Any, ...]]) -> Any:
    """``default_collate`` of ``(image, label, ...)`` items, after checking that the images
    share one shape.

    Raises:
        MixedImageSizesError: naming two of the shapes found, instead of ``torch.stack``'s
            "stack expects each tensor to be equal size".
    """
    from torch.utils.data import default_collate

    shapes = sorted({tuple(item[0].shape) for item in batch if hasattr(item[0], "shape")})
    if len(shapes) > 1:
        raise MixedImageSizesError(
            f"images of different sizes in one batch ({_shape(shapes[0])} and "
            f"{_shape(shapes[-1])}): resize them to one size when loading"
        )
    return default_collate(batch)


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def pillow() -> Any:
    """Import Pillow's ``Image`` module or explain which extra provides it."""
    try:
        from PIL import Image
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "reading image files needs Pillow: pip install 'contrastkit[data]'"
        ) from err
    return Image


def is_image_file(name: str, extensions: tuple[str, ...] = IMAGE_EXTENSIONS) -> bool:
    """Whether ``name`` ends with one of ``extensions``, ignoring case."""
    return name.lower().endswith(extensions)


# Start-of-frame markers of the JPEG processes libjpeg decodes: baseline, extended, progressive.
_SOF = frozenset((0xC0, 0xC1, 0xC2))
_STANDALONE = frozenset((0x01, *range(0xD0, 0xD8)))
_SOI = b"\xff\xd8"  # start of image: the first two bytes of every JPEG


def _jpeg_segments(data: bytes) -> Iterator[tuple[int, int]]:
    """``(marker, offset)`` of a JPEG's marker segments (ITU-T T.81, annex B) up to and with
    its first scan (``0xDA``); stops early at anything malformed."""
    if data[:2] != _SOI:
        return
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _STANDALONE:
            i += 2
            continue
        yield marker, i
        if marker == 0xDA:
            return
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")


def jpeg_header(data: bytes) -> tuple[int, int, int] | None:
    """``(height, width, components)`` from a JPEG's start-of-frame marker, else ``None``.

    Walks the marker segments (ITU-T T.81, annex B) up to the frame header; returns ``None``
    for non-JPEG data, unusual processes (lossless, arithmetic) or a malformed header, so that
    the caller falls back to Pillow's own parser. The size is the stored one, before the EXIF
    orientation (:func:`jpeg_orientation`) turns it.
    """
    for marker, i in _jpeg_segments(data):
        if marker in _SOF:
            if i + 10 > len(data):
                return None
            height = int.from_bytes(data[i + 5 : i + 7], "big")
            width = int.from_bytes(data[i + 7 : i + 9], "big")
            return height, width, data[i + 9]
        if marker == 0xDA or (0xC3 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC)):
            return None  # scan data or an unsupported frame type
    return None


#: EXIF's orientation tag.
ORIENTATION_TAG = 0x0112

#: How each EXIF orientation (2-8) is turned upright, as ``PIL.ImageOps.exif_transpose`` does:
#: ``(transpose, flip rows, flip columns)``, applied in that order (2 mirrors left-right, 3
#: turns 180 degrees, 4 mirrors top-bottom, 5 transposes, 6 turns 90 degrees clockwise, 7
#: transverses, 8 turns 90 degrees anticlockwise).
ORIENTATIONS: dict[int, tuple[bool, bool, bool]] = {
    2: (False, False, True), 3: (False, True, True), 4: (False, True, False),
    5: (True, False, False), 6: (True, False, True), 7: (True, True, True),
    8: (True, True, False)}


def exif_orientation(img: Any) -> int:
    """The EXIF orientation (1-8) of an opened Pillow image, read as
    ``PIL.ImageOps.exif_transpose`` reads it (``getexif()``: the EXIF block, a TIFF's own tags,
    else XMP's ``tiff:Orientation``); 1 when it is absent, not one of 2-8, or unreadable."""
    try:
        with warnings.catch_warnings():  # "Corrupt EXIF data": read as stored, said nowhere
            warnings.simplefilter("ignore")
            value = img.getexif().get(ORIENTATION_TAG, 1)
    except Exception:  # Pillow's EXIF parser raises many types on malformed blocks
        return 1
    return int(value) if isinstance(value, int) and value in ORIENTATIONS else 1


def jpeg_orientation(data: bytes) -> int:
    """The EXIF orientation of a JPEG's bytes (:func:`exif_orientation`): 1 without an APP1
    segment before its scan (neither EXIF nor XMP, decided without Pillow), else as Pillow
    reads its header."""
    if not any(marker == 0xE1 for marker, _ in _jpeg_segments(data)):
        return 1
    image_mod = pillow()
    try:
        with warnings.catch_warnings():  # a bomb, "Corrupt EXIF data": the decode's to say
            warnings.simplefilter("ignore")
            with image_mod.open(io.BytesIO(data)) as img:
                return exif_orientation(img)
    except (OSError, SyntaxError, ValueError, image_mod.DecompressionBombError):
        return 1


def upright_size(img: Any) -> tuple[int, int]:
    """``(height, width)`` of an image opened by Pillow (its header read, not its pixels) once
    turned upright by its EXIF orientation. A TIFF's stored size is read from its own tags
    (Pillow's TIFF reader gives the size it turns the image to when it loads it)."""
    tags = getattr(img, "tag_v2", None) if img.format == "TIFF" else None
    if tags is not None and 256 in tags and 257 in tags:  # ImageWidth, ImageLength
        stored = (int(tags[257]), int(tags[256]))
    else:
        stored = (img.size[1], img.size[0])
    return oriented_size(*stored, exif_orientation(img))


def oriented_size(height: int, width: int, orientation: int) -> tuple[int, int]:
    """``(height, width)`` of a stored ``height x width`` image once turned upright."""
    return (width, height) if ORIENTATIONS.get(orientation, (False,))[0] else (height, width)


def orient(array: np.ndarray, orientation: int) -> np.ndarray:
    """An ``(H, W, ...)`` array of stored pixels turned upright for its EXIF ``orientation``
    (:data:`ORIENTATIONS`): a view, no copy."""
    if orientation not in ORIENTATIONS:
        return array
    transpose, rows, cols = ORIENTATIONS[orientation]
    if transpose:
        array = array.swapaxes(0, 1)
    return array[::-1 if rows else 1, ::-1 if cols else 1]


def _decode_jpeg_fast(data: bytes, image_mod: Any, scale: int = 1,
                      orientation: int = 1) -> np.ndarray | None:
    """Decode a plain gray or 3-component JPEG with libjpeg directly, skipping Pillow's
    Python-level header parsing (faster on small images: ``benchmarks/README.md``), at
    ``1 / scale`` (1, 2, 4 or 8: libjpeg's DCT scaling, ``ceil(H / scale) x ceil(W / scale)``),
    turned upright for its EXIF ``orientation`` (:func:`orient`); ``None`` if not applicable or
    on any error, in which case the caller uses the general path (and its error message).
    """
    header = jpeg_header(data)
    if header is None or header[2] not in (1, 3) or 0 in header[:2]:
        return None
    height, width, components = header
    if height * width > image_mod.MAX_IMAGE_PIXELS:
        return None  # the general path refuses it (decompression-bomb limit)
    mode = "L" if components == 1 else "RGB"
    out_h, out_w = -(-height // scale), -(-width // scale)
    try:
        img = image_mod.frombytes(mode, (out_w, out_h), data, "jpeg", mode, "", scale)
    except (OSError, ValueError, SyntaxError):
        return None
    array = orient(np.asarray(img, dtype=np.uint8), orientation)
    if components == 1:
        return _owned(np.broadcast_to(array, (3, *array.shape)))
    return _owned(array.transpose(2, 0, 1))


def _owned(array: np.ndarray) -> np.ndarray:
    """``array`` C-contiguous and writable: a copy unless it already is both (the view of a
    1 x 1 image's pixels is contiguous but read-only, Pillow's buffer, and
    ``torch.from_numpy`` warns about a read-only array)."""
    out = np.ascontiguousarray(array)
    return out if out.flags.writeable else out.copy()


def dct_scale(reduction: int) -> int:
    """The largest JPEG DCT scale denominator (1, 2, 4 or 8) not above ``reduction``."""
    return next(s for s in (8, 4, 2, 1) if s <= max(1, reduction))


#: Pillow modes of 16-bit gray images (``I`` is what 16-bit PNG and TIFF files decode to).
_SIXTEEN_BIT_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I")


def _to_8_bits(img: Any, image_mod: Any) -> Any:
    """A 16-bit gray image scaled to 8 bits, ``round(v * 255 / 65535)`` (``convert("RGB")``
    would clip every value above 255 to white); other images as they are."""
    if img.mode not in _SIXTEEN_BIT_MODES:
        return img
    values = np.asarray(img).astype(np.float64)
    return image_mod.fromarray(np.round(np.clip(values, 0, 65535) * (255 / 65535))
                               .astype(np.uint8), mode="L")


def decode_image(
    source: str | os.PathLike[str] | bytes,
    name: str | None = None,
    size: tuple[int, int] | None = None,
) -> np.ndarray:
    """Decode an image file to an RGB uint8 array of shape ``(3, H, W)``.

    The whole image is decoded (not only its header), so truncated files are detected; a
    multi-frame file gives its first frame. Grayscale, palette, CMYK and alpha images are
    converted to RGB (alpha dropped); 16-bit gray images are scaled to 8 bits first. The image
    is turned upright by its EXIF orientation (:func:`exif_orientation`), so ``H x W`` is its
    upright size. An image above Pillow's decompression-bomb limit
    (``PIL.Image.MAX_IMAGE_PIXELS`` x 2, about 179 megapixels) is refused unread. Plain
    gray or 3-component JPEGs (the usual case) are handed to libjpeg directly through
    ``PIL.Image.frombytes`` (same pixels, less Python overhead); anything else, and any JPEG
    the fast path rejects, goes through ``PIL.Image.open``.

    Args:
        source: file path, or the encoded bytes.
        name: how to name the file in error messages (defaults to the path).
        size: optional ``(H, W)``: resize the upright image to it (bilinear). For JPEG,
            Pillow's draft mode first decodes at the smallest scale (1/2, 1/4, 1/8) still at
            least ``size``.

    Returns:
        ``np.ndarray`` uint8 ``(3, H, W)``, C-contiguous.

    Raises:
        UnreadableImageError: (a ``ValueError``) when the file cannot be decoded.
        FileNotFoundError: when the path does not exist.
    """
    return _decode(source, name, size, None)[0]


def decode_scaled(
    source: str | os.PathLike[str] | bytes,
    name: str | None,
    reduction: Callable[[int, int], int],
) -> tuple[np.ndarray, tuple[int, int]]:
    """Decode an image reduced by ``r``, the largest of 1, 2, 4, 8 not above ``reduction(H, W)``
    of its full size ``(H, W)``, so that a large image is never held at full size as an RGB
    array.

    A JPEG is decoded at libjpeg's DCT scale ``1 / r``: only the reduced image is ever in
    memory. Other formats (PNG, WebP, ...) have no reduced decode: Pillow decodes the whole image
    (the peak memory is that decoded image, at most the decompression-bomb limit of about 179
    megapixels), then ``Image.reduce(r)`` takes the rounded means of ``r x r`` boxes before any
    other copy is made (conversion to RGB or 8 bits, the array). The output is ``ceil(H / r) x
    ceil(W / r)`` (the last row and column cover what is left); with ``r = 1`` it is
    :func:`decode_image`'s array. The factors stop at 8 as libjpeg's do: the geometry of a
    partial last box stays within 7 pixels of the full image, and the array is at most 1/64 of
    it. The reduced image is then turned upright by its EXIF orientation, and ``(H, W)`` is the
    upright full size (a partial last box may then lie on the first row or column). Errors as
    in :func:`decode_image`.

    Args:
        source: file path, or the encoded bytes.
        name: how to name the file in error messages (``None``: the path).
        reduction: ``(H, W) -> s >= 1``, the wanted factor, from the file's upright full size.

    Returns:
        ``(array, (H, W))``: the upright uint8 ``(3, h, w)`` array and the file's upright full
        size.
    """
    return _decode(source, name, None, reduction)


def decode_at_least(source: str | os.PathLike[str] | bytes, side: int,
                    name: str | None = None) -> np.ndarray:
    """:func:`decode_scaled` by the largest factor (1, 2, 4, 8) that keeps the shorter side at
    least ``side`` (``r <= min(H, W) // side``): what a resize to a ``side`` square needs."""
    return decode_scaled(source, name, lambda h, w: max(1, min(h, w) // side))[0]


def _decode(source: str | os.PathLike[str] | bytes, name: str | None,
            size: tuple[int, int] | None, reduction: Callable[[int, int], int] | None
            ) -> tuple[np.ndarray, tuple[int, int]]:
    image_mod = pillow()
    if name is None:
        name = "<bytes>" if isinstance(source, bytes) else str(source)
    if isinstance(source, bytes):
        data = source
    else:  # a JPEG's bytes go to the direct decoder; any other file is streamed by Pillow
        with open(source, "rb", buffering=0) as f:  # unbuffered: one allocation of the file
            data = f.read(2)
            if data == _SOI:
                f.seek(0)
                data = f.read()
    header = jpeg_header(data)
    if header is not None:
        turn = jpeg_orientation(data)
        full = oriented_size(*header[:2], turn)
        if size is None or full == size:
            scale = 1 if reduction is None else dct_scale(reduction(*full))
            fast = _decode_jpeg_fast(data, image_mod, scale, turn)
            if fast is not None:
                return fast, full
    fp = io.BytesIO(data) if isinstance(source, bytes) or data[:2] == _SOI else source
    try:
        with quiet_bomb_warning(image_mod), image_mod.open(fp) as img:
            drafted = False
            if img.format in ("JPEG", "MPO"):  # its DCT scale is chosen from the header
                full = upright_size(img)
                scale = 1 if reduction is None else dct_scale(reduction(*full))
                if size is not None or scale > 1:
                    want = (oriented_size(*size, exif_orientation(img)) if size is not None
                            else (max(1, img.size[1] // scale), max(1, img.size[0] // scale)))
                    img.draft("RGB", (want[1], want[0]))
                    drafted = True
            img.load()
            # read after loading, as exif_transpose does (Pillow's TIFF loader turns the image
            # itself and drops the tag)
            turn = exif_orientation(img)
            if not drafted:
                full = oriented_size(img.size[1], img.size[0], turn)
                scale = 1 if reduction is None else dct_scale(reduction(*full))
                if scale > 1:
                    img = _reduce(img, scale)
            rgb = _to_8_bits(img, image_mod)
            rgb = rgb if rgb.mode == "RGB" else rgb.convert("RGB")
            array = orient(np.asarray(rgb, dtype=np.uint8), turn)
            if size is not None and array.shape[:2] != size:
                array = np.asarray(image_mod.fromarray(np.ascontiguousarray(array)).resize(
                    (size[1], size[0]), image_mod.Resampling.BILINEAR), dtype=np.uint8)
    except FileNotFoundError:
        raise
    except (OSError, SyntaxError, ValueError, image_mod.DecompressionBombError) as err:
        raise UnreadableImageError(
            f"{name}: unreadable image (expected a decodable {FORMATS} file): {err}"
        ) from err
    return _owned(array.transpose(2, 0, 1)), full


@contextlib.contextmanager
def quiet_bomb_warning(image_mod: Any) -> Iterator[None]:
    """Pillow's ``DecompressionBombWarning`` (an image above ``MAX_IMAGE_PIXELS``, about 89
    megapixels) is not printed: contrastkit's policy is its own, one line or nothing. Images up
    to twice that limit are read (reduced as early as the output allows, see
    :func:`decode_scaled`); above it, Pillow's ``DecompressionBombError`` refuses them in one
    line naming the file (:class:`UnreadableImageError`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", image_mod.DecompressionBombWarning)
        yield


#: Modes ``Image.reduce`` averages directly (16-bit gray goes through ``I``, others RGB first).
_REDUCIBLE = ("L", "LA", "RGB", "RGBA", "CMYK", "I", "F")


def _reduce(img: Any, factor: int) -> Any:
    """``img`` reduced ``factor`` times by box averages (``ceil`` of each side)."""
    if img.mode in _SIXTEEN_BIT_MODES:
        img = img.convert("I")
    elif img.mode not in _REDUCIBLE:
        img = img.convert("RGB")  # palette and 1-bit images: average colours, not indices
    return img.reduce(factor)
