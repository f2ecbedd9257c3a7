"""Feature extraction and its on-disk cache (contrastkit.eval.features)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from contrastkit.checkpoints import file_hash
from contrastkit.data.sources.images.datasets import ArrayImages
from contrastkit.eval import features as F
from contrastkit.eval.features import extract_features, feature_cache_key


class CountingBackbone(nn.Module):
    """Flatten + linear map; counts forward calls."""

    def __init__(self, in_dim: int = 3 * 4 * 4, out_dim: int = 5, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.linear = nn.Linear(in_dim, out_dim)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.linear(x.flatten(1))


class PlainDataset(torch.utils.data.Dataset):
    """A dataset without ``batches``: exercises the DataLoader path."""

    def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.from_numpy(self.images[i].copy()), int(self.labels[i])


def _data(n: int = 21) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(n, 3, 4, 4), dtype=np.uint8)
    return images, rng.integers(0, 3, size=n).astype(np.int64)


def _scale(x: torch.Tensor) -> torch.Tensor:
    return x.float() / 255.0


def _expected(backbone: nn.Module, images: np.ndarray) -> torch.Tensor:
    with torch.no_grad():
        return backbone.linear(_scale(torch.from_numpy(images)).flatten(1))


@pytest.mark.parametrize("kind", ["array", "plain"])
def test_features_match_direct_computation_in_order(kind):
    images, labels = _data()
    ds = ArrayImages(images, labels, ["a", "b", "c"]) if kind == "array" else \
        PlainDataset(images, labels)
    backbone = CountingBackbone()
    feats, labs = extract_features(backbone, ds, batch_size=4, transform=_scale, device="cpu",
                                   progress=False)
    assert feats.dtype == torch.float32 and feats.shape == (21, 5)
    assert labs.dtype == torch.int64 and labs.tolist() == labels.tolist()
    torch.testing.assert_close(feats, _expected(backbone, images))
    assert backbone.calls == 6  # ceil(21 / 4) batches


def test_cache_hit_does_not_recompute(tmp_path):
    images, labels = _data()
    ds = ArrayImages(images, labels, ["a", "b", "c"])
    backbone = CountingBackbone()
    key = feature_cache_key(checkpoint_sha256="abc", dataset="toy", split="test")
    kw = dict(batch_size=8, transform=_scale, device="cpu", cache_dir=tmp_path, cache_key=key,
              progress=False)
    first = extract_features(backbone, ds, **kw)
    assert backbone.calls == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a valid entry warns about nothing
        second = extract_features(backbone, ds, **kw)
    assert backbone.calls == 3
    torch.testing.assert_close(first[0], second[0], rtol=0, atol=0)
    assert torch.equal(first[1], second[1])
    sidecars = list(tmp_path.glob("*.json"))
    assert len(sidecars) == 1
    meta = json.loads(sidecars[0].read_text())
    assert meta["key"] == key and meta["features_shape"] == [21, 5]
    assert meta["sha256"] == file_hash(tmp_path / meta["file"])
    assert not list(tmp_path.glob("*.tmp"))  # atomic writes leave no temporary file


def _flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(len(data) - 40, len(data) - 8):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _drop_sidecar(path: Path) -> None:
    path.with_suffix(".json").unlink()


@pytest.mark.parametrize("damage", [_flip_bytes, _truncate, _drop_sidecar])
@pytest.mark.parametrize("safetensors", [True, False])
def test_corrupt_cache_is_warned_and_rebuilt(tmp_path, monkeypatch, damage, safetensors):
    if not safetensors:
        monkeypatch.setattr(F, "_has_safetensors", lambda: False)
    images, labels = _data()
    ds = ArrayImages(images, labels, ["a", "b", "c"])
    backbone = CountingBackbone()
    kw = dict(batch_size=32, transform=_scale, device="cpu", cache_dir=tmp_path,
              cache_key="key-1", progress=False)
    extract_features(backbone, ds, **kw)
    (data_file,) = [p for p in tmp_path.iterdir() if p.suffix in (".safetensors", ".npz")]
    assert data_file.suffix == (".safetensors" if safetensors else ".npz")
    damage(data_file)
    with pytest.warns(UserWarning, match="corrupt") as record:
        feats, labs = extract_features(backbone, ds, **kw)
    assert data_file.name in str(record[0].message)  # the damaged file, not its sidecar
    assert backbone.calls == 2  # recomputed, not read from the damaged file
    torch.testing.assert_close(feats, _expected(backbone, images))
    assert labs.tolist() == labels.tolist()
    extract_features(backbone, ds, **kw)  # the rebuilt entry is valid again
    assert backbone.calls == 2


def test_cache_key_follows_checkpoint_content(tmp_path):
    images, labels = _data()
    ds = ArrayImages(images, labels, ["a", "b", "c"])
    ckpt = tmp_path / "model.pth"

    def key_for(backbone: CountingBackbone) -> str:
        torch.save(backbone.state_dict(), ckpt)
        return feature_cache_key(checkpoint_sha256=file_hash(ckpt), dataset="toy", root=None,
                                 split="test", transform={"preset": "eval", "size": 4})

    a, b = CountingBackbone(seed=0), CountingBackbone(seed=1)
    key_a, key_b = key_for(a), key_for(b)
    assert key_a != key_b
    assert key_for(a) == key_a  # same content, same key
    kw = dict(batch_size=32, transform=_scale, device="cpu", cache_dir=tmp_path / "cache",
              progress=False)
    feats_a, _ = extract_features(a, ds, cache_key=key_a, **kw)
    feats_b, _ = extract_features(b, ds, cache_key=key_b, **kw)
    assert a.calls == 1 and b.calls == 1  # b's features were not served from a's entry
    torch.testing.assert_close(feats_b, _expected(b, images))
    assert not torch.allclose(feats_a, feats_b)
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2


def test_other_key_parts_change_the_key():
    base = dict(checkpoint_sha256="x", dataset="cifar10", root="/d", split="test",
                transform={"size": 32})
    key = feature_cache_key(**base)
    for change in ({"split": "train"}, {"root": "/e"}, {"transform": {"size": 64}},
                   {"dataset": "cifar100"}):
        assert feature_cache_key(**{**base, **change}) != key
    assert feature_cache_key(**dict(reversed(list(base.items())))) == key


def test_entries_of_another_decode_are_not_reused(tmp_path, monkeypatch):
    images, labels = _data()
    ds = ArrayImages(images, labels, ["a", "b", "c"])
    backbone = CountingBackbone()
    parts = dict(checkpoint_sha256="x", dataset="folder", root="/d", split="test", load_size=64)
    kw = dict(batch_size=32, transform=_scale, device="cpu", cache_dir=tmp_path, progress=False)
    before = json.dumps({"v": 1, **parts}, sort_keys=True)  # the key before DECODE_MODE
    extract_features(backbone, ds, cache_key=before, **kw)
    key = feature_cache_key(**parts)
    assert json.loads(key)["decode"] == F.DECODE_MODE and key != before
    extract_features(backbone, ds, cache_key=key, **kw)
    assert backbone.calls == 2  # the entry of the whole decodes was not served
    extract_features(backbone, ds, cache_key=feature_cache_key(**parts), **kw)
    assert backbone.calls == 2  # this decode's entry is
    monkeypatch.setattr(F, "DECODE_MODE", "another decode")
    extract_features(backbone, ds, cache_key=feature_cache_key(**parts), **kw)
    assert backbone.calls == 3


class NaNBackbone(nn.Module):
    """Finite features for the first batch, one NaN in the second."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = x.flatten(1)[:, :4].clone()
        if self.calls == 2:
            out[-1, 0] = float("nan")
        return out


