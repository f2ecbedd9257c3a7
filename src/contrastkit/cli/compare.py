"""``contrastkit compare RUN_A RUN_B``: parse the options and run
:func:`contrastkit.eval.compare.compare_evaluations` (paired bootstrap interval of the accuracy
difference of two ``contrastkit eval`` folders on the same test set, their metrics side by side
and what the difference compares).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from contrastkit.cli.common import DefaultsHelpFormatter, guard
from contrastkit.cli.parsing import CommandParser
from contrastkit.eval.compare import compare_evaluations


def compare_parser() -> argparse.ArgumentParser:
    """Parser of ``contrastkit compare RUN_A RUN_B``."""
    parser = CommandParser(
        prog="contrastkit compare", formatter_class=DefaultsHelpFormatter,
        description="Compare two `contrastkit eval` folders with a paired bootstrap interval.")
    parser.add_argument("run_a", help="eval output folder of model A")
    parser.add_argument("run_b", help="eval output folder of model B")
    parser.add_argument("--output", default=None,
                        help="folder for comparison.json/.md (default: print only)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--confidence", type=float, default=0.95,
                        help="two-sided confidence level of the interval")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    return parser


def compare_command(argv: Sequence[str]) -> int:
    """``contrastkit compare RUN_A RUN_B``; returns the exit status."""
    args = compare_parser().parse_args(list(argv))

    def body() -> int:
        _, text = compare_evaluations(args.run_a, args.run_b, output=args.output,
                                      resamples=args.resamples, confidence=args.confidence,
                                      seed=args.seed, argv=argv)
        print(text)
        return 0

    return guard("contrastkit compare", body)
