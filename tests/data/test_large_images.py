"""Issue 18 item 7: a very large image read for a small output is never held at full size.

The spies record the size of every image Pillow decodes (``ImageFile.load`` and the direct
``Image.frombytes`` path) and the shape of the array that reaches the float32 resize, so the
tests see what a decode materialises without measuring memory.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import torch
from PIL import Image, ImageFile

from contrastkit.data.decode import images as decode
from contrastkit.data.loading import crops as loader_crops
from contrastkit.data.loading.crops import CropSpec, crop_views
from contrastkit.data.sources import registry
from contrastkit.data.sources import wrappers as W
from contrastkit.data.sources.images._folder import ImageFiles

H, W_ = 1000, 1200  # (height, width) of the "large" image; the load size is 64
LOAD = 64


def _smooth(height: int = H, width: int = W_) -> np.ndarray:
    rng = np.random.default_rng(0)
    small = (rng.random((height // 100 + 2, width // 100 + 2, 3)) * 255).astype(np.uint8)
    return np.asarray(Image.fromarray(small).resize((width, height), Image.BILINEAR))


@pytest.fixture
def decoded(monkeypatch):
    """Sizes ``(w, h)`` of the images Pillow decodes, and shapes reaching the resize."""
    seen: dict[str, list] = {"decoded": [], "resized": []}
    load, frombytes = ImageFile.ImageFile.load, Image.frombytes
    interpolate = torch.nn.functional.interpolate

    def spy_load(self):
        seen["decoded"].append(tuple(self.size))
        return load(self)

    def spy_frombytes(mode, size, data, *args):
        seen["decoded"].append(tuple(size))
        return frombytes(mode, size, data, *args)

    def spy_interpolate(x, *args, **kwargs):
        seen["resized"].append(tuple(x.shape[-2:]))
        return interpolate(x, *args, **kwargs)

    monkeypatch.setattr(ImageFile.ImageFile, "load", spy_load)
    monkeypatch.setattr(Image, "frombytes", spy_frombytes)
    monkeypatch.setattr(torch.nn.functional, "interpolate", spy_interpolate)
    return seen


def _folder(tmp_path, suffix: str):
    path = tmp_path / "root" / "train" / "x" / f"big{suffix}"
    path.parent.mkdir(parents=True)
    Image.fromarray(_smooth()).save(path, **({"quality": 95} if suffix == ".jpg" else {}))
    return path


@pytest.mark.parametrize("route", ["jpeg", "jpeg-pillow", "png"])
def test_a_folder_read_at_a_load_size_never_holds_the_full_image(tmp_path, monkeypatch,
                                                                 decoded, route):
    path = _folder(tmp_path, ".png" if route == "png" else ".jpg")
    if route == "jpeg-pillow":  # above MAX_IMAGE_PIXELS, below twice it: Pillow's own path
        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", H * W_ - 1)
    dataset, _ = registry.open_split("folder", str(tmp_path / "root"), "train", load_size=LOAD)
    decoded["decoded"].clear()  # from here: the read
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        image, _ = dataset[0]
    assert image.shape == (3, LOAD, LOAD)
    if route == "png":  # no reduced decode: the PNG itself, then a box average before the rest
        assert max(w * h for w, h in decoded["decoded"]) == H * W_
    else:  # the JPEG is decoded at 1/8 (1000 // 64 = 15 >= 8): 150 x 125, never larger
        assert max(w * h for w, h in decoded["decoded"]) == (W_ // 8) * (H // 8)
    # the float32 resize gets the image reduced 8 times, not the 1000 x 1200 one
    assert decoded["resized"] == [(H // 8, W_ // 8)]
    # the same picture as the full decode resized directly (within JPEG's scaled IDCT)
    full = torch.from_numpy(decode.decode_image(path))
    reference = W.ResizedSquare([(full, 0)], LOAD)[0][0]
    difference = (image.float() - reference.float()).abs()
    assert difference.mean() < (1.0 if route == "png" else 2.0)


def test_reduced_decode_of_a_png_is_the_rounded_box_mean(tmp_path):
    pixels = (np.random.default_rng(1).random((12, 20, 3)) * 255).astype(np.uint8)
    Image.fromarray(pixels).save(tmp_path / "a.png")
    array, full = decode.decode_scaled(tmp_path / "a.png", None, lambda h, w: 4)
    assert full == (12, 20) and array.shape == (3, 3, 5)
    mean = pixels.astype(np.float64).reshape(3, 4, 5, 4, 3).mean(axis=(1, 3))
    np.testing.assert_array_equal(array.transpose(1, 2, 0), np.floor(mean + 0.5))
    sides = decode.decode_scaled(tmp_path / "a.png", None, lambda h, w: 7)[0].shape[1:]
    assert sides == (3, 5)  # 7 asked: 4 applied (as libjpeg's scales), ceil(12 / 4), ceil(20 / 4)
    sides = decode.decode_scaled(tmp_path / "a.png", None, lambda h, w: 8)[0].shape[1:]
    assert sides == (2, 3)  # ceil(12 / 8), ceil(20 / 8)
    assert np.array_equal(decode.decode_scaled(tmp_path / "a.png", None, lambda h, w: 1)[0],
                          decode.decode_image(tmp_path / "a.png"))


def test_sixteen_bit_reduced_decode_scales_after_averaging(tmp_path):
    levels = np.full((4, 4), 65535, np.uint16)
    levels[:, :2] = 257
    Image.fromarray(levels).save(tmp_path / "deep.png")
    array = decode.decode_scaled(tmp_path / "deep.png", None, lambda h, w: 2)[0]
    np.testing.assert_array_equal(array[0], [[1, 255], [1, 255]])


def test_loader_crops_of_a_png_are_cut_from_a_reduced_image(tmp_path, monkeypatch):
    Image.fromarray(_smooth()).save(tmp_path / "big.png")
    shapes = []
    decode = loader_crops.decode_scaled

    def spy(data, name, reduction):
        array, full = decode(data, name, reduction)
        shapes.append(array.shape)
        return array, full

    monkeypatch.setattr(loader_crops, "decode_scaled", spy)
    specs = [CropSpec(16, (0.5, 1.0))] * 2
    uniforms = np.random.default_rng(0).random((2, 2 * loader_crops.ATTEMPTS + 2))
    views = crop_views((tmp_path / "big.png").read_bytes(), "big.png", specs, uniforms)
    assert [tuple(v.shape) for v in views] == [(3, 16, 16)] * 2
    assert shapes == [(3, H // 8, W_ // 8)]  # boxes of >= 700 pixels a side: 1/8 leaves 16+


def test_the_skip_corrupt_check_decodes_a_jpeg_at_an_eighth(tmp_path, decoded):
    path = _folder(tmp_path, ".jpg")
    decoded["decoded"].clear()
    files = ImageFiles([(str(path), 0)], ["x"], path.parent, skip_corrupt=True)
    assert len(files) == 1
    assert decoded["decoded"] == [(W_ // 8, H // 8)]
    truncated = path.with_name("cut.jpg")
    truncated.write_bytes(path.read_bytes()[:-2000])  # still found at 1/8: all data is read
    with pytest.warns(UserWarning, match="skipped 1 unreadable"):
        kept = ImageFiles([(str(path), 0), (str(truncated), 0)], ["x"], path.parent,
                          skip_corrupt=True)
    assert [p for p, _ in kept.samples] == [str(path)]


def _file_readers(path):
    """Each file dataset that evaluation wraps in ``ResizedSquare``, over the one file."""
    from contrastkit.data.sources.transfer_sets import FileList, FileListImages
    from contrastkit.data.sources.voc07 import VOC07Images, VOC07Split

    voc = VOC07Split("test", ["big"], ["x"], np.ones((1, 1), np.int8), [path])
    return {"voc07": VOC07Images(voc), "finetune": FileListImages(FileList([path], [0], ["x"]))}


@pytest.mark.parametrize("reader", ["voc07", "finetune", "shards"])
def test_evaluation_readers_decode_a_large_jpeg_reduced(tmp_path, decoded, reader):
    path = _folder(tmp_path, ".jpg")
    if reader == "shards":
        from contrastkit.data.loading.pack import pack_folder
        from contrastkit.data.sources.shards import ShardImages

        pack_folder(tmp_path / "root", tmp_path / "packed", shards=True)
        dataset = ShardImages(tmp_path / "packed" / "train")
    else:
        dataset = _file_readers(path)[reader]
    decoded["decoded"].clear()
    image, label = W.ResizedSquare(dataset, LOAD)[0]
    assert image.shape == (3, LOAD, LOAD) and label == 0
    assert decoded["decoded"] == [(W_ // 8, H // 8)]  # 1/8, never 1200 x 1000
    assert decoded["resized"] == [(H // 8, W_ // 8)]
    full = torch.from_numpy(decode.decode_image(path))
    reference = W.ResizedSquare([(full, 0)], LOAD)[0][0]
    assert (image.float() - reference.float()).abs().mean() < 2.0
    assert tuple(dataset[0][0].shape) == (3, H, W_)  # read alone, the image is whole


def test_finetune_file_list_reduces_a_png_before_the_resize(tmp_path, decoded):
    path = _folder(tmp_path, ".png")
    decoded["resized"].clear()
    image, _ = W.ResizedSquare(_file_readers(path)["finetune"], LOAD)[0]
    assert image.shape == (3, LOAD, LOAD)
    assert decoded["resized"] == [(H // 8, W_ // 8)]  # box-averaged, not the 1000 x 1200 one


def test_pack_decodes_a_large_jpeg_reduced_for_its_bounded_side(tmp_path, decoded):
    from contrastkit.data.loading.pack import encode_bounded

    path = _folder(tmp_path, ".jpg")
    data = path.read_bytes()
    decoded["decoded"].clear()
    packed, ext = encode_bounded(data, str(path), 200, 95)
    # 1200 // 200 = 6: decoded at 1/4 (300 x 250), the largest scale still above 200 x 167
    assert ext == ".jpg" and decoded["decoded"][0] == (W_ // 4, H // 4)
    assert max(w * h for w, h in decoded["decoded"]) == (W_ // 4) * (H // 4)
    out = np.asarray(Image.open(io.BytesIO(packed)))
    assert out.shape == (167, 200, 3)
    # the resize of the full image, as pack wrote it before: the same picture
    whole = Image.fromarray(decode.decode_image(data).transpose(1, 2, 0))
    reference = np.asarray(whole.resize((200, 167), Image.Resampling.BICUBIC))
    assert np.abs(out.astype(np.float64) - reference).mean() < 2.0
    decoded["decoded"].clear()  # kept as it is (no bound, or within it): checked at 1/8
    assert encode_bounded(data, str(path), None, 95) == (data, None)
    assert encode_bounded(data, str(path), 1200, 95) == (data, None)
    assert encode_bounded(str(path), str(path), 1200, 95) == (data, None)  # a path: its bytes
    assert decoded["decoded"] == [(W_ // 8, H // 8)] * 3
    with pytest.raises(decode.UnreadableImageError, match=r"cut\.jpg"):
        encode_bounded(data[:-2000], "cut.jpg", None, 95)  # truncation still found at 1/8


def test_a_png_path_is_streamed_to_pillow_not_read_whole_first(tmp_path, monkeypatch):
    pixels = (np.random.default_rng(2).random((40, 30, 3)) * 255).astype(np.uint8)
    Image.fromarray(pixels).save(tmp_path / "a.png")
    opened = []
    image_open = Image.open

    def spy(fp, *args, **kwargs):
        opened.append(fp)
        return image_open(fp, *args, **kwargs)

    monkeypatch.setattr(Image, "open", spy)
    array = decode.decode_image(tmp_path / "a.png")
    np.testing.assert_array_equal(array.transpose(1, 2, 0), pixels)
    assert opened == [tmp_path / "a.png"]  # the path: Pillow reads the file block by block
    assert decode.decode_scaled(str(tmp_path / "a.png"), None, lambda h, w: 2)[1] == (40, 30)
    assert opened[-1] == str(tmp_path / "a.png")
    decode.decode_image((tmp_path / "a.png").read_bytes())  # bytes stay bytes
    assert isinstance(opened[-1], io.BytesIO)
    (tmp_path / "cut.png").write_bytes((tmp_path / "a.png").read_bytes()[:-40])
    with pytest.raises(decode.UnreadableImageError, match=r"cut\.png: unreadable"):
        decode.decode_image(tmp_path / "cut.png")
