"""Packed tar shards streamed sequentially with webdataset (``--data.stream true``).

:mod:`contrastkit.data.sources.shards` reads packed shards by random access (one ``pread`` per
image); this module reads them the way an object store or an HTTP server serves them best: each
shard from its first byte to its last, through webdataset's URL opener and tar reader
(``webdataset.tariterators.tarfile_samples``: local paths, ``file:``, ``http(s)://`` through
``curl``, ``gs://`` through ``gsutil``, ``pipe:COMMAND``; only local paths are tested here).

One epoch of one process (:meth:`ShardStream.__iter__`), with ``N`` images in ``S`` shards,
``P`` processes of ``B`` images per step and ``K`` loader workers per process:

1. the shards are put in the order of a permutation drawn from ``(seed, epoch)``; their
   samples, concatenated in that order, are the epoch's global stream of ``N`` samples;
2. the stream is cut into ``T = floor(N / (P B))`` steps: process ``p`` takes the ``p``-th
   contiguous run of ``T B`` samples, and the last ``N - T P B`` samples of the stream (fewer
   than one global batch, the tail of the epoch's last shards) are dropped, as the folder's
   sampler drops its incomplete last global batch. Every process therefore runs the same
   ``T`` steps (no DDP hang on uneven ends) and every other image is seen exactly once per
   epoch across the processes. A shard that straddles two runs is read by both readers, each
   keeping its own samples (the second reads past the first one's: at most one shard's bytes
   read twice per reader and epoch);
3. the process's run is cut in the same way among its ``K`` workers, in whole batches
   (worker ``k`` takes ``floor(T / K)`` batches, one more when ``k < T mod K``), so no worker
   ends on a partial batch and the loader's round-robin over the workers yields exactly
   ``T`` batches;
4. each worker passes its samples, still encoded, through a shuffle buffer of
   ``shuffle_buffer`` samples drawn from ``(seed, epoch, first sample of its run)``, then
   decodes those it yields (:class:`DecodedImage`, or the views' crops in the loader:
   :class:`~contrastkit.data.loading.crops.ViewCrops`, keyed by the sample's row in
   ``index.json`` order, so the crops of an image are those of the random-access reader).

The order is a pure function of ``(seed, epoch, P, B, K, shuffle_buffer)``: the same again for
the same seed, another each epoch. Epochs are counted per loader pass: the first pass is the
``epoch`` given when the loader is built (the trainer's epoch: a resumed run starts at its
checkpoint's epoch), each further pass the next. Checkpoints are written at epoch ends, so a
resumed run streams exactly the epochs an uninterrupted one would; a run stopped mid-epoch
restarts that epoch from its beginning (mid-epoch positions are not saved). Loader workers
must be persistent (``persistent_workers=True``, as the data module makes them): each worker
counts the passes of its own copy, and a worker started afresh would start again at ``epoch``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from contrastkit.data.decode.images import decode_image

from .pack_state import check_complete
from .shards import FORMAT, INDEX_JSON
from .wrappers import resize_square

__all__ = ["DecodedImage", "ShardStream", "is_url", "shuffled"]

Transform = Callable[[bytes, str, int, int], Any]


def is_url(root: str) -> bool:
    """Whether ``root`` names a location webdataset opens (``scheme:...``), not a local path."""
    scheme = root.split(":", 1)[0] if ":" in root else ""
    return len(scheme) > 1 and scheme.replace("+", "").isalnum() and scheme != "file"


def _webdataset():
    try:
        import webdataset
        import webdataset.gopen
        import webdataset.tariterators
    except ImportError as err:
        raise ImportError("data.stream reads shards with webdataset: pip install "
                          "'contrastkit[imagenet]'") from err
    return webdataset


def _read_index(root: str, split: str) -> dict:
    location = f"{root.rstrip('/')}/{split}/{INDEX_JSON}"
    try:
        if is_url(root):
            with _webdataset().gopen.gopen(location, "rb") as stream:
                text = stream.read()
        else:
            text = Path(location.removeprefix("file:")).read_bytes()
        meta = json.loads(text)
    except FileNotFoundError:
        raise FileNotFoundError(f"data.root {root}: no {split}/{INDEX_JSON} (write shards with "
                                "`contrastkit data pack SRC DEST --shards`)") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"{location}: unreadable shard index: {err}") from err
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{location}: not a {FORMAT} index")
    return meta


def shuffled(items: Iterator[Any], size: int, rng: np.random.Generator) -> Iterator[Any]:
    """``items`` shuffled within a buffer of ``size``: each new item replaces a uniformly
    drawn buffered one, which is yielded; the last ``size`` are yielded in a random order."""
    buffer: list[Any] = []
    for item in items:
        if len(buffer) < size:
            buffer.append(item)
            continue
        j = int(rng.integers(size))
        buffer[j], item = item, buffer[j]
        yield item
    for j in rng.permutation(len(buffer)):
        yield buffer[j]


class DecodedImage:
    """The whole decoded image, ``uint8 (3, H, W)``; with ``size``, its shorter side resized
    to ``size`` and centre-cropped to a square (as ``data.load_size`` does)."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size

    def __call__(self, data: bytes, name: str, index: int, epoch: int) -> torch.Tensor:
        image = torch.from_numpy(decode_image(data, name))
        return image if self.size is None else resize_square(image, self.size)


