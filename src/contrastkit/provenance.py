"""Where the code that wrote a file came from: contrastkit's version and, when it runs from a
git checkout, the commit (the runs' and exports' identity records it)."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from contrastkit import __version__

__all__ = ["source_commit", "source_identity"]


@functools.cache
def source_commit() -> str | None:
    """The commit of the git checkout contrastkit is imported from, with ``-dirty`` when its
    tracked files differ from it; None for an installed package (its files tracked by no git
    repository, even one whose ignored virtual environment holds it) or without git."""
    here = Path(__file__).resolve().parent
    try:
        tracked = subprocess.run(["git", "-C", str(here), "ls-files", "--error-unmatch", "--",
                                  Path(__file__).name], capture_output=True, timeout=10)
        if tracked.returncode != 0:
            return None
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(here), "diff", "--quiet", "HEAD", "--", "."],
                               capture_output=True, timeout=30).returncode != 0
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def source_identity() -> dict[str, str | None]:
    """``{"contrastkit_version": ..., "commit": ...}`` of the running code."""
    return {"contrastkit_version": __version__, "commit": source_commit()}
