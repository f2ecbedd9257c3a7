"""Issue 36: bad input files, each one line or nothing (docs/reliability.md counts them): text
lines that are not UTF-8 or far too long, a 1 x 1 image, an image between Pillow's two
decompression-bomb limits, a skipped file whose name holds a newline."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from contrastkit.data.decode import images as decode
from contrastkit.data.sources import text
from contrastkit.data.sources.images.datasets import ImageFolder, check_headers


def _no_warnings(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    assert not caught, [str(w.message) for w in caught]
    return result


def test_a_line_that_is_not_utf8_is_named_by_file_and_line(tmp_path):
    """It was "'utf-8' codec can't decode byte 0xe9 in position 3" at the first batch that
    held it: no file, no line, and one bad line killed the run."""
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"first sentence\n\nsecond one\ncaf\xe9 au lait\nlast one\n")
    with pytest.raises(ValueError) as err:
        text.LineFile(path, option="data.text_file")
    assert str(err.value) == (f"data.text_file: {path} line 4 is not UTF-8 (byte 0xe9 at byte 4 "
                              "of the line)")


@pytest.mark.parametrize(("choice", "expected"), [
    ("skip", ["first sentence", "second one", "last one"]),
    ("replace", ["first sentence", "second one", "caf\ufffd au lait", "last one"])])
def test_lines_that_are_not_utf8_are_skipped_or_replaced_as_chosen(tmp_path, choice, expected):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"first sentence\n\nsecond one\ncaf\xe9 au lait\nlast one\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines = text.LineFile(path, option="data.text_file", decode_errors=choice)
    assert [lines[i] for i in range(len(lines))] == expected
    if choice == "skip":
        assert lines.skipped == [f"{path}:4"]
        assert [str(w.message) for w in caught] == [
            f"data.text_file: skipped 1 line(s) of {path} that are not UTF-8 (first: line 4)"]
    else:
        assert lines.skipped == [] and not caught


def test_a_huge_line_is_read_up_to_the_bound(tmp_path):
    """A 60 MB line was tokenised whole (70 s an epoch, 12 GB): now at most
    ``max_line_bytes`` (16 KiB by default) of a line are read, a character cut there dropped,
    and one warning counts such lines."""
    path = tmp_path / "corpus.txt"
    huge = "\u00e9" * 3_000_000  # 6 MB of two-byte characters on one line
    path.write_text("short one\n" + huge + "\nanother\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"1 line\(s\) of .* are longer than 16384 bytes .* "
                                          r"\(first: line 2\)"):
        lines = text.LineFile(path)
    assert len(lines) == 3 and lines[0] == "short one" and lines[2] == "another"
    assert lines[1] == huge[: 16384 // 2]
    with pytest.warns(UserWarning, match="longer than 101 bytes"):
        odd = text.LineFile(path, max_line_bytes=101)  # cuts a character in two: dropped
    assert odd[1] == huge[:50]


def _png(path: Path, height: int, width: int, mode: str = "RGB") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(0).integers(0, 255, (height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).convert(mode).save(path)
    return path


@pytest.mark.parametrize(("ext", "mode"), [("png", "RGB"), ("jpg", "RGB"), ("png", "L")])
def test_a_one_pixel_image_reads_without_numpys_warning(tmp_path, ext, mode):
    """A 1 x 1 image's array was a read-only view of Pillow's buffer: torch.from_numpy printed
    "The given NumPy array is not writable"."""
    path = _png(tmp_path / "c" / f"dot.{ext}", 1, 1, mode)
    folder = ImageFolder(tmp_path)
    image, _ = _no_warnings(lambda: folder[0])
    assert image.shape == (3, 1, 1) and image.dtype == torch.uint8
    assert decode.decode_image(path).flags.writeable


def test_an_image_between_the_bomb_limits_is_read_without_pillows_warning(tmp_path,
                                                                         monkeypatch):
    """Above PIL.Image.MAX_IMAGE_PIXELS (about 89 megapixels) and below twice that, Pillow
    printed its DecompressionBombWarning; the project reads such images (reduced) silently
    and refuses larger ones in one line. The limits are lowered here (40 x 40 pixels
    between 1000 and 2000)."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    for ext in ("png", "jpg"):
        path = _png(tmp_path / "c" / f"big.{ext}", 40, 40)
        assert _no_warnings(lambda p=path: decode.decode_image(p)).shape == (3, 40, 40)
        assert _no_warnings(lambda p=path: decode.decode_at_least(p, 8)).shape[0] == 3
    _no_warnings(lambda: check_headers(ImageFolder(tmp_path), same_size=True))
    above = _png(tmp_path / "d" / "bomb.png", 50, 50)  # 2500 > 2 x 1000: refused
    with pytest.raises(decode.UnreadableImageError, match=r"bomb\.png"):
        decode.decode_image(above)


def test_the_warning_on_skipped_files_keeps_a_name_with_a_newline_on_one_line(tmp_path):
    _png(tmp_path / "a" / "good.png", 8, 8)
    (tmp_path / "a" / "bad\nname.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.warns(UserWarning) as caught:
        folder = ImageFolder(tmp_path, skip_corrupt=True)
    [message] = [str(w.message) for w in caught]
    assert "\n" not in message and "bad\\nname.jpg" in message, message
    assert folder.skipped == [str(tmp_path / "a" / "bad\nname.jpg")]
