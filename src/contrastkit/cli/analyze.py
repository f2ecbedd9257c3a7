"""``contrastkit analyze``: parse the options and run :func:`contrastkit.eval.analyze`
(embedding diagnostics and figures of a frozen checkpoint)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import fields

from contrastkit.cli.common import DefaultsHelpFormatter, common_parser, eval_request, guard
from contrastkit.cli.parsing import CommandParser
from contrastkit.eval.analyze import AnalyzeOptions, analyze


def analyze_parser() -> argparse.ArgumentParser:
    """Parser of ``contrastkit analyze ...``."""
    parser = CommandParser(
        prog="contrastkit analyze", parents=[common_parser()],
        formatter_class=DefaultsHelpFormatter,
        description="Embedding diagnostics and figures of a frozen backbone beside its random "
        "initialisation, and the verdict on whether pretraining helped.")
    parser.add_argument("--views", nargs="+", default=None, metavar="PRESET",
                        help="augmentation preset(s) of the two views (default: the "
                        "pretraining run's, else simclr); e.g. 'simclr' or 'strong weak'")
    parser.add_argument("--paper-references", action="store_true",
                        help="also the papers' values beside ours and the paper figures: "
                        "hardness weights, temperature functions (both independent of the "
                        "checkpoint), uniformity and alignment against DySTreSS Table 13")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.5],
                        help="temperatures of the hardness-weight and temperature figures "
                        "(other values imply --paper-references)")
    parser.add_argument("--dystress", type=float, nargs="+", default=None,
                        metavar="V", help="DySTreSS temperature T_MIN T_MAX [SHIFT SCALE] drawn "
                        "beside them (implies --paper-references; default: none)")
    parser.add_argument("--embedding", choices=("none", "tsne", "umap"), default="none",
                        help="2-D map of the test embeddings (and of random init's)")
    parser.add_argument("--embedding-samples", type=int, default=2000,
                        help="test samples in the 2-D map")
    parser.add_argument("--max-samples", type=int, default=10000,
                        help="test samples used (a seeded random subset when larger)")
    parser.add_argument("--neighbors", type=int, default=10, help="negatives in local separation")
    parser.add_argument("--loss-value", type=float, default=None,
                        help="final SINCERE loss (nats) for the KL bound (needs --num-noise; "
                        "default: none, no bound)")
    parser.add_argument("--num-noise", type=int, default=None,
                        help="|N| of SINCERE Thm. 11 (default: none)")
    return parser


def analyze_command(argv: Sequence[str]) -> int:
    """``contrastkit analyze ...``; returns the exit status."""
    args = analyze_parser().parse_args(list(argv))
    options = AnalyzeOptions(**{f.name: getattr(args, f.name) for f in fields(AnalyzeOptions)})

    def body() -> int:
        print(analyze(eval_request(args), options, argv).markdown)
        return 0

    return guard("contrastkit analyze", body, args.threads)
