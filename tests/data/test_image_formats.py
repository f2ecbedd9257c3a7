"""Issue 52, item 4: the still-image formats Pillow reads, and EXIF orientation, on every decode
path. At 0f3dae1 ``.gif``, ``.tif`` and ``.bmp`` files in class folders were skipped without a
count, and EXIF orientation was ignored (a phone photo taken sideways trained sideways).

The images are written by Pillow here; the expected pixels are the upright image as
``PIL.ImageOps.exif_transpose`` gives it (and, for a lossless file, the written pixels turned by
NumPy, so the definition is not only Pillow's word)."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from contrastkit.data.decode import images as decode
from contrastkit.data.loading.crops import ATTEMPTS, CropSpec, crop_box, crop_views
from contrastkit.data.loading.dali_crops import stored_box, upright_views
from contrastkit.data.sources.images import cache as cache_mod
from contrastkit.data.sources.images import datasets as D
from contrastkit.data.sources.images._folder import check_headers

H, W = 24, 40  # stored size: even, so a reduction by 2 has no partial box

#: (file name, Pillow format, save options, EXIF orientation or None, lossless)
FILES = [
    ("a/plain.png", "PNG", {}, None, True),
    ("a/lossless.webp", "WEBP", {"lossless": True}, None, True),
    ("a/palette.gif", "GIF", {}, None, True),
    ("a/rgb.tif", "TIFF", {}, None, True),
    ("a/lzw.tiff", "TIFF", {"compression": "tiff_lzw"}, None, True),
    ("a/rgb.bmp", "BMP", {}, None, True),
    ("a/rgb.ppm", "PPM", {}, None, True),
    ("a/photo.jpg", "JPEG", {"quality": 95}, None, False),
    ("b/sideways.jpg", "JPEG", {"quality": 95}, 6, False),  # a phone photo, turned 90 degrees
    ("b/mirrored.jpeg", "JPEG", {"quality": 95}, 7, False),
    ("b/sideways.png", "PNG", {}, 8, True),
    ("b/upside_down.webp", "WEBP", {"lossless": True}, 3, True),
    ("b/sideways.tif", "TIFF", {}, 5, True),
]

#: np.rot90 / flips of the stored pixels that turn each orientation upright (EXIF's meaning).
TURNED = {None: lambda a: a, 3: lambda a: a[::-1, ::-1], 5: lambda a: a.swapaxes(0, 1),
          6: lambda a: np.rot90(a, -1), 7: lambda a: np.rot90(a, 1)[::-1, ::-1],
          8: lambda a: np.rot90(a, 1)}


def _pixels(seed: int) -> np.ndarray:
    """A random (H, W, 3) image of 16 colours (a GIF holds it exactly), smooth enough in
    blocks for JPEG to keep it close."""
    rng = np.random.default_rng(seed)
    palette = rng.integers(0, 256, (16, 3), dtype=np.uint8)
    blocks = rng.integers(0, 16, (H // 4, W // 4))
    return palette[np.kron(blocks, np.ones((4, 4), int))]


def _save(path: Path, pixels: np.ndarray, fmt: str, options: dict,
          orientation: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.fromarray(pixels)
    if orientation is not None:
        exif = Image.Exif()
        exif[decode.ORIENTATION_TAG] = orientation
        options = {**options, "exif": exif if fmt == "TIFF" else exif.tobytes()}
    image.save(path, fmt, **options)


def _upright(path: Path) -> np.ndarray:
    """The image as ``PIL.ImageOps.exif_transpose`` turns it, RGB (H, W, 3)."""
    with Image.open(path) as image:
        return np.asarray(ImageOps.exif_transpose(image).convert("RGB"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    """``(root, {relative path: expected upright RGB (H, W, 3)})``: one file of each format
    in class ``a``; files with an EXIF orientation and a 16-bit gray TIFF in class ``b``."""
    root = tmp_path_factory.mktemp("formats")
    expected = {}
    for i, (name, fmt, options, orientation, lossless) in enumerate(FILES):
        pixels = _pixels(i)
        _save(root / name, pixels, fmt, options, orientation)
        expected[name] = _upright(root / name)
        if lossless:  # Pillow's turn is EXIF's
            np.testing.assert_array_equal(expected[name], TURNED[orientation](pixels))
    deep = (np.arange(H * W).reshape(H, W) * 65535 // (H * W - 1)).astype(np.uint16)
    Image.fromarray(deep).save(root / "b" / "deep.tif")
    assert Image.open(root / "b" / "deep.tif").mode in ("I;16", "I")
    gray = np.round(deep * (255 / 65535)).astype(np.uint8)
    expected["b/deep.tif"] = np.repeat(gray[..., None], 3, axis=2)
    return root, expected


def _rel(root: Path, path: str) -> str:
    return str(Path(path).relative_to(root))


def test_every_format_is_listed_and_decodes_upright(folder):
    root, expected = folder
    files = D.ImageFolder(root)
    assert sorted(_rel(root, p) for p, _ in files.samples) == sorted(expected)
    assert files.not_images == []
    for i, (path, _) in enumerate(files.samples):
        image, _ = files[i]
        want = expected[_rel(root, path)]
        assert image.dtype == torch.uint8 and image.shape == (3, *want.shape[:2]), path
        np.testing.assert_array_equal(image.numpy().transpose(1, 2, 0), want, err_msg=path)


def test_the_jpeg_paths_agree_with_pillows_decoder(folder, monkeypatch):
    """The direct libjpeg path and Pillow's own (``Image.open``) give the same upright pixels."""
    root, expected = folder
    monkeypatch.setattr(decode, "_decode_jpeg_fast", lambda *args: None)
    for name in ("a/photo.jpg", "b/sideways.jpg", "b/mirrored.jpeg"):
        array = decode.decode_image(root / name)
        np.testing.assert_array_equal(array.transpose(1, 2, 0), expected[name])


