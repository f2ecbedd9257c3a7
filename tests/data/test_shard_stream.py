"""Packed shards streamed through webdataset (``data.stream``): the epoch's runs, the rows they
yield, the shuffle buffer, loader workers, crops keyed as the random-access path keys them."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from contrastkit.data.loading.crops import CropSpec, LoaderCrops, ViewCrops, encoded_reader
from contrastkit.data.loading.pack import pack_folder
from contrastkit.data.sources.shards import ShardImages, ShardReader
from contrastkit.data.sources.stream import DecodedImage, ShardStream, shuffled
from contrastkit.train.datamodule import PretrainDataModule

pytest.importorskip("webdataset")

N_IMAGES = 26  # 7 shards of 4 (the last of 2): uneven shard sizes, a remainder to drop


def packed(root: Path, n: int = N_IMAGES, shard_size: int = 4) -> Path:
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / "src" / c).mkdir(parents=True)
    for i in range(n):
        h, w = (20, 30) if i % 2 else (32, 24)
        pixels = (rng.random((h, w, 3)) * 255).astype(np.uint8)
        Image.fromarray(pixels).save(root / "src" / "ab"[i % 2] / f"{i}.jpg")
    pack_folder(root / "src", root / "shards", shards=True, shard_size=shard_size)
    return root / "shards"


class Row:
    """A transform that returns the sample's row after checking its bytes against the
    random-access reader (so the rows the stream reports are the index's rows)."""

    def __init__(self, folder: Path) -> None:
        self.reader = ShardReader(folder)

    def __call__(self, data: bytes, name: str, row: int, epoch: int) -> int:
        assert self.reader.read(row)[0] == data, name
        return row


def rows_of(stream: ShardStream) -> list[int]:
    return [row for row, _ in stream]


def test_the_runs_cover_the_epoch_once_in_whole_batches(tmp_path: Path):
    stream = ShardStream(str(packed(tmp_path, n=29, shard_size=5)), "train")
    for world, batch, workers in ((1, 3, 1), (2, 3, 2), (3, 2, 4), (2, 7, 3)):
        steps = 29 // (world * batch)
        runs = []
        for rank in range(world):
            share = stream.for_process(rank, world, batch, DecodedImage(), 0, 4)
            assert len(share) == steps * batch  # every process the same number of steps
            mine = [share.run(0, k, workers) for k in range(workers)]
            assert all((end - first) % batch == 0 for first, end in mine)
            assert sum(end - first for first, end in mine) == steps * batch
            runs += mine
        covered = sorted(p for first, end in runs for p in range(first, end))
        assert covered == list(range(steps * world * batch))  # once each, the tail dropped


def test_every_row_once_per_epoch_the_tail_dropped_and_reshuffled(tmp_path: Path):
    folder = packed(tmp_path)
    stream = ShardStream(str(folder), "train")
    assert stream.classes == ["a", "b"] and len(stream) == N_IMAGES
    share = stream.for_process(0, 1, 3, Row(folder / "train"), seed=5, shuffle_buffer=5)
    epochs = [rows_of(share) for _ in range(3)]  # one pass per epoch: 0, 1, 2
    for epoch, rows in enumerate(epochs):
        assert len(rows) == len(set(rows)) == 24  # 8 steps of 3; 26 - 24 dropped
        global_stream = [r for s in share.shard_order(epoch)
                         for r in range(4 * s, 4 * s + share.counts[s])]
        assert sorted(rows) == sorted(global_stream[:24])  # what is dropped: the tail
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2]  # another order each epoch
    assert share.shard_order(0) != share.shard_order(1)
    again = stream.for_process(0, 1, 3, Row(folder / "train"), seed=5, shuffle_buffer=5)
    assert rows_of(again) == epochs[0]  # the same seed: the same order
    resumed = stream.for_process(0, 1, 3, Row(folder / "train"), seed=5, shuffle_buffer=5,
                                 epoch=2)
    assert rows_of(resumed) == epochs[2]  # a run resumed at epoch 2 streams epoch 2
    other = stream.for_process(0, 1, 3, Row(folder / "train"), seed=6, shuffle_buffer=5)
    assert rows_of(other) != epochs[0]
    labels = [label for _, label in stream.for_process(0, 1, 3, Row(folder / "train"), 5, 5)]
    assert labels == [ShardReader(folder / "train").targets[r] for r in epochs[0]]


