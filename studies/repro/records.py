"""The study's durable record: what a finished run or comparison leaves in git.

The run folders under ``runs/repro`` are a working copy: checkpoints, the runs under way, and
everything else a machine loses when it goes. When a run has finished (pretraining to its last
epoch and every evaluation), a command of it has failed (:func:`failure`: a diverged loss is a
result, which the page shows; the runner tries the command again on its next call, so that a
failure that newer code mends goes away) or a comparison has been made, the runner copies its
small files, everything but ``checkpoints/`` and the lock, to the same relative path under
:data:`~studies.repro.layout.RECORDS` (``docs/reproduction/runs``, committed with the
report). ``python -m studies.repro cpu|gpu|report`` first restores every recorded folder that the
working copy lacks, so a study spans sessions and machines: a recorded run is not trained
again, and its numbers and figures stay in the report.

Two files the runner writes make a folder self-describing without its checkpoint:

* ``pretrain/finished.json``: pretraining reached its last epoch (``{"epochs": N}``), written
  once the checkpoint's loop state says so (:func:`mark_finished`, read by :func:`finished`);
* ``cost.jsonl``: one line per command run for the folder (``step``, ``cpu_seconds`` of the
  command's process tree, ``wall_seconds``, ``exit_status``, ``started``, and a failed
  command's last stderr line, ``error``), appended by :class:`~studies.repro.runner.Runner`
  (:func:`append_cost`, summed by :func:`read_costs`; a run whose last command failed is
  recorded as it is, :func:`failure`);
* ``provenance.jsonl``: one line per command, the checkout's commit, the versions and the
  hardware it ran on (:mod:`studies.repro.provenance`).

Checkpoints (about 11 MB per run) are not recorded: a recorded run is evaluated with a protocol
added after it finished only by training it again (delete its folder and its record).

Usage (what the runner does)::

    restore("cpu")                     # before the runs: recorded folders back into runs/repro
    mark_finished(pretrain_dir, 30)    # once the last epoch's checkpoint is written
    record(run_dir("cpu", "sce", 0))   # once its evaluations are done
"""

from __future__ import annotations

import datetime as dt
import filecmp
import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from studies.repro import layout
from studies.repro.invocations import pretrain_cost
from studies.repro.layout import RECORDS, RUNS
from studies.repro.provenance import PROVENANCE_LOG, read_entries

FINISHED = "finished.json"
COST_LOG = "cost.jsonl"
#: The longest failed command's error line kept in ``cost.jsonl``.
MAX_ERROR_CHARS = 500
#: The per-command logs a folder grows (its cost, and its provenance:
#: :mod:`studies.repro.provenance`).
LOGS = (COST_LOG, PROVENANCE_LOG)
#: Names never recorded: the checkpoints folder and the runner's lock.
UNRECORDED = frozenset({"checkpoints", ".lock"})


def mark_finished(pretrain_dir: Path, epochs: int) -> None:
    """Write ``pretrain_dir/finished.json``: pretraining reached epoch ``epochs``."""
    (pretrain_dir / FINISHED).write_text(json.dumps({"epochs": epochs}) + "\n")


def finished(pretrain_dir: Path, epochs: int) -> bool:
    """Whether ``pretrain_dir/finished.json`` says pretraining reached ``epochs`` epochs."""
    try:
        return int(json.loads((pretrain_dir / FINISHED).read_text())["epochs"]) >= epochs
    except (OSError, ValueError, KeyError, TypeError):
        return False


def append_cost(log: Path, step: str, cpu_seconds: float, wall_seconds: float,
                exit_status: int, started: dt.datetime, error: str | None = None) -> None:
    """Append one command's cost to ``log`` (``cost.jsonl``), one JSON object per line; a
    failed command's last stderr line as ``error``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    line = {"step": step, "cpu_seconds": round(cpu_seconds, 2),
            "wall_seconds": round(wall_seconds, 2), "exit_status": exit_status,
            "started": started.isoformat(timespec="seconds")}
    if error is not None:
        line["error"] = error[:MAX_ERROR_CHARS]
    with open(log, "a") as handle:
        handle.write(json.dumps(line) + "\n")


def failed_status(exit_status: int) -> bool:
    """Whether a command's exit status is a failure: 1 to 127 (``contrastkit``'s one-line
    errors exit with 2, a traceback with 1); not 0, nor a stop by a signal (128 + its number
    from a command that caught it, negative from one the signal killed)."""
    return 0 < exit_status < 128


def failure(folder: Path) -> dict | None:
    """The last command logged in ``folder/cost.jsonl`` when it failed (:func:`failed_status`):
    its ``step``, ``exit_status`` and ``error`` (None when the runner that ran it kept no
    error line); None when it did not fail or nothing is logged."""
    entries = _cost_entries(folder)
    status = int(entries[-1].get("exit_status", 0)) if entries else 0
    if not failed_status(status):
        return None
    return {"step": entries[-1]["step"], "exit_status": status,
            "error": entries[-1].get("error")}


def failure_text(failed: Mapping[str, object]) -> str:
    """A :func:`failure` in words: its step and exit status, and its error's first clause."""
    error = failed.get("error")
    reason = (str(error).split(": error: ", 1)[-1].split("; ", 1)[0] if error
              else "its error line was not recorded")
    return f"{failed['step']} failed with exit status {failed['exit_status']} ({reason})"


