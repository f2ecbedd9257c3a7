"""Verdict rules: whether the measured runs reproduce each claim of a study.

Part A (``cpu``): a claim is judged on the paired values of its seeds (one value per seed,
e.g. the 200-NN accuracy of run A minus that of run B trained with the same seed), once every
seed the study plans (``Study.seeds``) has them. The rules were revised once, by issue 54
(:mod:`studies.repro.superseded` keeps the labels of the page before), and apply in this order:

* *collapsed* when a run the claim reads collapsed in pretraining
  (:func:`studies.repro.trained.collapsed`), with the evidence;
* *not yet run* while fewer seeds than planned have every number the claim needs, or when only
  runs shortened with ``--epochs`` have (:data:`PIPELINE_CHECK`); *not testable at this scale*
  instead for a claim planned so (below), with the seeds measured so far;
* *inconclusive (not trained)* when a trained run the claim reads is not shown past its
  random initialisation (:func:`studies.repro.trained.not_past_random_init`): the claim
  compares networks not shown to have learned, which is evidence neither way;
* *reversed at this scale* when the 95% t-interval excludes 0 on the side opposite the paper
  (for a ``not_worse`` claim: lies below minus the margin), whatever the planned power;
* *contradicted* when an ``equivalent`` claim's 90% t-interval lies wholly outside -/+ its
  margin (:data:`studies.repro.studies.EQUIVALENCE_MARGIN`): the runs differ by more than the
  margin, against the paper's "no difference";
* *not testable at this scale* when, before any run, the paper's effect is below the effect the
  planned seeds detect with 80% power (:func:`planned_effect`; for a ``not_worse`` or
  ``equivalent`` claim: when its margin is), whatever the runs later measure; *not testable at
  this scale, the paper's effect excluded* when the 95% t-interval nonetheless lies below the
  paper's effect (at this study's scale where the paper's baseline differs,
  :func:`rescaled_paper_effect`): evidence against the effect the paper reports, though not
  against its direction; a t-interval that excludes 0 is stated beside, as what the study shows
  at its own scale;
* *reproduced* (``better``, ``sign``) when the 95% t-interval of the mean paired value lies
  above 0 and every seed's value is positive (sign consistency); (``not_worse``) when the
  interval lies above minus the margin (:data:`studies.repro.studies.NOT_WORSE_MARGIN`);
  (``equivalent``) when the 90% t-interval (two one-sided tests at 5%) lies within -/+ the
  margin; *direction only* instead when the sign agrees but the measured mean is below a
  tenth of the paper's effect (:data:`ORDER_OF_MAGNITUDE`) or the paper's stated mechanism or
  property (``Claim.mechanisms``) has its 95% t-interval below 0;
* *not reproduced* otherwise, with the reason (and whether the interval excludes the paper's
  effect);
* *not comparable*, for a claim measured but not comparable with the paper's number
  (``Claim.role``; its note says why): what the rules above decided is said after it, *as
  measured*, and is no verdict on the paper's claim;
* *pending rerun (issue 54)* instead, for a claim of a study issue 54's round trains again
  (:data:`studies.repro.plan.ROUND_THREE`), until every planned seed has every number it needs
  from runs whose records name a clean commit (a collapse aside): beside it, what these rules
  make of the runs it replaces (:func:`studies.repro.superseded.previous_study`) and why they
  were replaced.

Which claims are counted (``Claim.role``) is the report's affair: a claim read off a table with
no sentence of the paper stating it is shown, not counted (:mod:`studies.repro.rules`).

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
from collections.abc import Callable
from dataclasses import dataclass, field

from studies.repro.collection import run_tags, seed_values
from studies.repro.plan import ROUND_THREE
from studies.repro.provenance import names_clean_commit
from studies.repro.records import failure_text
from studies.repro.schema import Claim, Mechanism, Study
from studies.repro.stats import SEED_SD, mde_at_power, t_interval
from studies.repro.studies import EQUIVALENCE_MARGIN, NOT_WORSE_MARGIN
from studies.repro.superseded import (
    PENDING,
    PREVIOUS_COMMIT,
    RERUN_WHY,
    previous_study,
    superseded_runs,
)
from studies.repro.trained import (
    baseline,
    chance,
    collapse_evidence,
    collapsed,
    not_past_random_init,
    untrained_text,
)
from studies.repro.tuning import resolve_study

#: The verdict's first words of a claim whose interval lies on the side opposite the paper.
REVERSED = "reversed at this scale"
#: ... of an equivalence claim whose interval lies wholly outside its margin.
CONTRADICTED = "contradicted"
#: ... of a claim whose sign agrees but whose size or mechanism does not.
DIRECTION_ONLY = "direction only"
#: ... of a claim planned as not testable.
NOT_TESTABLE = "not testable at this scale"
#: ... of such a claim whose interval nonetheless lies below the paper's effect.
EXCLUDED = "not testable at this scale, the paper's effect excluded"
#: ... of a claim that reads a run not shown past its random initialisation.
NOT_TRAINED = "inconclusive (not trained"
#: The verdict's first words of a claim that is not comparable with the paper's number.
NOT_COMPARABLE = "not comparable"
#: What follows it in such a verdict: the outcome of the rules, as measured.
AS_MEASURED = "as measured: "
#: First words of the verdicts that decide (the others wait for runs or report a collapse).
_DECIDED = ("reproduced", DIRECTION_ONLY, REVERSED, CONTRADICTED, "not reproduced",
            NOT_TESTABLE, "inconclusive")
#: The labels, in the tally's column order (a verdict's label is the first of
#: :data:`_MATCH_ORDER` its text starts with).
CATEGORIES = ("reproduced", DIRECTION_ONLY, REVERSED, CONTRADICTED, "not reproduced", EXCLUDED,
              NOT_TESTABLE, "collapsed", "inconclusive", PENDING, "not yet run")
_MATCH_ORDER = (NOT_COMPARABLE, REVERSED, CONTRADICTED, DIRECTION_ONLY, "not reproduced",
                EXCLUDED, NOT_TESTABLE, "collapsed", "inconclusive", PENDING, "not yet run",
                "reproduced")
#: Confidence of the equivalence claims' interval: two one-sided tests at 5% each.
EQUIVALENCE_CONFIDENCE = 0.90
#: The power at which a planned effect counts as detectable (the not-testable threshold).
PLANNED_POWER = 0.8
#: *Direction only* when the measured mean is below the paper's effect divided by this.
ORDER_OF_MAGNITUDE = 10.0

ABSOLUTE_TOLERANCE = 1.0  # points: Part B absolute numbers
SIGN_STANDARD_ERRORS = 2.0  # Part B: a sign claim's seed mean must exceed this many std errors

#: Verdict of a claim measured only on runs shortened with ``--epochs`` (pipeline checks).
PIPELINE_CHECK = "not yet run (only a shortened pipeline-check run so far)"


def category(verdict: str) -> str:
    """The label of a verdict's text (a tally column, or *not comparable*)."""
    return next(k for k in _MATCH_ORDER if verdict.startswith(k))


