"""What ``contrastkit pretrain --resume`` reads and repairs in a run folder.

* :func:`read_checkpoint` reads a checkpoint to resume (``weights_only=True``, weights checked
  against their stored SHA-256); :func:`newest_checkpoint` picks, for ``--resume last``, the
  complete checkpoint with the most optimiser steps (``last.ckpt`` when it is intact), saying
  so when it falls back to another;
* :func:`remove_partial_files` removes the temporary files that a write killed midway left
  (called while the run folder is locked, so no live writer owns them);
* :func:`truncate_metrics` drops the rows logged after the checkpoint, and a last row cut off by
  a kill or a full disk, with a warning;
* :func:`interrupted_message` is the line a run stopped by a signal prints.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import warnings
from collections.abc import Collection
from dataclasses import asdict
from pathlib import Path

import lightning as L

from contrastkit.checkpoints import load_checkpoint_file, verify_weights
from contrastkit.outputs import temp_file_beside


def read_checkpoint(path: str | os.PathLike) -> dict:
    """The Lightning checkpoint at ``path`` (tensors memory-mapped), its weights verified.

    Raises:
        FileNotFoundError: when ``path`` does not exist.
        ValueError: when it is not a readable, intact contrastkit pretraining checkpoint
            (a folder, truncated, corrupted, another file, or a pickle of other Python
            objects).
    """
    if Path(path).is_dir():
        raise ValueError(f"--resume {path} is a folder, not a checkpoint file (--resume last "
                         "continues the run of --output from its newest checkpoint)")
    if not Path(path).is_file():
        raise FileNotFoundError(f"--resume: no checkpoint at {path}")
    try:
        state = load_checkpoint_file(path, mmap=True)
    except ValueError as err:
        reason = str(err).split(" could not be read ", 1)
        if len(reason) == 2:
            raise ValueError(f"--resume {path} is not a readable checkpoint {reason[1]}") from None
        raise ValueError(f"--resume: {err}") from None
    try:
        verify_weights(state, path)
    except ValueError as err:
        raise ValueError(f"--resume: {err}") from None
    if not isinstance(state, dict) or "state_dict" not in state or "global_step" not in state:
        raise ValueError(f"--resume {path} is not a contrastkit pretraining checkpoint "
                         "(no state_dict / global_step)")
    return state


def newest_checkpoint(folder: Path) -> tuple[str, dict]:
    """``(path, checkpoint)`` of the intact checkpoint in ``folder`` with the most steps;
    ``last.ckpt`` on a tie. Warns when ``last.ckpt`` is missing or damaged and another is used.

    Raises:
        FileNotFoundError: when ``folder`` holds no checkpoint.
        ValueError: when none of its checkpoints is intact (the message says why for each).
    """
    last = folder / "last.ckpt"
    paths = sorted(folder.glob("*.ckpt"), key=lambda p: p != last)
    if not paths:
        raise FileNotFoundError(f"--resume last: no checkpoint in {folder}")
    found, problems = [], []
    for path in paths:
        try:
            found.append((str(path), read_checkpoint(path)))
        except ValueError as err:
            problems.append(str(err))
    if not found:
        raise ValueError("--resume last: no intact checkpoint; " + "; ".join(problems))
    path, state = max(found, key=lambda item: int(item[1]["global_step"]))  # first on a tie
    if path != str(last):
        why = problems[0] if problems and paths[0] == last else f"{last} is missing"
        warnings.warn(f"--resume last: {why}; resuming from {path} (step "
                      f"{state['global_step']})", stacklevel=2)
    return path, state


def remove_partial_files(run: Path) -> list[Path]:
    """Remove the temporary files (``.NAME.*.tmp``) of writes killed midway in the run folder and
    its ``checkpoints/``; returns them."""
    leftovers = [p for folder in (run, run / "checkpoints") if folder.is_dir()
                 for p in folder.glob(".*.tmp") if p.is_file()]
    for path in leftovers:
        path.unlink(missing_ok=True)
    return leftovers


def truncate_metrics(path: Path, step: int) -> int:
    """Drop the rows of a Lightning ``metrics.csv`` logged at optimiser step ``step`` or later
    (a resumed run logs them again), and damaged rows (with a warning): a last row that a kill
    or a full disk cut off, a row of another width, or one whose bytes are not UTF-8 (garbage
    written over the file's tail). Returns how many rows were dropped. Written atomically."""
    if not path.is_file():
        return 0
    lines, damaged = _utf8_lines(path.read_bytes())
    rows = list(csv.reader(io.StringIO("".join(lines))))
    if not rows or "step" not in rows[0]:
        if damaged:
            raise ValueError(f"{path}: its header is damaged (not UTF-8 or cut off); move the "
                             "file away to resume without it")
        return 0
    width, column = len(rows[0]), rows[0].index("step")
    kept, unreadable = [rows[0]], damaged
    for row in rows[1:]:
        if len(row) != width or not _is_number(row[column]):
            damaged += 1
        elif not (row[column] and int(float(row[column])) >= step):
            kept.append(row)
    if damaged:
        warnings.warn(f"{path}: dropped {damaged} incomplete row(s) (a write cut off by a kill "
                      "or a full disk, or bytes that are not UTF-8)", stacklevel=2)
    fd, tmp = temp_file_beside(path)
    with os.fdopen(fd, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(kept)
    os.replace(tmp, path)
    return len(rows) - len(kept) + unreadable


def _utf8_lines(data: bytes) -> tuple[list[str], int]:
    """The complete lines of ``data`` (each ending in a newline) that are UTF-8, decoded, and
    how many others there were (a last line without its newline, lines of other bytes)."""
    pieces = data.split(b"\n")
    tail = pieces.pop()  # b"" when the data ends with a newline: then nothing was cut off
    lines, damaged = [], int(bool(tail))
    for piece in pieces:
        try:
            lines.append(piece.decode("utf-8") + "\n")
        except UnicodeDecodeError:
            damaged += 1
    return lines, damaged


def _is_number(text: str) -> bool:
    if text == "":
        return True  # a row logged without a step value is kept as it was
    try:
        float(text)
    except ValueError:
        return False
    return True


#: Environment variables that launchers (Lightning, torchrun, SLURM) set to a process's rank.
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID")


def launched_as_rank_zero() -> bool:
    """Whether this process is the first of its run (no launcher gave it a rank above 0): the
    one that locks, cleans and repairs the run folder."""
    return all(os.environ.get(name, "0") in ("", "0") for name in _RANK_VARIABLES)


def interrupted_message(trainer: L.Trainer, output_dir: Path, signum: int) -> tuple[str, bool]:
    """One line on a run stopped by ``signum``: where it stopped, what is saved, how to go on;
    and whether a checkpoint is saved."""
    where = (f"stopped by {signal.Signals(signum).name} in epoch {trainer.current_epoch + 1} "
             f"(step {trainer.global_step})")
    try:
        path, state = newest_checkpoint(output_dir / "checkpoints")
    except (FileNotFoundError, ValueError):
        return f"{where}, before the first checkpoint: nothing is kept; run it again", False
    return (f"{where}; {Path(path).name} holds epoch {int(state['epoch']) + 1} "
            f"(step {state['global_step']}): resume with contrastkit pretrain --config "
            f"{output_dir / 'config.yaml'} --output {output_dir} --resume last"), True


#: Words of the errors a collective raises when another process of the run is gone.
_PEER_LOST = ("gloo", "nccl", "connection reset by peer", "connection closed by peer")


def lost_peer(err: BaseException, trainer: L.Trainer, output_dir: Path) -> ConnectionError | None:
    """The one-line error of a multi-process run whose process ``err`` stopped because another
    process of the run is gone (killed, its node lost): what happened, what is saved, how to
    go on. None when ``err`` is something else, or the run has one process.
    """
    import torch.distributed as dist

    message = " ".join(str(err).split())
    is_collective = isinstance(err, dist.DistError) or (
        isinstance(err, RuntimeError) and any(w in message.lower() for w in _PEER_LOST))
    if trainer.world_size < 2 or not is_collective:
        return None
    where = (f"another process of this {trainer.world_size}-process run stopped, so process "
             f"{trainer.global_rank} stops too, in epoch {trainer.current_epoch + 1} (step "
             f"{trainer.global_step}; {message.split('. ')[0][:200]})")
    try:
        path, state = newest_checkpoint(output_dir / "checkpoints")
    except (FileNotFoundError, ValueError):
        return ConnectionError(f"{where}; no checkpoint was written: start it again")
    return ConnectionError(f"{where}; {Path(path).name} holds epoch {int(state['epoch']) + 1} "
                           f"(step {state['global_step']}): resume with --resume last on every "
                           "node")


def check_resume_fits(model: L.LightningModule, trainer: L.Trainer, resumed: dict,
                      path: str | None, allowed: Collection[str] = ()) -> None:
    """Refuse to resume ``model`` from the checkpoint ``resumed`` (read from ``path``) when it
    was trained with another method or backbone, holds another model, or would change the
    learning-rate schedule (but for the schedule keys ``allowed``: ``trainer.max_epochs`` when
    the run is extended, :mod:`contrastkit.train.extend`).

    Raises:
        ValueError: naming the checkpoint, what differs, and the run's own config.
    """
    method = model.method
    record = resumed.get("contrastkit") or {}
    name, backbone = type(method).__name__, asdict(method.backbone_spec)
    if record.get("method") not in (None, name):
        _differs(path, f"was trained with {record['method']}, the config gives {name}")
    _check_same_model(model.state_dict(), resumed["state_dict"], path)
    recorded = record.get("backbone")
    if isinstance(recorded, dict):  # a field added since, left at its default None, is equal
        recorded = {**{k: v for k, v in backbone.items() if v is None}, **recorded}
    if recorded not in (None, backbone):
        _differs(path, f"has the backbone {record['backbone']}, the config {backbone}")
    _check_same_schedule(model, trainer, resumed, path, allowed)


def _differs(path: str | None, what: str) -> None:
    """Raise the error of a checkpoint that does not fit the config (SCE and MoCo, for one,
    have the same modules and would otherwise resume into each other)."""
    run = Path(path).parent.parent if path else Path("RUN")
    raise ValueError(f"--resume {path}: the checkpoint {what}; resume with the run's own "
                     f"config: --config {run / 'config.yaml'}")


def _check_same_schedule(model: L.LightningModule, trainer: L.Trainer, resumed: dict,
                         path: str | None, allowed: Collection[str] = ()) -> None:
    """Refuse a resume whose run length or optimiser settings differ from the checkpoint's
    (the learning-rate schedule would be recomputed mid-run), but for the keys ``allowed``; a
    longer run is told about ``--extend-to``. Checkpoints written before the schedule was
    recorded are not checked."""
    recorded = (resumed.get("contrastkit") or {}).get("schedule")
    if not recorded:
        return
    now = {"trainer.max_epochs": trainer.max_epochs, "trainer.max_steps": trainer.max_steps,
           **{f"optimizer.{k}": v for k, v in asdict(model.optimizer_spec).items()}}
    then = {"trainer.max_epochs": recorded.get("max_epochs"),
            "trainer.max_steps": recorded.get("max_steps"),
            **{f"optimizer.{k}": v for k, v in (recorded.get("optimizer") or {}).items()}}
    changed = [k for k in now if k in then and now[k] != then[k] and k not in allowed]
    if changed:
        key = changed[0]
        longer = (key == "trainer.max_epochs" and (now[key] or 0) > (then[key] or 0)
                  and (then[key] or 0) > 0)
        way = (f"to train the run longer, give --extend-to {now[key]} instead (a stated new "
               "schedule: docs/configs.md)" if longer else
               "resume with the run's settings or start a new run")
        raise ValueError(f"--resume {path}: {key} is {now[key]} but the run was started with "
                         f"{then[key]}, which would change its learning-rate schedule; {way}")


def _check_same_model(expected: dict, found: dict, path: str | None) -> None:
    missing = [k for k in expected if k not in found]
    unexpected = [k for k in found if k not in expected]
    shapes = [f"{k} {tuple(found[k].shape)} instead of {tuple(v.shape)}"
              for k, v in expected.items() if k in found and found[k].shape != v.shape]
    if missing or unexpected or shapes:
        details = "; ".join(part for part in (
            f"missing {missing[:3]}" if missing else "",
            f"unexpected {unexpected[:3]}" if unexpected else "",
            f"shapes {shapes[:3]}" if shapes else "") if part)
        run = Path(path).parent.parent if path else Path("RUN")
        raise ValueError(f"--resume {path}: the checkpoint's model differs from the configured "
                         f"one ({details}); resume with the run's own config: --config "
                         f"{run / 'config.yaml'}")
