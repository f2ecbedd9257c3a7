"""``contrastkit compare RUN_A RUN_B``: paired bootstrap interval of the accuracy difference of
two ``contrastkit eval`` folders on the same test set (Feeney & Hughes 2023, appendix M), and
their metrics side by side.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from contrastkit.cli.common import DefaultsHelpFormatter, guard
from contrastkit.cli.parsing import CommandParser
from contrastkit.eval import bootstrap_accuracy_difference, report, significance_verdict
from contrastkit.eval.results import header


# --- options ------------------------------------------------------------------------------------
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



# --- command ------------------------------------------------------------------------------------
def compare_command(argv: Sequence[str]) -> int:
    """``contrastkit compare RUN_A RUN_B``; returns the exit status."""
    args = compare_parser().parse_args(list(argv))
    return guard("contrastkit compare", lambda: _compare(args, argv))


def _numeric(flat: dict) -> dict[str, float]:
    return {k: v for k, v in flat.items() if isinstance(v, (int, float))
            and not isinstance(v, bool)}


def _compare(args: argparse.Namespace, argv: Sequence[str]) -> int:
    res_a, pred_a = report.load_run(args.run_a)
    res_b, pred_b = report.load_run(args.run_b)
    labels = pred_a["labels"]
    if pred_a["labels"].shape != pred_b["labels"].shape:
        raise ValueError(f"test labels differ: {args.run_a} has {pred_a['labels'].shape[0]} test "
                         f"samples, {args.run_b} has {pred_b['labels'].shape[0]}")
    mismatched = int((pred_a["labels"] != pred_b["labels"]).sum())
    if mismatched:
        raise ValueError(f"test labels differ between {args.run_a} and {args.run_b} at "
                         f"{mismatched} of {labels.shape[0]} samples: not the same test set")
    diff, low, high = bootstrap_accuracy_difference(
        pred_a["pred"], pred_b["pred"], labels, n_resamples=args.resamples,
        confidence=args.confidence, seed=args.seed)
    verdict = significance_verdict(low, high)
    flat_a = _numeric(report.flatten_metrics(res_a.get("metrics", {})))
    flat_b = _numeric(report.flatten_metrics(res_b.get("metrics", {})))
    keys = [k for k in flat_a if k in flat_b] + [k for k in flat_a if k not in flat_b] + \
        [k for k in flat_b if k not in flat_a]
    side = {k: [flat_a.get(k), flat_b.get(k)] for k in keys}
    summary = {
        **header("compare", argv),
        "a": {"folder": str(args.run_a), "protocol": res_a.get("protocol"),
              "checkpoint": res_a.get("checkpoint", {}).get("sha256")},
        "b": {"folder": str(args.run_b), "protocol": res_b.get("protocol"),
              "checkpoint": res_b.get("checkpoint", {}).get("sha256")},
        "num_test": int(labels.shape[0]),
        "accuracy_a": float(np.mean(pred_a["pred"] == labels)),
        "accuracy_b": float(np.mean(pred_b["pred"] == labels)),
        "difference": diff, "ci_low": low, "ci_high": high, "confidence": args.confidence,
        "n_resamples": args.resamples, "verdict": verdict, "metrics": side,
    }
    text = _compare_markdown(summary)
    if args.output:
        out = Path(args.output)
        report.write_json(out / "comparison.json", summary)
        report.write_text(out / "comparison.md", text)
    print(text)
    return 0


def _compare_markdown(c: dict) -> str:
    a, b = c["a"], c["b"]
    rows = [["folder", a["folder"], b["folder"]], ["protocol", a["protocol"], b["protocol"]],
            ["checkpoint sha256", (a["checkpoint"] or "-")[:16], (b["checkpoint"] or "-")[:16]],
            ["accuracy of predictions", c["accuracy_a"], c["accuracy_b"]]]
    rows += [[k, *v] for k, v in c["metrics"].items()]
    pct = 100.0
    line = (f"A - B accuracy: {pct * c['difference']:+.2f} points, "
            f"{100 * c['confidence']:g}% bootstrap CI [{pct * c['ci_low']:+.2f}, "
            f"{pct * c['ci_high']:+.2f}] over {c['num_test']} test samples "
            f"({c['n_resamples']} resamples): {c['verdict']}")
    return ("# contrastkit compare\n\n" + report.markdown_table(["", "A", "B"], rows)
            + f"\n{line}\n")