class ShardStream(IterableDataset):
    """The training split of packed shards, streamed (module doc): items ``(image or views,
    label)``, ``len`` the samples this process yields per epoch (all ``N`` before
    :meth:`for_process`).

    Args:
        root: the folder or URL prefix given to ``contrastkit data pack`` as ``DEST``.
        split: the split (``root/<split>/index.json`` and its shards).

    Raises:
        FileNotFoundError: no index under a local ``root``.
        ValueError: an index this version did not write, or that cannot be read.
    """

    def __init__(self, root: str, split: str) -> None:
        if not is_url(root):
            check_complete(root.removeprefix("file:"))
        meta = _read_index(root, split)
        self.location = f"{root.rstrip('/')}/{split}"
        self.urls = [f"{self.location}/{s['name']}" for s in meta["shards"]]
        self.counts = [int(s["count"]) for s in meta["shards"]]
        self.classes = [str(c) for c in meta["classes"]]
        self.rank, self.world_size, self.batch_size = 0, 1, 1
        self.transform: Transform = DecodedImage()
        self.seed, self.shuffle_buffer, self.epoch = 0, 1, 0

    def __len__(self) -> int:
        total = sum(self.counts)
        return total // (self.world_size * self.batch_size) * self.batch_size

    def for_process(self, rank: int, world_size: int, batch_size: int, transform: Transform,
                    seed: int, shuffle_buffer: int, epoch: int = 0) -> ShardStream:
        """A copy that streams process ``rank``'s share, decoded by ``transform(data, name,
        row, epoch)``, its first loader pass being ``epoch``."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must lie in [0, {world_size}), got {rank}")
        if shuffle_buffer < 1:
            raise ValueError(f"data.shuffle_buffer must be >= 1, got {shuffle_buffer}")
        copy = ShardStream.__new__(ShardStream)
        copy.__dict__.update(self.__dict__)
        copy.rank, copy.world_size, copy.batch_size = rank, world_size, batch_size
        copy.transform, copy.seed = transform, int(seed)
        copy.shuffle_buffer, copy.epoch = int(shuffle_buffer), int(epoch)
        return copy

    def run(self, epoch: int, worker: int = 0, workers: int = 1) -> tuple[int, int]:
        """``(first, end)``: the positions in ``epoch``'s global stream that ``worker`` of
        ``workers`` of this process reads (steps 2 and 3 of the module doc)."""
        steps = len(self) // self.batch_size
        first = self.rank * steps * self.batch_size
        share, extra = divmod(steps, workers)
        first += self.batch_size * (worker * share + min(worker, extra))
        return first, first + self.batch_size * (share + (worker < extra))

    def shard_order(self, epoch: int) -> list[int]:
        """The shards of ``epoch``'s global stream, in order (step 1)."""
        rng = np.random.default_rng([self.seed, int(epoch)])
        return [int(s) for s in rng.permutation(len(self.urls))]

    def _encoded(self, epoch: int, first: int, end: int) -> Iterator[tuple[bytes, str, int, int]]:
        """``(bytes, name, label, row)`` of the stream's samples ``first`` to ``end - 1``."""
        tarfile_samples = _webdataset().tariterators.tarfile_samples
        rows = np.concatenate([[0], np.cumsum(self.counts)])
        position = 0
        for shard in self.shard_order(epoch):
            start, count = position, self.counts[shard]
            position += count
            if position <= first or start >= end:
                continue
            url, seen = self.urls[shard], 0
            for sample in tarfile_samples([{"url": url}]):
                if start + seen >= end:
                    break
                if start + seen >= first:
                    image = next((v for k, v in sample.items()
                                  if not k.startswith("__") and k != "cls"), None)
                    if image is None or "cls" not in sample:
                        raise ValueError(f"{url}: sample {sample['__key__']} lacks its image "
                                         "or its .cls label")
                    yield (image, f"{url}[{sample['__key__']}]", int(sample["cls"]),
                           int(rows[shard]) + seen)
                seen += 1
            if seen < min(count, end - start):
                raise ValueError(f"{url}: {seen} samples, {INDEX_JSON} lists {count} (a "
                                 "truncated or replaced shard)")

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        epoch = self.epoch
        self.epoch += 1  # the next pass of this copy (a persistent worker's) is the next epoch
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        first, end = self.run(epoch, worker, workers)
        rng = np.random.default_rng([self.seed, epoch, first])
        samples = shuffled(self._encoded(epoch, first, end), self.shuffle_buffer, rng)
        return ((self.transform(data, name, row, epoch), label)
                for data, name, label, row in samples)

