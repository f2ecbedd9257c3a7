"""Verdict rules: whether the measured runs reproduce each claim of a study.

Part A (``cpu``): a claim is judged on the paired values of its seeds (one value per seed,
e.g. the 200-NN accuracy of run A minus that of run B trained with the same seed), once every
seed the study plans (``Study.seeds``) has them:

* *not testable at this scale* when, before any run, the paper's effect is below the minimum
  detectable effect of the planned seeds (:func:`planned_mde`; for a ``not_worse`` claim: when
  its margin is), whatever the runs later measure; once every planned seed has run, a
  t-interval that excludes 0 is stated beside it, as what the study shows at its own scale;
* *reversed at this scale* when, once every planned seed has run, the 95% t-interval excludes 0
  on the side opposite the paper (for a ``not_worse`` claim: lies below minus the margin),
  whatever the minimum detectable effect: the study shows the other direction;
* *collapsed* when a run the claim reads collapsed in pretraining (:func:`collapsed`), with the
  evidence (last-epoch positive similarity, first and last epochs' loss);
* *reproduced* (``better``, ``sign``) when the 95% t-interval of the mean paired value lies
  above 0 and every seed's value is positive (sign consistency); (``not_worse``) when the
  interval lies above minus the margin (:data:`studies.repro.studies.NOT_WORSE_MARGIN`);
  (``equivalent``) when the 90% t-interval (two one-sided tests at 5%) lies within -/+ the
  margin (:data:`studies.repro.studies.EQUIVALENCE_MARGIN`);
* *not reproduced* otherwise, with the reason;
* *not yet run* while fewer seeds than planned have every number the claim needs, or when only
  runs shortened with ``--epochs`` have (:data:`PIPELINE_CHECK`);
* *not comparable*, for a claim measured but not comparable with the paper's number
  (``Claim.role``; its note says why): what the rules above decided is said after it, *as
  measured*, and is no verdict on the paper's claim;
* *pending rerun (second-round plan)* instead, for a claim of a study the second round reruns
  (:data:`studies.repro.plan.ROUND_TWO`), until every planned seed has every number it needs
  (a collapse aside): no verdict before then, not even *not testable*, since a finished rerun
  may still be *reversed*; the first round's superseded result and why it was superseded are
  said beside (:mod:`studies.repro.superseded`).

The per-seed paired bootstrap interval of an accuracy difference (``contrastkit compare``) is
reported beside each seed's value; it describes test-set noise within one seed, not the seed
noise the verdict is about.

Part B (``gpu``, one seed per run) keeps the rules it was planned with: *A beats B* when the
seed's bootstrap interval lies above 0, *not worse* when it does not lie below 0, a ``sign``
claim is *inconclusive* with one seed and needs the paper's sign in every seed and a mean
above :data:`SIGN_STANDARD_ERRORS` standard errors with more, an absolute number is reproduced
when the seed mean is at least the paper's minus :data:`ABSOLUTE_TOLERANCE` point.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from studies.repro.collection import run_tags
from studies.repro.plan import ROUND_TWO
from studies.repro.stats import SEED_SD, mde, t_interval
from studies.repro.studies import EQUIVALENCE_MARGIN, NOT_WORSE_MARGIN, Claim, Study
from studies.repro.superseded import pending_verdict
from studies.repro.tuning import resolve_study

#: The verdict's first words of a claim whose interval lies on the side opposite the paper.
REVERSED = "reversed at this scale"
#: The verdict's first words of a claim that is not comparable with the paper's number.
NOT_COMPARABLE = "not comparable"
#: What follows it in such a verdict: the outcome of the rules, as measured.
AS_MEASURED = "as measured: "
#: First words of the verdicts that decide (the others wait for runs or report a collapse).
_DECIDED = ("reproduced", REVERSED, "not reproduced", "not testable", "inconclusive")
#: Confidence of the equivalence claims' interval: two one-sided tests at 5% each.
EQUIVALENCE_CONFIDENCE = 0.90

ABSOLUTE_TOLERANCE = 1.0  # points: Part B absolute numbers
SIGN_STANDARD_ERRORS = 2.0  # Part B: a sign claim's seed mean must exceed this many std errors

#: A run counts as collapsed when, in its last epoch, the two views' mean cosine similarity is
#: at least this and the loss fell by less than COLLAPSE_MAX_DROP of its first epoch's value.
COLLAPSE_SIMILARITY = 0.95
COLLAPSE_MAX_DROP = 0.03

#: Verdict of a claim measured only on runs shortened with ``--epochs`` (pipeline checks).
PIPELINE_CHECK = "not yet run (only a shortened pipeline-check run so far)"


def collapsed(metrics: dict[str, float]) -> bool:
    """Whether a run's pretraining collapsed or nearly so: every embedding nearly the same
    vector, the loss stuck near its value for identical similarities (log of the number of
    candidates). Such a run carries no evidence about a claim. The thresholds were set after
    the earlier Part A runs: every hard-loss run ended at 4.177 ~ log 65 (64 hard negatives +
    the positive) with view similarity 0.96-0.998, the CIFAR-2 runs at log 257 / log 511, and
    the SINCERE/SupCon CIFAR-10 runs at similarity 0.97 after a 2% fall; every other run had
    similarity <= 0.94 or a fall of 5% or more."""
    try:
        similarity = metrics["pretrain/final_positive_similarity"]
        first, final = metrics["pretrain/initial_loss"], metrics["pretrain/final_loss"]
    except KeyError:
        return False
    return similarity >= COLLAPSE_SIMILARITY and final >= (1.0 - COLLAPSE_MAX_DROP) * first


def collapse_evidence(label: str, metrics: dict[str, float]) -> str:
    """``label: positive cosine 0.981, loss 6.24 -> 6.20`` (the numbers :func:`collapsed`
    reads)."""
    return (f"{label}: last-epoch positive cosine "
            f"{metrics['pretrain/final_positive_similarity']:.3f}, loss "
            f"{metrics['pretrain/initial_loss']:.2f} -> {metrics['pretrain/final_loss']:.2f}")


def planned_mde(claim: Claim, study: Study) -> float | None:
    """Minimum detectable effect of ``claim`` over the study's seeds, from the assumed seed
    noise of its value (:data:`studies.repro.stats.SEED_SD`); None without an assumption
    or with fewer than 2 seeds."""
    if claim.noise is None or len(study.seeds) < 2:
        return None
    return mde(SEED_SD[claim.noise][0], len(study.seeds))


def untestable_reason(claim: Claim, study: Study) -> str | None:
    """Why ``claim`` is not testable at this scale (decided before the runs), or None."""
    if study.part != "cpu":
        return None
    limit = planned_mde(claim, study)
    if limit is None:
        return None
    if claim.kind in ("not_worse", "equivalent"):
        margin = NOT_WORSE_MARGIN if claim.kind == "not_worse" else EQUIVALENCE_MARGIN
        if margin < limit:
            return f"margin {margin:g} < MDE {limit:.3g}{claim.unit}"
        return None
    if claim.paper_value is not None and abs(claim.paper_value) < limit:
        return f"paper effect {claim.paper_value:+g} < MDE {limit:.3g}{claim.unit}"
    return None


@dataclass
class Verdict:
    """What the report says about one claim: the verdict, the seeds' paired values, their
    per-seed bootstrap intervals (accuracy claims) and, with two seeds or more, the mean's 95%
    t-interval."""

    verdict: str
    seeds: list[int]
    values: list[float]
    intervals: list[tuple[float, float]]
    tag: str | None = None
    t_interval: tuple[float, float] | None = field(default=None)
    #: the 90% t-interval of an ``equivalent`` claim (two one-sided tests at 5%)
    tost_interval: tuple[float, float] | None = field(default=None)

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None

    @property
    def positive(self) -> int:
        """Number of seeds whose value has the paper's sign (is positive)."""
        return sum(v > 0 for v in self.values)


