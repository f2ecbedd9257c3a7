"""The uint8 array cache: build once, reuse, rebuild on source change or corruption."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from contrastkit.data.decode import images as decode
from contrastkit.data.sources.images import cache as C
from contrastkit.data.sources.images import datasets as D

RNG = np.random.default_rng(11)
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
CIFAR_JPG = SHARED / "cifar10-jpg.tar.gz"


def make_folder(root: Path, per_class: int = 4, classes: tuple[str, ...] = ("b", "a", "c")):
    for name in classes:
        for k in range(per_class):
            path = root / name / f"{k:03d}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(RNG.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)).save(path)


def stacked(ds) -> torch.Tensor:
    return torch.stack([ds[i][0] for i in range(len(ds))])


def test_build_then_reuse_without_decoding(tmp_path: Path) -> None:
    make_folder(tmp_path / "src")
    builds = C.ArrayCache.builds
    first = C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache")
    assert first.built and C.ArrayCache.builds == builds + 1
    reference = D.ImageFolder(tmp_path / "src")
    assert first.classes == reference.classes == ["a", "b", "c"]
    assert first.targets == reference.targets
    assert first.images.shape == (12, 3, 5, 7) and isinstance(first.images, np.memmap)
    assert torch.equal(stacked(first), stacked(reference))
    mtime = first.path.stat().st_mtime_ns
    again = C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache")
    assert not again.built and C.ArrayCache.builds == builds + 1
    assert again.path.stat().st_mtime_ns == mtime
    assert torch.equal(stacked(again), stacked(reference))
    files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(files) == 2 and files[0].endswith(".json") and files[1].endswith(".u8")


def test_rebuilt_when_source_changes(tmp_path: Path) -> None:
    make_folder(tmp_path / "src")
    C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache")
    changed = tmp_path / "src" / "a" / "001.png"
    new_pixels = np.full((5, 7, 3), 200, dtype=np.uint8)
    Image.fromarray(new_pixels).save(changed)
    os.utime(changed, ns=(1, 1))  # a different mtime even on coarse clocks
    rebuilt = C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache")
    assert rebuilt.built
    assert torch.equal(rebuilt[1][0], torch.from_numpy(new_pixels.transpose(2, 0, 1)))
    make_folder(tmp_path / "src", per_class=1, classes=("d",))  # a new class
    grown = C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache")
    assert grown.built and grown.classes == ["a", "b", "c", "d"] and len(grown) == 13


@pytest.mark.parametrize("damage", ["flip", "truncate", "sidecar"])
def test_corruption_detected_and_rebuilt(tmp_path: Path, damage: str) -> None:
    make_folder(tmp_path / "src")
    good = C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache")
    expected = stacked(good).clone()
    path, sidecar = good.path, good.path.with_suffix(".json")
    del good
    if damage == "flip":
        data = bytearray(path.read_bytes())
        data[100] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[:-1])
    else:
        sidecar.write_text(sidecar.read_text()[:-10])
    with pytest.warns(UserWarning, match="rebuilding cache"):
        fixed = C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache")
    assert fixed.built and torch.equal(stacked(fixed), expected)


def test_verify_false_skips_content_check(tmp_path: Path) -> None:
    make_folder(tmp_path / "src")
    good = C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache")
    data = bytearray(good.path.read_bytes())
    data[0] ^= 1
    good.path.write_bytes(bytes(data))
    assert not C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache",
                                          verify=False).built


def test_archive_source_matches_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hidden members are not read, as in a folder: the ``._name.png`` resource forks a Mac's
    tar adds beside each file (not images) and a hidden folder's copies."""
    make_folder(tmp_path / "tree" / "train")
    make_folder(tmp_path / "tree" / "test", per_class=1)
    archive = tmp_path / "imgs.tar.gz"
    (tmp_path / "tree" / "train" / "a" / "._000.png").write_bytes(b"\x00\x05\x16\x07 fork")
    make_folder(tmp_path / "tree" / "train" / "b" / ".thumbnails", per_class=1, classes=("x",))
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "tree" / "train", arcname="train")
        tar.add(tmp_path / "tree" / "test", arcname="test")
    assert len([m for m in tarfile.open(archive).getnames() if "/." in m]) == 4
    from_tar = C.ArrayCache.build_or_load(archive, tmp_path / "cache", subdir="train")
    from_dir = C.ArrayCache.build_or_load(tmp_path / "tree" / "train", tmp_path / "cache")
    assert from_tar.path != from_dir.path
    assert from_tar.classes == from_dir.classes and from_tar.targets == from_dir.targets
    assert torch.equal(stacked(from_tar), stacked(from_dir))
    test = C.ArrayCache.build_or_load(archive, tmp_path / "cache", subdir="test")
    assert len(test) == 3

    def no_reading(*args):
        raise AssertionError("a valid cache must not read the archive")

    monkeypatch.setattr(C, "_read_archive", no_reading)
    assert not C.ArrayCache.build_or_load(archive, tmp_path / "cache", subdir="train").built


