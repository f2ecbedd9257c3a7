"""Image-file datasets (ImageFolder, TinyImageNet, ImageNet100) and long-tailed subsets."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from own_images import make_own_folder
from PIL import Image

from contrastkit.data.decode import images as decode
from contrastkit.data.sources.images import datasets as D

RNG = np.random.default_rng(7)


def write_png(path: Path, size: tuple[int, int] = (6, 5), mode: str = "RGB") -> np.ndarray:
    """Write a random lossless image; return its pixels as RGB uint8 (3, H, W)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = size
    pixels = RNG.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    img = Image.fromarray(pixels)
    if mode == "L":
        img = img.convert("L")
        pixels = np.repeat(np.asarray(img)[..., None], 3, axis=2)
    img.save(path, format="PNG")
    return pixels.transpose(2, 0, 1)


def make_folder(root: Path) -> dict[str, np.ndarray]:
    truth = {}
    truth["cat/b.png"] = write_png(root / "cat" / "b.png")
    truth["cat/a.PNG"] = write_png(root / "cat" / "a.PNG", mode="L")
    truth["ant/x.png"] = write_png(root / "ant" / "x.png")
    truth["ant/sub/y.png"] = write_png(root / "ant" / "sub" / "y.png")
    truth["dog/z.png"] = write_png(root / "dog" / "z.png")
    (root / "dog" / "notes.txt").write_text("not an image")
    return truth


def test_image_folder_round_trip(tmp_path: Path) -> None:
    truth = make_folder(tmp_path)
    ds = D.ImageFolder(tmp_path)
    assert ds.classes == ["ant", "cat", "dog"]
    rel = [str(Path(p).relative_to(tmp_path)) for p, _ in ds.samples]
    assert rel == ["ant/x.png", "ant/sub/y.png", "cat/a.PNG", "cat/b.png", "dog/z.png"]
    assert ds.targets == [0, 0, 1, 1, 2]
    for i, name in enumerate(rel):
        image, label = ds[i]
        assert image.dtype == torch.uint8 and image.shape == (3, 6, 5)
        assert torch.equal(image, torch.from_numpy(truth[name]))
        assert label == ds.targets[i]