def judge(claim: Claim, study: Study, summary: dict, tag: str | None = None) -> Verdict:
    """Verdict of ``claim`` from the collected ``summary`` (see the module docstring)."""
    verdict = _judge(claim, study, summary, tag)
    if (study.part == "cpu" and study.name in ROUND_TWO
            and (verdict.tag != study.part or not set(study.seeds) <= set(verdict.seeds))
            and not verdict.verdict.startswith("collapsed")):
        verdict.verdict = pending_verdict(claim.id)
    if claim.role == "not_comparable" and verdict.verdict.startswith(_DECIDED):
        verdict.verdict = (f"{NOT_COMPARABLE} (the claim's note says why); {AS_MEASURED}"
                           f"{verdict.verdict}")
    return verdict


def _judge(claim: Claim, study: Study, summary: dict, tag: str | None) -> Verdict:
    runs, comparisons = summary.get("runs", {}), summary.get("comparisons", {})
    study = resolve_study(study, summary.get("choices") or {})  # tuned runs as chosen
    reason = untestable_reason(claim, study)
    if claim.value is None:
        return Verdict(f"not testable at this scale ({reason}; not run)" if reason
                       else "not yet run", [], [], [])
    for candidate in ([tag] if tag else run_tags(summary, study.part)):
        seeds = sorted({r["seed"] for r in runs.values() if r.get("tag") == candidate})
        values, intervals, used = [], [], []
        stuck: dict[str, str] = {}  # label -> evidence, of collapsed runs the claim reads
        for seed in seeds:
            def get(name: str, metric: str, seed: int = seed, tag: str = candidate,
                    stuck: dict[str, str] = stuck) -> float:
                run = runs.get(f"{tag}/{study.variant(name).stem}/seed{seed}") or {}
                if not run.get("pretrain_finished"):
                    raise KeyError(metric)
                if collapsed(run["metrics"]):
                    label = study.variant(name).label
                    stuck.setdefault(label, collapse_evidence(f"{label} seed {seed}",
                                                              run["metrics"]))
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
            ci = t_interval(values)[1:] if len(values) >= 2 else None
            verdict = Verdict("", used, values, intervals, candidate, ci)
            if claim.kind == "equivalent" and len(values) >= 2:
                verdict.tost_interval = t_interval(values, EQUIVALENCE_CONFIDENCE)[1:]
            if candidate != study.part:  # a shortened run: measured, but not evidence
                verdict.verdict = PIPELINE_CHECK
            elif study.part == "gpu":
                verdict.verdict = _decide_single_seed(claim, values, intervals)
            elif reason:
                verdict.verdict = (_reversed(claim, verdict, study, reason)
                                   or f"not testable at this scale ({reason})"
                                   + _untestable_measured(claim, verdict, study))
            elif stuck:
                verdict.verdict = f"collapsed ({'; '.join(stuck[k] for k in sorted(stuck))})"
            elif not set(study.seeds) <= set(used):
                verdict.verdict = (f"not yet run ({len(set(used) & set(study.seeds))} of "
                                   f"{len(study.seeds)} planned seeds finished)")
            else:
                verdict.verdict = _decide_paired(claim, verdict)
            return verdict
    if reason:
        return Verdict(f"not testable at this scale ({reason})", [], [], [])
    return Verdict("not yet run", [], [], [])


