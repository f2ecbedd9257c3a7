"""``data.crops: loader``: the pretraining data module cuts the views' crops from each full image
in the loader, the kNN monitor keeps the evaluation transform, and ``contrastkit pretrain``
runs an ImageNet-style config on a folder of JPEGs of mixed sizes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from contrastkit.cli import main
from contrastkit.data.loading.crops import CropSpec, LoaderCrops
from contrastkit.train.datamodule import PretrainDataModule

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "sce" / "imagenet_sce.yaml"
SIZES = ((48, 64), (64, 40), (30, 90), (75, 100))  # (height, width)


def jpeg_folder(root: Path, per_class: int = 6, seed: int = 0) -> Path:
    """``root/{train,val}/<class>/*.jpg`` of mixed sizes and aspect ratios."""
    rng = np.random.default_rng(seed)
    for split, n in (("train", per_class), ("val", 2)):
        for c in ("cat", "dog"):
            (root / split / c).mkdir(parents=True)
            for i in range(n):
                h, w = SIZES[i % len(SIZES)]
                small = (rng.random((h // 8 + 2, w // 8 + 2, 3)) * 255).astype(np.uint8)
                image = Image.fromarray(small).resize((w, h), Image.BICUBIC)
                image.save(root / split / c / f"{c}{i}.jpg", quality=90)
    return root


def test_loader_crops_full_images_for_training_squares_for_the_monitor(tmp_path: Path):
    root = jpeg_folder(tmp_path)
    dm = PretrainDataModule(dataset="folder", root=str(root), val_split="val", batch_size=4,
                            load_size=20, crops="loader")
    dm.setup("fit")
    shapes = {tuple(dm.train_set[i][0].shape) for i in range(len(dm.train_set))}
    assert shapes == {(3, h, w) for h, w in SIZES}  # full images, not load_size squares
    assert {tuple(dm.val_set[i][0].shape) for i in range(4)} == {(3, 20, 20)}
    assert {tuple(dm.bank_set[i][0].shape) for i in range(4)} == {(3, 20, 20)}
    dm.crop_specs = [CropSpec(16, (0.2, 1.0)), CropSpec(8, (0.1, 0.5))]
    loader = dm.train_dataloader()
    assert isinstance(loader.dataset, LoaderCrops) and not loader.dataset.fast_decode
    views, labels = next(iter(loader))
    assert [tuple(v.shape) for v in views] == [(4, 3, 16, 16), (4, 3, 8, 8)]
    assert views[0].dtype == torch.uint8 and labels.shape == (4,)
    # a bank drawn from the training split holds the training images, as squares
    dm = PretrainDataModule(dataset="folder", root=str(root), val_split="val", batch_size=4,
                            load_size=20, crops="loader", subset=7)
    dm.setup("fit")
    assert len(dm.bank_set) == len(dm.train_set) == 7
    assert {tuple(dm.bank_set[i][0].shape) for i in range(7)} == {(3, 20, 20)}
    assert dm.bank_set.targets == dm.train_set.targets


def test_fast_decode_reaches_the_loader_crops(tmp_path: Path):
    root = jpeg_folder(tmp_path)
    dm = PretrainDataModule(dataset="folder", root=str(root), val_split="val", batch_size=4,
                            load_size=20, crops="loader", fast_decode=True)
    dm.setup("fit")
    dm.crop_specs = [CropSpec(16, (0.2, 1.0))]
    assert dm.train_dataloader().dataset.fast_decode
    with pytest.raises(ValueError, match=r"data\.fast_decode"):
        PretrainDataModule(dataset="folder", root=str(root), fast_decode=True)


def test_loader_crops_refuse_what_they_cannot_crop(tmp_path: Path):
    with pytest.raises(ValueError, match=r"data\.crops"):
        PretrainDataModule(dataset="folder", root=str(tmp_path), cache_dir=str(tmp_path),
                           crops="loader")
    dm = PretrainDataModule(dataset="digits", batch_size=8, crops="loader")
    dm.setup("fit")
    dm.crop_specs = [CropSpec(8, (0.2, 1.0))]
    with pytest.raises(ValueError, match=r"image files.*data\.crops: device"):
        dm.train_dataloader()


def test_auto_workers_share_the_cores_among_the_devices(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(16)), raising=False)
    dm = PretrainDataModule(dataset="digits", num_workers="auto")
    dm.trainer = SimpleNamespace(num_devices=2)
    assert dm.workers() == 7  # 16 cores for 2 GPU processes, one core each for training
    dm.trainer = SimpleNamespace(num_devices=32)
    assert dm.workers() == 1
    assert PretrainDataModule(dataset="digits", num_workers=3).workers() == 3
    with pytest.raises(ValueError, match=r"data\.num_workers"):
        PretrainDataModule(dataset="digits", num_workers="many")


TINY_IMAGENET = [
    "--model.method.backbone", '{"name": "resnet18", "width": 4}',
    "--model.method.projector", '{"hidden_dim": 16, "out_dim": 8, "num_layers": 2}',
    "--model.method.queue_size", "32", "--model.method.shuffle_bn", "2",
    "--model.views.size", "32", "--data.batch_size", "4", "--data.num_workers", "1",
    "--data.load_size", "37", "--data.monitor_bank_size", "12",
    "--trainer.devices", "1", "--trainer.strategy", "auto", "--trainer.precision", "32",
    "--trainer.accelerator", "cpu", "--trainer.max_epochs", "1",
    "--trainer.enable_progress_bar", "false",
]


@pytest.mark.parametrize("form", ["folder", "store", "shards", "stream"])
def test_imagenet_config_pretrains_on_mixed_jpegs(tmp_path: Path, form: str):
    root = jpeg_folder(tmp_path / "images")
    dataset = "shards" if form in ("shards", "stream") else "folder"
    if form != "folder":
        packed = tmp_path / form
        args = ["data", "pack", str(root), str(packed), "--max-side", "64"]
        assert main(args + (["--shards", "--shard-size", "5"] if dataset == "shards" else [])
                    ) == 0
        root = packed
    out = tmp_path / "run"
    stream = ["--data.stream", "true", "--data.shuffle_buffer", "4"] if form == "stream" else []
    code = main(["pretrain", "--config", str(CONFIG), "--data.root", str(root),
                 "--data.dataset", dataset, *TINY_IMAGENET, *stream, "--output", str(out)])
    assert code == 0
    assert (out / "checkpoints" / "last.ckpt").is_file()
    config = (out / "config.yaml").read_text()
    assert "crops: loader" in config and f"dataset: {dataset}" in config
    assert f"stream: {str(form == 'stream').lower()}" in config
