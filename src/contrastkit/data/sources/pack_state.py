"""The completeness of a ``contrastkit data pack`` output: its marker, its staging folder.

``contrastkit data pack SRC DEST`` writes into a staging folder beside ``DEST``,
``.DEST.pack-partial`` (:func:`stage_of`), whose ``pack.json`` (:data:`MARKER`) says
``"complete": false`` and records the options; once every split is written the marker says
``"complete": true`` and the staging folder is renamed to ``DEST`` at once. A pack stopped
midway (a kill, a full disk, an unreadable image) thus never looks like a finished one, and
running the same command again continues it (:mod:`contrastkit.data.loading.pack`).

:func:`check_complete` is the readers' side: a folder (or the folder above it) whose marker
says incomplete, or a missing ``DEST`` beside a staging folder, is refused in one line that
gives the command that finishes it. Folders without a marker (packs written before it, or any
other image folder) are read as they are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["MARKER", "IncompletePackError", "check_complete", "read_marker", "stage_of"]

#: The marker file of a pack (in ``DEST`` and in its staging folder).
MARKER = "pack.json"
#: The marker's format.
FORMAT = "contrastkit-pack-1"


class IncompletePackError(ValueError):
    """A pack that ``contrastkit data pack`` did not finish; the message says how to."""


def stage_of(dest: str | os.PathLike[str]) -> Path:
    """The staging folder of a pack into ``dest``: ``.NAME.pack-partial`` beside it."""
    dest = Path(dest)
    return dest.parent / f".{dest.name}.pack-partial"


def read_marker(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The marker of a pack in ``folder`` (None when there is none, or it is not one)."""
    path = Path(folder) / MARKER
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == FORMAT else None


def _refusal(option: str, root: Path, meta: dict[str, Any] | None) -> IncompletePackError:
    command = (meta or {}).get("command") or "contrastkit data pack SRC DEST"
    return IncompletePackError(f"{option} {root} is an incomplete pack (`contrastkit data pack` "
                               f"was stopped while writing it): run the same command again "
                               f"to finish it: {command}")


def check_complete(root: str | os.PathLike[str], option: str = "data.root") -> None:
    """Refuse to read an unfinished pack.

    Raises:
        IncompletePackError: when ``root`` or its parent holds a pack marker that says
            incomplete, or ``root`` does not exist but the staging folder of a pack into it
            does (the message gives the command that finishes it).
    """
    root = Path(root).expanduser()
    for folder in (root, root.parent):
        meta = read_marker(folder)
        if meta is not None:
            if not meta.get("complete"):
                raise _refusal(option, root, meta)
            return
    if not root.exists():
        for stage in (stage_of(root), stage_of(root.parent)):
            if stage.is_dir():
                raise _refusal(option, root, read_marker(stage))