def planned_effect(claim: Claim, study: Study) -> float | None:
    """The effect the study's seeds detect with :data:`PLANNED_POWER` (the 95% t-interval above
    0), from the assumed seed noise of the claim's value (:data:`studies.repro.stats.SEED_SD`);
    None without an assumption or with fewer than 2 seeds."""
    if claim.noise is None or len(study.seeds) < 2:
        return None
    return mde_at_power(SEED_SD[claim.noise][0], len(study.seeds), PLANNED_POWER)


def untestable_reason(claim: Claim, study: Study) -> str | None:
    """Why ``claim`` is not testable at this scale (decided before the runs), or None."""
    if study.part != "cpu":
        return None
    limit = planned_effect(claim, study)
    if limit is None:
        return None
    power = f"the effect {len(study.seeds)} seeds detect with {PLANNED_POWER:.0%} power"
    if claim.kind in ("not_worse", "equivalent"):
        margin = NOT_WORSE_MARGIN if claim.kind == "not_worse" else EQUIVALENCE_MARGIN
        if margin < limit:
            return f"margin {margin:g} < {power}, {limit:.3g}{claim.unit}"
        return None
    if claim.paper_value is not None and abs(claim.paper_value) < limit:
        return f"paper effect {claim.paper_value:+g} < {power}, {limit:.3g}{claim.unit}"
    return None


