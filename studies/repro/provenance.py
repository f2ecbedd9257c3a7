"""Where a recorded run came from: the checkout, the library versions and the hardware.

Every command the runner makes for a run or comparison appends one line to the folder's
``provenance.jsonl`` (recorded with the run, like ``cost.jsonl``): the step, the git commit of
the checkout the command ran from and whether its tracked files differed from that commit
(``dirty``; the study's own output, ``docs/reproduction*`` and ``docs/figures``, aside: the
runner writes the records there while it runs), the versions of Python, torch, numpy,
Lightning and contrastkit, the CPU model, the torch threads (``OMP_NUM_THREADS`` as the
command inherits it) and the GPU model when one is visible. :func:`read_provenance` folds a
folder's lines into what the report prints: the commits that trained it, in order.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

PROVENANCE_LOG = "provenance.jsonl"
#: Paths the runner itself writes while it runs (records, report): not "dirty" code.
STUDY_OUTPUT = ("docs/reproduction", "docs/reproduction.md", "docs/reproduction.json",
                "docs/figures")
#: The packages whose versions a record holds (distribution names).
PACKAGES = ("torch", "numpy", "lightning", "contrastkit")


#: The commit (and ``1`` when its tree differed) that a Part B block on the GPU machine runs:
#: the copy of the checkout sent there carries no git history, so the session's planner
#: passes what it read (:mod:`studies.repro.device_block`); set, they replace git's answer.
COMMIT_VARIABLE, DIRTY_VARIABLE = "REPRO_COMMIT", "REPRO_DIRTY"


def git_state(repo: Path) -> dict[str, object]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the checkout ``repo``: ``dirty``
    when a tracked file outside :data:`STUDY_OUTPUT` differs from the commit (untracked files
    do not count). None for both outside a git checkout or without git. The environment's
    :data:`COMMIT_VARIABLE` and :data:`DIRTY_VARIABLE`, when set, are the answer instead."""
    if os.environ.get(COMMIT_VARIABLE):
        return {"commit": os.environ[COMMIT_VARIABLE],
                "dirty": os.environ.get(DIRTY_VARIABLE) == "1"}
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                                  text=True, check=False, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                 *(f":(exclude){p}" for p in STUDY_OUTPUT))
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@cache
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s ``model name``; ``platform.processor()``
    elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_model() -> str | None:
    """The first visible CUDA device's name, or None (no CUDA build, no device)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(0)


def environment(repo: Path) -> dict[str, object]:
    """What a command run from ``repo`` now runs on (see the module docstring)."""
    import torch

    return {
        **git_state(repo),
        "python": platform.python_version(),
        **{package: _version(package) for package in PACKAGES},
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch_threads": torch.get_num_threads(),
        "gpu": gpu_model(),
        "host": platform.node(),
    }


def append_provenance(log: Path, step: str, entry: dict[str, object],
                      started: dt.datetime) -> None:
    """Append ``entry`` (:func:`environment`) for the command ``step`` to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    line = {"step": step, "started": started.isoformat(timespec="seconds"), **entry}
    with open(log, "a") as handle:
        handle.write(json.dumps(line) + "\n")


def read_entries(folder: Path) -> list[dict]:
    """The commands logged in ``folder/provenance.jsonl``, in order; empty without a log (a
    line cut short by a crash is left out)."""
    try:
        lines = (folder / PROVENANCE_LOG).read_text().splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return [e for e in entries if isinstance(e, dict)]


def read_provenance(folder: Path) -> dict[str, object]:
    """``folder/provenance.jsonl`` folded: ``commits`` (in the order first seen, of the
    pretraining commands when there are any, else of every command), ``dirty`` (any of them),
    the last of them's versions and hardware (what trained the run, not what evaluated it),
    and ``evaluated_elsewhere``: ``[step, commit, dirty]`` of each other command run at
    another commit (an evaluation made after a fix); empty without a log (a run recorded
    before provenance was)."""
    entries = read_entries(folder)
    if not entries:
        return {}
    trained = [e for e in entries if e.get("step") == "pretrain"] or entries
    last = trained[-1]
    commits = list(dict.fromkeys(str(e.get("commit")) for e in trained))
    return {"commits": commits,
            "dirty": any(bool(e.get("dirty")) for e in trained),
            "evaluated_elsewhere": [[str(e.get("step")), str(e.get("commit")),
                                     bool(e.get("dirty"))] for e in entries
                                    if str(e.get("commit")) not in commits],
            **{k: last.get(k) for k in ("python", *PACKAGES, "cpu", "omp_num_threads",
                                        "torch_threads", "gpu")}}


