"""The commit an export or a run records (contrastkit.provenance): the checkout's commit only when
the imported files are tracked there, never that of a repository whose ignored folder (a virtual
environment) merely holds an installed copy."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

import contrastkit.provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def _commit_seen_from(path: Path) -> str | None:
    """``source_commit()`` of a copy of the module imported from ``path``."""
    spec = importlib.util.spec_from_file_location("provenance_copy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.source_commit()


def test_commit_of_a_tracked_copy_and_none_for_an_ignored_one(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / ".venv").mkdir()
    (repo / ".gitignore").write_text(".venv/\n")
    source = Path(contrastkit.provenance.__file__)
    shutil.copy(source, repo / "pkg" / "provenance.py")
    shutil.copy(source, repo / ".venv" / "provenance.py")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    assert _commit_seen_from(repo / "pkg" / "provenance.py") == head
    assert _commit_seen_from(repo / ".venv" / "provenance.py") is None
    (repo / "pkg" / "provenance.py").write_text(source.read_text() + "\n")
    assert _commit_seen_from(repo / "pkg" / "provenance.py") == f"{head}-dirty"