def rescaled_paper_effect(claim: Claim, study: Study, summary: dict,
                          tag: str = "cpu") -> float | None:
    """The paper's effect times (this study's baseline / the paper's baseline) for a claim
    of ``study`` with a ``paper_baseline``; None without one or before its baseline is
    measured."""
    if claim.paper_baseline is None or claim.paper_value is None:
        return None
    paper_base, run, metric = claim.paper_baseline
    stem = resolve_study(study, summary.get("choices") or {}).variant(run).stem
    values = seed_values(summary, tag, stem, metric)
    if not values:
        return None
    return claim.paper_value * (sum(values) / len(values)) / paper_base


@dataclass
class MechanismValues:
    """A claim's mechanism (:class:`~studies.repro.schema.Mechanism`) as measured: its seeds'
    values, the numbers each was computed from (``inputs``: per seed, ``"run metric"`` ->
    value, e.g. each loss's median nearest-noise similarity) and, with two or more seeds,
    their mean's 95% t-interval."""

    statement: str
    short: str
    seeds: list[int]
    values: list[float]
    t_interval: tuple[float, float] | None
    inputs: list[dict[str, float]] = field(default_factory=list)

    @property
    def reversed(self) -> bool:
        """Whether the interval lies below 0: the paper's mechanism runs the other way."""
        return self.t_interval is not None and self.t_interval[1] < 0


@dataclass
class Verdict:
    """What the report says about one claim: the verdict, the seeds' paired values, their
    per-seed bootstrap intervals (accuracy claims) and, with two seeds or more, the mean's 95%
    t-interval; the measured mechanisms, the runs read that name no clean commit, and for a
    pending claim the verdict of the runs it replaces (``superseded``)."""

    verdict: str
    seeds: list[int]
    values: list[float]
    intervals: list[tuple[float, float]]
    tag: str | None = None
    t_interval: tuple[float, float] | None = field(default=None)
    #: the 90% t-interval of an ``equivalent`` claim (two one-sided tests at 5%)
    tost_interval: tuple[float, float] | None = field(default=None)
    mechanisms: list[MechanismValues] = field(default_factory=list)
    uncommitted: list[str] = field(default_factory=list)
    superseded: Verdict | None = None
    #: why a claim is *direction only*, in a few words each
    shortfalls: list[str] = field(default_factory=list)

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None

    @property
    def positive(self) -> int:
        """Number of seeds whose value has the paper's sign (is positive)."""
        return sum(v > 0 for v in self.values)


class _Reader:
    """``get(run, metric)`` of one seed's finished runs (a KeyError for an unfinished one),
    noting the collapsed runs it reads and those whose record names no clean commit."""

    def __init__(self, study: Study, runs: dict, tag: str) -> None:
        self.study, self.runs, self.tag = study, runs, tag
        self.stuck: dict[str, str] = {}  # label -> evidence
        self.uncommitted: set[str] = set()

    def at(self, seed: int) -> Callable[[str, str], float]:
        def get(name: str, metric: str) -> float:
            variant = self.study.variant(name)
            run = self.runs.get(f"{self.tag}/{variant.stem}/seed{seed}") or {}
            if not run.get("pretrain_finished"):
                raise KeyError(metric)
            if collapsed(run["metrics"], chance(variant)):
                self.stuck.setdefault(variant.label, collapse_evidence(
                    f"{variant.label} seed {seed}", run["metrics"], chance(variant)))
            if not names_clean_commit(run.get("provenance") or {}):
                self.uncommitted.add(f"{variant.stem} s{seed}")
            return run["metrics"][metric]

        return get

    def mechanism(self, mechanism: Mechanism, seeds: tuple[int, ...]) -> MechanismValues:
        measured, inputs = {}, []
        for seed in seeds:
            get = self.at(seed)
            try:
                measured[seed] = mechanism.value(get)
            except KeyError:
                continue
            inputs.append({f"{name} {metric.rsplit('/', 1)[-1]}": get(name, metric)
                           for name, metric in mechanism.needs})
        values = list(measured.values())
        interval = t_interval(values)[1:] if len(values) >= 2 else None
        return MechanismValues(mechanism.statement, mechanism.short or mechanism.statement,
                               list(measured), values, interval, inputs)


