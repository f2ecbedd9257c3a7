"""The ``python -m studies.repro`` command line: ``cpu | gpu | report | list``.

``cpu`` and ``gpu`` run the studies of Part A and Part B (:mod:`studies.repro.runner`);
``report`` restores the recorded runs the working copy lacks
(:mod:`studies.repro.records`), collects the runs and writes the report
(:mod:`studies.repro.report`); ``list`` prints the studies. Paths of
``report --output/--figures`` are relative to the checkout.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import studies.repro
from contrastkit.errors import run_command
from studies.repro import layout
from studies.repro.collection import collect, write_summary
from studies.repro.commands import parse_duration
from studies.repro.layout import DOC, DOC_SUMMARY, FIGURES, RUNS, SUMMARY
from studies.repro.records import restore
from studies.repro.report import write_report
from studies.repro.runner import Runner, run_studies, selected
from studies.repro.studies import STUDIES

PROG = "python -m studies.repro"


def parser() -> argparse.ArgumentParser:
    """The ``python -m studies.repro`` argument parser."""
    p = argparse.ArgumentParser(prog=PROG,
                                description=studies.repro.__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_text in (("cpu", "Part A: CPU studies"), ("gpu", "Part B: GPU runs")):
        s = sub.add_parser(name, help=help_text)
        s.add_argument("--study", nargs="+", default=None, help="studies to run (default: all)")
        s.add_argument("--seeds", type=int, nargs="+", default=None,
                       help="seeds (default: each study's own)")
        s.add_argument("--epochs", type=int, default=None,
                       help="override the configs' epochs (runs go to runs/repro/<part>-e<N>)")
        s.add_argument("--dry-run", action="store_true", help="print the commands only")
        if name == "gpu":
            s.add_argument("--chunk-time", default="00:00:08:30",
                           help="training time per pretraining chunk (DD:HH:MM:SS); a chunk "
                           "stops at the first epoch end after it")
            s.add_argument("--device", default="cuda", help="device of the evaluations")
        s.add_argument("--max-steps", type=int, default=None,
                       help="stop after this many pretraining runs/chunks and evaluations")
    r = sub.add_parser("report", help="collect the results and write docs/reproduction.md")
    r.add_argument("--summary", default=None,
                   help="render from this summary.json instead of scanning runs/repro")
    r.add_argument("--output", default=str(DOC), help="Markdown file to write")
    r.add_argument("--figures", default=str(FIGURES), help="folder of the PNG figures")
    sub.add_parser("list", help="list the studies, their runs and default seeds")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m studies.repro``; an expected failure is one line and exit status 2."""
    args = parser().parse_args(argv)
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
    runner = Runner(dry_run=args.dry_run, max_steps=args.max_steps)
    studies = selected(args.study, args.command)
    if args.command == "cpu":
        done = run_studies("cpu", studies, args.seeds, runner, epochs=args.epochs)
    else:
        done = run_studies("gpu", studies, args.seeds, runner, epochs=args.epochs,
                           chunk_seconds=parse_duration(args.chunk_time), device=args.device)
    return 0 if done or args.dry_run else 1


def _read_summary(path: Path) -> dict:
    """The summary JSON given as ``--summary``, with errors that name the option and file."""
    if not path.is_file():
        raise FileNotFoundError(f"--summary {path}: no such file")
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"--summary {path} is not JSON ({err})") from err
