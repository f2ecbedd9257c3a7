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
folder of unlabelled images (as ``--data.dataset folder`` reads them). ``DEST`` must be absent
or empty, and outside ``SRC``. The pack is written into a staging folder beside ``DEST`` and
renamed to ``DEST`` when it is complete, its ``pack.json`` saying so
(:mod:`contrastkit.data.sources.pack_state`): a pack stopped midway is never read as a finished one,
and the same command continues it (every file is written to a temporary name and renamed
when complete, and listed as done; a file whose source has gone is removed, shards of a split
whose files changed are written again).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import shutil
import tarfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from contrastkit.data.decode.images import decode_scaled, pillow
from contrastkit.data.sources.images.datasets import open_image_folder
from contrastkit.data.sources.pack_state import FORMAT as MARKER_FORMAT
from contrastkit.data.sources.pack_state import MARKER, read_marker, stage_of
from contrastkit.data.sources.shards import FORMAT, INDEX_JSON, INDEX_TABLE
from contrastkit.outputs import LOCK_FILE, FolderLock, temp_file_beside, write_bytes_atomic

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


class _Progress:
    """What a pack wrote so far, one JSON line per finished file or shard in the staging
    folder's ``.progress.jsonl``: read back when a stopped pack is run again (a line cut off
    by a kill is ignored: its file is written again, atomically)."""

    def __init__(self, stage: Path) -> None:
        self.path = stage / ".progress.jsonl"
        self.lines: list[dict] = []
        if self.path.is_file():
            for line in self.path.read_text(errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    self.lines.append(entry)
        self._handle = open(self.path, "a")  # kept open for the pack's length

    def add(self, **entry: object) -> None:
        self.lines.append(entry)
        self._handle.write(json.dumps(entry) + "\n")
        self._handle.flush()

    def of(self, split: str, key: str) -> list:
        return [e[key] for e in self.lines if e.get("split") == split and key in e]

    def forget(self, split: str) -> None:
        """Drop the entries of ``split`` (its files are written again)."""
        self.lines = [e for e in self.lines if e.get("split") != split]
        self._handle.close()
        fd, tmp = temp_file_beside(self.path)
        with os.fdopen(fd, "w") as handle:
            handle.write("".join(json.dumps(e) + "\n" for e in self.lines))
        os.replace(tmp, self.path)
        self._handle = open(self.path, "a")

    def close(self) -> None:
        self._handle.close()


def _pack_store(folder: Path, out: Path, max_side: int | None, quality: int,
                workers: int, progress: _Progress, split: str) -> int:
    files = open_image_folder(folder)
    paths = [p for p, _ in files.samples]
    sources = [os.path.relpath(p, folder) for p in paths]
    present = set(sources)
    done = dict(zip(progress.of(split, "source"), progress.of(split, "output"), strict=True))
    for source, output in done.items():
        if source not in present:  # its source is gone since the pack was stopped
            (out / output).unlink(missing_ok=True)
    written = {output: source for source, output in done.items() if source in present}
    todo = [(p, r) for p, r in zip(paths, sources, strict=True) if r not in done]
    encoded = _encoded([p for p, _ in todo], max_side, quality, workers)
    for (_, source), (data, ext) in zip(todo, encoded, strict=True):
        output = str(Path(source).with_suffix(ext)) if ext else source
        if written.get(output, source) != source:
            raise ValueError(f"{folder / written[output]} and {folder / source} would both be "
                             f"written as {out / output} (an image resized to --max-side is "
                             "re-encoded as .jpg): rename one of them")
        write_bytes_atomic(out / output, data)
        written[output] = source
        progress.add(split=split, source=source, output=output)
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
        spans = _image_spans(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return spans


def _image_spans(path: Path) -> list[tuple[int, int]]:
    """Byte offset and size of each image member of a shard."""
    with tarfile.open(path) as tar:
        return [(m.offset_data, m.size) for m in tar.getmembers() if not m.name.endswith(".cls")]


def _pack_shards(folder: Path, out: Path, max_side: int | None, quality: int,
                 shard_size: int, seed: int, workers: int, progress: _Progress,
                 split: str) -> int:
    files = open_image_folder(folder)
    listing = hashlib.sha256(json.dumps([[os.path.relpath(p, folder), y]
                                         for p, y in files.samples]).encode()).hexdigest()
    if progress.of(split, "files") not in ([], [listing]):  # SRC changed: its shards are stale
        shutil.rmtree(out, ignore_errors=True)
        progress.forget(split)
    if not progress.of(split, "files"):
        progress.add(split=split, files=listing)
    order = [int(i) for i in np.random.default_rng(seed).permutation(len(files))]
    plan = [(f"shard-{k:05d}.tar", order[first : first + shard_size])
            for k, first in enumerate(range(0, len(order), shard_size))]
    done = {name for name in progress.of(split, "shard") if (out / name).is_file()}
    encoded = _encoded([files.samples[i][0] for name, part in plan if name not in done
                        for i in part], max_side, quality, workers)
    rows: list[list[int]] = []
    shards = []
    for number, (name, part) in enumerate(plan):
        labels = [files.samples[i][1] for i in part]
        if name in done:
            spans = _image_spans(out / name)
        else:
            members = []
            for index in part:
                path, label = files.samples[index]
                data, ext = next(encoded)
                members.append((f"{index:08d}{ext or Path(path).suffix.lower()}", data, label))
            spans = _write_shard(out / name, members)
            progress.add(split=split, shard=name)
        rows += [[number, off, size, label] for (off, size), label in zip(spans, labels,
                                                                           strict=True)]
        shards.append({"name": name, "count": len(part)})
    table = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    buf = io.BytesIO()
    np.save(buf, table)
    write_bytes_atomic(out / INDEX_TABLE, buf.getvalue())
    meta = {"format": FORMAT, "classes": files.classes, "shards": shards,
            "max_side": max_side, "seed": seed}
    write_bytes_atomic(out / INDEX_JSON, json.dumps(meta, indent=1).encode())
    return len(files)


def _command(src: Path, dest: Path, options: dict) -> str:
    """The ``contrastkit data pack`` command line of a pack (what finishes it)."""
    flags = ["--shards"] if options["shards"] else []
    if options["max_side"] is not None:
        flags += ["--max-side", str(options["max_side"])]
    flags += ["--quality", str(options["quality"])]
    if options["shards"]:
        flags += ["--shard-size", str(options["shard_size"]), "--seed", str(options["seed"])]
    return " ".join(shlex.quote(a) for a in ("contrastkit", "data", "pack", str(src), str(dest),
                                             *flags))


def _start_or_continue(stage: Path, src: Path, dest: Path, options: dict) -> None:
    """Write the marker of a new pack in ``stage``, or check that the stopped pack there is
    this one (same SRC, same options)."""
    meta = read_marker(stage)
    if meta is None:
        if any(e.name != LOCK_FILE for e in stage.iterdir()):
            raise ValueError(f"{stage} (the staging folder of DEST) holds files that are not a "
                             "pack: move it away, or choose another DEST")
        meta = {"format": MARKER_FORMAT, "complete": False, "src": str(src.resolve()),
                "options": options, "command": _command(src, dest, options)}
        write_bytes_atomic(stage / MARKER, json.dumps(meta, indent=1).encode())
        return
    if meta.get("src") != str(src.resolve()) or meta.get("options") != options:
        raise ValueError(f"DEST {dest} is being packed from another SRC or with other options "
                         f"(stopped; its files are in {stage}): finish it with "
                         f"{meta.get('command')}, or remove {stage} to start afresh")


def pack_folder(src: str | os.PathLike[str], dest: str | os.PathLike[str], *,
                max_side: int | None = None, quality: int = 90, shards: bool = False,
                shard_size: int = 1000, seed: int = 0, workers: int = 1) -> dict[str, int]:
    """Write the image folder ``src`` into ``dest`` as a store or as shards (module doc).

    ``workers`` processes decode and re-encode the images (the writing stays in order).
    Everything is written into the staging folder ``.DEST.pack-partial`` beside ``dest``
    (:mod:`contrastkit.data.sources.pack_state`), renamed to ``dest`` once complete; a pack stopped
    midway is continued by the same call (what it wrote is kept), and readers refuse it
    meanwhile.

    Returns:
        Images written per split.

    Raises:
        FileNotFoundError: ``src`` is missing.
        ValueError: ``dest`` is not empty or lies inside ``src``, a bad option, a stopped
            pack into ``dest`` with other options, or an image that does not decode
            (:class:`~contrastkit.data.decode.images.UnreadableImageError`, naming it).
    """
    src, dest = Path(src), Path(dest)
    if not src.is_dir():
        raise FileNotFoundError(f"SRC {src} is not a folder")
    if dest.resolve().is_relative_to(src.resolve()):
        raise ValueError(f"DEST {dest} is inside SRC {src}: the pack would read what it writes "
                         "(its folders would become classes); choose a DEST outside SRC")
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
    options = {"shards": shards, "max_side": max_side, "quality": quality,
               "shard_size": shard_size, "seed": seed}
    stage = stage_of(dest)
    with FolderLock(stage, option="DEST's staging folder"):
        _start_or_continue(stage, src, dest, options)
        progress = _Progress(stage)
        try:
            counts = {}
            for name, folder in source_splits(src):
                if shards:
                    counts[name] = _pack_shards(folder, stage / name, max_side, quality,
                                                shard_size, seed, workers, progress, name)
                else:
                    counts[name] = _pack_store(folder, stage / name, max_side, quality,
                                               workers, progress, name)
        finally:
            progress.close()
        meta = {**(read_marker(stage) or {}), "complete": True, "images": counts}
        write_bytes_atomic(stage / MARKER, json.dumps(meta, indent=1).encode())
        progress.path.unlink()
        os.replace(stage, dest)  # at once: DEST holds the whole pack or nothing
        (dest / LOCK_FILE).unlink(missing_ok=True)  # the lock's file moved with the folder
    return counts
