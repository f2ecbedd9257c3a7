"""Tests of contrastkit.data.loading.crops: the views' random resized crops cut from each full
image in the loader (SCE Table 1 / DySTreSS: crops of the whole image), and their device half
(contrastkit.data.augment.views ... from_crops)."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from contrastkit.data import augment as A
from contrastkit.data.augment import views as V
from contrastkit.data.augment._geometry import crop_boxes_from_uniforms
from contrastkit.data.decode.images import collate_images
from contrastkit.data.loading.crops import (
    ATTEMPTS,
    CropSpec,
    EpochKeys,
    FileReader,
    LoaderCrops,
    crop_box,
    crop_views,
    dct_reduction,
    decode_reduced,
    encoded_reader,
    keyed_uniforms,
)
from contrastkit.data.sources.images.datasets import ImageFolder
from contrastkit.data.sources.wrappers import fixed_subset, select_classes

pytestmark = pytest.mark.usefixtures("one_thread")


def smooth_image(height: int, width: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = (rng.random((height // 8 + 2, width // 8 + 2, 3)) * 255).astype(np.uint8)
    return np.asarray(Image.fromarray(base).resize((width, height), Image.BICUBIC))


def encode(array: np.ndarray, fmt: str = "JPEG") -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    return buf.getvalue()


@pytest.mark.parametrize(("height", "width", "scale"), [
    (375, 500, (0.2, 1.0)), (40, 90, (0.08, 1.0)), (100, 30, (0.9, 1.0)), (10, 100, (0.9, 1.0)),
    (7, 5, (0.086, 0.429)),
])
def test_boxes_equal_the_device_sampler_on_the_same_uniforms(height, width, scale) -> None:
    u = torch.rand(400, 2 * ATTEMPTS + 2, generator=torch.Generator().manual_seed(height),
                   dtype=torch.float64)
    spec = CropSpec(224, scale)
    device = crop_boxes_from_uniforms(u, height, width, scale, spec.ratio)
    loader = [crop_box(row, height, width, spec) for row in u.tolist()]
    assert torch.equal(device, torch.tensor(loader, dtype=torch.float64))


def test_boxes_are_drawn_from_the_full_image_not_a_centre_square() -> None:
    # a 3:1 image: a crop within the centre square never starts left of x = 100 nor ends right
    # of x = 200; crops of the full image do both, and cover the whole width
    dataset = LoaderCrops(FileReader([], []), [CropSpec(16, (0.2, 1.0))], seed=3)
    boxes = [crop_box(dataset.uniforms(i, 0)[0], 100, 300, dataset.specs[0]) for i in range(300)]
    assert min(b[0] for b in boxes) < 20 and max(b[0] + b[2] for b in boxes) > 280
    assert sum(b[0] < 100 for b in boxes) > 100 and sum(b[0] + b[2] > 200 for b in boxes) > 100
    # the largest crops are wider than the image is high (the square's side)
    assert max(b[2] for b in boxes) > 100


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_crop_views_are_the_uint8_crop_resize_of_the_decoded_image(fmt: str) -> None:
    array = smooth_image(60, 90)
    data = encode(array, fmt)
    decoded = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    specs = [CropSpec(40, (0.2, 1.0)), CropSpec(30, (0.05, 0.3))]  # no DCT reduction
    u = np.random.default_rng(0).random((2, 2 * ATTEMPTS + 2))
    views = crop_views(data, "x", specs, u)
    for view, row, spec in zip(views, u, specs, strict=True):
        x0, y0, w, h = crop_box(row, 60, 90, spec)
        crop = torch.from_numpy(decoded[y0 : y0 + h, x0 : x0 + w].transpose(2, 0, 1).copy())
        expected = torch.nn.functional.interpolate(
            crop[None].float(), size=(spec.size, spec.size), mode="bilinear",
            align_corners=False, antialias=True)[0]
        assert view.dtype == torch.uint8 and view.shape == (3, spec.size, spec.size)
        assert (view.float() - expected).abs().max() <= 1.0 + (fmt == "JPEG")
        # torchvision's RandomResizedCrop on a PIL image: crop, then resize
        pil = Image.fromarray(decoded).crop((x0, y0, x0 + w, y0 + h)).resize(
            (spec.size, spec.size), Image.BILINEAR)
        pil_chw = torch.from_numpy(np.asarray(pil).transpose(2, 0, 1).copy()).float()
        assert (view.float() - pil_chw).abs().max() <= 2.0 + (fmt == "JPEG")


def test_whole_image_crop_shows_the_sides() -> None:
    # left third red, right third blue: a crop of the full 3:1 image keeps both sides
    array = np.full((30, 90, 3), 128, np.uint8)
    array[:, :30] = (255, 0, 0)
    array[:, 60:] = (0, 0, 255)
    spec = CropSpec(12, (1.0, 1.0), ratio=(3.0, 3.0))
    (view,) = crop_views(encode(array, "PNG"), "x", [spec], np.full((1, 22), 0.5))
    assert view[:, :, 0].float().mean(1).tolist() == pytest.approx([255, 0, 0], abs=2)
    assert view[:, :, -1].float().mean(1).tolist() == pytest.approx([0, 0, 255], abs=2)


def test_dct_reduction_keeps_every_view_at_least_its_side() -> None:
    specs = [CropSpec(100, (0.2, 1.0)), CropSpec(50, (0.1, 0.5))]
    assert dct_reduction([(0, 0, 800, 420), (0, 0, 420, 900)], specs) == 4
    assert dct_reduction([(0, 0, 800, 420), (0, 0, 90, 900)], specs) == 1
    assert dct_reduction([(0, 0, 1000, 900), (0, 0, 400, 400)], specs) == 8
    assert dct_reduction([(0, 0, 300, 199), (0, 0, 400, 400)], specs) == 1


def test_reduced_jpeg_decode_is_close_to_the_full_decode() -> None:
    rng = np.random.default_rng(2)
    cells = (rng.random((10, 12, 3)) * 255).astype(np.uint8)  # a smooth 480x640 photo
    data = encode(np.asarray(Image.fromarray(cells).resize((640, 480), Image.BICUBIC)))
    spec = CropSpec(32, (0.5, 1.0))
    u = np.random.default_rng(1).random((1, 2 * ATTEMPTS + 2))
    box = crop_box(u[0], 480, 640, spec)
    assert dct_reduction([box], [spec]) == 8  # boxes of at least 0.5 x 480 x 640 pixels
    (view,) = crop_views(data, "x", [spec], u)
    x0, y0, w, h = box
    full = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))[y0 : y0 + h, x0 : x0 + w]
    expected = torch.nn.functional.interpolate(
        torch.from_numpy(full.transpose(2, 0, 1).copy())[None].float(), size=(32, 32),
        mode="bilinear", antialias=True)[0]
    diff = (view.float() - expected).abs()
    # the 1/8 DCT-scaled decode is the same picture (box edges rounded to 8 full pixels)
    assert diff.mean() < 5.0


@pytest.mark.parametrize("backend", ["simplejpeg", "pillow"])
def test_reduced_decode_is_the_dct_scaled_image(backend: str, monkeypatch) -> None:
    if backend == "pillow":
        monkeypatch.setitem(__import__("sys").modules, "simplejpeg", None)  # not installed
    else:
        pytest.importorskip("simplejpeg")
    data = encode(smooth_image(375, 500))
    for scale in (1, 2, 4, 8):
        array = decode_reduced(data, scale)
        assert array is not None and array.shape == (-(-375 // scale), -(-500 // scale), 3)
        with Image.open(io.BytesIO(data)) as img:  # Pillow's own reduced decode (draft mode)
            img.draft("RGB", (500 // scale, 375 // scale))
            expected = np.asarray(img.convert("RGB"))
        assert expected.shape == array.shape
        assert np.abs(array.astype(int) - expected).max() <= 2


def test_unreadable_file_is_named() -> None:
    with pytest.raises(ValueError, match=r"broken\.jpg"):
        crop_views(b"\xff\xd8 not a jpeg", "broken.jpg", [CropSpec(8, (0.2, 1.0))],
                   np.zeros((1, 22)))


def write_folder(root: Path, sizes=((30, 40), (50, 20), (24, 24))) -> Path:
    for c, name in enumerate(("a", "b")):
        (root / name).mkdir(parents=True)
        for i, (h, w) in enumerate(sizes):
            Image.fromarray(smooth_image(h, w, seed=3 * c + i)).save(root / name / f"{i}.jpg")
    return root


def test_items_are_a_function_of_seed_epoch_and_index(tmp_path: Path) -> None:
    folder = ImageFolder(write_folder(tmp_path))
    specs = [CropSpec(16, (0.2, 1.0)), CropSpec(16, (0.2, 1.0)), CropSpec(8, (0.1, 0.4))]
    one = LoaderCrops(encoded_reader(folder), specs, seed=7)
    other = LoaderCrops(encoded_reader(folder), specs, seed=7)  # another worker, another run
    views, label = one[(4, 2)]
    assert label == folder.targets[4] and [v.shape[-1] for v in views] == [16, 16, 8]
    assert all(torch.equal(a, b) for a, b in zip(views, other[(4, 2)][0], strict=True))
    assert not torch.equal(views[0], views[1])  # each view its own box
    assert not torch.equal(views[0], one[(4, 3)][0][0])  # another epoch, other boxes
    assert not torch.equal(views[0], LoaderCrops(encoded_reader(folder), specs, 8)[(4, 2)][0][0])


def test_a_resumed_loader_crops_as_the_uninterrupted_one(tmp_path: Path) -> None:
    folder = ImageFolder(write_folder(tmp_path))
    dataset = LoaderCrops(encoded_reader(folder), [CropSpec(12, (0.2, 1.0))] * 2, seed=1)

    def epoch_batches(keys: EpochKeys, workers: int) -> list[torch.Tensor]:
        loader = DataLoader(dataset, batch_size=2, sampler=keys, num_workers=workers)
        return [torch.cat(views) for views, _ in loader]

    running = EpochKeys(list(range(len(dataset))))
    epoch_batches(running, 0)  # epoch 0
    running.set_epoch(1)
    uninterrupted = epoch_batches(running, 0)
    resumed = EpochKeys(list(range(len(dataset))))  # a new process, started at epoch 1
    resumed.set_epoch(1)
    again = epoch_batches(resumed, 2)  # and read by 2 worker processes
    assert all(torch.equal(a, b) for a, b in zip(uninterrupted, again, strict=True))


def test_encoded_reader_follows_class_selection_and_subsets(tmp_path: Path) -> None:
    folder = ImageFolder(write_folder(tmp_path))
    paths = [p for p, _ in folder.samples]
    for dataset in (select_classes(folder, ["b"]), fixed_subset(folder, 4, seed=0),
                    fixed_subset(select_classes(folder, ["b", "a"]), 3, seed=1)):
        reader = encoded_reader(dataset)
        assert len(reader) == len(dataset) and reader.classes == dataset.classes
        for i in range(len(dataset)):
            data, path, label = reader.read(i)
            image, expected = dataset[i]
            assert label == expected and data == Path(path).read_bytes()
            assert torch.equal(image, folder[paths.index(path)][0])
    with pytest.raises(ValueError, match=r"data\.crops"):
        encoded_reader(torch.utils.data.TensorDataset(torch.zeros(2)))


@pytest.mark.parametrize("kind", ["two", "multicrop"])
def test_device_half_flips_and_augments_each_view(kind: str) -> None:
    if kind == "two":
        gen = V.TwoViews(A.preset("weak", 8), A.preset("strong", 8))
    else:
        gen = V.make_views("multicrop", 16, preset="weak", global_presets=("weak", "weak"))
    specs = gen.crop_specs()
    assert [s.size for s in specs] == ([8, 8] if kind == "two" else [16, 16, 14, 11, 9, 8])
    crops = [torch.randint(0, 256, (64, 3, s.size, s.size), dtype=torch.uint8) for s in specs]
    torch.manual_seed(0)
    out = gen.from_crops(crops)
    assert [tuple(v.shape) for v in out] == [(64, 3, s.size, s.size) for s in specs]
    first = gen.online if kind == "two" else gen.global_views[0]
    flip = first.steps[0].last_params["flip"]
    assert 10 < int(flip.sum()) < 54
    raw = crops[0].float() / 255
    assert torch.allclose(out[0], torch.where(flip.view(-1, 1, 1, 1), raw.flip(-1), raw))
    with pytest.raises(ValueError, match="loader crops"):
        gen.from_crops(crops[:1])
    with pytest.raises(ValueError, match="for a"):
        gen.from_crops([c[..., :-1, :-1] for c in crops])


@pytest.mark.parametrize("mode", ["L", "CMYK"])
def test_gray_and_cmyk_jpegs_become_rgb_crops(mode: str) -> None:
    gray = smooth_image(40, 50)[..., 0]
    pixels = gray if mode == "L" else np.stack([gray, gray // 2, 255 - gray, gray // 3], -1)
    buf = io.BytesIO()
    Image.fromarray(pixels, mode).save(buf, "JPEG", quality=95)
    spec = CropSpec(24, (0.5, 1.0))  # no DCT reduction for these boxes
    (view,) = crop_views(buf.getvalue(), "x", [spec], np.full((1, 2 * ATTEMPTS + 2), 0.3))
    x0, y0, w, h = crop_box(np.full(2 * ATTEMPTS + 2, 0.3), 40, 50, spec)
    decoded = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
    crop = torch.from_numpy(decoded[y0 : y0 + h, x0 : x0 + w].transpose(2, 0, 1).copy())
    expected = torch.nn.functional.interpolate(crop[None].float(), size=(24, 24),
                                               mode="bilinear", antialias=True)[0]
    assert view.shape == (3, 24, 24) and (view.float() - expected).abs().max() <= 2.0
    if mode == "L":
        assert torch.equal(view[0], view[1]) and torch.equal(view[1], view[2])


def test_keyed_uniforms_are_the_hash_words_on_the_53_bit_grid() -> None:
    u = keyed_uniforms("7,2,4", 3, 22)
    words = np.frombuffer(hashlib.shake_128(b"7,2,4").digest(8 * 66), "<u8")
    assert np.array(u).ravel().tolist() == ((words >> np.uint64(11)) * 2.0**-53).tolist()
    assert keyed_uniforms("7,2,4", 3, 22) == u and keyed_uniforms("7,2,5", 3, 22) != u
    # uniform on [0, 1): 20 bins of 40,000 draws within chi-square's 0.999 quantile (43.8)
    flat = np.array([keyed_uniforms(f"0,0,{i}", 2, 20) for i in range(1000)]).ravel()
    assert flat.min() >= 0.0 and flat.max() < 1.0
    counts = np.bincount((flat * 20).astype(int), minlength=20)
    assert ((counts - 2000) ** 2 / 2000).sum() < 43.8
    dataset = LoaderCrops(FileReader([], []), [CropSpec(8, (0.2, 1.0))] * 2, seed=7)
    assert dataset.uniforms(4, 2) == keyed_uniforms("7,2,4", 2, 2 * ATTEMPTS + 2)


def test_views_are_channels_last_and_collate_to_the_contiguous_batch(tmp_path: Path) -> None:
    folder = ImageFolder(write_folder(tmp_path))
    dataset = LoaderCrops(encoded_reader(folder), [CropSpec(16, (0.2, 1.0))] * 2, seed=2)
    items = [dataset[(i, 1)] for i in range(4)]
    view = items[0][0][0]
    assert view.shape == (3, 16, 16) and view.stride() == (1, 48, 3)  # the resize's layout
    views, _ = collate_images(items)
    assert views[0].is_contiguous() and views[0].shape == (4, 3, 16, 16)
    for b, (item_views, _) in enumerate(items):
        assert torch.equal(views[1][b], item_views[1].contiguous())
    # the same crops from a NumPy array of the uniforms as from the lists
    u = dataset.uniforms(0, 1)
    data = Path(folder.samples[0][0]).read_bytes()
    for a, b in zip(crop_views(data, "x", dataset.specs, np.array(u)), items[0][0], strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("backend", ["simplejpeg", "pillow"])
def test_fast_decode_is_libjpegs_fast_idct_within_grey_levels(backend: str, monkeypatch) -> None:
    data = encode(smooth_image(375, 500))
    accurate = decode_reduced(data, 1).astype(int)
    fast = decode_reduced(data, 1, fast=True).astype(int) if backend == "simplejpeg" else None
    if backend == "pillow":
        monkeypatch.setitem(__import__("sys").modules, "simplejpeg", None)  # not installed
        # Pillow has no fast-IDCT switch alone: the accurate decode, whatever fast says
        assert np.array_equal(decode_reduced(data, 1, fast=True), decode_reduced(data, 1))
        return
    simplejpeg = pytest.importorskip("simplejpeg")
    assert np.array_equal(fast, simplejpeg.decode_jpeg(data, "RGB", fastdct=True))
    diff = np.abs(fast - accurate)
    assert 0.1 < diff.mean() < 2.5 and diff.max() <= 20  # another decode, close to the first
    spec = CropSpec(224, (0.2, 1.0))  # boxes of a 500x375 image: no reduction
    u = np.random.default_rng(0).random((1, 2 * ATTEMPTS + 2))
    (a,) = crop_views(data, "x", [spec], u)
    (b,) = crop_views(data, "x", [spec], u, fast_decode=True)
    assert not torch.equal(a, b) and (a.float() - b.float()).abs().mean() < 2.0