def read_costs(folder: Path) -> dict[str, float]:
    """Sums of ``folder/cost.jsonl``: ``cost/cpu_seconds`` and ``cost/wall_seconds`` of every
    command, ``cost/pretrain_cpu_seconds`` and ``pretrain/wall_minutes`` of the pretraining
    commands (over the logged invocations of a resumed run), and the whole pretraining's
    estimate where an invocation ended with its machine unlogged
    (:func:`~studies.repro.invocations.pretrain_cost`); empty without a log. A line cut short
    by a crash is left out."""
    entries = _cost_entries(folder)
    if not entries:
        return {}
    pretrain = [e for e in entries if e["step"] == "pretrain"]
    out = {"cost/cpu_seconds": sum(e["cpu_seconds"] for e in entries),
           "cost/wall_seconds": sum(e["wall_seconds"] for e in entries)}
    if pretrain:
        out["cost/pretrain_cpu_seconds"] = sum(e["cpu_seconds"] for e in pretrain)
        out["pretrain/wall_minutes"] = sum(e["wall_seconds"] for e in pretrain) / 60.0
    out.update(pretrain_cost(folder / "pretrain", pretrain))
    return out


def wall_minutes_text(metrics: Sequence[Mapping[str, float]], text: str) -> str:
    """``text`` (the pretraining wall minutes of runs with ``metrics``), marked ``≥`` when an
    invocation of one of them left no cost line (a session's end stopped it before the runner
    logged it): its minutes are missing, so the sum is a lower bound."""
    partly = any(m.get("cost/pretrain_invocations_logged", 0.0)
                 < m.get("cost/pretrain_invocations", 0.0) for m in metrics)
    return f"≥ {text}" if partly else text


def _cost_entries(folder: Path) -> list[dict]:
    """The commands logged in ``folder/cost.jsonl``, in order; empty without a log."""
    try:
        lines = (folder / COST_LOG).read_text().splitlines()
    except OSError:
        return []
    return [entry for entry in map(_cost_entry, lines) if entry is not None]


def _cost_entry(line: str) -> dict | None:
    """One ``cost.jsonl`` line; None for a blank line or one cut short (a crash mid-write)."""
    try:
        entry = json.loads(line)
        float(entry["cpu_seconds"]), float(entry["wall_seconds"]), str(entry["step"])
    except (ValueError, KeyError, TypeError):
        return None
    return entry


def _files(folder: Path) -> list[Path]:
    """Files under ``folder`` that are recorded, relative to it, sorted."""
    out = []
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.is_file() and not UNRECORDED.intersection(rel.parts):
            out.append(rel)
    return sorted(out)


def _same(a: Path, b: Path) -> bool:
    files = _files(a)
    return b.is_dir() and files == _files(b) and all(
        filecmp.cmp(a / f, b / f, shallow=False) for f in files)


def record(folder: Path) -> Path:
    """Copy the run or comparison folder ``folder`` (relative to the checkout, under
    ``runs/repro``) to its record, replacing an older record whole; return the record's path.
    Nothing is written when the record already holds the same files."""
    source = layout.REPO / folder
    target = layout.REPO / RECORDS / folder.relative_to(RUNS)
    if _same(source, target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    for rel in _files(source):
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, staging / rel)
    old = target.with_name(f".{target.name}.old")
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def _replaced(recorded: Path, working: Path) -> bool:
    """Whether ``working`` is a finished run restored earlier (no checkpoint: not trained here)
    of another training than the finished record's, which was trained again elsewhere and
    recorded whole: the first pretraining command of the record's provenance log is not the working
    copy's (:func:`~studies.repro.provenance.read_entries`)."""
    pre = working / "pretrain"
    if not ((recorded / "pretrain" / FINISHED).is_file() and (pre / FINISHED).is_file()) or (
            pre / "checkpoints" / "last.ckpt").is_file():
        return False

    def training(folder: Path) -> dict | None:
        return next((e for e in read_entries(folder) if e.get("step") == "pretrain"), None)

    recorded_training = training(recorded)
    return recorded_training is not None and recorded_training != training(working)


