"""The subprocess runner of the reproduction study: every run, resumable, in report order.

:func:`run_studies` makes, for every study, seed and run, the ``contrastkit pretrain`` call(s)
until the checkpoint's loop state says the last epoch finished (a finished run is skipped; with
``chunk_seconds`` it trains in chunks resumed with ``--resume last``), then the run's
evaluations (each skipped when its ``results.json`` exists), then ``contrastkit compare`` for
the study's pairs, and collects everything into ``runs/repro/summary.json``. A run shared by
several studies (the random-initialisation baseline, the SimCLR runs) is trained once and
evaluated with every protocol any of them needs. Two processes ("lanes", e.g. two
``contrastkit repro cpu --study ...`` calls with one thread each) may share runs: each run is
trained and evaluated under an exclusive lock on ``<run>/.lock`` (:func:`run_lock`), so the
second lane waits for the first and then finds the run finished. A
:class:`Runner` executes (or, dry, only prints) each command from the checkout, with an
optional budget of steps (pretraining chunks and evaluations) so that one call fits a short
window.
"""

from __future__ import annotations

import contextlib
import fcntl
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from contrastkit.repro import layout
from contrastkit.repro.collection import collect, config_epochs, pretrain_finished, write_summary
from contrastkit.repro.commands import (
    chunk_arguments,
    compare_command,
    eval_command,
    pretrain_command,
    trained_seconds,
)
from contrastkit.repro.layout import SUMMARY, compare_dir, eval_dir, run_dir
from contrastkit.repro.studies import STUDIES, Study, Variant


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

    def __call__(self, cmd: list[str]) -> int:
        self.commands.append(cmd)
        self.log("$ " + shlex.join(cmd))
        if self.dry_run:
            return 0
        exe = shutil.which(cmd[0], path=str(Path(sys.executable).parent)) or cmd[0]
        return subprocess.run([exe, *cmd[1:]], cwd=layout.REPO, check=False).returncode


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
    """Pretrain, evaluate and compare every run of ``studies``; True when all finished."""
    all_done = True
    done_runs: set[tuple[str, int, tuple[str, ...]]] = set()
    trained: set[tuple[str, int]] = set()  # a dry run prints each pretraining once
    for study in studies:
        for seed in (seeds if seeds else study.seeds):
            for variant in study.variants:
                key = (variant.stem, seed, variant.evals)
                if key in done_runs:
                    continue
                folder = layout.REPO / run_dir(part, variant.stem, seed, epochs)
                with run_lock(folder, run):
                    finished = _train_and_eval(part, variant, seed, run, epochs=epochs,
                                               chunk_seconds=chunk_seconds, device=device,
                                               trained=trained)
                all_done &= finished
                if finished:
                    done_runs.add(key)
            for a, b, protocol in study.all_pairs():
                va, vb = study.variant(a), study.variant(b)
                da = eval_dir(run_dir(part, va.stem, seed, epochs), protocol)
                db = eval_dir(run_dir(part, vb.stem, seed, epochs), protocol)
                out = compare_dir(part, va.stem, vb.stem, protocol, seed, epochs)
                ready = run.dry_run or ((layout.REPO / da / "results.json").is_file()
                                        and (layout.REPO / db / "results.json").is_file())
                if ready and not (layout.REPO / out / "comparison.json").is_file():
                    run(compare_command(da, db, out, seed))
    if not run.dry_run:
        write_summary(collect(), layout.REPO / SUMMARY)
    return all_done


@contextlib.contextmanager
def run_lock(folder: Path, run: Runner) -> Iterator[None]:
    """Hold an exclusive lock on ``folder/.lock`` (``fcntl.flock``) while a run is trained and
    evaluated; wait, saying so, while another process holds it. The kernel releases the lock
    when its holder exits, however it exits. A dry run takes no lock and writes nothing."""
    if run.dry_run:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            run.log(f"# {folder}: another process is running it; waiting")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _train_and_eval(part: str, variant: Variant, seed: int, run: Runner, *, epochs: int | None,
                    chunk_seconds: int | None, device: str,
                    trained: set[tuple[str, int]]) -> bool:
    """Pretrain one run to its last epoch (in chunks with ``chunk_seconds``), then evaluate;
    ``trained``: the runs already pretrained by this call (added to)."""
    out = run_dir(part, variant.stem, seed, epochs)
    ckpt = layout.REPO / out / "pretrain" / "checkpoints" / "last.ckpt"

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
    while not pretrain_finished(ckpt, target_epochs):
        if not run.spend():
            run.log(f"# {out}: step budget spent; rerun to continue")
            return False
        code = run(pretrain_command(variant, seed, out, resume=ckpt.is_file(), epochs=epochs,
                                    chunk=chunk()))
        if code != 0:
            run.log(f"# {out}: pretraining failed with exit status {code}")
            return False
        if chunk_seconds is None and not pretrain_finished(ckpt, target_epochs):
            run.log(f"# {out}: pretraining ended before epoch {target_epochs}")
            return False
    for protocol in variant.evals:
        if not (layout.REPO / eval_dir(out, protocol) / "results.json").is_file():
            if not run.spend():
                run.log(f"# {out}: step budget spent; rerun to continue")
                return False
            code = run(eval_command(variant, protocol, seed, out, device))
            if code != 0:
                run.log(f"# {out}: {protocol} failed with exit status {code}")
                return False
    return True