def test_nan_features_raise_and_are_not_cached(tmp_path):
    images, labels = _data(10)
    ds = ArrayImages(images, labels, ["a", "b", "c"])
    with pytest.raises(ValueError, match="NaN or Inf features in the batch starting at sample 4"):
        extract_features(NaNBackbone(), ds, batch_size=4, transform=_scale, device="cpu",
                         cache_dir=tmp_path, cache_key="k", progress=False)
    assert not list(tmp_path.iterdir())


def test_bad_batch_size_and_empty_dataset():
    images, labels = _data(3)
    ds = ArrayImages(images, labels, ["a", "b", "c"])
    with pytest.raises(ValueError, match="batch_size"):
        extract_features(CountingBackbone(), ds, batch_size=0, transform=_scale, device="cpu")
    empty = ArrayImages(images[:0], labels[:0], ["a"])
    with pytest.raises(ValueError, match="empty"):
        extract_features(CountingBackbone(), empty, batch_size=2, transform=_scale,
                         device="cpu", progress=False)


def test_progress_bar_goes_to_stderr_and_quiet_disables_it(capsys):
    pytest.importorskip("tqdm")
    images, labels = _data()
    ds = ArrayImages(images, labels, ["a", "b", "c"])
    extract_features(CountingBackbone(), ds, batch_size=8, transform=_scale, device="cpu",
                     progress=True, desc="toy:test")
    out, err = capsys.readouterr()
    assert "toy:test" in err and out == ""
    extract_features(CountingBackbone(), ds, batch_size=8, transform=_scale, device="cpu",
                     progress=False)
    assert capsys.readouterr() == ("", "")
