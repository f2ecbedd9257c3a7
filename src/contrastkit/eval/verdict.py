"""One answer to "did pretraining help?": the protocols' comparisons with the baselines weighed
into one verdict that says which question each protocol answers.

Each protocol gives, for each baseline (raw pixels, random init; :mod:`.baselines`), the
accuracy difference pretrained minus baseline with its 95% paired bootstrap interval
(:func:`~contrastkit.eval.bootstrap.bootstrap_accuracy_difference`; SINCERE, Feeney & Hughes
2023, App. M: significant when the interval excludes 0). A protocol's outcome:

* ``helped``: significantly better than every baseline;
* ``partly``: significantly better than some, not significantly different from the others;
* ``not shown``: no significant difference to any baseline;
* ``worse``: significantly worse than some baseline and better than none;
* ``mixed``: better than some baseline, worse than another.

The verdict over the protocols: ``yes`` when every protocol helped; ``partly`` when some helped
(or partly) and none was worse; ``not shown`` when none differs; ``no`` when some were worse
and none better; ``mixed`` otherwise. The protocols answer different questions
(:data:`QUESTIONS`): kNN reads the features as they are, a linear probe what a classifier
trained on the labels makes of them; the verdict names each.

One source of wording: a protocol's :class:`Standing` against each baseline (at how many of its
settings it was significantly better or worse) gives its outcome, its words in the headline and
the use line (``beat raw pixels``, or ``beat raw pixels at 2 of 3 settings`` when not at every
one) and its line's summary, so none can say more than another. Differences print with
:func:`~contrastkit.eval.report.format_signed` (never a signed zero).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from torch import Tensor

from contrastkit.eval.bootstrap import bootstrap_accuracy_difference
from contrastkit.eval.report import format_signed

#: What each protocol's accuracy answers about the features.
QUESTIONS = {
    "knn": "are images of one class near each other, before any training on the labels?",
    "linear": "can a linear classifier trained on the labels read the classes off them?",
    "lowshot": "can a linear classifier trained on a few labels per class read the classes?",
}
LABELS = {"knn": "kNN", "linear": "linear probe", "lowshot": "low-shot linear probes"}

#: Confidence of the paired bootstrap intervals and their resamples.
CONFIDENCE, RESAMPLES = 0.95, 1000


@dataclass(frozen=True)
class Comparison:
    """Pretrained minus ``baseline``: accuracy difference and its paired bootstrap interval
    (fractions); ``setting``: what else it is specific to (e.g. ``16 shots``)."""

    baseline: str
    difference: float
    low: float
    high: float
    setting: str = ""

    @property
    def sign(self) -> int:
        """+1 significantly better, -1 significantly worse, 0 not significant."""
        return 1 if self.low > 0 else (-1 if self.high < 0 else 0)

    def text(self) -> str:
        """``+9.5 points vs raw pixels [+5.0, +14.0]`` (pretrained minus baseline; an end that
        is not 0 keeps its sign: ``[-0.01, +3.2]``)."""
        where = f" at {self.setting}" if self.setting else ""
        return (f"{format_signed(100 * self.difference)} points vs {self.baseline}{where} "
                f"[{format_signed(100 * self.low)}, {format_signed(100 * self.high)}]")


#: A protocol's relation to a baseline when every setting agrees.
BEAT, WORSE, SAME = "beat", "did worse than", "did not significantly differ from"


@dataclass(frozen=True)
class Standing:
    """Pretrained against one baseline over a protocol's comparisons with it (one per setting):
    at how many of its ``settings`` the difference was significantly positive (``better``) or
    negative (``worse``)."""

    baseline: str
    better: int
    worse: int
    settings: int

    @property
    def kind(self) -> str:
        """:data:`BEAT`, :data:`WORSE` or :data:`SAME` when every setting agrees, else
        ``partly``."""
        if self.better == self.settings:
            return BEAT
        if self.worse == self.settings:
            return WORSE
        return SAME if self.better == self.worse == 0 else "partly"

    def phrase(self) -> str:
        """``beat raw pixels``; when the settings differ, ``beat raw pixels at 2 of 3
        settings``, ``beat raw pixels at 1 and did worse than it at 1 of 3 settings``."""
        if self.kind != "partly":
            return f"{self.kind} {self.baseline}"
        parts = [f"beat {self.baseline} at {self.better}"] if self.better else []
        if self.worse:
            parts.append(f"{WORSE} {'it' if self.better else self.baseline} at {self.worse}")
        return " and ".join(parts) + f" of {self.settings} settings"


@dataclass(frozen=True)
class Evidence:
    """One protocol's comparisons with the baselines.

    Attributes:
        protocol: ``knn``, ``linear`` or ``lowshot`` (a key of :data:`QUESTIONS`).
        settings: how it was run, in words (``k 200, t 0.1``).
        comparisons: one per baseline (and setting).
        note: what qualifies the reading (e.g. a probe that fits its training images only).
    """

    protocol: str
    settings: str
    comparisons: tuple[Comparison, ...]
    note: str = ""

    def standings(self) -> tuple[Standing, ...]:
        """One :class:`Standing` per baseline, in the order of the comparisons."""
        out = []
        for name in dict.fromkeys(c.baseline for c in self.comparisons):
            signs = [c.sign for c in self.comparisons if c.baseline == name]
            out.append(Standing(name, signs.count(1), signs.count(-1), len(signs)))
        return tuple(out)

    @property
    def outcome(self) -> str:
        """``helped``, ``partly``, ``not shown``, ``worse`` or ``mixed`` (module docstring)."""
        standings = self.standings()
        better = any(s.better for s in standings)
        worse = any(s.worse for s in standings)
        if better and worse:
            return "mixed"
        if worse:
            return "worse"
        if all(s.kind == BEAT for s in standings):
            return "helped"
        return "partly" if better else "not shown"

    def line(self) -> str:
        """``kNN (k 200) - are images ...? Helped: +9.5 points vs raw pixels [...]; ...``;
        comparisons at several settings (low-shot) summarised per baseline."""
        label = LABELS.get(self.protocol, self.protocol)
        label = label if self.protocol == "knn" else label[:1].upper() + label[1:]
        if any(c.setting for c in self.comparisons):
            found = self._per_baseline()
        else:
            found = "; ".join(c.text() for c in self.comparisons)
        text = (f"{label} ({self.settings}) - {QUESTIONS[self.protocol]} "
                f"{self.outcome.capitalize()}: {found}.")
        return text + (f" {self.note}" if self.note else "")

    def _per_baseline(self) -> str:
        """``beat raw pixels at 2 of 3 settings (-1.0 to +3.0 points); did worse than random
        init (-28.6 to -23.2 points)``: each baseline's :meth:`Standing.phrase`, the words of
        the headline."""
        parts = []
        for standing in self.standings():
            diffs = [100 * c.difference for c in self.comparisons
                     if c.baseline == standing.baseline]
            low, high = format_signed(min(diffs)), format_signed(max(diffs))
            span = low if low == high else f"{low} to {high}"
            parts.append(f"{standing.phrase()} ({span} points)")
        return "; ".join(parts)


@dataclass(frozen=True)
class Verdict:
    """The answer over the protocols (:func:`weigh`)."""

    answer: str
    headline: str
    evidence: tuple[Evidence, ...] = field(default_factory=tuple)
    use: str = ""

    def markdown(self) -> str:
        """``## Verdict: did pretraining help?``, the headline, one line per protocol, the
        use."""
        lines = [f"* {e.line()}" for e in self.evidence]
        tail = f"\n{self.use}\n" if self.use else ""
        return ("\n## Verdict: did pretraining help?\n\n" + self.headline + "\n\n"
                + "\n".join(lines) + "\n" + tail)

    def record(self) -> dict:
        """What ``results.json`` holds under ``verdict``."""
        return {"answer": self.answer, "headline": self.headline, "use": self.use,
                "evidence": [{**asdict(e), "outcome": e.outcome,
                              "question": QUESTIONS[e.protocol]} for e in self.evidence]}


def evidence_from_record(record: dict) -> Evidence:
    """The :class:`Evidence` of one entry of :meth:`Verdict.record`'s ``evidence``."""
    comparisons = tuple(Comparison(**c) for c in record["comparisons"])
    return Evidence(record["protocol"], record["settings"], comparisons, record.get("note", ""))