def compared(out: Path, a: Path, b: Path) -> bool:
    """Whether ``out`` holds the comparison of the evaluations ``a`` and ``b`` as they are now:
    the checkpoints it compared are theirs (a run trained again leaves its comparisons
    stale, and they are made again)."""
    def read(path: Path) -> dict:
        return json.loads((layout.REPO / path).read_text())

    try:
        made = read(out / "comparison.json")
        return all(made[side]["checkpoint"] == read(d / "results.json")["checkpoint"]["sha256"]
                   for side, d in (("a", a), ("b", b)))
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _outdated(recorded: Path, working: Path) -> bool:
    """Whether ``working`` is a comparison of evaluations no longer there, which its record,
    made again elsewhere after a run was trained again, compares as they are now
    (:func:`compared`; the runs are restored first). A comparison made here and not recorded
    yet, or one whose runs are under way here, stays."""
    try:
        made = json.loads((recorded / "comparison.json").read_text())
        a, b = (Path(made[side]["folder"]) for side in ("a", "b"))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return ((working / "comparison.json").is_file() and compared(recorded, a, b)
            and not compared(working, a, b))


def _restorable(recorded: Path, working: Path) -> list[Path]:
    """The files of a record to copy back: those of a recorded run that the working copy lacks
    where it has trained nothing (no checkpoint: a run under way, or one trained here, stays as
    it is; a run restored earlier gets the evaluations recorded since, and its cost and
    provenance logs, which grew with them); those of a failed run (:func:`failure`) that the
    working copy lacks or holds otherwise where it has trained nothing; those of a comparison
    where none was made."""
    if not (recorded / "pretrain" / FINISHED).is_file() and failure(recorded) is not None:
        if (working / "pretrain" / "checkpoints" / "last.ckpt").is_file():
            return []
        return [f for f in _files(recorded) if not (working / f).is_file()
                or (working / f).read_bytes() != (recorded / f).read_bytes()]
    if (recorded / "pretrain" / FINISHED).is_file():
        pre = working / "pretrain"
        if (pre / "checkpoints" / "last.ckpt").is_file():
            return []
        if not (pre / FINISHED).is_file():  # nothing trained here: the whole record
            return _files(recorded)
        grown = {log for log in map(Path, LOGS) if (working / log).is_file()
                 and (recorded / log).is_file()
                 and (working / log).read_bytes() != (recorded / log).read_bytes()}
        return [f for f in _files(recorded) if not (working / f).is_file() or f in grown]
    return [] if (working / "comparison.json").is_file() else _files(recorded)


def restore(tag: str | None = None) -> list[Path]:
    """Copy every recorded folder (of run tag ``tag``, e.g. ``cpu``; all tags by default), or
    the files of it that the working copy lacks, back under ``runs/repro`` (see
    :func:`_restorable`; a restored copy of another training, :func:`_replaced`, or a
    comparison of evaluations no longer there, :func:`_outdated`, is removed first, so none of
    its files stays beside the record's; the runs go before the comparisons of them); return
    the folders restored (relative to the checkout)."""
    base = layout.REPO / RECORDS
    pattern = f"{tag or '*'}/"
    units = [p.parent.parent for p in base.glob(pattern + f"*/seed*/pretrain/{FINISHED}")]
    units += [p.parent for p in base.glob(pattern + f"*/seed*/{COST_LOG}")
              if p.parent not in units and failure(p.parent) is not None]
    units += [p.parent for p in base.glob(pattern + "compare/*/*/seed*/comparison.json")]
    restored = []
    for recorded in sorted(units, key=lambda p: ((p / "comparison.json").is_file(), p)):
        rel = recorded.relative_to(base)
        working = layout.REPO / RUNS / rel
        if _replaced(recorded, working) or _outdated(recorded, working):
            shutil.rmtree(working)
        files = _restorable(recorded, working)
        if not files:
            continue
        for f in files:
            (working / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(recorded / f, working / f)
        restored.append(RUNS / rel)
    return restored