def judge(claim: Claim, study: Study, summary: dict, tag: str | None = None) -> Verdict:
    """Verdict of ``claim`` from the collected ``summary`` (see the module docstring)."""
    verdict = _judge(claim, study, summary, tag)
    finished = (verdict.tag == study.part and set(study.seeds) <= set(verdict.seeds)
                and not verdict.uncommitted)
    if (study.part == "cpu" and study.name in ROUND_THREE and not finished
            and not verdict.verdict.startswith("collapsed")):
        verdict.superseded = _judge(claim, previous_study(study),
                                    superseded_runs(PREVIOUS_COMMIT), study.part)
        verdict.verdict = (f"{PENDING}; {PREVIOUS_COMMIT}'s runs under the revised rules: "
                           f"{verdict.superseded.verdict}; superseded: {RERUN_WHY[study.name]}")
    if claim.role == "not_comparable" and verdict.verdict.startswith(_DECIDED):
        verdict.verdict = (f"{NOT_COMPARABLE} (the claim's note says why); {AS_MEASURED}"
                           f"{verdict.verdict}")
    return verdict


def _judge(claim: Claim, study: Study, summary: dict, tag: str | None) -> Verdict:
    runs, comparisons = summary.get("runs", {}), summary.get("comparisons", {})
    study = resolve_study(study, summary.get("choices") or {})  # tuned runs as chosen
    reason = untestable_reason(claim, study)
    if claim.value is None:
        return Verdict(f"{NOT_TESTABLE} ({reason}; not run)" if reason
                       else "not yet run", [], [], [])
    for candidate in ([tag] if tag else run_tags(summary, study.part)):
        seeds = sorted({r["seed"] for r in runs.values() if r.get("tag") == candidate})
        reader = _Reader(study, runs, candidate)
        values, intervals, used = [], [], []
        for seed in seeds:
            try:
                value = claim.value(reader.at(seed))
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
            reader.uncommitted |= _baseline_uncommitted(study, runs, candidate)
            verdict = Verdict("", used, values, intervals, candidate, ci,
                              uncommitted=sorted(reader.uncommitted))
            if claim.kind == "equivalent" and len(values) >= 2:
                verdict.tost_interval = t_interval(values, EQUIVALENCE_CONFIDENCE)[1:]
            if candidate != study.part:  # a shortened run: measured, but not evidence
                verdict.verdict = PIPELINE_CHECK
            elif study.part == "gpu":
                verdict.verdict = _decide_single_seed(claim, values, intervals)
            elif reader.stuck:
                evidence = "; ".join(reader.stuck[k] for k in sorted(reader.stuck))
                verdict.verdict = f"collapsed ({evidence})"
            elif not set(study.seeds) <= set(used):
                verdict.verdict = (f"{NOT_TESTABLE} ({reason})" if reason else
                                   f"not yet run ({len(set(used) & set(study.seeds))} of "
                                   f"{len(study.seeds)} planned seeds finished"
                                   f"{_failed_runs(study, runs, candidate)})")
            else:
                verdict.verdict = _decide_part_a(claim, verdict, study, summary, reader,
                                                 reason)
            return verdict
    if reason:
        return Verdict(f"{NOT_TESTABLE} ({reason})", [], [], [])
    failed = _failed_runs(study, runs, study.part)
    return Verdict(f"not yet run ({failed.removeprefix('; ')})" if failed else "not yet run",
                   [], [], [])