def names_clean_commit(provenance: dict) -> bool:
    """Whether a run's folded provenance (:func:`read_provenance`) names the commit that trained
    it, with no tracked file changed from it."""
    commits = provenance.get("commits") or []
    return (bool(commits) and all(c not in ("", "None") for c in commits)
            and provenance.get("dirty") is False)


#: The checkout that trained the second round's runs (issue 38), one for the whole round.
SECOND_ROUND_CHECKOUT = "1955f53"
#: The checkout at which issue 54's round was planned and its runs' definitions fixed.
PLAN_CHECKOUT = "89437e1"
#: The checkout that went on with issue 54's round when the machine holding
#: :data:`PLAN_CHECKOUT` was lost (2026-12-02), until the grids' second extension.
RESUMED_CHECKOUT = "fbb61bb"
#: The checkout that went on from the grids' second extension, which it defined, until their
#: third.
SECOND_EXTENSION_CHECKOUT = "adbea0c"
#: The checkout that trains the rest of issue 54's round: the commit that defined the grids'
#: third extension for both losses (:data:`CHECKOUT_MOVE`).
STUDY_CHECKOUT = "e5942a8"
#: Every checkout that trained issue 54's round, in order.
ROUND_CHECKOUTS = (PLAN_CHECKOUT, RESUMED_CHECKOUT, SECOND_EXTENSION_CHECKOUT, STUDY_CHECKOUT)
#: Why the round's checkout moved, and what that changes.
CHECKOUT_MOVE = (
    f"It was {PLAN_CHECKOUT}, the commit that fixed the round's runs, until 2026-12-02, when "
    f"the machine holding that checkout was lost with two runs under way; then "
    f"{RESUMED_CHECKOUT} (`git diff {PLAN_CHECKOUT} {RESUMED_CHECKOUT}`: no run's definition, "
    "data or training changed; the evaluations changed in their words, in reading DINO's "
    "head and in the form of the projector's record) until the first grid extension's "
    f"choices came out corners, the same day; then {SECOND_EXTENSION_CHECKOUT}, the commit "
    "that defined the grids' second extension (`git diff "
    f"{RESUMED_CHECKOUT} {SECOND_EXTENSION_CHECKOUT}`: those four cells are the one change to "
    "a run's definition; no run's data or training changed: the image readers' hidden-name "
    "rule became one function, reading the same files; the runner trains again by itself a "
    "record that names no commit) until its choices came out corners again; then "
    f"{STUDY_CHECKOUT}, the commit that defined the third extension for both losses (`git diff "
    f"{SECOND_EXTENSION_CHECKOUT} {STUDY_CHECKOUT}`: its six cells are the one change to a "
    "run's definition; the library did not change, the study's code only in how it plans, "
    "names and words the extensions). The records made at the earlier three stay: "
    f"{PLAN_CHECKOUT}'s one, the random init's seed 0 (every number of it equals the first "
    f"round's record of that run), {RESUMED_CHECKOUT}'s, among them the first extension's "
    f"cells and ReSSL's seed 0, and {SECOND_EXTENSION_CHECKOUT}'s, the second extension's "
    "cells and the runs under way when the checkout moved, so a claim's seeds may come from "
    "more than one of these checkouts; the provenance table names each run's.")
