"""The subprocess runner of the reproduction study: every run, resumable, in report order.

:func:`run_studies` makes, for every study, seed and run, the ``contrastkit pretrain`` call(s)
until the checkpoint's loop state says the last epoch finished (a finished run is skipped; with
``chunk_seconds`` it trains in chunks resumed with ``--resume last``), then the run's
evaluations (each skipped when its ``results.json`` exists), then ``contrastkit compare`` for
the study's pairs, and collects everything into ``runs/repro/summary.json``. A run shared by
several studies (the random-initialisation baseline, the SimCLR runs) is trained once and
evaluated with every protocol any of them needs. Two processes ("lanes", e.g. two
``python -m studies.repro cpu --study ...`` calls with one thread each) may share runs, even run the
same studies: each run is trained and evaluated under an exclusive lock on ``<run>/.lock``
(:func:`run_lock`); a lane that reaches a run the other holds takes the next free one, and
waits for the runs it left only at the end (then finding them finished). A
:class:`Runner` executes (or, dry, only prints) each command from the checkout, with an
optional budget of steps (pretraining chunks and evaluations) so that one call fits a short
window, and logs each command's CPU and wall time to its folder's ``cost.jsonl``.

Across machines (:mod:`studies.repro.records`): :func:`run_studies` first restores the
recorded runs and comparisons the working copy lacks, and records each run once it is finished
and evaluated, and each comparison once it is made.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from studies.repro import layout
from studies.repro.collection import collect, config_epochs, pretrain_finished, write_summary
from studies.repro.commands import (
    chunk_arguments,
    compare_command,
    eval_command,
    pretrain_command,
    trained_seconds,
)
from studies.repro.layout import SUMMARY, compare_dir, eval_dir, run_dir, run_tag
from studies.repro.plan import planned_train_seconds
from studies.repro.provenance import (
    PROVENANCE_LOG,
    append_provenance,
    environment,
    names_clean_commit,
    read_provenance,
)
from studies.repro.records import (
    COST_LOG,
    FINISHED,
    append_cost,
    compared,
    failed_status,
    failure,
    finished,
    mark_finished,
    record,
    restore,
)
from studies.repro.schema import Study, Variant
from studies.repro.studies import STUDIES
from studies.repro.tuning import (
    choose,
    folder_choices,
    grid_scores,
    is_resolved,
    resolve,
    resolve_study,
)


class Runner:
    """Runs (or, with ``dry_run``, prints) commands from the repository root."""

    def __init__(self, dry_run: bool = False, log: Callable[[str], None] = print,
                 max_steps: int | None = None) -> None:
        self.dry_run = dry_run
        self.log = log
        self.commands: list[list[str]] = []
        self.steps_left = max_steps  # pretraining chunks and evaluations still allowed

    def spend(self) -> bool:
        """Take one step of the budget; False when it is exhausted."""
        if self.steps_left is None:
            return True
        if self.steps_left <= 0:
            return False
        self.steps_left -= 1
        return True

    def __call__(self, cmd: list[str], cost_log: Path | None = None, step: str = "") -> int:
        """Run ``cmd``; with ``cost_log`` (relative to the checkout), append its CPU and wall
        time as ``step`` (:func:`studies.repro.records.append_cost`), and, before it runs,
        the checkout's commit, the versions and the hardware to ``provenance.jsonl`` beside
        it (:mod:`studies.repro.provenance`).

        A SIGTERM or SIGINT that reaches the runner while the command runs (a lane stopped by
        signalling its process group, or Ctrl-C) waits for the command, which got it too and
        stops on its own (``contrastkit pretrain`` after writing a checkpoint); its cost is
        logged, then the runner exits with status 128 + the signal's number.
        """
        self.commands.append(cmd)
        self.log("$ " + shlex.join(cmd))
        if self.dry_run:
            return 0
        argv = _executable(cmd)
        started, wall, cpu = dt.datetime.now(dt.timezone.utc), time.monotonic(), _children_cpu()
        if cost_log is not None:
            append_provenance(layout.REPO / cost_log.parent / PROVENANCE_LOG, step,
                              environment(layout.REPO), started)
        with _deferred_stop() as stop:
            code, last_line = _run_passing_stderr(argv)
        if cost_log is not None:
            append_cost(layout.REPO / cost_log, step, _children_cpu() - cpu,
                        time.monotonic() - wall, code, started,
                        error=last_line if failed_status(code) else None)
        if stop:
            raise SystemExit(128 + stop[0])
        return code


def _run_passing_stderr(argv: list[str]) -> tuple[int, str | None]:
    """Run ``argv`` from the checkout, its stderr passed on line by line; its exit status and
    its last non-blank stderr line (a failed ``contrastkit`` command's one-line error, or a
    traceback's last line)."""
    last = None
    with subprocess.Popen(argv, cwd=layout.REPO, stderr=subprocess.PIPE) as process:
        for raw in process.stderr:
            line = raw.decode(errors="replace")
            sys.stderr.write(line)
            sys.stderr.flush()
            last = line.strip() or last
    return process.returncode, last


def _executable(cmd: list[str]) -> list[str]:
    """``cmd`` with its program resolved beside this Python (a virtual environment's
    ``contrastkit`` script); where no ``contrastkit`` script is installed (a GPU machine that
    has the checkout's ``src`` on ``PYTHONPATH`` only), ``python -m contrastkit.cli``."""
    exe = shutil.which(cmd[0], path=str(Path(sys.executable).parent))
    if exe is None and cmd[0] == "contrastkit" and shutil.which(cmd[0]) is None:
        return [sys.executable, "-m", "contrastkit.cli", *cmd[1:]]
    return [exe or cmd[0], *cmd[1:]]


def _children_cpu() -> float:
    """User + system CPU-seconds of the waited-for child processes (and theirs) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def _deferred_stop() -> Iterator[list[int]]:
    """Note SIGTERM and SIGINT in the yielded list instead of acting on them (main thread
    only; elsewhere the handlers stay as they are)."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum))
                for s in signals}
    try:
        yield caught
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def selected(names: Sequence[str] | None, part: str) -> list[Study]:
    """The studies of ``part`` named in ``--study`` (all of them when none is named)."""
    chosen = [s for s in STUDIES.values() if s.part == part]
    if names:
        unknown = [n for n in names if n not in STUDIES or STUDIES[n].part != part]
        if unknown:
            known = ", ".join(s.name for s in chosen)
            raise SystemExit(f"--study: unknown {part} study {unknown}; choose from {known}")
        chosen = [STUDIES[n] for n in names]
    return chosen


