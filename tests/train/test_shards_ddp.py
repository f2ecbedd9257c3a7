"""Tar shards (``--data.dataset shards``) read by 2 gloo processes with crops cut in the loader:
every image once per epoch across the processes, and a restarted loader (a resumed run)
cropping exactly as the running one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist
from gloo_harness import run_ranks
from PIL import Image

from contrastkit.data.loading.crops import CropSpec
from contrastkit.data.loading.pack import pack_folder
from contrastkit.train.datamodule import PretrainDataModule

SIZES = ((30, 40), (40, 30), (24, 60))  # (height, width)
N_IMAGES = 24  # 2 classes x 12: a multiple of world x batch, so no image is left out


def packed(root: Path) -> Path:
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / "src" / c).mkdir(parents=True)
        for i in range(N_IMAGES // 2):
            h, w = SIZES[i % len(SIZES)]
            pixels = (rng.random((h, w, 3)) * 255).astype(np.uint8)
            Image.fromarray(pixels).save(root / "src" / c / f"{i}.jpg")
    pack_folder(root / "src", root / "shards", shards=True, shard_size=5)
    return root / "shards"


def loader_for(root: Path, rank: int, world: int):
    data = PretrainDataModule(dataset="shards", root=str(root), val_split=None, batch_size=3,
                              crops="loader", seed=11)
    data.setup("fit")
    data.trainer = SimpleNamespace(world_size=world, global_rank=rank, lightning_module=None)
    data.crop_specs = [CropSpec(12, (0.2, 1.0)), CropSpec(8, (0.1, 0.5))]
    return data.train_dataloader(), data.train_set.targets


def test_two_processes_see_every_image_once_per_epoch_and_resume_exactly(tmp_path: Path):
    root = packed(tmp_path)

    def body(rank: int) -> dict:
        world = dist.get_world_size()
        loader, targets = loader_for(root, rank, world)
        out: dict = {"keys": [], "labels_ok": True}
        for epoch in range(2):
            loader.sampler.set_epoch(epoch)
            out["keys"].append([index for index, _ in loader.sampler])
            batches = list(loader)
            labels = torch.cat([labels for _, labels in batches]).tolist()
            out["labels_ok"] &= labels == [targets[i] for i in out["keys"][-1]]
        out["epoch1"] = batches
        resumed, _ = loader_for(root, rank, world)  # a new process resuming at epoch 1
        resumed.sampler.set_epoch(1)
        out["resumed"] = list(resumed)
        gathered = [None] * world
        dist.all_gather_object(gathered, out["keys"])
        out["all_keys"] = gathered
        return out

    results = run_ranks(body, 2, tmp_path)
    for epoch in range(2):
        keys = [results[r]["keys"][epoch] for r in range(2)]
        assert sorted(keys[0] + keys[1]) == list(range(N_IMAGES))  # each image once
        assert results[0]["all_keys"][1][epoch] == keys[1]  # what the processes exchanged
    assert results[0]["keys"][0] != results[0]["keys"][1]  # reshuffled each epoch
    for result in results:
        assert result["labels_ok"]
        assert len(result["epoch1"]) == N_IMAGES // 6
        for (views, labels), (again, labels_again) in zip(result["epoch1"], result["resumed"],
                                                          strict=True):
            assert [v.shape[-1] for v in views] == [12, 8]
            assert torch.equal(labels, labels_again)
            assert all(torch.equal(a, b) for a, b in zip(views, again, strict=True))