def _failed_runs(study: Study, runs: dict, tag: str) -> str:
    """``; <run> s<seed> failed: ...`` for each of ``study``'s runs under ``tag`` whose last
    command failed (:func:`studies.repro.records.failure`: the claim waits on it); empty when
    none did."""
    failed = [f"; {variant.stem} s{seed}: {failure_text(run['failure'])}"
              for variant in study.variants for seed in study.seeds
              if (run := runs.get(f"{tag}/{variant.stem}/seed{seed}")) and run.get("failure")]
    return "".join(failed)


def _baseline_uncommitted(study: Study, runs: dict, tag: str) -> set[str]:
    """The study's random-init runs (which the claims' gains over random init read) whose
    record names no clean commit."""
    base = baseline(study)
    if base is None:
        return set()
    return {f"{base.stem} s{seed}" for seed in study.seeds
            if f"{tag}/{base.stem}/seed{seed}" in runs and not names_clean_commit(
                runs[f"{tag}/{base.stem}/seed{seed}"].get("provenance") or {})}


def _decide_part_a(claim: Claim, v: Verdict, study: Study, summary: dict, reader: _Reader,
                   reason: str | None) -> str:
    """Part A once every planned seed has run: the rules of the module docstring, in order."""
    names = {name for name, _ in claim.needs}
    untrained = [u for u in not_past_random_init(study, summary, study.part)
                 if u[0].name in names]
    if untrained:
        return (f"{NOT_TRAINED}: {untrained_text(untrained)} over the same network untrained, "
                "95% t-interval not above 0; the claim compares networks not shown to have "
                "learned, evidence neither way)")
    v.mechanisms = [reader.mechanism(m, study.seeds) for m in claim.mechanisms]
    reversed_ = _reversed(claim, v, reason)
    if reversed_:
        return reversed_
    if claim.kind == "equivalent":
        contradicted = _contradicted(claim, v)
        if contradicted:
            return contradicted
    effect = rescaled_paper_effect(claim, study, summary, study.part)
    effect = claim.paper_value if effect is None else effect
    if reason:
        excluded = _excluded(claim, v, effect)
        head = f"{EXCLUDED} ({reason}; {excluded})" if excluded else f"{NOT_TESTABLE} ({reason})"
        return head + _untestable_measured(claim, v)
    label = _decide_paired(claim, v, effect)
    if label != "reproduced":
        return label
    return _direction_only(claim, v, effect) or label


def _excluded(claim: Claim, v: Verdict, effect: float | None) -> str | None:
    """Why the 95% t-interval excludes the paper's (positive) effect ``effect``, or None."""
    if claim.kind not in ("better", "sign") or effect is None or effect <= 0:
        return None
    assert v.t_interval is not None
    low, high = v.t_interval
    if high >= effect:
        return None
    return (f"the 95% t-interval [{low:+.3g}, {high:+.3g}] lies below the paper's effect "
            f"{effect:+.3g}{claim.unit}")


def _untestable_measured(claim: Claim, v: Verdict) -> str:
    """What every planned seed of an untestable claim measured, when its t-interval excludes
    0: the study may still show a direction at its own scale, which is not the paper's claim
    tested (the paper's effect could not have been detected) but is worth reading. An
    equivalence claim: :func:`_equivalence_measured`."""
    if claim.kind == "equivalent" and v.t_interval is not None:
        return _equivalence_measured(claim, v)
    if claim.kind == "not_worse" and v.t_interval is not None:
        return _not_worse_measured(claim, v)
    if claim.kind not in ("better", "sign") or v.t_interval is None:
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


def _not_worse_measured(claim: Claim, v: Verdict) -> str:
    """What the seeds of an untestable *not worse* claim measured: whether the 95% t-interval
    lies above minus the margin all the same (the test passes, which the planned power could
    not promise), and whether above 0 as well, with every seed positive (better at this
    scale). Below minus the margin is *reversed* (rule 4), not stated here."""
    assert v.t_interval is not None and v.mean is not None
    if not above_margin(v.t_interval):
        return ""
    low, high = v.t_interval
    text = (f"; at this scale the measured mean {v.mean:+.3g}{claim.unit} has its 95% "
            f"t-interval [{low:+.3g}, {high:+.3g}] above -{NOT_WORSE_MARGIN:g}{claim.unit}: "
            "the not-worse test passes all the same")
    if low > 0 and v.positive == len(v.values):
        text += (f", and above 0 with all {len(v.values)} seeds positive: better, not only "
                 "not worse, at this scale")
    return text


