"""Text files of one sentence per line (the format of SimCSE's Wiki1M, Gao et al. 2021).

:class:`LineFile` indexes such a file in one streaming pass (the byte offset of every
non-blank line, 8 bytes a line: about 8 MB for Wiki1M's million lines) and reads a sentence
only when it is asked for, so a file far larger than memory can be shuffled and read by index
(what the pretraining sampler needs for an exact resume).

Choices: lines are decoded as UTF-8 and stripped of surrounding white space; blank lines are
skipped (they hold no sentence).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from torch.utils.data import Dataset

__all__ = ["LineFile"]

_CHUNK = 1 << 20


def _checked_path(path: str | os.PathLike, option: str) -> Path:
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"{option}: no text file at {file}")
    return file


def _line_offsets(file: Path) -> np.ndarray:
    """Byte offsets of the starts of the non-blank lines of ``file`` (one streaming pass)."""
    offsets: list[int] = []
    position = 0
    blank = True
    with open(file, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            for start, line in _split_keeping_ends(chunk, position):
                if blank and line.strip():
                    offsets.append(start)
                    blank = False
                if line.endswith(b"\n"):
                    blank = True
            position += len(chunk)
    return np.asarray(offsets, dtype=np.int64)


def _split_keeping_ends(chunk: bytes, position: int) -> Iterator[tuple[int, bytes]]:
    """``(absolute offset, piece)`` of the pieces of ``chunk`` cut after each newline; a line
    cut by the chunk boundary comes in two pieces (the caller joins them by state)."""
    start = 0
    for piece in chunk.splitlines(keepends=True):
        yield position + start, piece
        start += len(piece)


class LineFile(Dataset):
    """The sentences of a one-sentence-per-line text file, by index, read on demand.

    Args:
        path: the text file (UTF-8).
        option: how the caller names the file in errors (e.g. ``data.text_file``).

    Raises:
        FileNotFoundError: when ``path`` is not a file.
        ValueError: when it holds no sentence (empty or blank lines only).
    """

    def __init__(self, path: str | os.PathLike, option: str = "text file") -> None:
        self.path = _checked_path(path, option)
        self.offsets = _line_offsets(self.path)
        if len(self.offsets) == 0:
            raise ValueError(f"{option}: {self.path} holds no sentence (empty or blank lines "
                             "only); give a file of one sentence per line")
        self._handle = None
        self._pid = -1

    def __len__(self) -> int:
        return int(self.offsets.shape[0])

    def __getitem__(self, index: int) -> str:
        if self._handle is None or self._pid != os.getpid():  # one handle per loader worker
            self._handle = open(self.path, "rb")
            self._pid = os.getpid()
        self._handle.seek(int(self.offsets[index]))
        return self._handle.readline().decode("utf-8").strip()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_handle": None, "_pid": -1}
