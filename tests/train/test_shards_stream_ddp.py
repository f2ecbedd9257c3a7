"""Streamed shards (``--data.stream true``) under 2 gloo processes, and under Lightning's loop:
every image once per epoch across the processes (less the documented tail), the same number of
batches on each, another order each epoch, the same order again for the same seed, and a
resumed run streaming the epoch an uninterrupted one would."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import lightning as L
import numpy as np
import pytest
import torch
import torch.distributed as dist
from gloo_harness import run_ranks
from PIL import Image

from contrastkit.data.loading.crops import CropSpec
from contrastkit.data.loading.pack import pack_folder
from contrastkit.data.sources.shards import ShardReader
from contrastkit.train.datamodule import PretrainDataModule

N_IMAGES = 27  # 6 shards of 5 (the last of 2); 2 processes x 3 per batch: 3 images dropped
SIZES = ((30, 40), (40, 30), (24, 60))  # (height, width)


def packed(root: Path) -> Path:
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / "src" / c).mkdir(parents=True)
    for i in range(N_IMAGES):
        h, w = SIZES[i % len(SIZES)]
        pixels = (rng.random((h, w, 3)) * 255).astype(np.uint8)
        Image.fromarray(pixels).save(root / "src" / "ab"[i % 2] / f"{i}.jpg")
    pack_folder(root / "src", root / "shards", shards=True, shard_size=5)
    return root / "shards"


class RowAnd:
    """Wraps the loader's transform: ``(row, what it returns)``, the row checked against the
    random-access reader's bytes."""

    def __init__(self, transform, folder: Path) -> None:
        self.transform, self.reader = transform, ShardReader(folder)

    def __call__(self, data: bytes, name: str, row: int, epoch: int):
        assert self.reader.read(row)[0] == data, name
        return row, self.transform(data, name, row, epoch)


def loader_for(root: Path, rank: int, world: int, epoch: int = 0, seed: int = 11):
    data = PretrainDataModule(dataset="shards", root=str(root), val_split=None, batch_size=3,
                              crops="loader", seed=seed, stream=True, shuffle_buffer=4)
    data.setup("fit")
    data.trainer = SimpleNamespace(world_size=world, global_rank=rank, current_epoch=epoch,
                                   lightning_module=None)
    data.crop_specs = [CropSpec(12, (0.2, 1.0)), CropSpec(8, (0.1, 0.5))]
    loader = data.train_dataloader()
    loader.dataset.transform = RowAnd(loader.dataset.transform, root / "train")
    return loader


def epoch_of(loader) -> tuple[list[int], list]:
    rows, batches = [], []
    for (batch_rows, views), labels in loader:
        rows += batch_rows.tolist()
        batches.append((views, labels))
    return rows, batches


def test_two_processes_stream_every_image_once_per_epoch(tmp_path: Path):
    pytest.importorskip("webdataset")
    root = packed(tmp_path)
    targets = ShardReader(root / "train").targets

    def body(rank: int) -> dict:
        world = dist.get_world_size()
        loader = loader_for(root, rank, world)
        out: dict = {"rows": [], "batches": [], "labels_ok": True}
        for _ in range(2):  # one pass per epoch
            rows, batches = epoch_of(loader)
            out["rows"].append(rows)
            out["batches"].append(len(batches))
            labels = torch.cat([labels for _, labels in batches]).tolist()
            out["labels_ok"] &= labels == [targets[r] for r in rows]
        out["epoch1"] = batches
        out["again"] = epoch_of(loader_for(root, rank, world))[0]  # same seed, epoch 0
        out["resumed"] = epoch_of(loader_for(root, rank, world, epoch=1))[1]
        out["other_seed"] = epoch_of(loader_for(root, rank, world, seed=12))[0]
        gathered = [None] * world
        dist.all_gather_object(gathered, out["rows"])
        out["all_rows"] = gathered
        return out

    results = run_ranks(body, 2, tmp_path)
    for epoch in range(2):
        rows = [results[r]["rows"][epoch] for r in range(2)]
        assert results[0]["all_rows"][1][epoch] == rows[1]  # what the processes exchanged
        assert [results[r]["batches"][epoch] for r in range(2)] == [4, 4]  # equal ends
        everything = rows[0] + rows[1]
        assert len(everything) == len(set(everything)) == 24  # each image at most once
        assert len(set(range(N_IMAGES)) - set(everything)) == N_IMAGES % 6  # the tail
    assert results[0]["rows"][0] != results[0]["rows"][1]  # reshuffled each epoch
    for result in results:
        assert result["labels_ok"]
        assert result["again"] == result["rows"][0]  # the same seed: the same order
        assert result["other_seed"] != result["rows"][0]
        for (views, labels), (again, labels_again) in zip(result["epoch1"], result["resumed"],
                                                          strict=True):
            assert [v.shape[-1] for v in views] == [12, 8]
            assert torch.equal(labels, labels_again)
            assert all(torch.equal(a, b) for a, b in zip(views, again, strict=True))


class Recorder(L.LightningModule):
    """Records, per epoch, a checksum of each image it trains on."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.seen: dict[int, list[float]] = {}

    def training_step(self, batch, batch_idx):
        images, _ = batch
        sums = images.double().sum((1, 2, 3)).tolist()
        self.seen.setdefault(self.current_epoch, []).extend(sums)
        return (self.weight * images.float().mean()).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def fit(root: Path, out: Path, epochs: int, ckpt: str | None = None, stream: bool = True
        ) -> dict[int, list[float]]:
    data = PretrainDataModule(dataset="shards", root=str(root), val_split=None, batch_size=3,
                              load_size=16, num_workers=1, stream=stream, shuffle_buffer=4)
    module = Recorder()
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=str(out), num_sanity_val_steps=0)
    trainer.fit(module, datamodule=data, ckpt_path=ckpt)
    return module.seen


@pytest.mark.parametrize("stream", [True, False])
def test_lightning_reads_the_next_epoch_each_epoch_and_after_a_resume(tmp_path: Path,
                                                                      stream: bool):
    """Streamed, and read by random access (the seeded sampler): with a loader worker, whose
    first batches Lightning requests before it calls ``set_epoch``."""
    if stream:
        pytest.importorskip("webdataset")
    root = packed(tmp_path)
    seen = fit(root, tmp_path / "run", 2, stream=stream)
    assert sorted(seen) == [0, 1] and all(len(v) == 27 for v in seen.values())  # 9 steps of 3
    assert seen[0] != seen[1]
    first = fit(root, tmp_path / "first", 1, stream=stream)
    assert first[0] == seen[0]
    ckpt = next((tmp_path / "first").rglob("*.ckpt"))
    resumed = fit(root, tmp_path / "resumed", 2, ckpt=str(ckpt), stream=stream)
    assert list(resumed) == [1] and resumed[1] == seen[1]
