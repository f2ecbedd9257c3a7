"""``contrastkit data pack``: an image folder written once into a store or tar shards.

* **store** (default): the same folder layout (``DEST/<split>/<class>/<file>``), every image
  whose longer side exceeds ``max_side`` resized to it (antialiased) and re-encoded as a JPEG
  of ``quality``; the others copied byte for byte. Read with ``--data.dataset folder``: fewer
  pixels to decode per epoch, the same crop distribution (a random resized crop's box is drawn
  relative to the image: area fraction and aspect ratio do not depend on the resolution), at
  a resolution capped by ``max_side`` (a box smaller than a view's side is upsampled).
* **shards** (``--shards``): ``DEST/<split>/shard-NNNNN.tar`` in webdataset's layout plus an
  index (:mod:`contrastkit.data.sources.shards`), read with ``--data.dataset shards``; samples are
  shuffled once (seeded) before they are cut into shards, so that streaming readers see
  mixed classes in every shard.

Splits: the ``train``, ``val`` and ``test`` sub-folders of ``SRC`` when it has any, else
``SRC`` as a whole is written as ``train``. Each split is a class-per-folder tree or a flat
folder of unlabelled images (as ``--data.dataset folder`` reads them). Every file is written
to a temporary name and renamed when complete; ``DEST`` must be absent or empty.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from contrastkit.data.decode.images import decode_scaled, pillow
from contrastkit.data.sources.images.datasets import open_image_folder
from contrastkit.data.sources.shards import FORMAT, INDEX_JSON, INDEX_TABLE
from contrastkit.outputs import temp_file_beside, write_bytes_atomic

__all__ = ["pack_folder", "source_splits"]

SPLITS = ("train", "val", "test")


def source_splits(src: Path) -> list[tuple[str, Path]]:
    """``(name, folder)`` of the splits of ``src`` (see the module docstring)."""
    found = [(name, src / name) for name in SPLITS if (src / name).is_dir()]
    return found or [("train", src)]


def encode_bounded(source: str | bytes, name: str, max_side: int | None, quality: int
                   ) -> tuple[bytes, str | None]:
    """``(bytes, new extension or None)``: the file's bytes (``source``: a path or the bytes)
    unchanged when its longer side is at most ``max_side`` (or no bound), else resized
    (antialiased bicubic) and encoded as JPEG.

    One :func:`~contrastkit.data.decode.images.decode_scaled` per file, its factor chosen
    from the full size in the header: an image that is kept is decoded at 1/8 (all its data
    are read, so a file that does not decode is refused now, not in training); one to resize
    is decoded reduced by the largest factor (1, 2, 4, 8) not above ``L // max_side`` (``L``
    its longer side), so the reduced image is still at least the output size and a 10000 x
    10000 JPEG bounded to 1024 pixels is decoded at 1/8, never whole. A path is decoded from
    the file (a PNG is streamed, not held as bytes beside its pixels) and read only if kept.
    """
    def reduction(height: int, width: int) -> int:
        longer = max(height, width)
        return 8 if max_side is None or longer <= max_side else max(1, longer // max_side)

    array, (height, width) = decode_scaled(source, name, reduction)
    if max_side is None or max(width, height) <= max_side:
        return (source if isinstance(source, bytes) else _read(source)), None
    image_mod = pillow()
    scale = max_side / max(width, height)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    rgb = image_mod.fromarray(array.transpose(1, 2, 0))
    buf = io.BytesIO()
    rgb.resize(size, image_mod.Resampling.BICUBIC).save(buf, "JPEG", quality=quality)
    return buf.getvalue(), ".jpg"


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _encode_file(path: str, max_side: int | None, quality: int) -> tuple[bytes, str | None]:
    return encode_bounded(path, path, max_side, quality)


def _encoded(paths: list[str], max_side: int | None, quality: int, workers: int
             ) -> Iterator[tuple[bytes, str | None]]:
    """:func:`encode_bounded` of every file, in order, in ``workers`` processes (1: here)."""
    encode = partial(_encode_file, max_side=max_side, quality=quality)
    if workers <= 1:
        yield from map(encode, paths)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(encode, paths, chunksize=16)


def _pack_store(folder: Path, out: Path, max_side: int | None, quality: int,
                workers: int) -> int:
    files = open_image_folder(folder)
    paths = [p for p, _ in files.samples]
    for path, (data, ext) in zip(paths, _encoded(paths, max_side, quality, workers),
                                 strict=True):
        rel = Path(os.path.relpath(path, folder))
        write_bytes_atomic(out / (rel.with_suffix(ext) if ext else rel), data)
    return len(files)


def _write_shard(path: Path, members: list[tuple[str, bytes, int]]) -> list[tuple[int, int]]:
    """Write one tar (``<key><ext>`` and ``<key>.cls`` per sample); return the byte offset and
    size of each image member."""
    fd, tmp = temp_file_beside(path)
    try:
        with os.fdopen(fd, "wb") as handle, tarfile.open(fileobj=handle, mode="w",
                                                         format=tarfile.USTAR_FORMAT) as tar:
            for name, data, label in members:
                for member, payload in ((name, data), (f"{Path(name).stem}.cls",
                                                       str(label).encode())):
                    info = tarfile.TarInfo(member)
                    info.size, info.mode, info.mtime = len(payload), 0o644, 0
                    tar.addfile(info, io.BytesIO(payload))
        with tarfile.open(tmp) as tar:
            images = [m for m in tar.getmembers() if not m.name.endswith(".cls")]
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return [(m.offset_data, m.size) for m in images]


def _pack_shards(folder: Path, out: Path, max_side: int | None, quality: int,
                 shard_size: int, seed: int, workers: int) -> int:
    files = open_image_folder(folder)
    order = [int(i) for i in np.random.default_rng(seed).permutation(len(files))]
    encoded = _encoded([files.samples[i][0] for i in order], max_side, quality, workers)
    rows: list[list[int]] = []
    shards = []
    for first in range(0, len(order), shard_size):
        members = []
        for index in order[first : first + shard_size]:
            path, label = files.samples[index]
            data, ext = next(encoded)
            members.append((f"{index:08d}{ext or Path(path).suffix.lower()}", data, label))
        name = f"shard-{len(shards):05d}.tar"
        spans = _write_shard(out / name, members)
        rows += [[len(shards), off, size, m[2]] for (off, size), m in zip(spans, members,
                                                                            strict=True)]
        shards.append({"name": name, "count": len(members)})
    table = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    buf = io.BytesIO()
    np.save(buf, table)
    write_bytes_atomic(out / INDEX_TABLE, buf.getvalue())
    meta = {"format": FORMAT, "classes": files.classes, "shards": shards,
            "max_side": max_side, "seed": seed}
    write_bytes_atomic(out / INDEX_JSON, json.dumps(meta, indent=1).encode())
    return len(files)


def pack_folder(src: str | os.PathLike[str], dest: str | os.PathLike[str], *,
                max_side: int | None = None, quality: int = 90, shards: bool = False,
                shard_size: int = 1000, seed: int = 0, workers: int = 1) -> dict[str, int]:
    """Write the image folder ``src`` into ``dest`` as a store or as shards (module doc).

    ``workers`` processes decode and re-encode the images (the writing stays in order).

    Returns:
        Images written per split.

    Raises:
        FileNotFoundError: ``src`` is missing.
        ValueError: ``dest`` is not empty, a bad option, or an image that does not decode
            (:class:`~contrastkit.data.decode.images.UnreadableImageError`, naming it).
    """
    src, dest = Path(src), Path(dest)
    if not src.is_dir():
        raise FileNotFoundError(f"SRC {src} is not a folder")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ValueError(f"DEST {dest} exists and is not an empty folder (nothing is "
                         "overwritten: choose a new folder)")
    if max_side is not None and max_side < 1:
        raise ValueError(f"--max-side must be >= 1, got {max_side}")
    if not 1 <= quality <= 100:
        raise ValueError(f"--quality must lie in [1, 100], got {quality}")
    if shard_size < 1:
        raise ValueError(f"--shard-size must be >= 1, got {shard_size}")
    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    counts = {}
    for name, folder in source_splits(src):
        if shards:
            counts[name] = _pack_shards(folder, dest / name, max_side, quality, shard_size,
                                        seed, workers)
        else:
            counts[name] = _pack_store(folder, dest / name, max_side, quality, workers)
    return counts
