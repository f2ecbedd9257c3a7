"""``benchmarks/lightly_side_by_side.py``: every method's lightly model (its heads, loss,
momentum copies and views, over contrastkit's backbone) trains one epoch on a tiny folder, and
the folder of JPEG files is cut from an archive's train split as stated."""

from __future__ import annotations

import functools
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("lightly", reason="lightly is not installed: run make test-timm")
PIL = pytest.importorskip("PIL.Image")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import lightly_side_by_side as bench  # noqa: E402


def _archive(path: Path, per_class: int = 6) -> Path:
    """A ``.tar.gz`` laid out as the CIFAR-10 JPEG archive: two classes, train and test."""
    rng = np.random.default_rng(0)
    staging = path.parent / "staging"
    with tarfile.open(path, "w:gz") as tar:
        for split in ("train", "test"):
            for name in ("cat", "dog"):
                for i in range(per_class):
                    file = staging / split / name / f"{i:04d}.jpg"
                    file.parent.mkdir(parents=True, exist_ok=True)
                    pixels = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                    PIL.fromarray(pixels).save(file)
                    tar.add(file, arcname=f"{split}/{name}/{i:04d}.jpg")
    return path


def test_the_folder_holds_the_first_files_of_each_class_of_the_train_split(tmp_path):
    folder = bench.write_images(_archive(tmp_path / "a.tar.gz"), tmp_path / "imgs", images=40)
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.jpg"))
    assert files == [f"{c}/{i:04d}.jpg" for c in ("cat", "dog") for i in range(4)]


@pytest.mark.parametrize("name", list(bench.METHODS))
def test_every_lightly_model_trains_an_epoch(tmp_path, name):
    folder = bench.write_images(_archive(tmp_path / "a.tar.gz", per_class=8),
                                tmp_path / "imgs", images=80)
    torch.manual_seed(0)
    side = bench.lightly_side(bench.METHODS[name], folder, width=4, batch=8, workers=0,
                              epochs=1)
    before = [p.detach().clone() for p in side.model.backbone.parameters()]
    side.epoch()
    after = list(side.model.backbone.parameters())
    assert len(side.seconds) == 1
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))


#: The contrastkit class each entry trains (a misspelt option would make the script skip it).
CLASSES = {"simclr": "SimCLR", "moco": "MoCo", "dcl": "SimCLR", "dclw": "SimCLR", "byol": "BYOL",
           "barlow_twins": "BarlowTwins", "vicreg": "VICReg", "swav": "SwAV", "dino": "DINO",
           "nnclr": "NNCLR", "mocov3": "MoCoV3"}


@pytest.mark.parametrize("name", list(bench.METHODS))
def test_every_contrastkit_side_builds_its_method(tmp_path, name):
    from contrastkit.cli.pretrain import build

    method = bench.METHODS[name]
    folder = bench.write_images(_archive(tmp_path / "a.tar.gz", per_class=8),
                                tmp_path / "imgs", images=80)
    cli, _ = build(bench.contrastkit_args(method, folder, width=4, batch=8, workers=0,
                                          epochs=1, output=tmp_path / "run"))
    built = cli.model.method
    assert type(built).__name__ == CLASSES[name]
    assert cli.model.optimizer_spec.name == ("adam" if method.adam else "sgd")
    assert cli.model.optimizer_spec.base_lr == pytest.approx(
        (1e-3 if method.adam else method.lr) * 8 / 128)
    # the sizes lightly's benchmark models use, not contrastkit's defaults (the paper's)
    sizes = {"swav": ("prototypes.weight", (512, 128)), "nnclr": ("queue.size", 4096)}
    if name in sizes:
        key, expected = sizes[name]
        value = functools.reduce(getattr, key.split("."), built)
        assert (tuple(value.shape) if hasattr(value, "shape") else value) == expected
