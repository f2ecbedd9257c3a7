"""One-sentence-per-line text files (Wiki1M's format)."""

from __future__ import annotations

import pytest

from contrastkit.data.sources import text


def test_lines_by_index_and_in_order(tmp_path, monkeypatch):
    path = tmp_path / "wiki.txt"
    lines = [f"sentence number {i} \u00e9t\u00e9" for i in range(50)]
    path.write_text("\n\n".join(lines[:10]) + "\n  \n" + "\r\n".join(lines[10:]), encoding="utf-8")
    monkeypatch.setattr(text, "_CHUNK", 7)  # lines cut across read chunks
    data = text.LineFile(path)
    assert len(data) == 50
    assert [data[i] for i in range(50)] == lines
    assert data[37] == lines[37] and data[3] == lines[3]  # random access


def test_last_line_without_newline(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"first\nsecond")
    assert [text.LineFile(path)[i] for i in range(2)] == ["first", "second"]


@pytest.mark.parametrize("content", [b"", b"\n  \n\t\n"])
def test_empty_file_is_a_one_line_error_naming_it(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"data.text_file: .*empty.txt holds no sentence") as err:
        text.LineFile(path, option="data.text_file")
    assert "\n" not in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data\.text_file: no text file"):
        text.LineFile(tmp_path / "nope.txt", option="data.text_file")
