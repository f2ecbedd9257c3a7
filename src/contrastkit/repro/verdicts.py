"""Verdict rules: whether the measured runs reproduce each claim of a study.

* A claim "A is more accurate than B" (``better``) is *reproduced* when, in every finished
  seed, the paired bootstrap 95% interval of A - B (``contrastkit compare``: 1,000 test-set
  resamples) lies above 0;
* "A and B are equally accurate" (``same``; Feeney & Hughes 2023, App. M) when every seed's
  interval contains 0;
* "A is not worse than B" (``not_worse``) when no seed's interval lies below 0;
* a claim on another number (``sign``: margin, loss, uniformity, a difference of differences)
  when its value has the paper's sign in every finished seed and the seed mean exceeds
  :data:`SIGN_STANDARD_ERRORS` standard errors (sample std / sqrt(seeds)); with a single seed
  such a claim is *inconclusive*;
* an absolute number (``absolute``, Part B) when the seed mean is at least the paper's minus
  :data:`ABSOLUTE_TOLERANCE` point;
* *inconclusive* when a run the claim reads collapsed (:func:`collapsed`);
* *not yet run* while no seed has every number the claim needs, or when only runs shortened
  with ``--epochs`` have (:data:`PIPELINE_CHECK`).
"""

from __future__ import annotations

from dataclasses import dataclass

from contrastkit.repro.collection import run_tags
from contrastkit.repro.studies import Claim, Study

ABSOLUTE_TOLERANCE = 1.0  # points: Part B absolute numbers
SIGN_STANDARD_ERRORS = 2.0  # a sign claim's seed mean must exceed this many standard errors

#: A run counts as collapsed when, in its last epoch, the two views' mean cosine similarity is
#: at least this and the loss fell by less than COLLAPSE_MAX_DROP of its first epoch's value.
COLLAPSE_SIMILARITY = 0.95
COLLAPSE_MAX_DROP = 0.03


def collapsed(metrics: dict[str, float]) -> bool:
    """Whether a run's pretraining collapsed or nearly so: every embedding nearly the same
    vector, the loss stuck near its value for identical similarities (log of the number of
    candidates). Such a run carries no evidence about a claim. The thresholds were set after
    the Part A runs: every hard-loss run ends at 4.177 ~ log 65 (64 hard negatives + the
    positive) with view similarity 0.96-0.998, the CIFAR-2 runs at log 257 / log 511, and the
    SINCERE/SupCon CIFAR-10 runs at similarity 0.97 after a 2% fall; every other run has
    similarity <= 0.94 or a fall of 5% or more."""
    try:
        similarity = metrics["pretrain/final_positive_similarity"]
        first, final = metrics["pretrain/initial_loss"], metrics["pretrain/final_loss"]
    except KeyError:
        return False
    return similarity >= COLLAPSE_SIMILARITY and final >= (1.0 - COLLAPSE_MAX_DROP) * first


@dataclass
class Verdict:
    """What the report says about one claim."""

    verdict: str
    seeds: list[int]
    values: list[float]
    intervals: list[tuple[float, float]]
    tag: str | None = None


def judge(claim: Claim, study: Study, summary: dict, tag: str | None = None) -> Verdict:
    """Verdict of ``claim`` from the collected ``summary`` (see the module docstring)."""
    runs, comparisons = summary.get("runs", {}), summary.get("comparisons", {})
    for candidate in ([tag] if tag else run_tags(summary, study.part)):
        seeds = sorted({r["seed"] for r in runs.values() if r.get("tag") == candidate})
        values, intervals, used = [], [], []
        stuck: set[str] = set()  # labels of collapsed runs the claim reads
        for seed in seeds:
            def get(name: str, metric: str, seed: int = seed, tag: str = candidate,
                    stuck: set[str] = stuck) -> float:
                run = runs.get(f"{tag}/{study.variant(name).stem}/seed{seed}") or {}
                if not run.get("pretrain_finished"):
                    raise KeyError(metric)
                if collapsed(run["metrics"]):
                    stuck.add(study.variant(name).label)
                return run["metrics"][metric]

            try:
                value = claim.value(get)
            except KeyError:
                continue
            interval = None
            if claim.compare:
                a, b, protocol = claim.compare
                key = (f"{candidate}/{study.variant(a).stem}__vs__{study.variant(b).stem}/"
                       f"{protocol}/seed{seed}")
                comp = comparisons.get(key)
                if comp is None:
                    continue
                interval = (100.0 * comp["ci_low"], 100.0 * comp["ci_high"])
            values.append(value)
            used.append(seed)
            if interval is not None:
                intervals.append(interval)
        if values:
            if candidate != study.part:  # a shortened run: measured, but not evidence
                return Verdict(PIPELINE_CHECK, used, values, intervals, candidate)
            if stuck:
                return Verdict(f"inconclusive ({', '.join(sorted(stuck))} collapsed or nearly: "
                               "see the "
                               "run table)", used, values, intervals, candidate)
            return Verdict(_decide(claim, values, intervals), used, values, intervals, candidate)
    return Verdict("not yet run", [], [], [])


#: Verdict of a claim measured only on runs shortened with ``--epochs`` (pipeline checks).
PIPELINE_CHECK = "not yet run (only a shortened pipeline-check run so far)"


def _decide(claim: Claim, values: list[float], intervals: list[tuple[float, float]]) -> str:
    mean = sum(values) / len(values)
    if claim.kind == "better":
        ok = all(low > 0 for low, _ in intervals)
        why = "" if ok else "; the 95% interval is not above 0 in every seed"
    elif claim.kind == "same":
        ok = all(low <= 0 <= high for low, high in intervals)
        why = "" if ok else "; a seed's 95% interval excludes 0"
    elif claim.kind == "not_worse":
        ok = all(high >= 0 for _, high in intervals)
        why = "" if ok else "; a seed's 95% interval lies below 0"
    elif claim.kind == "sign":
        if len(values) < 2:
            side = "the paper's sign" if values[0] > 0 else "the opposite sign"
            return (f"inconclusive (one seed, measured {values[0]:+.3f}{claim.unit}: "
                    f"{side}, with no seed spread to judge its size by)")
        sem = (sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values)) ** 0.5
        ok = all(v > 0 for v in values) and mean > SIGN_STANDARD_ERRORS * sem
        why = "" if ok else (
            "; the sign differs from the paper's in some seed" if not all(v > 0 for v in values)
            else f"; the mean is within {SIGN_STANDARD_ERRORS:g} standard errors of 0 over "
                 f"{len(values)} seeds")
    elif claim.kind == "absolute":
        assert claim.paper_value is not None
        ok = mean >= claim.paper_value - ABSOLUTE_TOLERANCE
        why = f"; more than {ABSOLUTE_TOLERANCE:g} point below the paper" if not ok else ""
    else:
        raise ValueError(f"claim {claim.id}: unknown kind {claim.kind!r}")
    if ok:
        return "reproduced"
    if claim.paper_value is None:
        return f"not reproduced (measured {mean:+.3f}{claim.unit}{why})"
    gap = mean - claim.paper_value
    return (f"not reproduced (measured {mean:+.3f} vs paper {claim.paper_value:+g}{claim.unit}"
            f", gap {gap:+.3f}{why})")