def run_studies(part: str, studies: list[Study], seeds: Sequence[int] | None, run: Runner, *,
                epochs: int | None = None, chunk_seconds: int | None = None,
                device: str = "cpu") -> bool:
    """Pretrain, evaluate and compare every run of ``studies``; True when all finished.

    The recorded runs and comparisons of this part (and ``epochs`` tag) are restored first,
    each run is recorded once finished and evaluated, each comparison once made. A run another
    lane holds (its lock is taken), or a tuned run whose grid has not chosen its setting yet
    (:mod:`studies.repro.tuning`), is left for later: this lane takes the next free run,
    and goes through the runs it left again while a tuned run among them may have become
    choosable; otherwise it waits for the first run it left (for a tuned run: for its grid's
    runs, training those another lane has not), then goes on."""
    tag = run_tag(part, epochs)
    if not run.dry_run:
        restored = restore(tag)
        if restored:
            run.log(f"# restored {len(restored)} recorded runs and comparisons into "
                    f"{layout.RUNS}/{tag} (docs/reproduction/runs)")
    all_done = True
    done_runs: set[tuple[str, int, tuple[str, ...]]] = set()
    trained: set[tuple[str, int]] = set()  # a dry run prints each pretraining once
    made: set[Path] = set()  # the comparisons this call made

    def train(variant: Variant, seed: int, wait: bool) -> bool | None:
        """Train and evaluate one run under its lock; None when another lane holds it and
        ``wait`` is False."""
        key = (variant.stem, seed, variant.evals)
        if key in done_runs:
            return True
        folder = layout.REPO / run_dir(part, variant.stem, seed, epochs)
        with run_lock(folder, run, wait=wait) as held:  # a second lane may share the run
            if not held:
                return None
            if not run.dry_run and restored_without_commit(folder):
                run.log(f"# {run_dir(part, variant.stem, seed, epochs)}: its record names no "
                        "clean commit (issue 54); training it again")
                _clear(folder)
            done = _train_and_eval(part, variant, seed, run, epochs=epochs,
                                   chunk_seconds=chunk_seconds, device=device, trained=trained)
            if not run.dry_run and (done or failure(folder) is not None):
                record(run_dir(part, variant.stem, seed, epochs))
        if done:
            done_runs.add(key)
        return done

    def concrete(variant: Variant) -> Variant | None:
        """The run ``variant`` stands for; None for a tuned one its grid has not chosen."""
        if variant.tuning is None:
            return variant
        chosen = choose(variant.tuning, grid_scores(variant.tuning, part=tag))
        return resolve(variant, chosen) if chosen is not None else None

    pending = [(study, seed, variant) for study in studies
               for seed in (seeds if seeds else study.seeds) for variant in study.variants]
    if not run.dry_run:
        run.log(_left_line(part, pending, epochs, concrete))
    if run.dry_run:  # a dry run evaluates nothing: a grid not evaluated yet chooses nothing
        waiting = [item for item in pending
                   if item[2].tuning is not None and concrete(item[2]) is None]
        for study, seed, variant in waiting:
            run.log(f"# {study.name} seed {seed}: {variant.name} is trained at the setting "
                    f"its grid ({variant.tuning.name}) chooses, once the grid is evaluated")
        pending = [item for item in pending if item not in waiting]
    while pending:
        left = []
        for study, seed, variant in pending:
            v = concrete(variant)
            done = None if v is None else train(v, seed, wait=False)
            if done is None:
                left.append((study, seed, variant))
                continue
            all_done &= done
            _compare(part, study, seed, run, epochs, made)
        if len(left) < len(pending) and any(item[2].tuning is not None for item in left):
            pending = left  # a tuned run's grid may have chosen since: go through them again
            continue
        if not left:
            break
        # none could be taken, or only runs another lane holds are left: wait for the first
        study, seed, variant = left[0]
        if variant.tuning is not None and concrete(variant) is None:
            grid = variant.tuning
            for cell in grid.grid:
                train(cell, grid.seed, wait=True)
            if concrete(variant) is None:
                run.log(f"# {grid.name}: its grid has no choice (a grid run failed); the runs "
                        "tuned on it are not trained")
                all_done = False
                left = [item for item in left if item[2].tuning != grid]
            pending = left
            continue
        v = concrete(variant)
        assert v is not None
        all_done &= bool(train(v, seed, wait=True))
        _compare(part, study, seed, run, epochs, made)
        pending = left[1:]
    if not run.dry_run:
        write_summary(collect(), layout.REPO / SUMMARY)
    return all_done