def _untestable_measured(claim: Claim, v: Verdict, study: Study) -> str:
    """What every planned seed of an untestable claim measured, when its t-interval excludes
    0: the study may still show a direction at its own scale, which is not the paper's claim
    tested (the paper's effect could not have been detected) but is worth reading."""
    if (claim.kind not in ("better", "sign") or v.t_interval is None
            or not set(study.seeds) <= set(v.seeds)):
        return ""
    low, high = v.t_interval
    if low > 0 and v.positive == len(v.values):
        side = "above 0, the claimed direction"
    elif high < 0 and v.positive == 0:
        side = "below 0, the opposite direction"
    else:
        return ""
    return (f"; at this scale the measured mean {v.mean:+.3g}{claim.unit} has its 95% "
            f"t-interval [{low:+.3g}, {high:+.3g}] {side}")


def _measured(claim: Claim, v: Verdict) -> str:
    assert v.t_interval is not None and v.mean is not None
    low, high = v.t_interval
    return (f"mean {v.mean:+.3g}{claim.unit}, 95% t-interval [{low:+.3g}, {high:+.3g}], "
            f"{v.positive} of {len(v.values)} seeds positive")


def _reversed(claim: Claim, v: Verdict, study: Study, reason: str | None = None) -> str | None:
    """*Reversed at this scale* when every planned seed has run and the 95% t-interval lies
    on the side opposite the paper (a ``not_worse`` claim: below minus its margin); None
    otherwise. ``reason``: why the claim was planned as not testable, said beside."""
    if (claim.kind not in ("better", "sign", "not_worse") or v.t_interval is None
            or not set(study.seeds) <= set(v.seeds)):
        return None
    limit = -NOT_WORSE_MARGIN if claim.kind == "not_worse" else 0.0
    if v.t_interval[1] >= limit:
        return None
    planned = (f"; planned as not testable, {reason}: the paper's effect could not have been "
               "detected, but this direction was" if reason else "")
    side = (f"below -{NOT_WORSE_MARGIN:g}, worse by more than the margin"
            if claim.kind == "not_worse" else "below 0, the opposite direction")
    return f"{REVERSED} ({_measured(claim, v)}: the interval lies {side}{planned})"