def test_reduced_reads_are_the_upright_image_reduced(folder):
    """``read_at_least`` (``data.load_size``, the ``skip_corrupt`` check, evaluation readers):
    a JPEG at a DCT scale, another format box-averaged, then turned upright."""
    root, expected = folder
    files = D.ImageFolder(root)
    for i, (path, _) in enumerate(files.samples):
        if path.endswith((".jpg", ".jpeg")):  # libjpeg's DCT scaling: Pillow's draft mode
            with Image.open(path) as image:
                image.draft("RGB", (image.width // 2, image.height // 2))
                reduced = np.asarray(ImageOps.exif_transpose(image).convert("RGB"))
        else:
            reduced = np.asarray(Image.fromarray(expected[_rel(root, path)]).reduce(2))
        image, _ = files.read_at_least(i, 10)  # min(24, 40) // 10 = 2
        assert image.shape == (3, *reduced.shape[:2]), path
        diff = np.abs(image.numpy().transpose(1, 2, 0) - reduced.astype(float))
        assert diff.max() <= 1, path  # 16-bit: reduced before its scaling to 8 bits


def test_loader_crops_draw_their_boxes_on_the_upright_image(folder):
    """The boxes come from the header's size, turned upright (width and height swap for a
    photo taken sideways), and are cut from the upright pixels: the crops of each file equal
    those of a PNG of its expected upright pixels."""
    root, expected = folder
    specs = [CropSpec(16, (0.3, 1.0)), CropSpec(12, (0.1, 0.5))]  # no DCT reduction
    rng = np.random.default_rng(0)
    for name, want in expected.items():
        data = (root / name).read_bytes()
        buf = io.BytesIO()
        Image.fromarray(want).save(buf, "PNG")
        for _ in range(3):
            u = rng.random((2, 2 * ATTEMPTS + 2))
            for got, ref in zip(crop_views(data, name, specs, u),
                                crop_views(buf.getvalue(), "ref", specs, u), strict=True):
                assert torch.equal(got, ref), name


def test_the_array_cache_holds_the_upright_images(folder, tmp_path):
    root, expected = folder
    files = D.ImageFolder(root)
    cached = D.ArrayCache.build_or_load(files, tmp_path / "cache", size=(16, 16), workers=1)
    for i, (path, _) in enumerate(files.samples):
        want = np.asarray(Image.fromarray(expected[_rel(root, path)]).resize(
            (16, 16), Image.Resampling.BILINEAR))
        np.testing.assert_array_equal(cached[i][0].numpy().transpose(1, 2, 0), want,
                                      err_msg=path)


def test_a_cache_built_before_orientation_is_rebuilt_not_reused(folder, tmp_path):
    """Its sidecar says format 1 (images as stored): it is decoded again, with a warning."""
    root, _ = folder
    files = D.ImageFolder(root)
    first = D.ArrayCache.build_or_load(files, tmp_path, size=(16, 16), workers=1)
    sidecar = first.path.with_suffix(".json")
    meta = json.loads(sidecar.read_text())
    assert meta["version"] == cache_mod.FORMAT_VERSION == 2
    sidecar.write_text(json.dumps({**meta, "version": 1}))
    with pytest.warns(UserWarning, match="it was built as format 1, this version of "
                                         "contrastkit reads format 2"):
        again = D.ArrayCache.build_or_load(files, tmp_path, size=(16, 16), workers=1)
    assert again.built


def test_headers_compare_upright_sizes(tmp_path):
    """A 40x24 JPEG stored sideways (orientation 6) is a 24x40 image like the others: one
    size, not "images of different sizes" (and a stored 24x40 one turned is another size)."""
    _save(tmp_path / "a" / "upright.png", _pixels(0), "PNG", {}, None)
    _save(tmp_path / "a" / "sideways.jpg", _pixels(1).swapaxes(0, 1).copy(), "JPEG", {}, 6)
    check_headers(D.ImageFolder(tmp_path))
    _save(tmp_path / "a" / "turned.png", _pixels(2), "PNG", {}, 8)
    with pytest.raises(decode.MixedImageSizesError, match=r"turned\.png is 24x40"):
        check_headers(D.ImageFolder(tmp_path))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_orient_is_exif_transpose(orientation):
    pixels = _pixels(orientation)
    buf = io.BytesIO()
    exif = Image.Exif()
    exif[decode.ORIENTATION_TAG] = orientation
    Image.fromarray(pixels).save(buf, "PNG", exif=exif.tobytes())
    with Image.open(buf) as image:
        assert decode.exif_orientation(image) == orientation
        want = np.asarray(ImageOps.exif_transpose(image).convert("RGB"))
    np.testing.assert_array_equal(decode.orient(pixels, orientation), want)
    assert decode.oriented_size(H, W, orientation) == want.shape[:2]


@pytest.mark.parametrize("orientation", range(1, 9))
def test_dali_boxes_on_the_stored_pixels_turned_upright_are_the_upright_crops(orientation):
    """``data.crops: dali`` decodes the stored pixels (DALI's ``adjust_orientation`` off): the
    box drawn on the upright image, mapped to the stored pixels and the crop turned back, is
    the crop of the upright image."""
    stored = torch.from_numpy(_pixels(orientation).copy())
    upright = torch.from_numpy(decode.orient(stored.numpy(), orientation).copy())
    height, width = upright.shape[:2]
    rng = np.random.default_rng(orientation)
    for spec in (CropSpec(8, (0.1, 0.6)), CropSpec(8, (0.1, 0.6), ratio=(1.0, 1.0))):
        for _ in range(5):
            x0, y0, w, h = crop_box(rng.random(2 * ATTEMPTS + 2), height, width, spec)
            sx, sy, sw, sh = stored_box((x0, y0, w, h), H, W, orientation)
            cut = stored[sy:sy + sh, sx:sx + sw]
            assert torch.equal(upright_views(cut[None], [orientation])[0],
                               upright[y0:y0 + h, x0:x0 + w])


def test_a_file_pillow_cannot_orient_reads_as_stored(tmp_path):
    """A broken EXIF block is not a broken image: it reads as stored, as most viewers show it."""
    path = tmp_path / "odd.jpg"
    _save(path, _pixels(0), "JPEG", {"quality": 95}, None)
    data = path.read_bytes()
    broken = data[:2] + b"\xff\xe1\x00\x10Exif\x00\x00MM\x00\x2a\xff\xff\xff\xff" + data[2:]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        image = decode.decode_image(broken)
    assert image.shape == (3, H, W)
