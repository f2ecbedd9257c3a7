"""Array-format readers (CIFAR, STL-10, SVHN, Digits) on tiny files written in the real formats."""

from __future__ import annotations

import io
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from contrastkit.data.sources.images import datasets as D

RNG = np.random.default_rng(1234)


def _images(n: int, h: int = 32, w: int = 32) -> np.ndarray:
    return RNG.integers(0, 256, size=(n, 3, h, w), dtype=np.uint8)


def _cifar_rows(images: np.ndarray) -> np.ndarray:
    """Official row layout: 1024 red values (row by row), then 1024 green, then 1024 blue."""
    return np.concatenate([images[:, c].reshape(len(images), 1024) for c in range(3)], axis=1)


def _dump(path: Path, obj: dict, bytes_keys: bool) -> None:
    if bytes_keys:
        obj = {k.encode(): v for k, v in obj.items()}
    path.write_bytes(pickle.dumps(obj, protocol=2))


def write_cifar10(root: Path, n_per_batch: int = 4, bytes_keys: bool = False) -> dict:
    """cifar-10-batches-py with data_batch_1..5, test_batch, batches.meta; returns the truth."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    truth: dict = {"train": ([], []), "test": ([], [])}
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        imgs = _images(n_per_batch)
        labels = RNG.integers(0, 10, size=n_per_batch).tolist()
        _dump(folder / name, {"batch_label": "x", "data": _cifar_rows(imgs), "labels": labels},
              bytes_keys)
        split = "test" if name == "test_batch" else "train"
        truth[split][0].append(imgs)
        truth[split][1].extend(labels)
    names10 = [f"class{i}" for i in range(10)]
    meta = {"label_names": [n.encode() for n in names10] if bytes_keys else names10}
    _dump(folder / "batches.meta", meta, bytes_keys)
    return {k: (np.concatenate(v[0]), v[1]) for k, v in truth.items()} | {"classes": names10}


def _tar_folder(folder: Path, archive: Path) -> None:
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)


@pytest.mark.parametrize("bytes_keys", [False, True])
def test_cifar10_folder_round_trip(tmp_path: Path, bytes_keys: bool) -> None:
    truth = write_cifar10(tmp_path, bytes_keys=bytes_keys)
    for split in ("train", "test"):
        ds = D.CIFAR10(tmp_path, split=split)
        imgs, labels = truth[split]
        assert len(ds) == len(imgs) == len(ds.targets)
        assert ds.targets == labels
        assert ds.classes == truth["classes"]
        for i in range(len(ds)):
            image, label = ds[i]
            assert image.dtype == torch.uint8 and image.shape == (3, 32, 32)
            assert torch.equal(image, torch.from_numpy(imgs[i]))
            assert label == labels[i] and isinstance(label, int)
    # one pixel located by hand in the raw row: channel 1, row 5, column 7 of image 0
    raw = pickle.loads((tmp_path / "cifar-10-batches-py" / "data_batch_1").read_bytes(),
                       encoding="latin1")
    row = raw[b"data" if bytes_keys else "data"][0]
    assert D.CIFAR10(tmp_path)[0][0][1, 5, 7] == row[1024 + 5 * 32 + 7]


def test_cifar10_reads_tar_gz_without_extracting(tmp_path: Path) -> None:
    src = tmp_path / "src"
    truth = write_cifar10(src)
    root = tmp_path / "root"
    root.mkdir()
    _tar_folder(src / "cifar-10-batches-py", root / "cifar-10-python.tar.gz")
    ds = D.CIFAR10(root, split="train")
    assert torch.equal(torch.stack([ds[i][0] for i in range(len(ds))]),
                       torch.from_numpy(truth["train"][0]))
    assert ds.targets == truth["train"][1]
    assert sorted(p.name for p in root.iterdir()) == ["cifar-10-python.tar.gz"]


def test_cifar100_fine_and_coarse(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    truth = {}
    for split, n in (("train", 6), ("test", 3)):
        imgs = _images(n)
        fine = RNG.integers(0, 100, size=n).tolist()
        coarse = RNG.integers(0, 20, size=n).tolist()
        _dump(folder / split, {"data": _cifar_rows(imgs), "fine_labels": fine,
                               "coarse_labels": coarse, "filenames": ["f"] * n}, True)
        truth[split] = (imgs, fine, coarse)
    fine_names = [f"fine{i}" for i in range(100)]
    coarse_names = [f"coarse{i}" for i in range(20)]
    _dump(folder / "meta", {"fine_label_names": fine_names,
                            "coarse_label_names": coarse_names}, False)
    for split, (imgs, fine, coarse) in truth.items():
        f = D.CIFAR100(tmp_path, split=split, label="fine")
        c = D.CIFAR100(tmp_path, split=split, label="coarse")
        assert f.targets == fine and c.targets == coarse
        assert f.classes == fine_names and c.classes == coarse_names
        assert torch.equal(f[len(f) - 1][0], torch.from_numpy(imgs[-1]))
    assert D.CIFAR100(tmp_path).fingerprint() != D.CIFAR100(tmp_path, label="coarse").fingerprint()
    with pytest.raises(ValueError, match="label"):
        D.CIFAR100(tmp_path, label="medium")


def test_cifar_missing_files_message(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"cifar-10-python\.tar\.gz") as info:
        D.CIFAR10(tmp_path)
    command = str(info.value).split("or run: ")[1]  # a command that runs as it stands
    assert command == (f"python -c 'from contrastkit.data.sources.images.datasets import CIFAR10; "
                       f"CIFAR10(\"{tmp_path}\", download=True)'")
    compile(command.split("-c ")[1].strip("'"), "<hint>", "exec")
    with pytest.raises(ValueError, match="split"):
        D.CIFAR10(tmp_path, split="val")


def test_cifar_truncated_or_wrong_shape_names_file(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    batch.write_bytes(batch.read_bytes()[:200])
    with pytest.raises(ValueError, match=r"data_batch_3.*truncated"):
        D.CIFAR10(tmp_path)
    assert len(D.CIFAR10(tmp_path, split="test")) == 4  # other files still readable
    _dump(batch, {"data": np.zeros((4, 1000), np.uint8), "labels": [0] * 4}, False)
    with pytest.raises(ValueError, match=r"data_batch_3.*3072"):
        D.CIFAR10(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "test_batch").unlink()
    with pytest.raises(FileNotFoundError, match="test_batch"):
        D.CIFAR10(tmp_path, split="test")


def _stl_bytes(images: np.ndarray) -> bytes:
    """Each image (3, 96, 96) written in Fortran order of (H, W, C), as the official files."""
    return b"".join(np.transpose(img, (1, 2, 0)).tobytes(order="F") for img in images)


def write_stl10(root: Path) -> dict:
    folder = root / "stl10_binary"
    folder.mkdir(parents=True)
    truth = {}
    for split, n in (("train", 3), ("test", 2), ("unlabeled", 4)):
        imgs = _images(n, 96, 96)
        (folder / f"{split}_X.bin").write_bytes(_stl_bytes(imgs))
        labels = None
        if split != "unlabeled":
            labels = RNG.integers(1, 11, size=n).astype(np.uint8)
            (folder / f"{split}_y.bin").write_bytes(labels.tobytes())
        truth[split] = (imgs, labels)
    names = ["airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck"]
    (folder / "class_names.txt").write_text("\n".join(names) + "\n")
    return truth


def test_stl10_column_major_and_splits(tmp_path: Path) -> None:
    truth = write_stl10(tmp_path)
    raw = (tmp_path / "stl10_binary" / "train_X.bin").read_bytes()
    ds = D.STL10(tmp_path, "train")
    # byte h + 96 w + 96*96 c of image 1 is pixel (c, h, w)
    c, h, w = 2, 10, 70
    assert ds[1][0][c, h, w] == raw[96 * 96 * 3 + h + 96 * w + 96 * 96 * c]
    for split in ("train", "test"):
        ds = D.STL10(tmp_path, split)
        imgs, labels = truth[split]
        assert ds.targets == (labels.astype(int) - 1).tolist()
        assert all(torch.equal(ds[i][0], torch.from_numpy(imgs[i])) for i in range(len(ds)))
    unl = D.STL10(tmp_path, "unlabeled")
    assert isinstance(unl.images.base, np.memmap) or isinstance(unl.images, np.memmap)
    assert unl.targets == [-1] * 4
    both = D.STL10(tmp_path, "train+unlabeled")
    assert len(both) == 7 and both.targets[:3] == (truth["train"][1].astype(int) - 1).tolist()
    assert both.targets[3:] == [-1] * 4
    assert torch.equal(both[5][0], torch.from_numpy(truth["unlabeled"][0][2]))
    images, labels = both.get_batch([6, 0, 4])
    expected = [truth["unlabeled"][0][3], truth["train"][0][0], truth["unlabeled"][0][1]]
    assert torch.equal(images, torch.from_numpy(np.stack(expected)))
    assert labels.tolist() == [-1, int(truth["train"][1][0]) - 1, -1]
    assert both.classes[7] == "monkey"


def test_stl10_bad_files(tmp_path: Path) -> None:
    write_stl10(tmp_path)
    x = tmp_path / "stl10_binary" / "test_X.bin"
    x.write_bytes(x.read_bytes()[:-5])
    with pytest.raises(ValueError, match=r"test_X\.bin.*27648"):
        D.STL10(tmp_path, "test")
    (tmp_path / "stl10_binary" / "train_y.bin").write_bytes(b"\x01")
    with pytest.raises(ValueError, match=r"train_y\.bin.*expected 3"):
        D.STL10(tmp_path, "train")
    with pytest.raises(FileNotFoundError, match="stl10_binary"):
        D.STL10(tmp_path / "nowhere")


def test_svhn_mat_round_trip(tmp_path: Path) -> None:
    from scipy.io import savemat

    imgs = _images(5)
    y = np.array([[10], [1], [5], [10], [9]], dtype=np.uint8)
    savemat(tmp_path / "test_32x32.mat", {"X": np.transpose(imgs, (2, 3, 1, 0)), "y": y})
    ds = D.SVHN(tmp_path, "test")
    assert ds.targets == [0, 1, 5, 0, 9]
    assert ds.classes == [str(d) for d in range(10)]
    for i in range(5):
        assert torch.equal(ds[i][0], torch.from_numpy(imgs[i]))
    savemat(tmp_path / "train_32x32.mat", {"X": np.zeros((32, 32, 5), np.uint8), "y": y})
    with pytest.raises(ValueError, match=r"train_32x32\.mat.*\(32, 32, 3, N\)"):
        D.SVHN(tmp_path, "train")
    (tmp_path / "train_32x32.mat").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"train_32x32\.mat"):
        D.SVHN(tmp_path, "train")
    with pytest.raises(FileNotFoundError, match=r"extra_32x32\.mat"):
        D.SVHN(tmp_path, "extra")


def test_digits_splits() -> None:
    train, test, full = D.Digits("train"), D.Digits("test"), D.Digits("all")
    assert len(full) == 1797 and len(train) + len(test) == 1797
    assert len(test) == sum(int(np.ceil(0.2 * n)) for n in np.bincount(full.targets))
    image, label = train[0]
    assert image.dtype == torch.uint8 and image.shape == (3, 8, 8)
    assert torch.equal(image[0], image[2]) and isinstance(label, int)
    assert int(full.images.max()) == 255 and int(full.images.min()) == 0
    # stratified: every class in both splits in 80/20 proportion (within one image)
    for c in range(10):
        n_c = full.targets.count(c)
        assert abs(test.targets.count(c) - 0.2 * n_c) < 1
    assert D.Digits("test").targets == test.targets  # deterministic
    # pixel values are 0..16 scaled by 255/16
    from sklearn.datasets import load_digits

    raw = load_digits().images[0]
    assert torch.equal(full[0][0][1], torch.from_numpy(np.rint(raw * 255 / 16).astype(np.uint8)))


def test_array_batches_and_getitems() -> None:
    ds = D.Digits("test")
    g = torch.Generator().manual_seed(0)
    seen, total = [], 0
    for images, labels in ds.batches(50, shuffle=True, generator=g):
        assert images.dtype == torch.uint8 and labels.dtype == torch.int64
        total += len(images)
        seen.append(labels)
    assert total == len(ds)
    plain = [b for b in ds.batches(100)]
    assert torch.equal(torch.cat([b[0] for b in plain]), torch.from_numpy(ds.images))
    assert len(list(ds.batches(100, drop_last=True))) == len(ds) // 100
    items = ds.__getitems__([3, 1])
    assert torch.equal(items[1][0], ds[1][0]) and items[0][1] == ds[3][1]
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=False)
    first_images, first_labels = next(iter(loader))
    assert torch.equal(first_images, torch.from_numpy(ds.images[:64]))
    assert first_labels.tolist() == ds.targets[:64]


def test_with_index() -> None:
    ds = D.WithIndex(D.Digits("test"))
    image, label, index = ds[7]
    assert index == 7 and label == ds.targets[7] and torch.equal(image, ds.dataset[7][0])
    assert ds.classes == ds.dataset.classes and len(ds) == len(ds.dataset)
    loader = torch.utils.data.DataLoader(ds, batch_size=10, shuffle=True)
    _, labels, indices = next(iter(loader))
    assert labels.tolist() == [ds.targets[i] for i in indices.tolist()]


def test_download_file_url_md5_and_offline(tmp_path: Path) -> None:
    src = tmp_path / "blob.bin"
    src.write_bytes(b"contrastive" * 100)
    md5 = D.md5_of(src)
    dest = tmp_path / "out" / "blob.bin"
    D.download(src.as_uri(), dest, md5)
    assert dest.read_bytes() == src.read_bytes()
    bad = tmp_path / "out" / "bad.bin"
    with pytest.raises(ValueError, match="MD5"):
        D.download(src.as_uri(), bad, "0" * 32)
    assert not bad.exists() and sorted(p.name for p in dest.parent.iterdir()) == ["blob.bin"]
    with pytest.raises(ConnectionError, match="place it at"):
        D.download((tmp_path / "absent").as_uri(), tmp_path / "x.bin", None)


def test_cifar10_download_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contrastkit.data.sources.images import _cifar

    truth = write_cifar10(tmp_path / "src")
    archive = tmp_path / "mirror" / "cifar-10-python.tar.gz"
    archive.parent.mkdir()
    _tar_folder(tmp_path / "src" / "cifar-10-batches-py", archive)
    spec = dict(_cifar._CIFAR10, url=archive.as_uri(), md5=D.md5_of(archive))
    monkeypatch.setattr(D.CIFAR10, "_spec", spec)
    root = tmp_path / "root"
    ds = D.CIFAR10(root, split="test", download=True)
    assert ds.targets == truth["test"][1]
    assert (root / "cifar-10-batches-py" / "test_batch").is_file()
    monkeypatch.setattr(D.CIFAR10, "_spec", dict(spec, md5="1" * 32))
    with pytest.raises(ValueError, match="MD5"):
        D.CIFAR10(tmp_path / "root2", download=True)


def test_pickle_from_bytes_buffer_is_accepted() -> None:
    # official files are Python-2 pickles: str keys come back as str with encoding="latin1"
    from contrastkit.data.sources.images._cifar import _unpickle

    buf = io.BytesIO()
    pickle.dump({"data": np.zeros((1, 3072), np.uint8), "labels": [3]}, buf, protocol=2)
    assert _unpickle(buf.getvalue(), "x")["labels"] == [3]