def _equivalence_measured(claim: Claim, v: Verdict) -> str:
    """What the seeds of an untestable equivalence claim measured: whether the two one-sided
    tests pass at the margin all the same (a pass the planned power could not promise), whether
    the 95% t-interval excludes 0, and in how many seeds the paper's own test, each seed's
    bootstrap interval (SINCERE App. M), finds a difference."""
    assert v.tost_interval is not None and v.t_interval is not None
    tlow, thigh = v.tost_interval
    low, high = v.t_interval
    inside = within_margin(v.tost_interval)
    text = (f"; at this scale the 90% t-interval [{tlow:+.3g}, {thigh:+.3g}] "
            + ("lies within" if inside else "reaches beyond")
            + f" -/+{EQUIVALENCE_MARGIN:g}{claim.unit}"
            + (": the two one-sided tests pass all the same" if inside else ""))
    if low > 0 or high < 0:
        text += (f"; the 95% t-interval [{low:+.3g}, {high:+.3g}] excludes 0: the difference "
                 "is significant at 5%")
    if v.intervals:
        apart = sum(lo > 0 or hi < 0 for lo, hi in v.intervals)
        text += (f"; each seed's bootstrap 95% interval, the paper's own test, excludes 0 in "
                 f"{apart} of {len(v.intervals)} seeds")
    return text


def within_margin(interval: tuple[float, float]) -> bool:
    """Whether an equivalence claim's 90% t-interval lies within -/+ the margin (the two
    one-sided tests pass)."""
    return -EQUIVALENCE_MARGIN < interval[0] and interval[1] < EQUIVALENCE_MARGIN


def above_margin(interval: tuple[float, float]) -> bool:
    """Whether a *not worse* claim's 95% t-interval lies above minus the margin (the not-worse
    test passes)."""
    return interval[0] > -NOT_WORSE_MARGIN


def _measured(claim: Claim, v: Verdict) -> str:
    assert v.t_interval is not None and v.mean is not None
    low, high = v.t_interval
    return (f"mean {v.mean:+.3g}{claim.unit}, 95% t-interval [{low:+.3g}, {high:+.3g}], "
            f"{v.positive} of {len(v.values)} seeds positive")


def _reversed(claim: Claim, v: Verdict, reason: str | None = None) -> str | None:
    """*Reversed at this scale* when the 95% t-interval lies on the side opposite the paper (a
    ``not_worse`` claim: below minus its margin); None otherwise. ``reason``: why the claim was
    planned as not testable, said beside."""
    if claim.kind not in ("better", "sign", "not_worse") or v.t_interval is None:
        return None
    limit = -NOT_WORSE_MARGIN if claim.kind == "not_worse" else 0.0
    if v.t_interval[1] >= limit:
        return None
    planned = (f"; planned as not testable, {reason}: the paper's effect could not have been "
               "detected, but this direction was" if reason else "")
    side = (f"below -{NOT_WORSE_MARGIN:g}, worse by more than the margin"
            if claim.kind == "not_worse" else "below 0, the opposite direction")
    return f"{REVERSED} ({_measured(claim, v)}: the interval lies {side}{planned})"


def _half_width(claim: Claim, v: Verdict) -> str:
    """For an equivalence claim whose 90% interval is at least twice the margin wide: that even
    a true difference of 0 could not have passed at the measured spread."""
    assert v.tost_interval is not None
    half = (v.tost_interval[1] - v.tost_interval[0]) / 2.0
    if half < EQUIVALENCE_MARGIN:
        return ""
    return (f"; the 90% interval's half-width at the seeds' spread, {half:.3g}{claim.unit}, is "
            f"at least the margin {EQUIVALENCE_MARGIN:g}: with this spread the test could not "
            "have passed even at a true difference of 0")