def compare_with_baselines(pred: Tensor, baseline_preds: Mapping[str, Tensor], labels: Tensor,
                           seed: int, setting: str = "") -> tuple[Comparison, ...]:
    """One :class:`Comparison` per baseline: the paired bootstrap of ``pred`` against its
    predictions on the same test ``labels`` (``(n,)`` or ``(seeds, n)`` predictions; 1,000
    resamples seeded with ``seed``, 95%)."""
    out = []
    for name, other in baseline_preds.items():
        diff, low, high = bootstrap_accuracy_difference(
            pred, other, labels, n_resamples=RESAMPLES, confidence=CONFIDENCE, seed=seed)
        out.append(Comparison(name, diff, low, high, setting))
    return tuple(out)


def _the(protocol: str) -> str:
    """``kNN``, ``the linear probe``, ...: a protocol's name inside a sentence."""
    label = LABELS.get(protocol, protocol)
    return label if protocol == "knn" else f"the {label}"


def _joined(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _relation(e: Evidence) -> str:
    """``beat raw pixels and random init``, ``beat random init, did worse than raw pixels``,
    ``beat random init, beat raw pixels at 2 of 3 settings``: the baselines that every setting
    agrees on grouped by :class:`Standing` kind, the others each with its count."""
    standings = e.standings()
    grouped = {kind: [s.baseline for s in standings if s.kind == kind]
               for kind in (BEAT, WORSE, SAME)}
    parts = [f"{BEAT} {_joined(grouped[BEAT])}"] if grouped[BEAT] else []
    parts += [s.phrase() for s in standings if s.kind == "partly"]
    parts += [f"{kind} {_joined(grouped[kind])}" for kind in (WORSE, SAME) if grouped[kind]]
    return ", ".join(parts)


def _use(evidence: Sequence[Evidence]) -> str:
    """What the features are good for, per question: as they are (kNN), to a classifier
    trained on the labels (linear, low-shot)."""
    uses = {"knn": "as they are, without training on the labels (search, clustering, "
                   "labelling by example)",
            "linear": "to a classifier trained on your labels",
            "lowshot": "to a classifier trained on a few labels per class"}
    parts = [f"{uses[e.protocol]}: " + ("yes" if e.outcome == "helped" else
                                         f"pretraining {_relation(e)}")
             for e in evidence if e.protocol in uses]
    text = "; ".join(parts)
    return f"Are the features useful? {text[:1].upper()}{text[1:]}." if parts else ""


def weigh(evidence: Sequence[Evidence]) -> Verdict:
    """The verdict over ``evidence`` (module docstring).

    Raises:
        ValueError: without evidence.
    """
    if not evidence:
        raise ValueError("the verdict needs at least one protocol's comparisons")
    outcomes = [e.outcome for e in evidence]
    better = any(o in ("helped", "partly", "mixed") for o in outcomes)
    worse = any(o in ("worse", "mixed") for o in outcomes)
    if all(o == "helped" for o in outcomes):
        answer = "yes"
    elif better and not worse:
        answer = "partly"
    elif worse and not better:
        answer = "no"
    elif worse:
        answer = "mixed"
    else:
        answer = "not shown"
    clauses = "; ".join(f"under {_the(e.protocol)} pretraining {_relation(e)}" for e in evidence)
    headline = f"**{answer.capitalize()}**: {clauses} (95% paired bootstrap intervals)."
    return Verdict(answer, headline, tuple(evidence), _use(evidence))