def test_the_shuffle_buffer_is_bounded_and_seeded():
    items = list(range(50))
    out = list(shuffled(iter(items), 6, np.random.default_rng(1)))
    assert sorted(out) == items and out != items
    # output p is drawn when input p + 6 arrives: from the first p + 7 inputs only
    assert all(item <= position + 6 for position, item in enumerate(out))
    assert list(shuffled(iter(items), 1, np.random.default_rng(1))) == items
    assert out == list(shuffled(iter(items), 6, np.random.default_rng(1)))


def test_loader_workers_split_the_run_into_whole_batches(tmp_path: Path):
    folder = packed(tmp_path)
    share = ShardStream(str(folder), "train").for_process(1, 2, 3, Row(folder / "train"), 0, 4)
    # persistent workers (as the data module's): each keeps its copy's epoch count
    loader = DataLoader(share, batch_size=3, num_workers=2, drop_last=True,
                        persistent_workers=True)
    batches = [rows.tolist() for rows, _ in loader]
    assert len(batches) == len(loader) == 4 and all(len(b) == 3 for b in batches)
    rows = [r for b in batches for r in b]
    first, end = share.run(0)
    order = share.shard_order(0)
    global_stream = [r for s in order for r in range(4 * s, 4 * s + share.counts[s])]
    assert sorted(rows) == sorted(global_stream[first:end])  # rank 1's run, once
    assert [rows.tolist() for rows, _ in loader] != batches  # epoch 1 in the same workers
    fresh = DataLoader(share, batch_size=3, num_workers=2, drop_last=True,
                       persistent_workers=True)
    assert [rows.tolist() for rows, _ in fresh] == batches  # deterministic interleave


def test_stream_crops_are_those_of_the_random_access_reader(tmp_path: Path):
    folder = packed(tmp_path)
    specs = [CropSpec(12, (0.2, 1.0)), CropSpec(8, (0.1, 0.5))]
    crops = ViewCrops(specs, seed=3)
    rows = Row(folder / "train")

    def both(data: bytes, name: str, row: int, epoch: int):
        return rows(data, name, row, epoch), crops(data, name, row, epoch)

    share = ShardStream(str(folder), "train").for_process(0, 1, 4, both, 3, 8, epoch=1)
    reference = LoaderCrops(encoded_reader(ShardImages(folder / "train")), specs, seed=3)
    items = list(share)
    assert len(items) == 24
    for (row, views), label in items[:6]:
        expected, expected_label = reference[(row, 1)]
        assert label == expected_label
        assert all(torch.equal(a, b) for a, b in zip(views, expected, strict=True))
    square = DecodedImage(16)(ShardReader(folder / "train").read(0)[0], "x", 0, 0)
    assert square.shape == (3, 16, 16) and square.dtype == torch.uint8


def _rewrite_shard(path: Path, keep: int) -> None:
    with tarfile.open(path) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()][: 2 * keep]
    with tarfile.open(path, "w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))


def test_a_short_shard_is_named_and_bad_options_are_refused(tmp_path: Path):
    folder = packed(tmp_path)
    stream = ShardStream(str(folder), "train")
    victim = stream.shard_order(0)[0]
    _rewrite_shard(Path(stream.urls[victim]), keep=2)
    share = stream.for_process(0, 1, 2, Row(folder / "train"), 0, 2)
    with pytest.raises(ValueError, match=rf"shard-0000{victim}\.tar: 2 samples.*lists 4"):
        list(share)
    with pytest.raises(FileNotFoundError, match=r"no val/index\.json"):
        ShardStream(str(tmp_path / "nothing"), "val")
    (folder / "val").mkdir()
    (folder / "val" / "index.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a contrastkit-shards-1 index"):
        ShardStream(str(folder), "val")
    with pytest.raises(ValueError, match=r"data\.stream.*data\.dataset: shards"):
        PretrainDataModule(dataset="folder", root=str(folder), stream=True)
    with pytest.raises(ValueError, match=r"data\.val_split: null"):
        PretrainDataModule(dataset="shards", root="https://example.org/shards", stream=True)
    with pytest.raises(ValueError, match=r"data\.subset"):
        PretrainDataModule(dataset="shards", root=str(folder), stream=True, subset=4)
    with pytest.raises(ValueError, match=r"data\.shuffle_buffer"):
        PretrainDataModule(dataset="shards", root=str(folder), stream=True, shuffle_buffer=0)
