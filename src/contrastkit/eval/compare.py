"""Two evaluations of the same test set compared (:func:`compare_evaluations`, the function
under ``contrastkit compare RUN_A RUN_B``): the paired bootstrap interval of their accuracy
difference (Feeney & Hughes 2023, appendix M), their metrics side by side, and a verdict that
says what the difference compares (two models under one protocol, or two protocols, which
answer different questions, :data:`~contrastkit.eval.verdict.QUESTIONS`) and, when both folders
carry ``--baselines`` evidence of the same checkpoint, whether pretraining helped over both
(:func:`~contrastkit.eval.verdict.weigh`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from contrastkit.eval import report
from contrastkit.eval.bootstrap import bootstrap_accuracy_difference, significance_verdict
from contrastkit.eval.results import header
from contrastkit.eval.verdict import LABELS, QUESTIONS, Verdict, evidence_from_record, weigh

COMPARISON_JSON, COMPARISON_MD = "comparison.json", "comparison.md"


def _numeric(flat: dict) -> dict[str, float]:
    return {k: v for k, v in flat.items() if isinstance(v, (int, float))
            and not isinstance(v, bool)}


def _protocol(results: dict) -> str:
    return str(results.get("protocol") or "?")


def what_it_compares(summary: dict) -> str:
    """One sentence: which question each side answers and what their difference compares."""
    a, b = summary["a"], summary["b"]
    pa, pb = a["protocol"], b["protocol"]
    same_model = a["checkpoint"] is not None and a["checkpoint"] == b["checkpoint"]
    result = {"significant": ("A is significantly better" if summary["difference"] > 0 else
                              "B is significantly better"),
              "not significant": "no significant difference"}[summary["verdict"]]
    if pa == pb:
        question = QUESTIONS.get(pa)
        asked = f" ({LABELS[pa]}: {question})" if question else f" ({pa})"
        subject = "the same model twice" if same_model else "two models"
        return f"Both folders answer the same question{asked}: {subject}, {result}."
    questions = "; ".join(f"{side} ({LABELS[p]}): {QUESTIONS[p]}"
                          for side, p in (("A", pa), ("B", pb)) if p in QUESTIONS)
    subject = "the same checkpoint" if same_model else "different checkpoints"
    caveat = ("so the difference is between the protocols' readings of its features, not "
              "between features" if same_model else
              "so the difference mixes the protocols and the features")
    return (f"A and B are different protocols on {subject}, {caveat} ({result}). They answer "
            f"different questions: {questions}")


def pooled_verdict(res_a: dict, res_b: dict) -> Verdict | None:
    """The verdict over both folders' ``--baselines`` evidence when they evaluated the same
    checkpoint (each folder's own protocol from itself, the others from either); None
    otherwise."""
    records = [r.get("verdict") for r in (res_a, res_b)]
    same = res_a.get("checkpoint", {}).get("sha256") == res_b.get("checkpoint", {}).get("sha256")
    if not same or not all(records):
        return None
    evidence: dict[str, dict] = {}
    for record in records:
        for entry in record["evidence"]:  # type: ignore[index]
            evidence.setdefault(entry["protocol"], entry)
    for results, record in zip((res_a, res_b), records, strict=True):
        for entry in record["evidence"]:  # type: ignore[index]
            if entry["protocol"] == _protocol(results):  # a folder's own protocol, as it ran
                evidence[entry["protocol"]] = entry
    order = [p for p in QUESTIONS if p in evidence]
    return weigh([evidence_from_record(evidence[p]) for p in order])


def compare_evaluations(run_a: str | Path, run_b: str | Path, *,
                        output: str | Path | None = None, resamples: int = 1000,
                        confidence: float = 0.95, seed: int = 0,
                        argv: Sequence[str] | None = None) -> tuple[dict, str]:
    """Compare two ``contrastkit eval`` folders on their shared test set.

    Returns:
        ``(summary, markdown)``: what ``comparison.json`` / ``comparison.md`` hold (written to
        ``output`` when given).

    Raises:
        FileNotFoundError, ValueError: a missing folder or file, or different test sets.
    """
    res_a, pred_a = report.load_run(run_a)
    res_b, pred_b = report.load_run(run_b)
    labels = pred_a["labels"]
    if pred_a["labels"].shape != pred_b["labels"].shape:
        raise ValueError(f"test labels differ: {run_a} has {pred_a['labels'].shape[0]} test "
                         f"samples, {run_b} has {pred_b['labels'].shape[0]}")
    mismatched = int((pred_a["labels"] != pred_b["labels"]).sum())
    if mismatched:
        raise ValueError(f"test labels differ between {run_a} and {run_b} at "
                         f"{mismatched} of {labels.shape[0]} samples: not the same test set")
    diff, low, high = bootstrap_accuracy_difference(
        pred_a["pred"], pred_b["pred"], labels, n_resamples=resamples, confidence=confidence,
        seed=seed)
    flat_a = _numeric(report.flatten_metrics(res_a.get("metrics", {})))
    flat_b = _numeric(report.flatten_metrics(res_b.get("metrics", {})))
    keys = [k for k in flat_a if k in flat_b] + [k for k in flat_a if k not in flat_b] + \
        [k for k in flat_b if k not in flat_a]
    summary = {
        **header("compare", argv),
        "a": {"folder": str(run_a), "protocol": res_a.get("protocol"),
              "checkpoint": res_a.get("checkpoint", {}).get("sha256")},
        "b": {"folder": str(run_b), "protocol": res_b.get("protocol"),
              "checkpoint": res_b.get("checkpoint", {}).get("sha256")},
        "num_test": int(labels.shape[0]),
        "accuracy_a": float(np.mean(pred_a["pred"] == labels)),
        "accuracy_b": float(np.mean(pred_b["pred"] == labels)),
        "difference": diff, "ci_low": low, "ci_high": high, "confidence": confidence,
        "n_resamples": resamples, "verdict": significance_verdict(low, high),
        "metrics": {k: [flat_a.get(k), flat_b.get(k)] for k in keys},
    }
    summary["reading"] = what_it_compares(summary)
    pooled = pooled_verdict(res_a, res_b)
    if pooled is not None:
        summary["pretraining_verdict"] = pooled.record()
    text = compare_markdown(summary, pooled)
    if output:
        out = Path(output)
        report.write_json(out / COMPARISON_JSON, summary)
        report.write_text(out / COMPARISON_MD, text)
    return summary, text


def compare_markdown(c: dict, pooled: Verdict | None = None) -> str:
    """The table of both runs, the A - B line with its interval and verdict, what the
    difference compares, and the pooled pretraining verdict when there is one."""
    a, b = c["a"], c["b"]
    rows = [["folder", a["folder"], b["folder"]], ["protocol", a["protocol"], b["protocol"]],
            ["checkpoint sha256", (a["checkpoint"] or "-")[:16], (b["checkpoint"] or "-")[:16]],
            ["accuracy of predictions", c["accuracy_a"], c["accuracy_b"]]]
    rows += [[k, *v] for k, v in c["metrics"].items()]
    diff, low, high = (report.format_signed(100 * c[k], 2)
                       for k in ("difference", "ci_low", "ci_high"))
    line = (f"A - B accuracy: {diff} points, {100 * c['confidence']:g}% bootstrap CI "
            f"[{low}, {high}] over {c['num_test']} test samples ({c['n_resamples']} resamples): "
            f"{c['verdict']}")
    text = ("# contrastkit compare\n\n" + report.markdown_table(["", "A", "B"], rows)
            + f"\n{line}\n\n{c['reading']}\n")
    return text + (pooled.markdown() if pooled is not None else "")