def _left_line(part: str, pending: Sequence[tuple[Study, int, Variant]], epochs: int | None,
               concrete: Callable[[Variant], Variant | None]) -> str:
    """One line: the study list's runs and how many are left to train or to evaluate; for Part
    A, the plan's training CPU-hours of those to train
    (:func:`studies.repro.plan.planned_train_seconds`; a tuned run its grid has not chosen yet
    at its own config's cost), left out where the plan has no cost for one of them. A run
    listed by several studies counts once; a tuned run reusing its grid's chosen run counts, at
    the grid's seed, as that run; a run whose config cannot be read, or restored from a record
    naming no clean commit (:func:`restored_without_commit`), as one to train."""
    state: dict[tuple[str, int], str] = {}
    to_train: list[str] = []
    for _, seed, variant in pending:
        v = concrete(variant)
        if v is None:
            if variant.tuning is not None and variant.tuning.reuse \
                    and seed == variant.tuning.seed:
                continue  # the grid's chosen run, counted among the grid's cells
            key, kind = (f"{variant.name} (tuned)", seed), "train"
        else:
            out = run_dir(part, v.stem, seed, epochs)
            key = (v.stem, seed)
            try:
                target = epochs or config_epochs(v.config)
            except OSError:  # a config not readable: its pretraining will say so
                target = None
            if target is None or not finished(layout.REPO / out / "pretrain", target) \
                    or restored_without_commit(layout.REPO / out):
                kind = "train"
            elif not all((layout.REPO / eval_dir(out, p) / "results.json").is_file()
                         for p in v.evals):
                kind = "evaluate"
            else:
                kind = "done"
        if key not in state and kind == "train":
            to_train.append(variant.config if v is None else v.config)
        state[key] = kind
    count = {kind: sum(k == kind for k in state.values()) for kind in ("train", "evaluate", "done")}
    cost = ""
    if part == "cpu" and to_train:
        try:
            hours = sum(planned_train_seconds(config, epochs) for config in to_train) / 3600
            cost = (f" (about {hours:.1f} CPU-hours by the plan's per-step costs, "
                    "studies.repro.plan, evaluations aside)")
        except (OSError, KeyError, ValueError):
            pass  # a config the plan has no cost for: the count alone
    return (f"# this study list: {len(state)} runs; {count['train']} to train{cost}, "
            f"{count['evaluate']} to evaluate, {count['done']} done")


def restored_without_commit(folder: Path) -> bool:
    """Whether the run in ``folder`` was restored from a record that names no clean commit
    (:func:`~studies.repro.provenance.names_clean_commit`: the first round's, recorded before
    provenance was): finished, no checkpoint here. Such a run counts in no claim, so a lane
    trains it again, and its new record replaces the old one whole."""
    return ((folder / "pretrain" / FINISHED).is_file()
            and not (folder / "pretrain" / "checkpoints" / "last.ckpt").is_file()
            and not names_clean_commit(read_provenance(folder)))