def _decide_paired(claim: Claim, v: Verdict) -> str:
    """Part A: the t-interval and sign rules of the module docstring."""
    assert v.t_interval is not None and v.mean is not None
    low, high = v.t_interval
    measured = _measured(claim, v)
    if claim.kind == "equivalent":
        assert v.tost_interval is not None
        tlow, thigh = v.tost_interval
        tost = f"90% t-interval [{tlow:+.3g}, {thigh:+.3g}]"
        if -EQUIVALENCE_MARGIN < tlow and thigh < EQUIVALENCE_MARGIN:
            return f"reproduced ({tost} within -/+{EQUIVALENCE_MARGIN:g}{claim.unit})"
        return (f"not reproduced (mean {v.mean:+.3g}{claim.unit}, {tost}: reaches beyond "
                f"-/+{EQUIVALENCE_MARGIN:g}{claim.unit}"
                + (", the difference is significant at 5%" if low > 0 or high < 0 else "")
                + ")")
    if claim.kind == "not_worse":
        if low > -NOT_WORSE_MARGIN:
            return "reproduced"
        if high < -NOT_WORSE_MARGIN:
            return (f"{REVERSED} ({measured}: the interval lies below -{NOT_WORSE_MARGIN:g}, "
                    "worse by more than the margin)")
        return f"not reproduced ({measured}: the interval reaches below -{NOT_WORSE_MARGIN:g})"
    if claim.kind not in ("better", "sign"):
        raise ValueError(f"claim {claim.id}: kind {claim.kind!r} has no Part A rule")
    if low > 0 and v.positive == len(v.values):
        return "reproduced"
    if high < 0:
        return f"{REVERSED} ({measured}: the interval lies below 0, the opposite direction)"
    if low <= 0:
        why = "the interval includes 0"
    else:
        why = "the sign differs between seeds"
    return f"not reproduced ({measured}: {why})"


def _decide_single_seed(claim: Claim, values: list[float],
                        intervals: list[tuple[float, float]]) -> str:
    """Part B: the bootstrap-interval and absolute rules of the module docstring."""
    mean = sum(values) / len(values)
    if claim.kind == "better":
        ok = all(low > 0 for low, _ in intervals)
        why = "" if ok else "; the 95% interval is not above 0 in every seed"
    elif claim.kind == "not_worse":
        ok = all(high >= 0 for _, high in intervals)
        why = "" if ok else "; a seed's 95% interval lies below 0"
    elif claim.kind == "sign":
        if len(values) < 2:
            side = "the paper's sign" if values[0] > 0 else "the opposite sign"
            return (f"inconclusive (one seed, measured {values[0]:+.3f}{claim.unit}: "
                    f"{side}, with no seed spread to judge its size by)")
        sem = statistics.stdev(values, mean) / math.sqrt(len(values))
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