#: How to go on with issue 54's round at that checkout, and bring its records here.
CONTINUE_AT_STUDY_CHECKOUT = (
    f"Issue 54's round goes on at one checkout, {STUDY_CHECKOUT} (see Provenance; the second "
    f"round's, {SECOND_ROUND_CHECKOUT}, trained the runs it reuses). {CHECKOUT_MOVE} "
    "`make repro-cpu` on a later commit also goes on with "
    "them, with that commit's code (the provenance table then names both commits). To keep "
    "the one checkout, go on at it and bring its records here:",
    "",
    "```bash",
    f"git worktree add --detach ../contrastkit-study {STUDY_CHECKOUT}   # ../shared beside it",
    "# the runs recorded since that commit, which it then restores instead of training again",
    "# (a record that names no commit, the first round's, it trains again by itself, and",
    "# remakes the comparisons read from it):",
    "cp -r docs/reproduction/runs/. ../contrastkit-study/docs/reproduction/runs/",
    "cd ../contrastkit-study && make lint   # creates its .venv",
    "for lane in 1 2; do OMP_NUM_THREADS=1 nice -n 19 .venv/bin/python -m studies.repro cpu \\",
    "    --study sincere_grid ressl_grid sincere cifar2 baselines > ../study-lane$lane.log 2>&1 &",
    "done",
    "# later, whenever runs have finished (rerun the same loop after any stop: it resumes);",
    "# its records are the newer copies (a run's logs grow as a later study evaluates it);",
    "# a run trained again replaces its record that names no commit whole:",
    "cd - && for run in ../contrastkit-study/docs/reproduction/runs/cpu/*/seed*; do",
    "    old=docs/reproduction/runs/cpu/${run#*/runs/cpu/}",
    "    [ -f $old/provenance.jsonl ] || rm -rf $old; done",
    "cp -r ../contrastkit-study/docs/reproduction/runs/. docs/reproduction/runs/ "
    "&& make repro-report",
    "```",
    "",
)
#: The heads of main when the first round's remaining records (no commit recorded) started.
FIRST_ROUND_HEADS = "068e236 to ce89961"
#: What the first-steps check found about the records and today's code (tests/repro/
#: test_pinned_stream.py holds it): measured 2026-11-27 on an AMD EPYC machine and 2026-11-28 on
#: an Intel Xeon one (SCE, MoCo v2, ReSSL: 2026-11-28, Intel Xeon only).
STREAM_CHECK = (
    "Do the records and today's code train the same runs? The first round's seed-0 run of "
    "`configs/repro/cpu/simclr_t0.1.yaml` started on 2026-11-26 at 14:29 and its recorded "
    "config has the online monitor added by 2f74338 (14:22), so it was trained by a checkout "
    "between 2f74338 and c258b80 (15:13, the commit that recorded it). The first ten steps "
    "of that run with one thread (`contrastkit pretrain` and a callback that stops after ten "
    "steps without shortening the schedule) are bit-identical at 2f74338, at c258b80 and at "
    f"the second round's study checkout, {SECOND_ROUND_CHECKOUT} (step 9: 6.3309, on the AMD "
    "EPYC machine of the round's first sessions): no code change since the records' checkout "
    "altered the training stream. The record itself has 6.5892 at step 9: the same code and "
    "config give it only in another environment. On that machine they give 6.3309 with one thread "
    "and 6.2733 with two (step 0 identical, step 1 5e-7 apart from rounding in the threaded "
    "kernels, the gap growing from there); the first round moved between machines across "
    "sessions and recorded neither its CPU nor its thread count. Between machines the gap "
    "opens sooner: on an Intel Xeon (AVX-512) machine, 2026-11-28, the study checkout and "
    "today's code give the same first three losses as each other, a relative 7e-8, 5e-4 and "
    "3e-2 away from the AMD machine's at steps 0, 1 and 2. So a CPU run repeats bit for bit "
    "only with the same code, torch build, CPU kernels and thread count, which every record "
    "now holds; across environments the runs are statistically, not bitwise, the same. "
    "`tests/repro/test_pinned_stream.py` pins the first three steps of that run on both "
    "machines and compares them exactly on either (a change of the data order, augmentation, "
    "initialisation, loss or optimiser fails it); elsewhere it compares step 0 alone, to a "
    "relative 1e-5 (everything but the optimiser). The first round's SCE, MoCo v2, ReSSL and "
    "random-init records, which study 5 read, hold no commit either (issue 54's round trains "
    f"them again at {', '.join(ROUND_CHECKOUTS[1:])}; until their records arrive, the "
    "list below names them): "
    "each "
    "of their twelve runs (seeds 0, 1, 2) trains the same first three steps (the random "
    "init: its one step), bit for bit (Intel Xeon, one thread, 2026-11-28), at the head of "
    f"main when it started ({FIRST_ROUND_HEADS}, 2026-11-26 14:29 to 2026-11-27 05:29; a run "
    "resumed later on newer code is checked at its start only) and at 72c293e, after this "
    "round; the test pins seed 0 of SCE, MoCo v2 and ReSSL on that machine. The second "
    "round's runs are all trained "
    f"by that one study checkout, {SECOND_ROUND_CHECKOUT}, on the machines the table above "
    "names, "
    "even where this page is generated at a later commit; the test runs in `make test` "
    "wherever `../shared/data` lies beside the checkout (as in CI), so on either pinned "
    "machine the code of a commit whose tests pass trains the same first steps as the study "
    "checkout.")


