"""``data.crops: dali``: the ImageNet config pretrains with the views' crops decoded by DALI
(its CPU backend here), for two epochs (the pipeline restarts per epoch), and the module
refuses what DALI cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_loader_crops_pretrain import CONFIG, TINY_IMAGENET, jpeg_folder

from contrastkit.cli import main
from contrastkit.train.datamodule import PretrainDataModule


def test_dali_crops_refuse_streams_and_caches(tmp_path: Path):
    with pytest.raises(ValueError, match=r"data\.crops: dali reads files by random access"):
        PretrainDataModule(dataset="shards", root=str(tmp_path), crops="dali", stream=True)
    with pytest.raises(ValueError, match=r"data\.crops: dali cuts crops from image files"):
        PretrainDataModule(dataset="folder", root=str(tmp_path), cache_dir=str(tmp_path),
                           crops="dali")


def test_imagenet_config_pretrains_with_dali_crops(tmp_path: Path):
    pytest.importorskip("nvidia.dali", reason="NVIDIA DALI is not installed (contrastkit[dali])")
    root = jpeg_folder(tmp_path / "images", per_class=2)  # 4 images of two sizes
    out = tmp_path / "run"
    assert main(["pretrain", "--threads", "1", "--config", str(CONFIG), "--data.root", str(root),
                 "--data.dataset", "folder", *TINY_IMAGENET, "--data.crops", "dali",
                 "--trainer.max_epochs", "2", "--output", str(out)]) == 0
    state = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert state["global_step"] == 2  # 4 images, batches of 4, two epochs
    assert "crops: dali" in (out / "config.yaml").read_text()
