"""``contrastkit data pack``: the bounded-side store and the tar shards, and reading shards."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from contrastkit.cli import main
from contrastkit.data.loading.pack import pack_folder
from contrastkit.data.sources.images.datasets import ImageFolder
from contrastkit.data.sources.registry import MissingSplitError, build_dataset
from contrastkit.data.sources.shards import ShardImages, ShardReader

SIZES = ((30, 40), (80, 60), (24, 100))  # (height, width)


def source(root: Path, per_class: int = 5) -> Path:
    rng = np.random.default_rng(0)
    for split, n in (("train", per_class), ("val", 2)):
        for c in ("a", "b"):
            (root / split / c).mkdir(parents=True)
            for i in range(n):
                h, w = SIZES[i % len(SIZES)]
                pixels = (rng.random((h, w, 3)) * 255).astype(np.uint8)
                ext = "png" if i == 0 else "jpg"
                Image.fromarray(pixels).save(root / split / c / f"{c}{i}.{ext}")
    return root


def test_store_bounds_the_longer_side_and_keeps_the_layout(tmp_path: Path) -> None:
    src = source(tmp_path / "src")
    counts = pack_folder(src, tmp_path / "store", max_side=50, quality=95)
    assert counts == {"train": 10, "val": 4}
    for original in src.rglob("*.*"):
        rel = original.relative_to(src)
        with Image.open(original) as img:
            width, height = img.size
        if max(width, height) <= 50:  # small enough: the same bytes
            assert (tmp_path / "store" / rel).read_bytes() == original.read_bytes()
            continue
        packed = tmp_path / "store" / rel.with_suffix(".jpg")
        with Image.open(packed) as img:
            assert max(img.size) == 50 and img.format == "JPEG"
            # the aspect ratio is kept (to the rounding of a pixel)
            assert img.size[0] / img.size[1] == pytest.approx(width / height, rel=0.05)
    folder = ImageFolder(tmp_path / "store" / "train")
    assert folder.classes == ["a", "b"] and len(folder) == 10


def test_pack_refuses_a_non_empty_destination_and_names_a_broken_file(tmp_path: Path,
                                                                      capsys) -> None:
    src = source(tmp_path / "src")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("keep")
    assert main(["data", "pack", str(src), str(tmp_path / "busy")]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert (tmp_path / "busy" / "mine.txt").read_text() == "keep"
    (src / "train" / "a" / "zz_broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    assert main(["data", "pack", str(src), str(tmp_path / "out"), "--shards"]) == 2
    assert "zz_broken.jpg" in capsys.readouterr().err
    assert not list((tmp_path / "out").rglob(".*tmp"))  # no temporary file left behind


def test_shards_hold_every_image_once_with_its_label(tmp_path: Path) -> None:
    src = source(tmp_path / "src")
    assert main(["data", "pack", str(src), str(tmp_path / "shards"), "--shards",
                 "--shard-size", "3"]) == 0
    train = ShardImages(tmp_path / "shards" / "train")
    assert len(list((tmp_path / "shards" / "train").glob("shard-*.tar"))) == 4  # 10 = 3+3+3+1
    assert train.classes == ["a", "b"] and len(train) == 10
    originals = {p.read_bytes(): ("ab".index(p.parent.name), p) for p in
                 (src / "train").rglob("*.*")}
    seen = []
    for i in range(len(train)):
        data, _, label = train.reader.read(i)
        assert originals[data][0] == label == train.targets[i]  # the same bytes, its label
        seen.append(originals[data][1])
        image, _ = train[i]
        with Image.open(io.BytesIO(data)) as img:
            expected = np.asarray(img.convert("RGB")).transpose(2, 0, 1)
        assert torch.equal(image, torch.from_numpy(expected.copy()))
    assert sorted(seen) == sorted(originals[d][1] for d in originals)
    assert len(build_dataset("shards", str(tmp_path / "shards"), "val")) == 4
    with pytest.raises(MissingSplitError, match="no test/ split"):
        build_dataset("shards", str(tmp_path / "shards"), "test")


def test_workers_write_the_same_shards(tmp_path: Path) -> None:
    src = source(tmp_path / "src")
    pack_folder(src, tmp_path / "one", shards=True, shard_size=4, max_side=50)
    pack_folder(src, tmp_path / "two", shards=True, shard_size=4, max_side=50, workers=2)
    for split in ("train", "val"):
        for shard in (tmp_path / "one" / split).iterdir():
            assert (tmp_path / "two" / split / shard.name).read_bytes() == shard.read_bytes()


def test_shards_are_read_by_webdataset_streaming(tmp_path: Path) -> None:
    wds = pytest.importorskip("webdataset")
    src = source(tmp_path / "src")
    pack_folder(src, tmp_path / "shards", shards=True, shard_size=4)
    urls = sorted(str(p) for p in (tmp_path / "shards" / "train").glob("shard-*.tar"))
    samples = list(wds.WebDataset(urls, shardshuffle=False))
    reader = ShardReader(tmp_path / "shards" / "train")
    assert len(samples) == len(reader) == 10
    for i, sample in enumerate(samples):
        image = next(v for k, v in sample.items() if k in ("jpg", "png"))
        data, _, label = reader.read(i)
        assert image == data and int(sample["cls"]) == label


def test_a_damaged_index_is_refused_naming_it(tmp_path: Path) -> None:
    pack_folder(source(tmp_path / "src"), tmp_path / "shards", shards=True)
    (tmp_path / "shards" / "train" / "shard-00000.tar").unlink()
    with pytest.raises(ValueError, match="missing"):
        ShardReader(tmp_path / "shards" / "train")
    (tmp_path / "shards" / "val" / "index.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"index\.json"):
        ShardReader(tmp_path / "shards" / "val")
