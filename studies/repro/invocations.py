"""A resumed run's pretraining invocations, read from its TensorBoard event files.

The runner logs each command's CPU time to ``cost.jsonl`` when the command ends
(:func:`~studies.repro.records.append_cost`). An invocation that ends with its machine (the
session's end kills the runner and its child at once) leaves no cost line, so a run resumed
across sessions has logged the CPU time of only some of its invocations. Each invocation
does leave its own event file (``pretrain/tensorboard/events.out.tfevents.*``, written while it
trains): its first and last logged steps give the steps it trained, and the time of its first
log falls inside its command's span, which ties it to its cost line. :func:`pretrain_cost`
matches the logged invocations to their event files and scales their CPU-seconds per step to
the steps of the unlogged ones:

    estimated CPU-s = logged CPU-s + (CPU-s / steps of the logged invocations)
                                     x steps of the unlogged invocations

An invocation's steps are counted from its first to its last logged step plus one logging
interval: the steps it trained, those a resume repeats (from the last checkpoint before the
machine went) included, to within one interval (the steps after its last log are not seen).
The estimate assumes the unlogged invocations ran at the logged ones' rate per step (one
thread, same code and machine type).
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Invocation", "pretrain_cost", "read_invocations"]

EVENTS_GLOB = "tensorboard/events.out.tfevents.*"
#: Scalars logged at training steps (the monitor's val/ and the epoch counter are not).
TRAIN_TAG = "train/loss"


@dataclass(frozen=True)
class Invocation:
    """One pretraining invocation as its event file shows it."""

    started: float  # wall time of its first training log, seconds since the epoch
    first_step: int  # first step at which it logged the training loss
    last_step: int  # last such step
    interval: int  # smallest gap between two of its logged steps (0: it logged once)


def read_invocations(pretrain_dir: Path) -> list[Invocation]:
    """The invocations of ``pretrain_dir`` that logged a training step, in start order; empty
    without event files or without the ``tensorboard`` package."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    except ImportError:
        return []
    out = []
    for path in sorted(pretrain_dir.glob(EVENTS_GLOB)):
        started, steps = None, []
        for event in EventFileLoader(str(path)).Load():
            if event.HasField("summary") and any(v.tag == TRAIN_TAG for v in event.summary.value):
                started = event.wall_time if started is None else started
                steps.append(event.step)
        if started is not None and steps:
            steps = sorted(set(steps))
            gaps = [b - a for a, b in itertools.pairwise(steps)]
            out.append(Invocation(started, steps[0], steps[-1], min(gaps, default=0)))
    return sorted(out, key=lambda i: i.started)


def pretrain_cost(pretrain_dir: Path, logged: list[dict]) -> dict[str, float]:
    """The pretraining's CPU cost, estimated for the whole run where invocations went unlogged.

    Args:
        pretrain_dir: the run's ``pretrain`` folder (its event files).
        logged: the run's ``cost.jsonl`` entries of step ``pretrain`` (``started`` as ISO time,
            ``cpu_seconds``, ``wall_seconds``).

    Returns:
        Empty without event files. Otherwise ``cost/pretrain_invocations`` (event files that
        logged a step), ``cost/pretrain_invocations_logged`` (those with a cost line),
        ``cost/pretrain_steps`` (steps trained by all of them, a resume's repeated steps
        included), ``cost/pretrain_steps_logged`` (by the logged ones) and, where the logged
        invocations trained a step, ``cost/pretrain_cpu_seconds_estimated`` (every cost line
        plus the unlogged invocations' steps at the logged ones' rate).
    """
    invocations = read_invocations(pretrain_dir)
    if not invocations:
        return {}
    interval = _log_interval(invocations)
    trained = {inv: inv.last_step - inv.first_step + interval for inv in invocations}
    spans = {inv: [e for e in logged if _spans(e, inv)] for inv in invocations}
    matched = [inv for inv in invocations if spans[inv]]
    steps = sum(trained.values())
    steps_logged = sum(trained[inv] for inv in matched)
    out = {"cost/pretrain_invocations": float(len(invocations)),
           "cost/pretrain_invocations_logged": float(len(matched)),
           "cost/pretrain_steps": float(steps),
           "cost/pretrain_steps_logged": float(steps_logged)}
    if steps_logged > 0:
        matched_cpu = sum(float(e["cpu_seconds"]) for inv in matched for e in spans[inv])
        out["cost/pretrain_cpu_seconds_estimated"] = (
            sum(float(e["cpu_seconds"]) for e in logged)
            + matched_cpu / steps_logged * (steps - steps_logged))
    return out


def _log_interval(invocations: list[Invocation]) -> int:
    """The steps between two training logs (the same in every invocation of a run)."""
    return min((i.interval for i in invocations if i.interval > 0), default=1)


def _spans(entry: dict, invocation: Invocation) -> bool:
    """Whether the cost line ``entry``'s command spans the invocation's first training log."""
    try:
        start = dt.datetime.fromisoformat(entry["started"]).timestamp()
        return start <= invocation.started <= start + float(entry["wall_seconds"])
    except (KeyError, TypeError, ValueError):
        return False
