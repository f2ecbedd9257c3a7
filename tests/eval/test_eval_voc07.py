"""`contrastkit eval voc07` end to end on a 3-class VOCdevkit written in the real layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from contrastkit.cli import main
from contrastkit.data.sources.voc07 import read_voc07
from contrastkit.eval.voc_svm import largest_low_shot
from contrastkit.models.resnet import resnet18
from contrastkit.models.torchvision_layout import to_torchvision_state_dict

pytest.importorskip("sklearn")
Image = pytest.importorskip("PIL.Image")

CLASSES = ("car", "cat", "dog")
COLOURS = {"car": (220, 30, 30), "cat": (30, 220, 30), "dog": (30, 30, 220)}


def write_voc(root: Path, splits: dict[str, int], seed: int = 0) -> Path:
    """VOCdevkit/VOC2007 with JPEGs of different sizes, the split lists and per-class lists;
    image i of a split shows class i % 3 (and class (i + 1) % 3 as difficult every 4th)."""
    base = root / "VOCdevkit" / "VOC2007"
    main_dir = base / "ImageSets" / "Main"
    (base / "JPEGImages").mkdir(parents=True)
    (base / "Annotations").mkdir()
    main_dir.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    start = 0
    for split, n in splits.items():
        ids = [f"{start + i:06d}" for i in range(n)]
        start += n
        flags = {c: [] for c in CLASSES}
        for i, image_id in enumerate(ids):
            name = CLASSES[i % 3]
            h, w = (30, 40) if i % 2 else (40, 34)
            pixels = np.clip(np.array(COLOURS[name]) + rng.normal(0, 10, (h, w, 3)), 0, 255)
            Image.fromarray(pixels.astype(np.uint8)).save(base / "JPEGImages" / f"{image_id}.jpg")
            for c in CLASSES:
                flag = 1 if c == name else (0 if c == CLASSES[(i + 1) % 3] and i % 4 == 0 else -1)
                flags[c].append(f"{image_id} {flag:2d}")
        (main_dir / f"{split}.txt").write_text("\n".join(ids) + "\n")
        for c in CLASSES:
            (main_dir / f"{c}_{split}.txt").write_text("\n".join(flags[c]) + "\n")
    return root / "VOCdevkit"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("voc07")


@pytest.fixture(scope="module")
def voc(work) -> Path:
    return write_voc(work / "data", {"trainval": 18, "test": 12})


@pytest.fixture(scope="module")
def checkpoint(work) -> Path:
    torch.manual_seed(0)
    path = work / "r18.pth"
    torch.save(to_torchvision_state_dict(resnet18(cifar_stem=True, width=8)), path)
    return path


def _args(ckpt: Path, voc: Path, work: Path, *extra: str) -> list[str]:
    return ["eval", "voc07", "--checkpoint", str(ckpt), "--root", str(voc), "--size", "28",
            "--costs", "0.1", "1", "--folds", "2", "--seeds", "0", "1", "--quiet",
            "--cache-dir", str(work / "cache"), *extra]


def test_reader_gives_multilabel_targets_with_difficult_flags(voc):
    split = read_voc07(voc, "trainval")
    assert split.classes == list(CLASSES)
    assert split.targets.shape == (18, 3)
    assert split.targets[0].tolist() == [1, 0, -1]  # car; cat difficult
    assert split.targets[1].tolist() == [-1, 1, -1]
    assert (split.targets == 1).sum(axis=0).tolist() == [6, 6, 6]


def test_eval_voc07_writes_results_and_compare_reads_them(voc, checkpoint, work, capsys):
    out_a, out_b = work / "a", work / "b"
    assert main(_args(checkpoint, voc, work, "--shots", "2", "all", "--output", str(out_a))) == 0
    text = capsys.readouterr().out
    assert "mAP 11-point" in text and "cost selection" in text
    results = json.loads((out_a / "results.json").read_text())
    shots = results["metrics"]["shots"]
    assert list(shots) == ["2", "all"]
    assert shots["2"]["num_positives"] == [2, 2, 2]
    assert shots["2"]["num_negatives"] == [4, 4, 4]
    assert shots["all"]["num_positives"] == [6, 6, 6]
    assert len(shots["2"]["map_voc07"]["per_seed"]) == 2
    assert len(shots["all"]["map_voc07"]["per_seed"]) == 1
    assert 0.0 <= shots["all"]["map_all_point"]["mean"] <= 1.0
    assert "test split" in results["config"]["cost_selection"]
    with np.load(out_a / "predictions.npz") as npz:
        # 12 test images x 3 classes, minus the 3 difficult pairs (images 0, 4, 8)
        assert npz["pred"].shape == npz["labels"].shape == (33,)
        assert npz["labels"].sum() == 12
    assert main(_args(checkpoint, voc, work, "--shots", "all", "--output", str(out_b))) == 0
    capsys.readouterr()
    assert main(["compare", str(out_a), str(out_b)]) == 0
    assert "shots/all/map_voc07/mean" in capsys.readouterr().out
    # one run per --output
    assert main(_args(checkpoint, voc, work, "--output", str(out_b))) == 2
    assert "is not empty" in capsys.readouterr().err


def _one_line_error(capsys, argv: list[str], *needles: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err


def test_missing_list_file_is_named(voc, checkpoint, work, capsys, tmp_path):
    broken = write_voc(tmp_path, {"trainval": 9, "test": 6})
    (broken / "VOC2007" / "ImageSets" / "Main" / "test.txt").unlink()
    _one_line_error(capsys, _args(checkpoint, broken, work, "--no-cache"), "test.txt",
                    "does not exist")


def test_class_absent_from_the_split_is_named(checkpoint, work, capsys, tmp_path):
    broken = write_voc(tmp_path, {"trainval": 9, "test": 6})
    path = broken / "VOC2007" / "ImageSets" / "Main" / "dog_test.txt"
    path.write_text(path.read_text().replace(" 1", "-1"))
    _one_line_error(capsys, _args(checkpoint, broken, work, "--no-cache"), str(path),
                    "class dog has no positive image")


def test_corrupt_image_is_named(checkpoint, work, capsys, tmp_path):
    broken = write_voc(tmp_path, {"trainval": 9, "test": 6})
    image = broken / "VOC2007" / "JPEGImages" / "000003.jpg"
    image.write_bytes(b"not a jpeg")
    _one_line_error(capsys, _args(checkpoint, broken, work, "--no-cache", "--shots", "all"),
                    str(image), "unreadable image")


def test_too_many_shots_name_the_class_its_count_and_shots(voc, checkpoint, tmp_path, capsys):
    """Low-shot on a small set (issue 37, item 6): one line naming the class, its count and
    --shots, before any feature is extracted."""
    targets = read_voc07(voc, "trainval").targets
    largest = largest_low_shot(targets)
    assert largest == min((targets == 1).sum(axis=0).min(), (targets == -1).sum(axis=0).min() // 2)
    argv = _args(checkpoint, voc, tmp_path, "--shots", "2", "7")
    _one_line_error(capsys, argv, "--shots 7: class car has 6 positive training images, 7 are "
                    f"needed; pass --shots values of at most {largest}")
    assert not (tmp_path / "cache").exists()  # no feature was extracted