def provenance_lines(summary: dict, uncommitted: list[str], part: str = "cpu") -> list[str]:
    """The report's provenance section: which checkout (and environment) trained which runs
    of ``part``, the counted runs whose record names no clean commit (``uncommitted``, found
    by the report: :func:`studies.repro.headline.uncommitted_counted_runs`), then
    :data:`STREAM_CHECK`."""
    groups: dict[tuple, list[str]] = {}
    for run in summary.get("runs", {}).values():
        if run.get("tag") != part or not run.get("pretrain_finished"):
            continue
        p = run.get("provenance") or {}
        key = (tuple(p.get("commits") or ()), p.get("dirty"), p.get("torch"),
               p.get("lightning"), p.get("numpy"), p.get("cpu"), p.get("omp_num_threads"),
               p.get("gpu"))
        groups.setdefault(key, []).append(f"{run['stem']} s{run['seed']}")
    lines = ["## Provenance", "",
             "Which checkout trained each recorded run (every command the runner makes appends "
             "its commit, whether tracked code differed from it, the versions and the "
             "hardware to the run's `provenance.jsonl`, recorded with the run):", "",
             "| commit(s) | code changed | torch / Lightning / numpy | CPU, threads | runs |",
             "|---|---|---|---|---|"]
    for key, runs in sorted(groups.items(), key=lambda item: (not item[0][0], item[0])):
        commits, dirty, torch_v, lightning_v, numpy_v, cpu, threads, gpu = key
        if not commits:
            lines.append(f"| not recorded (first round, 2026-11-26 to 27: main's heads "
                         f"{FIRST_ROUND_HEADS}, below) | – | – | – | "
                         f"{len(runs)}: {', '.join(sorted(runs))} |")
            continue
        hardware = f"{cpu}, OMP_NUM_THREADS={threads}" + (f", GPU {gpu}" if gpu else "")
        lines.append(f"| {', '.join(c[:10] for c in commits)} | "
                     f"{'yes' if dirty else 'no'} | {torch_v} / {lightning_v} / {numpy_v} | "
                     f"{hardware} | {len(runs)}: {', '.join(sorted(runs))} |")
    elsewhere = sorted(f"{run['stem']} s{run['seed']}: {step} at {commit[:10]}"
                       + (" (code changed)" if dirty else "")
                       for run in summary.get("runs", {}).values()
                       if run.get("tag") == part and run.get("pretrain_finished")
                       for step, commit, dirty in
                       (run.get("provenance") or {}).get("evaluated_elsewhere") or [])
    if elsewhere:
        lines += ["", "Commands run at another commit than the run's training (the table "
                  "names the training's; each is in the run's `provenance.jsonl`): "
                  + "; ".join(elsewhere) + "."]
    check = ("Every counted run (read by a counted claim, or the random init of its study) "
             "names a clean commit." if not uncommitted else
             f"Counted runs (read by a counted claim, or the random init of its study) whose "
             f"record names no clean commit, {len(uncommitted)}: {', '.join(uncommitted)}. "
             "A claim of issue 54's round stays *pending* until its runs' records name one.")
    return [*lines, "", check, "", STREAM_CHECK, ""]
