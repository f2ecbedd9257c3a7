"""``--subset`` / ``--held-out``: a validation split of training-split images that a run
trained with ``data.subset N`` never saw (the bank: those N images), for tuning without the
test split (SINCERE App. J holds out part of the training set)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from contrastkit.cli import main
from contrastkit.data.sources.images.datasets import Digits
from contrastkit.data.sources.wrappers import fixed_subset
from contrastkit.train.datamodule import PretrainDataModule

pytest.importorskip("sklearn")


def test_held_out_items_follow_the_subset_and_never_overlap_it() -> None:
    data = Digits(split="train")
    first = fixed_subset(data, 128, seed=0)
    after = fixed_subset(data, 64, seed=0, start=128)
    assert not set(first.indices) & set(after.indices) and len(after) == 64
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(0)).tolist()
    assert sorted(first.indices + after.indices) == sorted(order[:192])
    # the bank is exactly the images pretraining with data.subset 128 (data.seed 0) trains on
    module = PretrainDataModule("digits", subset=128, batch_size=32, val_split=None)
    module.setup("fit")
    assert module.train_set.indices == first.indices
    with pytest.raises(ValueError, match="start"):
        fixed_subset(data, 4, seed=0, start=-1)


def test_knn_on_the_held_out_images(tiny_checkpoint: Path, tmp_path) -> None:
    # the tiny run trained on data.subset 128 (data.seed 0): the bank is its training images
    cache = tmp_path / "cache"
    assert main(["eval", "knn", "--checkpoint", str(tiny_checkpoint), "--data", "digits",
                 "--k", "1", "--subset", "128", "--held-out", "64", "--space", "projector",
                 "--cache-dir", str(cache), "--quiet", "--output", str(tmp_path / "val")]) == 0
    data = json.loads((tmp_path / "val" / "results.json").read_text())["data"]
    assert (data["test_split"], data["subset"], data["held_out"]) == ("held-out", 128, 64)
    # one cache entry per selection: the 128 bank images and the 64 held-out queries
    sizes = sorted(load_file(str(p))["features"].shape[0] for p in cache.glob("*.safetensors"))
    assert sizes == [64, 128]
    # the whole split's features are another cache entry, not these
    assert main(["eval", "knn", "--checkpoint", str(tiny_checkpoint), "--data", "digits",
                 "--k", "1", "--space", "projector", "--cache-dir", str(cache), "--quiet"]) == 0
    assert len(list(cache.glob("*.safetensors"))) == 4


def test_held_out_needs_the_subset(tiny_checkpoint: Path, capsys) -> None:
    code = main(["eval", "knn", "--checkpoint", str(tiny_checkpoint), "--data", "digits",
                 "--held-out", "64", "--no-cache", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "--held-out" in err[0] and "--subset" in err[0]
