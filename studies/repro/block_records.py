"""A Part B block's records in transit: packed on the GPU machine, recorded in git here.

On the GPU machine (:mod:`studies.repro.device_block`), :func:`pack` writes, after every
command of the block, the run folder's files (checkpoints and the lock aside: the same files
:func:`studies.repro.records.record` keeps) as one archive, :data:`RECORDS_ARCHIVE`, and the
block's summary, :data:`BLOCK_SUMMARY` (also kept in the run folder): the run, its status
(``running``, ``continue``, ``done`` or ``failed``), the commit the session's checkout was at,
the torch, CUDA, cuDNN and Lightning versions, the GPU's name, each command's wall time and
their sum in GPU-minutes, and the run's headline numbers. With the command's log that is 3
files of the 8 the device tool brings back, each far below its 16 MiB.

Here, :func:`ingest` checks the summary (a finished block of a known run), unpacks the
archive into ``runs/repro/<tag>/<stem>/seed<N>`` (regular files only, inside that folder) and
records it in ``docs/reproduction/runs`` as Part A's runs are recorded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

from contrastkit.outputs import temp_file_beside, write_bytes_atomic
from studies.repro import layout
from studies.repro.layout import RUNS
from studies.repro.records import UNRECORDED, record

RECORDS_ARCHIVE = "records.tar.gz"
BLOCK_SUMMARY = "block.json"
BLOCK_LOG = "block.log"
#: What the device tool brings back of ``$OUT``: at most this many files of this many bytes.
MAX_FILES = 8
MAX_FILE_BYTES = 16 * 2**20
#: Run tags a block may record: Part B's, or a shortened pipeline check's (``--epochs``).
TAG_PATTERN = re.compile(r"gpu(-e[0-9]+)?")


def _write_json(path: Path, data: dict) -> None:
    write_bytes_atomic(path, (json.dumps(data, indent=2) + "\n").encode())


def _recorded_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()
                  and not UNRECORDED.intersection(p.relative_to(folder).parts))


def pack(folder: Path, out: Path, summary: dict) -> None:
    """Write ``summary`` to ``folder/block.json`` and ``out/block.json``, and ``folder``'s
    recorded files to ``out/records.tar.gz`` (each replaced atomically).

    Raises:
        ValueError: when the archive would exceed :data:`MAX_FILE_BYTES` (it would not come
            back) or ``out`` would hold more than :data:`MAX_FILES` files.
    """
    folder.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(folder / BLOCK_SUMMARY, summary)
    fd, tmp = temp_file_beside(out / RECORDS_ARCHIVE)
    os.close(fd)
    with tarfile.open(tmp, "w:gz") as tar:
        for path in _recorded_files(folder):
            tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
    size = Path(tmp).stat().st_size
    if size > MAX_FILE_BYTES:
        os.unlink(tmp)
        raise ValueError(f"{out / RECORDS_ARCHIVE} would be {size / 2**20:.1f} MiB, more than "
                         f"the {MAX_FILE_BYTES // 2**20} MiB a file may have to come back")
    os.replace(tmp, out / RECORDS_ARCHIVE)
    _write_json(out / BLOCK_SUMMARY, summary)
    files = [p for p in out.rglob("*") if p.is_file()]
    if len(files) > MAX_FILES:
        raise ValueError(f"{out} holds {len(files)} files; at most {MAX_FILES} come back")


def read_summary(files: Path) -> dict:
    """``files/block.json``, with errors that name the file."""
    path = files / BLOCK_SUMMARY
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (the folder of a block's files, the "
                                "device reply's files_at, holds it)")
    try:
        summary = json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path} is not JSON ({err})") from err
    if not isinstance(summary, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return summary


def run_folder(summary: dict, known_stems: set[str]) -> Path:
    """``runs/repro/<tag>/<stem>/seed<N>`` of a block's summary, after checking that its tag
    is Part B's, its stem a Part B run's and its seed an integer (nothing else reaches a
    path)."""
    tag, stem, seed = summary.get("tag"), summary.get("stem"), summary.get("seed")
    if not isinstance(tag, str) or not TAG_PATTERN.fullmatch(tag):
        raise ValueError(f"block.json: tag {tag!r} is not a Part B run tag (gpu or gpu-e<N>)")
    if stem not in known_stems:
        raise ValueError(f"block.json: stem {stem!r} is not a Part B run; one of "
                         f"{', '.join(sorted(known_stems))}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"block.json: seed {seed!r} is not a non-negative integer")
    return RUNS / tag / stem / f"seed{seed}"


def _members(archive: Path, tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """The members of ``archive``, after checking that each is a regular file or folder inside
    the run folder (no absolute path, no ``..``, no link) and a record (no checkpoint)."""
    members = tar.getmembers()
    for m in members:
        parts = Path(m.name).parts
        if Path(m.name).is_absolute() or ".." in parts or not (m.isfile() or m.isdir()):
            raise ValueError(f"{archive}: member {m.name!r} is not a plain file inside the "
                             "run folder")
        if UNRECORDED.intersection(parts):
            raise ValueError(f"{archive}: member {m.name!r} is not a record")
    return members


def _extract(archive: Path, target: Path) -> None:
    """Unpack ``archive`` into the new folder ``target`` (its members checked first)."""
    with tarfile.open(archive, "r:gz") as tar:
        members = _members(archive, tar)
        target.mkdir(parents=True)
        for m in members:
            if m.isdir():
                (target / m.name).mkdir(parents=True, exist_ok=True)
                continue
            source = tar.extractfile(m)
            assert source is not None
            (target / m.name).parent.mkdir(parents=True, exist_ok=True)
            with source, open(target / m.name, "wb") as handle:
                shutil.copyfileobj(source, handle)


def ingest(files: Path, known_stems: set[str]) -> Path:
    """Record a finished block's files (the device reply's ``files_at``): unpack its run into
    the working copy, replacing one unpacked there before, and record it; return the run
    folder (relative to the checkout).

    Raises:
        FileNotFoundError, ValueError: naming the file, for a block that did not finish
            (status other than ``done``: its records are incomplete, and a recorded run is not
            trained again), an unknown run, an unsafe archive, or a working copy that trained
            the run itself (it has a checkpoint).
    """
    summary = read_summary(files)
    if summary.get("status") != "done":
        raise ValueError(f"{files / BLOCK_SUMMARY}: status {summary.get('status')!r}, not "
                         "'done': the block's run did not finish, so nothing is recorded (make "
                         "the same device call again while the machine is warm)")
    folder = run_folder(summary, known_stems)
    archive = files / RECORDS_ARCHIVE
    if not archive.is_file():
        raise FileNotFoundError(f"{archive}: no such file")
    with tarfile.open(archive, "r:gz") as tar:
        _members(archive, tar)  # checked before anything is written
    working = layout.REPO / folder
    if (working / "pretrain" / "checkpoints").exists():
        raise ValueError(f"{working} holds a run trained on this machine (it has checkpoints); "
                         "move it away to record the block's")
    staging = Path(tempfile.mkdtemp(prefix=f".{working.name}.", dir=_parent(working)))
    try:
        _extract(archive, staging / "run")
        if working.exists():
            shutil.rmtree(working)
        (staging / "run").rename(working)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    record(folder)
    return folder


def _parent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.parent
