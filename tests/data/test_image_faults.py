"""Issue 18 items 3, 7 and 10: image folders with a symlink loop, 16-bit images, images above
the decompression-bomb limit, and file names that hold a newline."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from contrastkit.data.decode import images as decode
from contrastkit.data.decode.images import decode_image
from contrastkit.data.sources.images import datasets as D
from contrastkit.data.sources.images._folder import check_headers, list_images
from contrastkit.outputs import SKIPPED_FILES, write_skipped_files


def _png(path: Path, value: int = 100, size: int = 4) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size, size, 3), value, np.uint8)).save(path)


def test_a_symlink_loop_lists_each_image_once(tmp_path):
    root = tmp_path / "root"
    for cls in ("cat", "dog"):
        for i in range(3):
            _png(root / cls / f"{i}.png")
    os.symlink(root, root / "cat" / "loop")  # cat/loop/cat/loop/... forever
    os.symlink(root / "dog", root / "cat" / "also_dog")  # the same folder twice
    files = D.ImageFolder(root)
    assert len(files) == 6
    assert len({os.path.realpath(p) for p, _ in files.samples}) == 6
    assert sorted(Path(p).name for p, label in files.samples if label == 0) == \
        ["0.png", "1.png", "2.png"]  # the links to the root and to dog/ are not cat's images
    alone = list_images(root / "cat")  # walked alone: each real image once
    assert len(alone) == 6 and len({os.path.realpath(p) for p in alone}) == 6


def test_sixteen_bit_gray_is_scaled_not_clipped(tmp_path):
    levels = np.array([[0, 257, 32768, 65535]], np.uint16)
    path = tmp_path / "deep.png"
    Image.fromarray(levels).save(path)
    assert Image.open(path).mode in ("I;16", "I")
    decoded = decode_image(path)
    assert decoded.shape == (3, 1, 4)
    np.testing.assert_array_equal(decoded[0, 0], [0, 1, 128, 255])
    np.testing.assert_array_equal(decoded[0], decoded[2])


def test_an_image_above_the_bomb_limit_is_one_line_and_skippable(tmp_path, monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 50)  # 20x20 = 400 > 2 x 50: a "bomb"
    root = tmp_path / "root"
    _png(root / "a" / "small.png", size=4)
    _png(root / "a" / "huge.png", size=20)
    with pytest.raises(decode.UnreadableImageError, match=r"huge\.png: unreadable image"):
        check_headers(D.ImageFolder(root), same_size=False)
    with pytest.raises(decode.UnreadableImageError, match=r"huge\.png: unreadable image"):
        decode_image(root / "a" / "huge.png")
    with pytest.warns(UserWarning, match="skipped 1 unreadable"):
        kept = D.ImageFolder(root, skip_corrupt=True)
    assert [Path(p).name for p, _ in kept.samples] == ["small.png"]


def test_a_jpeg_above_the_bomb_limit_is_refused_by_the_fast_path_too(tmp_path, monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 50)
    path = tmp_path / "huge.jpg"
    Image.fromarray(np.full((20, 20, 3), 9, np.uint8)).save(path)
    with pytest.raises(decode.UnreadableImageError, match=r"huge\.jpg"):
        decode_image(path)


def test_skipped_file_names_stay_on_one_line_each(tmp_path):
    names = ["a\nb.png", "c\\d.png", "e.png"]
    write_skipped_files(tmp_path, names)
    lines = (tmp_path / SKIPPED_FILES).read_text().splitlines()
    assert lines == ["a\\nb.png", "c\\\\d.png", "e.png"]
