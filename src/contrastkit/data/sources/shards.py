"""Image data sets packed in tar shards (webdataset's layout), read by random access.

``contrastkit data pack SRC DEST --shards`` (:mod:`contrastkit.data.loading.pack`) writes, per
split, ``DEST/<split>/shard-NNNNN.tar`` files whose members are ``<key>.jpg`` (or the original
extension) and ``<key>.cls`` (the label as text): the layout webdataset's streaming readers
(``webdataset.WebDataset``) read as they are. Beside them, ``index.json`` (classes, shard
names and counts) and ``index.npy`` (one row per sample: shard, byte offset and size of its
image member, label) let :class:`ShardImages` read any sample with one ``pread``: a few
thousand large files on a shared file system instead of a million small ones, sampled by the
same seeded sampler as a folder (every image once per epoch across processes; an exact
resume). :mod:`contrastkit.data.sources.stream` reads the same shards sequentially instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from contrastkit.data.decode.images import decode_at_least, decode_image

__all__ = ["INDEX_JSON", "INDEX_TABLE", "ShardImages", "ShardReader", "is_shard_split"]

INDEX_JSON = "index.json"
INDEX_TABLE = "index.npy"
FORMAT = "contrastkit-shards-1"


def is_shard_split(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a packed split (its ``index.json``)."""
    return (Path(folder) / INDEX_JSON).is_file()


class ShardReader:
    """Encoded images of one packed split: ``read(i) -> (bytes, name, label)``.

    Args:
        folder: the split's folder (``DEST/<split>``).

    Raises:
        FileNotFoundError: when the folder has no index.
        ValueError: when the index is not one this version wrote, or names a missing shard.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        meta_path = self.folder / INDEX_JSON
        if not meta_path.is_file():
            raise FileNotFoundError(f"{self.folder}: no {INDEX_JSON} (write shards with "
                                    "`contrastkit data pack SRC DEST --shards`)")
        try:
            meta = json.loads(meta_path.read_text())
            table = np.load(self.folder / INDEX_TABLE)
        except (OSError, ValueError) as err:
            raise ValueError(f"{meta_path}: unreadable shard index: {err}") from err
        if meta.get("format") != FORMAT or table.ndim != 2 or table.shape[1] != 4:
            raise ValueError(f"{meta_path}: not a {FORMAT} index")
        self.shards = [str(s["name"]) for s in meta["shards"]]
        missing = [s for s in self.shards if not (self.folder / s).is_file()]
        if missing:
            raise ValueError(f"{self.folder}: shard(s) {missing[:3]} listed in {INDEX_JSON} "
                             "are missing")
        self.classes = [str(c) for c in meta["classes"]]
        self.table = table.astype(np.int64)
        self.targets = [int(y) for y in self.table[:, 3]]
        self._files: dict[int, int] = {}
        self._pid = -1

    def __len__(self) -> int:
        return len(self.table)

    def _fd(self, shard: int) -> int:
        if self._pid != os.getpid():  # a forked loader worker opens its own descriptors
            self._files, self._pid = {}, os.getpid()
        fd = self._files.get(shard)
        if fd is None:
            fd = self._files[shard] = os.open(self.folder / self.shards[shard], os.O_RDONLY)
        return fd

    def read(self, index: int) -> tuple[bytes, str, int]:
        shard, offset, size, label = (int(v) for v in self.table[index])
        data = os.pread(self._fd(shard), size, offset)
        name = f"{self.folder / self.shards[shard]}[sample {index}]"
        if len(data) != size:
            raise ValueError(f"{name}: truncated shard ({len(data)} of {size} bytes)")
        return data, name, label

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_files"], state["_pid"] = {}, -1  # descriptors do not travel to workers
        return state


class ShardImages(Dataset):
    """A packed split as an image dataset: ``ds[i] = (uint8 (3, H, W), label)``, with
    ``classes`` and ``targets`` (the kNN monitor's and evaluation's view of the shards)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.reader = ShardReader(folder)
        self.classes, self.targets = self.reader.classes, self.reader.targets
        self.skipped: list[str] = []

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        data, name, label = self.reader.read(index)
        return torch.from_numpy(decode_image(data, name)), label

    def read_at_least(self, index: int, side: int) -> tuple[torch.Tensor, int]:
        """Sample ``index`` decoded reduced as far as its shorter side stays at least
        ``side`` (:func:`~contrastkit.data.decode.images.decode_at_least`), for
        :class:`~contrastkit.data.sources.wrappers.ResizedSquare`."""
        data, name, label = self.reader.read(index)
        return torch.from_numpy(decode_at_least(data, side, name)), label
