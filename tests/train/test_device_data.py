"""A training split kept on the device (``data.on_device``): the loader's batches, exactly.

On the CPU the device is the CPU itself, and the code path is the one a GPU run takes: the split
read once into two tensors, each batch gathered by index from the data module's sampler.
"""

from __future__ import annotations

import pytest
import torch
from pretrain_args import TINY, StopAfterEpochs, method_args
from torch.utils.data import DataLoader

from contrastkit.cli.pretrain import build, pretrain
from contrastkit.data.decode import images as decode
from contrastkit.data.sources.registry import open_split
from contrastkit.train.datamodule import EpochShuffleSampler
from contrastkit.train.device_data import DeviceBatches

ON_DEVICE = ["--data.on_device", "true"]


@pytest.mark.parametrize(("rank", "world"), [(0, 1), (1, 2)])
def test_the_batches_are_the_loaders_epoch_after_epoch(rank: int, world: int) -> None:
    split, _ = open_split("digits", None, "train")
    sampler = EpochShuffleSampler(len(split), seed=3, rank=rank, world_size=world, batch_size=64)
    loader = DataLoader(split, batch_size=64, sampler=sampler, drop_last=True,
                        collate_fn=decode.collate_images)
    kept = DeviceBatches(split, sampler, 64, torch.device("cpu"))
    assert kept.images.dtype == torch.uint8 and kept.images.shape[0] == len(split)
    for epoch in (0, 1, 5):
        sampler.set_epoch(epoch)  # what Lightning calls on either
        want, got = list(loader), list(kept)
        assert len(got) == len(want) == len(kept) == len(loader)
        for (x, y), (a, b) in zip(want, got, strict=True):
            assert torch.equal(x, a) and torch.equal(y, b) and y.dtype == b.dtype


def test_a_split_over_the_limit_is_one_line() -> None:
    split, _ = open_split("digits", None, "train")
    sampler = EpochShuffleSampler(len(split))
    with pytest.raises(ValueError, match=r"data.on_device: the training split takes .* GiB"):
        DeviceBatches(split, sampler, 32, torch.device("cpu"), max_bytes=1000)


def _weights(cli) -> dict:
    return {k: v.detach().clone() for k, v in cli.model.state_dict().items()}


def test_training_on_the_device_split_equals_the_loaders_and_resumes_exactly(tmp_path) -> None:
    """2 epochs from the loader == 2 epochs from the device split == 1 epoch on the device,
    a stop and a resume: every weight, bit for bit."""
    args = [*TINY, *method_args("SCE", queue_size=48), "--trainer.max_epochs", "2"]
    loader = _weights(pretrain([*args, "--output", str(tmp_path / "loader")]))
    device = _weights(pretrain([*args, *ON_DEVICE, "--output", str(tmp_path / "device")]))
    assert [k for k in loader if not torch.equal(loader[k], device[k])] == []
    split = [*args, *ON_DEVICE, "--output", str(tmp_path / "split")]
    cli, _ = build(split)
    cli.trainer.callbacks.append(StopAfterEpochs(1))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    resumed = _weights(pretrain([*split, "--resume", "last"]))
    assert [k for k in loader if not torch.equal(loader[k], resumed[k])] == []


def test_on_device_is_refused_where_it_does_not_apply(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"data\.on_device keeps decoded images"):
        build([*TINY, *method_args("SimCLR"), *ON_DEVICE, "--data.crops", "loader",
               "--output", str(tmp_path / "run")])