def test_image_folder_class_selection_and_errors(tmp_path: Path) -> None:
    make_folder(tmp_path)
    ds = D.ImageFolder(tmp_path, classes=["dog", "ant"])
    assert ds.classes == ["dog", "ant"] and ds.targets == [0, 1, 1]
    with pytest.raises(ValueError, match=r"not in .*\['bird', 'cow'\]"):
        D.ImageFolder(tmp_path, classes=["cat", "bird", "cow"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty contains no image"):
        D.ImageFolder(tmp_path)
    with pytest.raises(ValueError, match="no class sub-folders"):
        D.ImageFolder(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="missing"):
        D.ImageFolder(tmp_path / "missing")


def test_image_folder_corrupt_files(tmp_path: Path) -> None:
    make_folder(tmp_path)
    (tmp_path / "cat" / "c_garbage.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    good = tmp_path / "dog" / "z.png"
    (tmp_path / "dog" / "trunc.png").write_bytes(good.read_bytes()[:60])
    ds = D.ImageFolder(tmp_path)  # lazy: constructing works, reading the bad file fails
    assert len(ds) == 7
    bad = next(i for i, (p, _) in enumerate(ds.samples) if p.endswith("c_garbage.jpg"))
    with pytest.raises(decode.UnreadableImageError, match=r"c_garbage\.jpg"):
        ds[bad]
    with pytest.warns(UserWarning, match=r"skipped 2 unreadable") as record:
        skipping = D.ImageFolder(tmp_path, skip_corrupt=True)
    assert len([w for w in record if "unreadable" in str(w.message)]) == 1
    assert "c_garbage.jpg" in str(record[0].message) and "trunc.png" in str(record[0].message)
    assert len(skipping) == 5 and skipping.targets == [0, 0, 1, 1, 2]
    assert all(skipping[i][0].shape == (3, 6, 5) for i in range(len(skipping)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        D.ImageFolder(tmp_path, classes=["ant"], skip_corrupt=True)  # nothing bad: no warning


def test_decode_image_modes_and_resize(tmp_path: Path) -> None:
    rgba = Image.fromarray(RNG.integers(0, 256, size=(4, 4, 4), dtype=np.uint8), "RGBA")
    rgba.save(tmp_path / "a.png")
    arr = decode.decode_image(tmp_path / "a.png")
    assert arr.shape == (3, 4, 4)
    assert np.array_equal(arr, np.asarray(rgba.convert("RGB")).transpose(2, 0, 1))
    Image.fromarray(RNG.integers(0, 256, size=(64, 48, 3), dtype=np.uint8)).save(
        tmp_path / "b.jpg", quality=90)
    small = decode.decode_image(tmp_path / "b.jpg", size=(16, 12))
    assert small.shape == (3, 16, 12) and small.dtype == np.uint8
    with pytest.raises(FileNotFoundError):
        decode.decode_image(tmp_path / "none.png")


@pytest.mark.parametrize("mode", ["RGB", "L", "CMYK"])
@pytest.mark.parametrize("options", [{}, {"progressive": True}, {"subsampling": 0}])
def test_jpeg_fast_path_matches_pillow(tmp_path: Path, mode: str, options: dict) -> None:
    pixels = RNG.integers(0, 256, size=(11, 17, 3), dtype=np.uint8)
    path = tmp_path / "x.jpg"
    Image.fromarray(pixels).convert(mode).save(path, format="JPEG", **options)
    with Image.open(path) as img:
        expected = np.asarray(img.convert("RGB")).transpose(2, 0, 1)
    assert np.array_equal(decode.decode_image(path), expected)
    assert np.array_equal(decode.decode_image(path.read_bytes()), expected)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 3):
        with pytest.raises(decode.UnreadableImageError, match=r"part\.jpg"):
            decode.decode_image(data[:cut], name="part.jpg")


def make_tiny_imagenet(root: Path) -> dict:
    base = root / "tiny-imagenet-200"
    wnids = ["n02", "n01", "n03"]
    (base).mkdir(parents=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    (base / "words.txt").write_text("n01\tgoldfish, Carassius auratus\nn02\tsalamander\n"
                                    "n99\tunused\n")
    truth: dict = {"train": {}, "val": []}
    for w in wnids:
        for k in range(2):
            path = base / "train" / w / "images" / f"{w}_{k}.JPEG"
            truth["train"][str(path)] = (write_png(path, (8, 8)), w)
        (base / "train" / w / f"{w}_boxes.txt").write_text("box file, not an image")
    lines = []
    for k, w in enumerate(["n03", "n01", "n03", "n02"]):
        path = base / "val" / "images" / f"val_{k}.JPEG"
        truth["val"].append((write_png(path, (8, 8)), w))
        lines.append(f"val_{k}.JPEG\t{w}\t0\t1\t7\t7")
    (base / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return truth


def test_tiny_imagenet_layout(tmp_path: Path) -> None:
    truth = make_tiny_imagenet(tmp_path)
    train = D.TinyImageNet(tmp_path, "train")
    assert train.classes == ["n01", "n02", "n03"]
    assert train.class_words == ["goldfish, Carassius auratus", "salamander", "n03"]
    assert len(train) == 6
    for i, (path, label) in enumerate(train.samples):
        pixels, wnid = truth["train"][path]
        assert train.classes[label] == wnid
        assert torch.equal(train[i][0], torch.from_numpy(pixels))
    val = D.TinyImageNet(tmp_path / "tiny-imagenet-200", "val")  # the folder itself works too
    assert [val.classes[t] for t in val.targets] == ["n03", "n01", "n03", "n02"]
    for i, (pixels, _) in enumerate(truth["val"]):
        assert torch.equal(val[i][0], torch.from_numpy(pixels))
    ann = tmp_path / "tiny-imagenet-200" / "val" / "val_annotations.txt"
    ann.write_text(ann.read_text() + "val_9.JPEG\tn77\t0\t0\t1\t1\n")
    with pytest.raises(ValueError, match=r"val_annotations\.txt:5"):
        D.TinyImageNet(tmp_path, "val")
    with pytest.raises(FileNotFoundError, match=r"wnids\.txt"):
        D.TinyImageNet(tmp_path / "elsewhere")


def test_imagenet100_list() -> None:
    ids = D.imagenet100_classes()
    assert len(ids) == 100 and len(set(ids)) == 100
    assert all(re.fullmatch(r"n\d{8}", w) for w in ids)
    # first and last entries of SCE Table 22 (read row by row)
    assert ids[:4] == ["n02869837", "n01749939", "n02488291", "n02107142"]
    assert ids[-1] == "n02090622"


def test_imagenet100_selects_from_fake_imagenet(tmp_path: Path) -> None:
    ids = D.imagenet100_classes()
    for split in ("train", "val"):
        for w in [*ids, "n00000001", "n99999999"]:
            write_png(tmp_path / split / w / f"{w}_0.JPEG", (4, 4))
    ds = D.ImageNet100(tmp_path, "val")
    assert ds.classes == sorted(ids) and len(ds) == 100
    assert [Path(p).parent.name for p, _ in ds.samples] == sorted(ids)
    assert ds.targets == list(range(100))
    assert ds[0][0].shape == (3, 4, 4)
    missing = sorted(ids)[3]
    for f in (tmp_path / "train" / missing).iterdir():
        f.unlink()
    (tmp_path / "train" / missing).rmdir()
    with pytest.raises(ValueError, match=missing):
        D.ImageNet100(tmp_path, "train")


class _Labels:
    """A minimal labelled dataset: the item is its own index."""

    def __init__(self, targets: list[int], n_classes: int):
        self.targets = targets
        self.classes = [f"c{i}" for i in range(n_classes)]

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[int, int]:
        return i, self.targets[i]


def test_long_tailed_counts_follow_profile() -> None:
    # CIFAR-10-LT with ratio 0.01 as published (Cui et al. 2019 / Cao et al. 2019)
    assert D.long_tailed_counts(5000, 10, 0.01) == [5000, 2997, 1796, 1077, 645, 387, 232,
                                                     139, 83, 50]
    for n_max, n_classes, ratio in [(500, 100, 0.02), (37, 7, 0.3), (10, 1, 0.5)]:
        expected = [int(np.floor(n_max * ratio ** (c / max(1, n_classes - 1)) + 1e-6))
                    for c in range(n_classes)]
        assert D.long_tailed_counts(n_max, n_classes, ratio) == expected


def test_long_tailed_subset() -> None:
    targets = [c for _ in range(30) for c in range(4)]  # 30 per class, interleaved
    base = _Labels(targets, 4)
    lt = D.long_tailed(base, 0.1, seed=3)
    counts = np.bincount(lt.targets, minlength=4).tolist()
    assert counts == [30, int(np.floor(30 * 0.1 ** (1 / 3))), int(np.floor(30 * 0.1 ** (2 / 3))),
                      3]
    assert lt.indices == sorted(lt.indices)
    assert all(lt[k] == (i, targets[i]) for k, i in enumerate(lt.indices))
    assert lt.classes == base.classes and len(lt) == sum(counts)
    assert D.long_tailed(base, 0.1, seed=3).indices == lt.indices
    assert D.long_tailed(base, 0.1, seed=4).indices != lt.indices
    first = D.long_tailed(base, 0.1, seed=None)
    assert [i for i in first.indices if targets[i] == 3] == [3, 7, 11]
    assert len(D.long_tailed(base, 1.0)) == 120
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="ratio"):
            D.long_tailed(base, bad)
    with pytest.raises(ValueError, match="unlabelled"):
        D.long_tailed(_Labels([0, -1, 1], 2), 0.5)


def test_long_tailed_on_real_dataset() -> None:
    digits = D.Digits("all")
    lt = D.long_tailed(digits, 0.2)
    n_max = max(np.bincount(digits.targets))
    assert np.bincount(lt.targets)[9] == min(int(np.floor(n_max * 0.2 + 1e-6)),
                                             digits.targets.count(9))
    image, label = lt[len(lt) - 1]
    assert image.shape == (3, 8, 8) and label == lt.targets[-1]
    batch = lt.__getitems__([0, 1])
    assert torch.equal(batch[1][0], digits[lt.indices[1]][0])


def test_skipped_files_are_listed(tmp_path: Path) -> None:
    make_folder(tmp_path)
    (tmp_path / "cat" / "c_garbage.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.warns(UserWarning, match="skipped 1 unreadable"):
        ds = D.ImageFolder(tmp_path, skip_corrupt=True)
    assert ds.skipped == [str(tmp_path / "cat" / "c_garbage.jpg")]
    assert D.ImageFolder(tmp_path / "ant").skipped == []


def test_hold_out_is_stratified_disjoint_and_seeded(tmp_path: Path) -> None:
    make_own_folder(tmp_path, per_class=10, classes=("a", "b", "c"))
    for i in range(3):  # class d: 3 images; class e: a single image
        write_png(tmp_path / "d" / f"{i}.png")
    write_png(tmp_path / "e" / "0.png")
    whole = D.ImageFolder(tmp_path)
    train, test = (D.hold_out(whole, 0.2, seed=0, part=p) for p in ("train", "test"))
    train_files, test_files = {p for p, _ in train.samples}, {p for p, _ in test.samples}
    assert not train_files & test_files
    assert train_files | test_files == {p for p, _ in whole.samples}
    # round(0.2 * n) per class, at least 1 when the class has 2 or more images, never all
    assert np.bincount(test.targets, minlength=5).tolist() == [2, 2, 2, 1, 0]
    assert train.classes == test.classes == whole.classes
    assert (train.split, test.split) == ("train", "test")
    again = D.hold_out(D.ImageFolder(tmp_path), 0.2, seed=0, part="test")
    assert again.samples == test.samples  # deterministic
    other = D.hold_out(whole, 0.2, seed=1, part="test")
    assert other.samples != test.samples and len(other) == len(test)
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="test fraction"):
            D.hold_out(whole, bad, seed=0, part="test")
    with pytest.raises(ValueError, match="'val'"):
        D.hold_out(whole, 0.2, seed=0, part="val")


def test_flat_folder_is_read_as_unlabelled_images(tmp_path: Path) -> None:
    make_own_folder(tmp_path, per_class=3, labelled=False)
    ds = D.open_image_folder(tmp_path)
    assert len(ds) == 12 and ds.classes == [] and set(ds.targets) == {D.UNLABELLED}
    assert ds[0][0].dtype == torch.uint8
    labelled = D.open_image_folder(make_own_folder(tmp_path / "labelled", per_class=2))
    assert labelled.classes == ["apple", "bear", "car", "dog"] and len(labelled) == 8
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="neither class sub-folders nor image files"):
        D.open_image_folder(tmp_path / "empty")


def test_check_headers_names_non_images_and_mixed_sizes(tmp_path: Path) -> None:
    same = D.ImageFolder(make_own_folder(tmp_path / "same", per_class=2, sizes=((8, 8),)))
    D.check_headers(same)  # one size, all images: nothing to say
    mixed = D.ImageFolder(make_own_folder(tmp_path / "mixed", per_class=3))
    with pytest.raises(decode.MixedImageSizesError,
                       match=r"mixed/apple/apple_0\.png is 24x20.*16x16"):
        D.check_headers(mixed)
    D.check_headers(mixed, same_size=False)
    broken = D.ImageFolder(make_own_folder(tmp_path / "broken", per_class=2, corrupt=1))
    with pytest.raises(decode.UnreadableImageError, match=r"apple_broken0\.jpg"):
        D.check_headers(broken, same_size=False)


def test_collate_images_names_the_sizes() -> None:
    small, large = torch.zeros(3, 4, 4, dtype=torch.uint8), torch.zeros(3, 6, 5, dtype=torch.uint8)
    images, labels = decode.collate_images([(small, 0), (small, 1)])
    assert images.shape == (2, 3, 4, 4) and labels.tolist() == [0, 1]
    with pytest.raises(decode.MixedImageSizesError, match=r"3x4x4 and 3x6x5"):
        decode.collate_images([(small, 0), (large, 1)])