def _clear(folder: Path) -> None:
    """Remove what ``folder`` holds but the runner's lock."""
    for child in folder.iterdir():
        if child.name == ".lock":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _compare(part: str, study: Study, seed: int, run: Runner, epochs: int | None,
             made: set[Path]) -> None:
    """``contrastkit compare`` of the study's pairs for ``seed`` whose two evaluations exist
    and that are not made yet (``made``: the comparisons this call made, added to; a dry run
    prints each once); each recorded once made. Tuned runs are read as their grid chose (a
    pair with a run not chosen yet waits)."""
    study = resolve_study(study, folder_choices([study], part=run_tag(part, epochs)))
    for a, b, protocol in study.all_pairs():
        va, vb = study.variant(a), study.variant(b)
        if not (is_resolved(va) and is_resolved(vb)):
            continue
        da = eval_dir(run_dir(part, va.stem, seed, epochs), protocol)
        db = eval_dir(run_dir(part, vb.stem, seed, epochs), protocol)
        out = compare_dir(part, va.stem, vb.stem, protocol, seed, epochs)
        ready = run.dry_run or ((layout.REPO / da / "results.json").is_file()
                                and (layout.REPO / db / "results.json").is_file())
        if ready and out not in made and not compared(out, da, db):
            made.add(out)
            code = run(compare_command(da, db, out, seed), out / COST_LOG, "compare")
            if code == 0 and not run.dry_run:
                record(out)


def compare_pairs(part: str, study: Study, seed: int, run: Runner,
                  epochs: int | None = None) -> None:
    """``contrastkit compare`` of ``study``'s pairs for ``seed`` whose two evaluations exist
    and that are not made yet, each recorded once made (a Part B block's run, once recorded
    here, with the runs recorded before it)."""
    _compare(part, study, seed, run, epochs, set())


@contextlib.contextmanager
def run_lock(folder: Path, run: Runner, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on ``folder/.lock`` (``fcntl.flock``) while a run is trained and
    evaluated, and yield True. While another process holds it: with ``wait``, wait for it,
    saying so; without, say so and yield False (nothing held). The kernel releases the lock
    when its holder exits, however it exits. A dry run takes no lock and writes nothing."""
    if run.dry_run:
        yield True
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                run.log(f"# {folder}: another process is running it; taking the next run")
                yield False
                return
            run.log(f"# {folder}: another process is running it; waiting")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _train_and_eval(part: str, variant: Variant, seed: int, run: Runner, *, epochs: int | None,
                    chunk_seconds: int | None, device: str,
                    trained: set[tuple[str, int]]) -> bool:
    """Pretrain one run to its last epoch (in chunks with ``chunk_seconds``), then evaluate;
    ``trained``: the runs already pretrained by this call (added to)."""
    out = run_dir(part, variant.stem, seed, epochs)
    pre = layout.REPO / out / "pretrain"
    ckpt = pre / "checkpoints" / "last.ckpt"

    def chunk() -> list[str] | None:
        if chunk_seconds is None:
            return None
        return chunk_arguments(chunk_seconds, trained_seconds(ckpt))

    if run.dry_run:
        if (variant.stem, seed) not in trained:
            run(pretrain_command(variant, seed, out, resume=ckpt.is_file(), epochs=epochs,
                                 chunk=chunk()))
            trained.add((variant.stem, seed))
        for protocol in variant.evals:
            run(eval_command(variant, protocol, seed, out, device))
        return True
    target_epochs = epochs or config_epochs(variant.config)
    while not finished(pre, target_epochs):
        if pretrain_finished(ckpt, target_epochs):
            mark_finished(pre, target_epochs)
            break
        if not run.spend():
            run.log(f"# {out}: step budget spent; rerun to continue")
            return False
        code = run(pretrain_command(variant, seed, out, resume=ckpt.is_file(), epochs=epochs,
                                    chunk=chunk()), out / COST_LOG, "pretrain")
        if code != 0:
            run.log(f"# {out}: pretraining failed with exit status {code}")
            return False
        if chunk_seconds is None and not pretrain_finished(ckpt, target_epochs):
            run.log(f"# {out}: pretraining ended before epoch {target_epochs}")
            return False
    for protocol in variant.evals:
        if not (layout.REPO / eval_dir(out, protocol) / "results.json").is_file():
            if not ckpt.is_file():
                run.log(f"# {out}: {protocol} needs the checkpoint, which a recorded run does "
                        f"not keep: delete {out} and its record to train the run again")
                return False
            if not run.spend():
                run.log(f"# {out}: step budget spent; rerun to continue")
                return False
            code = run(eval_command(variant, protocol, seed, out, device), out / COST_LOG,
                       protocol)
            if code != 0:
                run.log(f"# {out}: {protocol} failed with exit status {code}")
                return False
    return True
