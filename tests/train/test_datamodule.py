"""The pretraining data module: class selection, subsets, deterministic shuffling, own image
folders (held-out split, unlabelled images, mixed sizes, unreadable files)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from own_images import make_own_folder

from contrastkit.data.decode import images as decode
from contrastkit.data.decode.images import MixedImageSizesError
from contrastkit.data.sources.images import datasets
from contrastkit.data.sources.registry import MissingSplitError, build_dataset
from contrastkit.data.sources.wrappers import select_classes
from contrastkit.train.datamodule import EpochShuffleSampler, PretrainDataModule


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
    from contrastkit.data.sources.wrappers import ResizedSquare

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


def _files(dataset) -> set[str]:
    """Paths of the image files under a data module split (through its wrappers)."""
    while not hasattr(dataset, "samples"):
        dataset = dataset.dataset
    return {p for p, _ in dataset.samples}


def test_folder_without_test_split_never_reuses_the_training_images(tmp_path):
    root = make_own_folder(tmp_path / "own", sizes=((16, 16),))
    hint = r"--data\.test_fraction 0\.2.*--data\.val_split null"
    with pytest.raises(MissingSplitError, match=hint):
        PretrainDataModule(dataset="folder", root=str(root), batch_size=8).setup("fit")
    with pytest.raises(MissingSplitError, match="no test/ sub-folder"):
        build_dataset("folder", str(root), "test")  # evaluation's view of the same folder
    dm = PretrainDataModule(dataset="folder", root=str(root), batch_size=8, test_fraction=0.25)
    dm.setup("fit")
    train, bank, query = _files(dm.train_set), _files(dm.bank_set), _files(dm.val_set)
    assert not train & query and bank == train
    assert len(query) == 4 * 3 and len(train) == 4 * 9  # 25% of each class of 12
    assert train | query == {str(p) for p in root.rglob("*.png")}
    assert dm.num_classes == 4
    with pytest.raises(ValueError, match="'folder' only"):
        build_dataset("digits", None, "test", test_fraction=0.2)


def test_unlabelled_folder_pretrains_without_the_monitor(tmp_path):
    root = make_own_folder(tmp_path / "flat", per_class=4, sizes=((16, 16),), labelled=False)
    dm = PretrainDataModule(dataset="folder", root=str(root), batch_size=8)
    assert dm.num_classes == 0
    assert len(dm.train_set) == 16 and dm.val_set is None and dm.val_dataloader() == []


def test_mixed_sizes_and_broken_files_fail_at_setup_not_at_a_batch(tmp_path):
    root = make_own_folder(tmp_path / "own", corrupt=2)
    kw = {"dataset": "folder", "root": str(root), "batch_size": 8, "test_fraction": 0.25}
    with pytest.raises((MixedImageSizesError, decode.UnreadableImageError)):
        PretrainDataModule(**kw).setup("fit")
    with pytest.raises(decode.UnreadableImageError, match="_broken"):
        PretrainDataModule(**kw, load_size=16).setup("fit")
    with pytest.warns(UserWarning, match="skipped 2 unreadable"):
        dm = PretrainDataModule(**kw, load_size=16, skip_corrupt=True)
        dm.setup("fit")
    assert sorted(Path(p).name for p in dm.skipped) == ["apple_broken0.jpg", "bear_broken1.jpg"]
    images = next(iter(dm.train_dataloader()))[0]
    assert images.shape == (8, 3, 16, 16)
