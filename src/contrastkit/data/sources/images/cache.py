"""Decode a small-image dataset once into a uint8 array file, reuse it while it is valid.

A cache named ``NAME`` in ``cache_dir`` is two files:

* ``NAME.u8``: the raw images, ``N x C x H x W`` uint8 in C order, read back with
  ``np.memmap`` (the page cache shares it between DataLoader workers and runs);
* ``NAME.json``: the sidecar: format version, shape, classes, labels, the **source
  fingerprint** (file names + sizes + modification times of the source, or a dataset's
  ``fingerprint()``) and the SHA-256 of the array content and labels.

:meth:`ArrayCache.build_or_load` reuses the cache when the sidecar parses, the source
fingerprint is unchanged, the array file has the expected size and (``verify=True``) its
SHA-256 matches; otherwise it rebuilds it (with a warning when the cache was corrupt). Files
are written to temporary names and moved into place with ``os.replace``, so an interrupted
build never leaves a cache that looks valid.

Sources: an image folder (``root/<class>/**/<image>``), a ``.tar``/``.tar.gz`` archive of such
folders (read directly, no extraction), an
:class:`~contrastkit.data.sources.images.datasets.ImageFiles` dataset (``ImageFolder``,
``TinyImageNet``, ...) — these three are decoded by a pool of ``workers`` processes writing
straight into the array file — or any dataset of equally shaped uint8 ``(C, H, W)`` images with
a ``fingerprint()`` method (or an explicit ``fingerprint``).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import tarfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from contrastkit.data.decode.images import (
    IMAGE_EXTENSIONS,
    MixedImageSizesError,
    UnreadableImageError,
    decode_image,
    is_image_file,
)
from contrastkit.outputs import escape_line

from ._common import ArrayImages, files_fingerprint, is_hidden
from ._folder import ImageFiles, hash_text, scan_folder

#: Version of the cache's layout and of the pixels in it: 2 since images are turned upright by
#: their EXIF orientation (a cache of version 1 holds them as stored, and is rebuilt).
FORMAT_VERSION = 2
_CHUNK = 512


class CachedImages(ArrayImages):
    """A dataset over a cache file: ``images`` is a read-only ``np.memmap`` ``(N, C, H, W)``.

    Attributes:
        path: the ``.u8`` array file.
        built: ``True`` when this object's cache was (re)built by the call that returned it,
            ``False`` when an existing valid cache was reused.
        source_fingerprint: the fingerprint the cache was built from.
        skipped: names of the unreadable images left out when the cache was built.
    """

    def __init__(self, path: Path, meta: dict[str, Any], built: bool):
        images = np.memmap(path, dtype=np.uint8, mode="r", shape=tuple(meta["shape"]))
        super().__init__(images, np.asarray(meta["labels"], dtype=np.int64), meta["classes"])
        self.path = path
        self.built = built
        self.source_fingerprint: str = meta["source_fingerprint"]
        self.content_sha256: str = meta["content_sha256"]
        self.skipped: list[str] = list(meta.get("skipped", []))

    def fingerprint(self) -> str:
        """The SHA-256 of the cached images and labels (identifies the content)."""
        return f"CachedImages:{self.content_sha256}"


class ArrayCache:
    """Build-or-load entry point; ``ArrayCache.builds`` counts builds in this process."""

    builds = 0

    @classmethod
    def build_or_load(
        cls,
        source: Any,
        cache_dir: str | os.PathLike[str],
        *,
        name: str | None = None,
        subdir: str | None = None,
        size: tuple[int, int] | None = None,
        workers: int = 2,
        skip_corrupt: bool = False,
        verify: bool = True,
        fingerprint: str | None = None,
    ) -> CachedImages:
        """Return the cached images of ``source``, decoding them only when needed.

        Args:
            source: image folder path, ``.tar``/``.tar.gz``/``.tgz`` archive path, an
                ``ImageFiles`` dataset, or any dataset of same-shape uint8 ``(C, H, W)``
                images with ``classes``, ``targets`` and ``fingerprint()``.
            cache_dir: folder for the cache files (created if missing).
            name: cache file stem; by default derived from the source's identity (path,
                ``subdir``, ``size``, or the dataset type, root and split).
            subdir: for folder and archive sources, the sub-folder holding the class folders
                (e.g. ``"train"`` in ``cifar10-jpg.tar.gz``).
            size: ``(H, W)`` to resize every image to (JPEG draft decoding); by default all
                images must have the shape of the first one.
            workers: decoding processes for file sources (1 decodes in this process).
            skip_corrupt: skip unreadable images of file sources with one warning counting
                them (otherwise the first one raises, naming the file).
            verify: check the SHA-256 of the array file when loading (about 1.5 GB/s).
            fingerprint: identity of a generic dataset source, instead of its
                ``fingerprint()``.

        Returns:
            :class:`CachedImages`.
        """
        plan = _plan(source, subdir, size, fingerprint)
        cache_dir = Path(cache_dir)
        cache_dir.mkdir(parents=True, exist_ok=True)
        stem = name or f"{plan.kind}-{hash_text(plan.identity)}"
        data_path, meta_path = cache_dir / f"{stem}.u8", cache_dir / f"{stem}.json"
        meta, problem = _load_meta(data_path, meta_path, plan.fingerprint, verify)
        if meta is not None:
            return CachedImages(data_path, meta, built=False)
        if problem:
            warnings.warn(f"rebuilding cache {data_path}: {problem}", UserWarning, stacklevel=2)
        meta = _build(plan, data_path, meta_path, size, workers, skip_corrupt)
        cls.builds += 1
        return CachedImages(data_path, meta, built=True)


class _Plan:
    """What to decode: ``items`` (paths or (name, bytes)) or a ``dataset``, and identities.

    ``load``, when given, fills ``classes``, ``labels`` and ``items`` only at build time (an
    archive is read only when the cache must be built).
    """

    def __init__(self, kind: str, identity: str, fingerprint: str, classes: list[str],
                 labels: list[int], items: list[Any] | None = None, dataset: Any = None,
                 load: Callable[[], tuple[list[str], list[int], list[Any]]] | None = None):
        self.kind, self.identity, self.fingerprint = kind, identity, fingerprint
        self.classes, self.labels, self.items, self.dataset = classes, labels, items, dataset
        self.load = load


def _plan(source: Any, subdir: str | None, size: Any, fingerprint: str | None) -> _Plan:
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        ident = f"{path.resolve()}|{subdir}|{size}"
        if path.is_file():
            return _archive_plan(path, subdir, ident)
        root = path / subdir if subdir else path
        samples, classes = scan_folder(root)
        paths = [p for p, _ in samples]
        fp = files_fingerprint(paths, root) + ":" + "|".join(classes)
        return _Plan("folder", ident, fp, classes, [y for _, y in samples], items=paths)
    if isinstance(source, ImageFiles):
        ident = (f"{type(source).__name__}|{source.root.resolve()}|"
                 f"{getattr(source, 'split', '')}|{source.classes}|{size}")
        return _Plan(type(source).__name__, ident, source.fingerprint(),
                     source.classes, list(source.targets), items=[p for p, _ in source.samples])
    fp = fingerprint or (source.fingerprint() if hasattr(source, "fingerprint") else None)
    if fp is None:
        raise ValueError(
            f"source: {type(source).__name__} has no fingerprint(); pass fingerprint=... "
            "identifying its data so that the cache can tell when it changes"
        )
    root = getattr(source, "root", "")
    attrs = [getattr(source, a, "") for a in ("split", "label")]
    ident = f"{type(source).__name__}|{Path(root).resolve() if root else ''}|{attrs}"
    return _Plan(type(source).__name__, ident, fp, list(source.classes),
                 [int(t) for t in source.targets], dataset=source)


def _archive_plan(path: Path, subdir: str | None, ident: str) -> _Plan:
    prefix = subdir.strip("/") + "/" if subdir else ""
    st = path.stat()
    fp = f"archive:{path.name}:{st.st_size}:{st.st_mtime_ns}:{prefix}"
    return _Plan("archive", ident, fp, [], [], load=lambda: _read_archive(path, prefix))


def _read_archive(path: Path, prefix: str) -> tuple[list[str], list[int], list[Any]]:
    """Classes, labels and ``(name, bytes)`` items of the images under ``prefix<class>/``;
    hidden members (a component under the prefix starting with ``.``) are not read, as in a
    folder (:func:`~contrastkit.data.sources.images._folder.list_images`)."""
    entries: list[tuple[str, str, bytes]] = []
    try:
        with tarfile.open(path, "r:*") as tar:
            for m in tar:
                name = m.name[2:] if m.name.startswith("./") else m.name
                if not (m.isfile() and name.startswith(prefix) and is_image_file(name)):
                    continue
                parts = name[len(prefix):].split("/")
                if len(parts) < 2 or any(is_hidden(part) for part in parts):
                    continue  # no class folder (directly under the prefix), or hidden
                f = tar.extractfile(m)
                assert f is not None
                entries.append((name, parts[0], f.read()))
    except (tarfile.TarError, EOFError, OSError) as err:
        raise ValueError(f"{path}: unreadable or truncated archive ({err})") from err
    if not entries:
        raise ValueError(f"{path}: no image ({', '.join(IMAGE_EXTENSIONS)}) under '{prefix}'"
                         "<class>/ in the archive")
    entries.sort()
    classes = sorted({c for _, c, _ in entries})
    index = {c: i for i, c in enumerate(classes)}
    items = [(f"{path}:{n}", data) for n, _, data in entries]
    return classes, [index[c] for _, c, _ in entries], items


def _content_hash(data_path: Path, labels: Sequence[int]) -> str:
    h = hashlib.sha256()
    with open(data_path, "rb") as f:
        while block := f.read(1 << 24):
            h.update(block)
    h.update(np.asarray(labels, dtype=np.int64).tobytes())
    return h.hexdigest()


def _load_meta(
    data_path: Path, meta_path: Path, fingerprint: str, verify: bool
) -> tuple[dict[str, Any] | None, str]:
    """The sidecar if the cache is valid, else ``(None, why)`` (``why`` empty if absent)."""
    if not meta_path.is_file():
        return None, ""
    try:
        meta = json.loads(meta_path.read_text())
        shape = tuple(int(s) for s in meta["shape"])
        version, ok_fields = meta["version"], len(meta["labels"]) == shape[0]
    except (ValueError, KeyError, TypeError) as err:
        return None, f"sidecar {meta_path} is corrupt ({err})"
    if version != FORMAT_VERSION:
        return None, (f"it was built as format {version}, this version of contrastkit reads "
                      f"format {FORMAT_VERSION} (images turned upright by their EXIF "
                      "orientation)")
    if not ok_fields:
        return None, f"sidecar {meta_path} is corrupt"
    if meta["source_fingerprint"] != fingerprint:
        return None, ""  # the source changed: an expected rebuild, no warning
    expected = int(np.prod(shape))
    if not data_path.is_file() or data_path.stat().st_size != expected:
        return None, f"array file {data_path} is missing or not {expected} bytes"
    if verify and _content_hash(data_path, meta["labels"]) != meta["content_sha256"]:
        return None, f"array file {data_path} does not match its checksum"
    return meta, ""


def _write_json_atomic(path: Path, obj: dict[str, Any]) -> None:
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def _build(plan: _Plan, data_path: Path, meta_path: Path, size: Any, workers: int,
           skip_corrupt: bool) -> dict[str, Any]:
    meta_path.unlink(missing_ok=True)  # from here on, the old cache is invalid
    if plan.load is not None:
        plan.classes, plan.labels, plan.items = plan.load()
    tmp = data_path.with_name(f"{data_path.name}.tmp-{os.getpid()}")
    try:
        skipped: list[str] = []
        if plan.items is not None:
            labels, item_shape, skipped = _decode_items(plan, tmp, size, workers, skip_corrupt)
        else:
            labels, item_shape = _copy_dataset(plan, tmp)
        os.replace(tmp, data_path)
    finally:
        tmp.unlink(missing_ok=True)
    shape = [len(labels), *item_shape]
    meta = {
        "version": FORMAT_VERSION,
        "shape": shape,
        "classes": plan.classes,
        "labels": labels,
        "source_fingerprint": plan.fingerprint,
        "content_sha256": _content_hash(data_path, labels),
        "skipped": skipped,
    }
    _write_json_atomic(meta_path, meta)
    return meta


def _first_shape(item: Any, size: Any) -> tuple[int, int, int]:
    src, name = (item, item) if isinstance(item, str) else (item[1], item[0])
    return tuple(decode_image(src, name, size).shape)  # type: ignore[return-value]


# --- worker side ---------------------------------------------------------------------------
_OUT: dict[str, np.memmap] = {}


def _decode_chunk(
    args: tuple[str, tuple[int, ...], int, list[Any], Any]
) -> list[tuple[int, str, str]]:
    """Decode ``items`` into rows ``start..`` of the array file; return ``(row, name, error)``
    of each unreadable item.

    Raises:
        MixedImageSizesError: for an image whose shape differs from the first one's.
    """
    out_path, shape, start, items, size = args
    out = _OUT.get(out_path)
    if out is None:
        out = _OUT[out_path] = np.memmap(out_path, dtype=np.uint8, mode="r+", shape=shape)
    failures = []
    for k, item in enumerate(items):
        src, name = (item, item) if isinstance(item, str) else (item[1], item[0])
        try:
            image = decode_image(src, name, size)
        except (UnreadableImageError, OSError) as err:
            failures.append((start + k, name, str(err)))
            continue
        if image.shape != shape[1:]:
            raise MixedImageSizesError(
                f"{name}: image of shape {image.shape}, expected {shape[1:]} like the first "
                "image: resize the images to one size when caching them")
        out[start + k] = image
    # no msync: the shared mapping is visible to the parent through the page cache, and a
    # crash before the data reaches the disk is caught by the content checksum on load
    return failures


def _decode_items(plan: _Plan, tmp: Path, size: Any, workers: int,
                  skip_corrupt: bool) -> tuple[list[int], tuple[int, ...], list[str]]:
    items = plan.items
    assert items is not None
    shape = (len(items), *_first_shape_any(items, size, skip_corrupt))
    with open(tmp, "wb") as f:
        f.truncate(int(np.prod(shape)))
    tasks = [(str(tmp), shape, s, items[s : s + _CHUNK], size)
             for s in range(0, len(items), _CHUNK)]
    failures: list[tuple[int, str, str]] = []
    if workers <= 1 or len(tasks) == 1:
        try:
            for t in tasks:
                failures += _decode_chunk(t)
        finally:
            _OUT.pop(str(tmp), None)
    else:
        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else None)
        with ctx.Pool(workers) as pool:
            for fails in pool.imap_unordered(_decode_chunk, tasks):
                failures += fails
    labels = list(plan.labels)
    if failures:
        failures.sort()
        if not skip_corrupt:
            more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
            raise UnreadableImageError(failures[0][2] + more)
        warnings.warn(f"skipped {len(failures)} unreadable image(s) of {len(items)}; first: "
                      f"{escape_line(failures[0][2])}", UserWarning, stacklevel=4)
        labels = _compact(tmp, shape, [r for r, _, _ in failures], labels)
        shape = (len(labels), *shape[1:])
    return labels, shape[1:], [name for _, name, _ in failures]


def _first_shape_any(items: list[Any], size: Any, skip_corrupt: bool) -> tuple[int, ...]:
    for item in items:
        try:
            return _first_shape(item, size)
        except UnreadableImageError:
            if not skip_corrupt:
                raise
    raise UnreadableImageError("no readable image in the source")


def _compact(tmp: Path, shape: tuple[int, ...], bad_rows: list[int],
             labels: list[int]) -> list[int]:
    keep = np.setdiff1d(np.arange(shape[0]), bad_rows)
    mm = np.memmap(tmp, dtype=np.uint8, mode="r+", shape=shape)
    for new, old in enumerate(keep):
        if new != old:
            mm[new] = mm[old]
    mm.flush()
    del mm
    with open(tmp, "r+b") as f:
        f.truncate(int(len(keep) * np.prod(shape[1:])))
    return [labels[i] for i in keep]


def _copy_dataset(plan: _Plan, tmp: Path) -> tuple[list[int], tuple[int, ...]]:
    ds = plan.dataset
    n = len(ds)
    if n == 0:
        raise ValueError(f"source: {type(ds).__name__} is empty")
    first = np.asarray(ds[0][0])
    if first.dtype != np.uint8 or first.ndim != 3:
        raise ValueError(f"source: images must be uint8 (C, H, W), got {first.dtype} "
                         f"{first.shape}")
    shape = (n, *first.shape)
    mm = np.memmap(tmp, dtype=np.uint8, mode="w+", shape=shape)
    get_many = getattr(ds, "__getitems__", None)
    for s in range(0, n, _CHUNK * 4):
        idx = list(range(s, min(n, s + _CHUNK * 4)))
        pairs = get_many(idx) if get_many else [ds[i] for i in idx]
        for i, (img, _) in zip(idx, pairs, strict=True):
            arr = np.asarray(img)
            if arr.shape != first.shape:
                raise ValueError(f"source: image {i} has shape {arr.shape}, expected "
                                 f"{first.shape} like image 0")
            mm[i] = arr
    mm.flush()
    del mm
    return [int(t) for t in plan.labels], tuple(first.shape)
