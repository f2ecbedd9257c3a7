"""Text files of one sentence per line (the format of SimCSE's Wiki1M, Gao et al. 2021).

:class:`LineFile` indexes such a file in one streaming pass (the byte offset of every
non-blank line, 8 bytes a line: about 8 MB for Wiki1M's million lines) and reads a sentence
only when it is asked for, so a file far larger than memory can be shuffled and read by index
(what the pretraining sampler needs for an exact resume).

Choices: lines are decoded as UTF-8 and stripped of surrounding white space; blank lines are
skipped (they hold no sentence). At most ``max_line_bytes`` bytes of a line are read (a
sentence encoder truncates to a few dozen tokens anyway; one 60 MB line would otherwise be
tokenised whole), the longer lines counted in one warning. A line whose bytes are not UTF-8 is
found by the indexing pass and, as ``decode_errors`` says, named in the error (file and line
number), left out (``skip``: listed in :attr:`LineFile.skipped`) or read with U+FFFD in place
of the bad bytes (``replace``).
"""

from __future__ import annotations

import codecs
import os
import warnings
from pathlib import Path
from typing import Literal

import numpy as np
from torch.utils.data import Dataset

__all__ = ["DECODE_ERRORS", "MAX_LINE_BYTES", "LineFile", "NotUTF8Error"]

_CHUNK = 1 << 20

#: Bytes of a line read by default (longer lines are read up to it).
MAX_LINE_BYTES = 16384

DecodeErrors = Literal["error", "skip", "replace"]
#: What :class:`LineFile` does with a line that is not UTF-8.
DECODE_ERRORS: tuple[str, ...] = DecodeErrors.__args__  # type: ignore[attr-defined]


class NotUTF8Error(ValueError):
    """A line of a text file is not UTF-8; the message names the file and the line."""


def _checked_path(path: str | os.PathLike, option: str) -> Path:
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"{option}: no text file at {file}")
    return file


def _decode(data: bytes, cut: bool, errors: str) -> str:
    """``data`` decoded as UTF-8; when the line was ``cut`` at the byte bound, a character cut
    in two at its end is dropped (it is not an error)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="strict" if errors == "skip"
                                                    else errors)
    return decoder.decode(data, final=not cut)


class _Index:
    """One streaming pass over a file: the offsets of its sentences, the numbers of the lines
    that are not UTF-8 and of those longer than the bound."""

    def __init__(self, file: Path, max_bytes: int, errors: str) -> None:
        self.file, self.max_bytes, self.errors = file, max_bytes, errors
        self.offsets: list[int] = []
        self.bad: list[int] = []
        self.long: list[int] = []
        line, start, head, length, position = 1, 0, bytearray(), 0, 0
        with open(file, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                i = 0
                while i < len(chunk):
                    newline = chunk.find(b"\n", i)
                    end = len(chunk) if newline < 0 else newline + 1
                    room = max_bytes - len(head)
                    if room > 0:
                        head += chunk[i : min(end, i + room)]
                    length += end - i
                    if newline >= 0:
                        self._line(line, start, bytes(head), length)
                        line, start, head, length = line + 1, position + end, bytearray(), 0
                    i = end
                position += len(chunk)
        if length:
            self._line(line, start, bytes(head), length)

    def _line(self, number: int, start: int, head: bytes, length: int) -> None:
        cut = length > len(head)
        try:
            text = _decode(head, cut, "strict" if self.errors != "replace" else "replace")
        except UnicodeDecodeError as err:
            if self.errors == "error":
                raise NotUTF8Error(f"{self.file} line {number} is not UTF-8 (byte "
                                   f"0x{head[err.start]:02x} at byte {err.start + 1} of the "
                                   "line)") from None
            self.bad.append(number)
            return
        if text.strip():
            self.offsets.append(start)
            if cut:
                self.long.append(number)


class LineFile(Dataset):
    """The sentences of a one-sentence-per-line text file, by index, read on demand.

    Args:
        path: the text file (UTF-8).
        option: how the caller names the file in errors (e.g. ``data.text_file``).
        max_line_bytes: bytes of a line read at most (longer lines are read up to it, the
            character cut there dropped; one warning counts them).
        decode_errors: a line that is not UTF-8 is an error naming the file and the line
            (``error``), left out and listed in :attr:`skipped` as ``FILE:LINE`` with one
            warning (``skip``), or read with U+FFFD for the bad bytes (``replace``).

    Raises:
        FileNotFoundError: when ``path`` is not a file.
        NotUTF8Error: (a ``ValueError``) for a line that is not UTF-8, with ``error``.
        ValueError: when it holds no sentence (empty or blank lines only), or a bad option.
    """

    def __init__(self, path: str | os.PathLike, option: str = "text file",
                 max_line_bytes: int = MAX_LINE_BYTES,
                 decode_errors: DecodeErrors = "error") -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be >= 1, got {max_line_bytes}")
        if decode_errors not in DECODE_ERRORS:
            raise ValueError(f"decode_errors must be one of {', '.join(DECODE_ERRORS)}, got "
                             f"{decode_errors!r}")
        self.path = _checked_path(path, option)
        self.max_line_bytes, self.decode_errors = max_line_bytes, decode_errors
        try:
            index = _Index(self.path, max_line_bytes, decode_errors)
        except NotUTF8Error as err:
            raise NotUTF8Error(f"{option}: {err}") from None
        self.offsets = np.asarray(index.offsets, dtype=np.int64)
        self.skipped = [f"{self.path}:{n}" for n in index.bad]
        if index.bad:
            warnings.warn(f"{option}: skipped {len(index.bad)} line(s) of {self.path} that are "
                          f"not UTF-8 (first: line {index.bad[0]})", stacklevel=2)
        if index.long:
            warnings.warn(f"{option}: {len(index.long)} line(s) of {self.path} are longer than "
                          f"{max_line_bytes} bytes and are read up to that many (first: line "
                          f"{index.long[0]})", stacklevel=2)
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
        offset = int(self.offsets[index])
        self._handle.seek(offset)
        data = self._handle.readline(self.max_line_bytes)
        cut = len(data) == self.max_line_bytes and not data.endswith(b"\n")
        try:
            return _decode(data, cut, self.decode_errors).strip()
        except UnicodeDecodeError:  # the file changed since it was indexed
            raise NotUTF8Error(f"{self.path} line {self._line_number(offset)} is not UTF-8 "
                               "(the file changed since it was read)") from None

    def _line_number(self, offset: int) -> int:
        with open(self.path, "rb") as handle:
            return handle.read(offset).count(b"\n") + 1

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_handle": None, "_pid": -1}