def _contradicted(claim: Claim, v: Verdict) -> str | None:
    """*Contradicted* when the 90% t-interval lies wholly outside -/+ the margin."""
    assert v.tost_interval is not None and v.mean is not None
    tlow, thigh = v.tost_interval
    if not (tlow > EQUIVALENCE_MARGIN or thigh < -EQUIVALENCE_MARGIN):
        return None
    return (f"{CONTRADICTED} (mean {v.mean:+.3g}{claim.unit}, 90% t-interval [{tlow:+.3g}, "
            f"{thigh:+.3g}] wholly outside -/+{EQUIVALENCE_MARGIN:g}{claim.unit}: the runs "
            f"differ by more than the margin{_half_width(claim, v)})")


def _direction_only(claim: Claim, v: Verdict, effect: float | None) -> str | None:
    """*Direction only* for a reproduced ``better`` or ``sign`` claim whose mean is below a
    :data:`ORDER_OF_MAGNITUDE`-th of the paper's effect, or whose mechanism is reversed."""
    if claim.kind not in ("better", "sign"):
        return None
    why = []
    assert v.mean is not None
    if effect is not None and effect > 0 and v.mean < effect / ORDER_OF_MAGNITUDE:
        why.append(f"the mean {v.mean:+.3g}{claim.unit} is below a tenth of the paper's "
                   f"effect {effect:+.3g}{claim.unit} ({effect / v.mean:.0f} times smaller)")
        v.shortfalls.append(f"{effect / v.mean:.0f} times below the paper's effect")
    for m in v.mechanisms:
        if m.reversed:
            assert m.t_interval is not None
            values = ", ".join(f"{x:+.3g}" for x in m.values)
            mean = sum(m.values) / len(m.values)
            why.append(f"the paper's mechanism or property is reversed: {m.statement} "
                       f"{mean:+.3g}, 95% t-interval [{m.t_interval[0]:+.3g}, "
                       f"{m.t_interval[1]:+.3g}] (seeds: {values})")
            v.shortfalls.append(f"the paper's {m.short} reversed ({mean:+.3g} "
                                f"[{m.t_interval[0]:+.3g}, {m.t_interval[1]:+.3g}])")
    if not why:
        return None
    return f"{DIRECTION_ONLY} ({_measured(claim, v)}: the sign agrees, but " + "; ".join(why) + ")"


def _decide_paired(claim: Claim, v: Verdict, effect: float | None) -> str:
    """Part A: the t-interval and sign rules of the module docstring (reversals and
    contradictions decided before)."""
    assert v.t_interval is not None and v.mean is not None
    low, high = v.t_interval
    measured = _measured(claim, v)
    if claim.kind == "equivalent":
        assert v.tost_interval is not None
        tlow, thigh = v.tost_interval
        tost = f"90% t-interval [{tlow:+.3g}, {thigh:+.3g}]"
        if within_margin(v.tost_interval):
            return f"reproduced ({tost} within -/+{EQUIVALENCE_MARGIN:g}{claim.unit})"
        return (f"not reproduced (mean {v.mean:+.3g}{claim.unit}, {tost}: reaches beyond "
                f"-/+{EQUIVALENCE_MARGIN:g}{claim.unit}"
                + (", the difference is significant at 5%" if low > 0 or high < 0 else "")
                + _half_width(claim, v) + ")")
    if claim.kind == "not_worse":
        if above_margin(v.t_interval):
            return "reproduced"
        return f"not reproduced ({measured}: the interval reaches below -{NOT_WORSE_MARGIN:g})"
    if claim.kind not in ("better", "sign"):
        raise ValueError(f"claim {claim.id}: kind {claim.kind!r} has no Part A rule")
    if low > 0 and v.positive == len(v.values):
        return "reproduced"
    why = "the interval includes 0" if low <= 0 else "the sign differs between seeds"
    excluded = _excluded(claim, v, effect)
    return f"not reproduced ({measured}: {why}" + (f"; {excluded}" if excluded else "") + ")"


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
