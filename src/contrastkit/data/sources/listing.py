"""The listing of a dataset's files: what a resumed run checks its data against.

A run's data is more than ``data.root``: images deleted from or added to an image folder
change what it trains on, and the held-out split of a ``folder`` is drawn again from the new
listing (images that were held out become training images, and the monitor then scores images
the model trained on). :func:`data_listing` records, per group of files (a class folder, a
split of shards), their number and a digest of their sorted relative paths and sizes: one
``stat`` per file, no contents read. :func:`listing_changes` says what differs between two
listings, in words.

Which datasets have a listing, and why (:data:`LISTED`):

* ``folder``, ``imagenet100``, ``tinyimagenet``: every image file under ``data.root`` (the
  extensions read, symbolic links followed as the readers follow them), grouped by class
  folder (``cat``, or ``train/cat`` under a split folder): the folders a user adds to and
  deletes from, and the one a held-out split is drawn from;
* ``shards``: every file under ``data.root`` (shards and their indexes), grouped by split;
* ``image_archive``: the archive file (its size);
* the others have none: ``digits`` is built in; CIFAR-10/100, STL-10 and SVHN are fixed
  releases whose files their readers know by name; the video datasets read split files or
  folders of videos and draw no held-out split (their listing is not recorded).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from contrastkit.data.sources.images.datasets import list_images

__all__ = ["LISTED", "data_listing", "listing_changes"]

#: The datasets whose files are listed (module doc).
LISTED = ("folder", "imagenet100", "tinyimagenet", "shards", "image_archive")

#: How many differing groups a change names before it counts the rest.
_SHOWN = 5


def data_listing(name: str, root: str | os.PathLike[str] | None,
                 splits: Collection[str] = ("train", "val", "test")) -> dict[str, Any] | None:
    """The listing of dataset ``name`` at ``root``: ``{"files": kind, "groups": {group:
    [count, digest]}}`` with ``digest`` the first 16 hex digits of the SHA-256 of the group's
    ``relative path NUL size`` lines, sorted; None for a dataset not in :data:`LISTED` or a
    ``root`` that is not on this machine (a URL).

    Args:
        name: the dataset name (``data.dataset``).
        root: its ``data.root``.
        splits: names of split folders: a file under ``root/<split>/<class>/`` is grouped as
            ``<split>/<class>``, one under ``root/<class>/`` as ``<class>``.
    """
    if name not in LISTED or root is None or not os.path.exists(root):
        return None
    base = Path(root)
    if name == "image_archive":
        return {"files": "archive", "groups": _groups(base.parent, [str(base)], lambda r: r)}
    if name == "shards":
        paths = sorted(str(p) for p in base.rglob("*") if p.is_file())
        return {"files": "shards", "groups": _groups(base, paths, lambda r: r.split("/")[0])}
    split_names = set(splits)

    def group(rel: str) -> str:
        parts = rel.split("/")[:-1]
        depth = 2 if len(parts) >= 2 and parts[0] in split_names else 1
        return "/".join(parts[:depth]) or "."

    return {"files": "images", "groups": _groups(base, list_images(base), group)}


def _groups(base: Path, paths: list[str], group_of: Any) -> dict[str, list]:
    """``{group: [count, digest]}`` of ``paths`` (relative to ``base``)."""
    lines: dict[str, list[str]] = {}
    for path in paths:
        rel = os.path.relpath(path, base).replace(os.sep, "/")
        lines.setdefault(group_of(rel), []).append(f"{rel}\0{os.stat(path).st_size}\n")
    return {key: [len(found), hashlib.sha256("".join(sorted(found)).encode(
        errors="surrogateescape")).hexdigest()[:16]] for key, found in sorted(lines.items())}


def listing_changes(then: Mapping[str, Any], now: Mapping[str, Any]) -> str | None:
    """What differs between two :func:`data_listing` records, in words (None when nothing):
    per group, the files fewer or more, a group gone or new, or, with the same count, other
    files (renamed, replaced or resized); the first few groups named, the rest counted."""
    if then == now:
        return None
    unit = "image" if now.get("files") == "images" else "file"
    old, new = then.get("groups", {}), now.get("groups", {})
    said = []
    for key in sorted(set(old) | set(new)):
        (n_then, d_then), (n_now, d_now) = old.get(key, (0, None)), new.get(key, (0, None))
        where = "in data.root" if key == "." else f"in '{key}'"
        if n_then != n_now:
            diff = n_now - n_then
            extra = " (new)" if not n_then else " (gone)" if not n_now else ""
            said.append(f"{abs(diff)} {unit}(s) {'more' if diff > 0 else 'fewer'} {where}"
                        f"{extra}")
        elif d_then != d_now:
            said.append(f"other {unit}s {where} (as many: renamed, replaced or resized)")
    more = f" and {len(said) - _SHOWN} more group(s) changed" if len(said) > _SHOWN else ""
    return ", ".join(said[:_SHOWN]) + more if said else "its files differ"
