"""The pretraining data module: class selection, subsets, deterministic shuffling."""

from __future__ import annotations

import pytest
import torch

from contrastkit.data import datasets
from contrastkit.train.datamodule import EpochShuffleSampler, PretrainDataModule, select_classes


def test_select_classes_keeps_and_relabels_in_the_given_order():
    digits = datasets.Digits("train")
    two = select_classes(digits, ["7", "3"])
    assert two.classes == ["7", "3"]
    assert set(two.targets) == {0, 1}
    assert len(two) == sum(1 for y in digits.targets if y in (3, 7))
    for i in range(0, len(two), 37):
        image, label = two[i]
        original = digits[two.indices[i]]
        assert torch.equal(image, original[0])
        assert label == {7: 0, 3: 1}[original[1]]
    with pytest.raises(ValueError, match="not among"):
        select_classes(digits, ["cat"])


def test_datamodule_applies_classes_to_every_split():
    dm = PretrainDataModule(dataset="digits", classes=["0", "1"], batch_size=16)
    dm.setup("fit")
    assert dm.num_classes == 2
    assert set(dm.val_set.targets) == {0, 1} and set(dm.train_set.targets) == {0, 1}


def test_batch_size_checks():
    with pytest.raises(ValueError, match="at least 2"):
        PretrainDataModule(batch_size=1)
    dm = PretrainDataModule(subset=10, batch_size=16)
    with pytest.raises(ValueError, match=r"fewer than data\.batch_size"):
        dm.setup("fit")


def test_epoch_shuffle_is_a_function_of_seed_and_epoch():
    a, b = EpochShuffleSampler(50, seed=1), EpochShuffleSampler(50, seed=1)
    first = list(a)
    assert first == list(b) and sorted(first) == list(range(50))
    a.set_epoch(1)
    assert list(a) != first
    b.set_epoch(1)
    assert list(a) == list(b)


def test_resized_square_makes_variable_images_stackable():
    from contrastkit.train.datamodule import ResizedSquare

    class Varied(torch.utils.data.Dataset):
        classes, targets = ["a"], [0, 0]

        def __len__(self):
            return 2

        def __getitem__(self, i):
            h, w = (40, 60) if i == 0 else (90, 30)
            img = torch.zeros(3, h, w, dtype=torch.uint8)
            img[:, h // 2 - 2 : h // 2 + 2, w // 2 - 2 : w // 2 + 2] = 255  # centre mark
            return img, 0

    ds = ResizedSquare(Varied(), 20)
    for i in range(2):
        image, label = ds[i]
        assert image.shape == (3, 20, 20) and image.dtype == torch.uint8 and label == 0
        assert image[:, 10, 10].min() > 100  # the centre survives the centre crop
        assert int(image[:, 0, 0].max()) == 0