def test_pool_decoding_and_corrupt_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "_CHUNK", 3)  # several tasks, so the 2-process pool is used
    make_folder(tmp_path / "src", per_class=5)
    (tmp_path / "src" / "b" / "002.png").write_bytes(b"broken")
    with pytest.raises(decode.UnreadableImageError, match=r"b/002\.png"):
        C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache", workers=2)
    assert not any(p.suffix == ".json" for p in (tmp_path / "cache").iterdir())
    with pytest.warns(UserWarning, match="skipped 1 unreadable"):
        ds = C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache", workers=2,
                                        skip_corrupt=True)
    with pytest.warns(UserWarning, match="skipped 1 unreadable"):
        reference = D.ImageFolder(tmp_path / "src", skip_corrupt=True, workers=1)
    assert len(ds) == 14 and ds.targets == reference.targets
    assert torch.equal(stacked(ds), stacked(reference))
    meta = json.loads(ds.path.with_suffix(".json").read_text())
    assert meta["shape"] == [14, 3, 5, 7]


def test_mismatched_sizes_need_resize(tmp_path: Path) -> None:
    make_folder(tmp_path / "src", per_class=2)
    Image.fromarray(np.zeros((9, 9, 3), np.uint8)).save(tmp_path / "src" / "c" / "big.png")
    with pytest.raises(ValueError, match=r"big\.png.*shape \(3, 9, 9\).*\(3, 5, 7\)"):
        C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache", workers=1)
    resized = C.ArrayCache.build_or_load(tmp_path / "src", tmp_path / "cache", size=(4, 4))
    assert resized.images.shape == (7, 3, 4, 4)


def test_dataset_sources(tmp_path: Path) -> None:
    digits = D.Digits("test")
    cached = C.ArrayCache.build_or_load(digits, tmp_path)
    assert torch.equal(stacked(cached), torch.from_numpy(digits.images))
    assert cached.targets == digits.targets and cached.classes == digits.classes
    assert not C.ArrayCache.build_or_load(D.Digits("test"), tmp_path).built
    assert C.ArrayCache.build_or_load(D.Digits("train"), tmp_path).path != cached.path
    make_folder(tmp_path / "src")
    folder = D.ImageFolder(tmp_path / "src", classes=["c", "a"])
    from_files = C.ArrayCache.build_or_load(folder, tmp_path)
    assert from_files.classes == ["c", "a"] and torch.equal(stacked(from_files), stacked(folder))

    class NoFingerprint(torch.utils.data.Dataset):
        classes, targets = ["x"], [0]

        def __len__(self) -> int:
            return 1

        def __getitem__(self, i: int):
            return torch.zeros(3, 2, 2, dtype=torch.uint8), 0

    with pytest.raises(ValueError, match="fingerprint"):
        C.ArrayCache.build_or_load(NoFingerprint(), tmp_path)
    assert len(C.ArrayCache.build_or_load(NoFingerprint(), tmp_path, fingerprint="v1")) == 1


def test_cached_batches_and_dataloader(tmp_path: Path) -> None:
    cached = C.ArrayCache.build_or_load(D.Digits("all"), tmp_path)
    g = torch.Generator().manual_seed(5)
    order = torch.randperm(len(cached), generator=torch.Generator().manual_seed(5))
    images, labels = next(cached.batches(256, shuffle=True, generator=g))
    assert torch.equal(images, torch.from_numpy(np.asarray(cached.images)[order[:256].numpy()]))
    assert labels.tolist() == [cached.targets[i] for i in order[:256].tolist()]
    seen = torch.cat([lab for _, lab in cached.batches(256, shuffle=True)])
    assert sorted(seen.tolist()) == sorted(cached.targets)
    loader = torch.utils.data.DataLoader(cached, batch_size=128, shuffle=False)
    batch_images, batch_labels = next(iter(loader))
    assert batch_images.shape == (128, 3, 8, 8) and batch_labels.tolist() == cached.targets[:128]
    assert torch.equal(batch_images, stacked(D.Digits("all"))[:128])
    sampler = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(cached), 100, False)
    batched = torch.utils.data.DataLoader(cached, sampler=sampler, batch_size=None)
    images, labels = next(iter(batched))
    assert images.shape == (100, 3, 8, 8) and labels.shape == (100,)
    idx = cached[[5, 2]]
    assert torch.equal(idx[0], torch.stack([cached[5][0], cached[2][0]]))
    assert idx[1].tolist() == [cached.targets[5], cached.targets[2]]


@pytest.mark.skipif(not CIFAR_JPG.is_file(), reason=f"{CIFAR_JPG} not available")
def test_real_cifar10_jpegs(tmp_path: Path) -> None:
    """200 files of the shared CIFAR-10 JPEG archive through folder and cache.

    The archive lists train/airplane/ first, then train/automobile/, ...: reading stops at the
    third class, so only about a sixth of it is decompressed.
    """
    per_class, taken = 100, {}
    with tarfile.open(CIFAR_JPG, "r:gz") as tar:
        for member in tar:
            parts = member.name.split("/")
            if len(parts) != 3 or parts[0] != "train" or not member.isfile():
                continue
            if parts[1] not in taken and len(taken) == 2:
                break
            if taken.get(parts[1], 0) < per_class:
                taken[parts[1]] = taken.get(parts[1], 0) + 1
                tar.extract(member, tmp_path, filter="data")
    root = tmp_path / "train"
    folder = D.ImageFolder(root)
    assert folder.classes == ["airplane", "automobile"]
    assert np.bincount(folder.targets).tolist() == [per_class, per_class]
    assert Path(folder.samples[0][0]).name == "0000.jpg"
    cached = C.ArrayCache.build_or_load(root, tmp_path / "cache")
    assert cached.images.shape == (2 * per_class, 3, 32, 32)
    assert torch.equal(stacked(cached), stacked(folder))
    mean = np.asarray(cached.images, dtype=np.float64).mean() / 255
    assert 0.3 < mean < 0.7  # natural images, not blank or saturated
