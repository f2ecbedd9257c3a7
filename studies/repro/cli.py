"""The ``python -m studies.repro`` command line: ``cpu | gpu | block | report | list``.

``cpu`` runs the studies of Part A (:mod:`studies.repro.runner`); ``gpu`` plans Part B's next
block of GPU time and prints its device call (:mod:`studies.repro.blocks`), or, with
``--record``, records a finished block's files (:mod:`studies.repro.block_records`); ``block``
is that call's command on the GPU machine (:mod:`studies.repro.device_block`); ``report``
restores the recorded runs the working copy lacks
(:mod:`studies.repro.records`), collects the runs and writes the report
(:mod:`studies.repro.report`); ``list`` prints the studies. Paths of
``report --output/--figures`` are relative to the checkout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import studies.repro
from contrastkit.errors import run_command
from studies.repro import layout
from studies.repro.block_records import ingest, read_summary
from studies.repro.blocks import (
    CARRIED_ARCHIVE,
    LIMIT_SECONDS,
    ORDER,
    checkout_state,
    next_block,
    plan_lines,
    variant_of,
)
from studies.repro.collection import collect, write_summary
from studies.repro.device_block import run_block
from studies.repro.layout import DOC, DOC_SUMMARY, FIGURES, RECORDS, RUNS, SUMMARY
from studies.repro.records import restore
from studies.repro.report import write_report
from studies.repro.runner import Runner, compare_pairs, run_studies, selected
from studies.repro.studies import STUDIES

PROG = "python -m studies.repro"


def parser() -> argparse.ArgumentParser:
    """The ``python -m studies.repro`` argument parser."""
    p = argparse.ArgumentParser(prog=PROG,
                                description=studies.repro.__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("cpu", help="Part A: CPU studies")
    s.add_argument("--study", nargs="+", default=None, help="studies to run (default: all)")
    s.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="seeds (default: each study's own)")
    s.add_argument("--epochs", type=int, default=None,
                   help="override the configs' epochs (runs go to runs/repro/cpu-e<N>)")
    s.add_argument("--dry-run", action="store_true", help="print the commands only")
    s.add_argument("--max-steps", type=int, default=None,
                   help="stop after this many pretraining runs/chunks and evaluations")
    g = sub.add_parser("gpu", help="Part B: plan the next block of GPU time, or record one")
    g.add_argument("--record", metavar="FOLDER", default=None,
                   help="record a finished block's files (the device reply's files_at) in "
                   "docs/reproduction/runs")
    g.add_argument("--json", action="store_true",
                   help="print only the device call (the run tool's arguments) as JSON")
    g.add_argument("--force", action="store_true",
                   help="print the device call even when the estimate says it does not fit")
    b = sub.add_parser("block", help="Part B on the GPU machine: train, evaluate and pack one "
                       "run (the command `gpu` prints); after `--`: more pretrain overrides")
    b.add_argument("run", help="the run: " + ", ".join(s.run for s in ORDER))
    b.add_argument("--out", required=True, help="folder of the records (the tool's $OUT)")
    b.add_argument("--archive", default=CARRIED_ARCHIVE, help="the CIFAR-10 JPEG archive")
    b.add_argument("--commit", required=True, help="the commit of the session's checkout")
    b.add_argument("--dirty", action="store_true", help="that checkout had uncommitted changes")
    b.add_argument("--limit-s", type=float, default=LIMIT_SECONDS,
                   help="seconds after which no step starts and the records are written")
    b.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: the same block on the CPU in full precision (a dry run)")
    b.add_argument("--epochs", type=int, default=None,
                   help="shorten pretraining (a pipeline check: runs/repro/gpu-e<N>)")
    b.add_argument("--probe-epochs", type=int, default=None,
                   help="shorten the linear probes (a dry run's size)")
    r = sub.add_parser("report", help="collect the results and write docs/reproduction.md")
    r.add_argument("--summary", default=None,
                   help="render from this summary.json instead of scanning runs/repro")
    r.add_argument("--output", default=str(DOC), help="Markdown file to write")
    r.add_argument("--figures", default=str(FIGURES), help="folder of the PNG figures")
    sub.add_parser("list", help="list the studies, their runs and default seeds")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m studies.repro``; an expected failure is one line and exit status 2.
    ``block``'s arguments after ``--`` are ``contrastkit pretrain`` overrides."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if argv[:1] == ["block"] and "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    args = parser().parse_args(argv)
    args.pretrain_args = extra
    return run_command(PROG, lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    if args.command == "list":
        for study in STUDIES.values():
            print(f"{study.name} ({study.part}, seeds {list(study.seeds)}): {study.title}")
            for v in study.variants:
                print(f"  {v.name}: {v.config} -> {', '.join(v.evals)}")
        return 0
    repo = layout.require_checkout()
    if args.command == "report":
        if args.summary:
            summary = _read_summary(Path(args.summary))
        else:
            restored = restore()
            if restored:
                print(f"restored {len(restored)} recorded runs and comparisons into {RUNS}")
            summary = collect()
            write_summary(summary, repo / SUMMARY)
        if args.output == str(DOC):
            write_summary(summary, repo / DOC_SUMMARY)
        doc = write_report(summary, repo / args.output, repo / args.figures)
        print(f"wrote {doc}")
        return 0
    if args.command == "gpu":
        return _gpu(args)
    if args.command == "block":
        if not args.out.strip():
            raise ValueError("--out is empty: the device tool sets $OUT to the folder whose "
                             "files come back")
        status = run_block(args.run, Path(args.out), archive=args.archive, commit=args.commit,
                           dirty=args.dirty, limit_s=args.limit_s, device=args.device,
                           epochs=args.epochs, probe_epochs=args.probe_epochs,
                           pretrain_args=args.pretrain_args)
        print(f"block status: {status}")
        return 0 if status in ("done", "continue") else 1
    runner = Runner(dry_run=args.dry_run, max_steps=args.max_steps)
    done = run_studies("cpu", selected(args.study, "cpu"), args.seeds, runner,
                       epochs=args.epochs)
    return 0 if done or args.dry_run else 1


def _gpu(args: argparse.Namespace) -> int:
    """``gpu``: record a block's files, or print the plan and the next block's device call
    (exit status 1 when that block cannot fit one block of GPU time or the upload limit)."""
    repo = layout.REPO
    if args.record:
        stems = {variant_of(step).stem for step in ORDER}
        folder = ingest(Path(args.record), stems)
        summary = read_summary(Path(args.record))
        seed = int(summary["seed"])
        runner = Runner()
        epochs = str(summary["tag"]).partition("-e")[2]
        for study in selected(None, "gpu"):
            compare_pairs("gpu", study, seed, runner, epochs=int(epochs) if epochs else None)
        print(f"recorded {folder} in {RECORDS}; now `{PROG} report` and commit docs/reproduction*")
        return 0
    summary = _read_summary(repo / DOC_SUMMARY) if (repo / DOC_SUMMARY).is_file() else {}
    commit, dirty = checkout_state(repo)
    lines, call = plan_lines(summary, commit, dirty, force=args.force)
    if args.json:
        if call is None:
            raise ValueError("no device call: " + lines[-1])
        print(json.dumps(call))
        return 0
    print("\n".join(lines))
    return 0 if call is not None or next_block(summary) is None else 1


def _read_summary(path: Path) -> dict:
    """The summary JSON given as ``--summary``, with errors that name the option and file."""
    if not path.is_file():
        raise FileNotFoundError(f"--summary {path}: no such file")
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"--summary {path} is not JSON ({err})") from err
