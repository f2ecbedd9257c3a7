"""The first screen of the reproduction report: the tally of verdicts and the results table.

:func:`tally_lines` counts the verdicts of each part's claims that are in the tally (role
``primary``; those reported beside a primary claim and those not comparable with the paper's
number are counted apart), with *reversed at this scale* as a column of its own.
:func:`results_lines` gives one row per claim: what was tested (with the paper's own sentence
when the tested form is *reworded*), the paper's effect (rescaled to this study's scale for a
geometric quantity whose scale differs), the measured mean with its 95% t-interval and its
standardised effect (mean over the seeds' spread), and the verdict's first words; the details
are in each study's section.
"""

from __future__ import annotations

from studies.repro.collection import seed_values
from studies.repro.stats import standardised
from studies.repro.studies import STUDIES, Claim, Study
from studies.repro.superseded import PENDING
from studies.repro.tuning import resolve_study
from studies.repro.verdicts import AS_MEASURED, NOT_COMPARABLE, REVERSED, Verdict, judge

#: Verdict categories of the tally, in column order (a verdict is counted under the first one
#: its text starts with; "reproduced" is matched last, being a suffix of "not reproduced").
#: A *not comparable* claim is matched too, but counted apart, by its role.
CATEGORIES = ("reproduced", REVERSED, "not reproduced", "not testable at this scale",
              "collapsed", "inconclusive", PENDING, "not yet run")
_MATCH_ORDER = (NOT_COMPARABLE, REVERSED, "not reproduced", "not testable at this scale",
                "collapsed", "inconclusive", PENDING, "not yet run", "reproduced")
ROLE_WORDS = {"beside": "beside (not counted)", "not_comparable": "not comparable (not counted)"}


def category(verdict: str) -> str:
    """The tally column of a verdict's text."""
    return next(k for k in _MATCH_ORDER if verdict.startswith(k))


def _claims(part: str) -> list[tuple[Study, Claim]]:
    return [(s, c) for s in STUDIES.values() if s.part == part for c in s.claims]


def tally_lines(summary: dict) -> list[str]:
    """The count of verdicts per part, primary claims only, and what is counted apart."""
    lines = ["## At a glance", "",
             "Primary claims per verdict (a claim reported *beside* another, e.g. in a second "
             "layer or against a stricter baseline, and one *not comparable* with the paper's "
             "number are listed in the results table but not counted). A verdict is counted "
             "once every planned seed has measured it; *not testable at this scale* is decided "
             "before the runs (the paper's effect below the planned minimum detectable one, "
             "with no run planned or every seed run). A claim whose second-round runs are not "
             "all finished is *pending rerun* and has no verdict: the results table points to "
             "its superseded first-round result.", "",
             "| part | claims | " + " | ".join(CATEGORIES) + " | beside | not comparable |",
             "|---|---|" + "---|" * (len(CATEGORIES) + 2)]
    for part, title in (("cpu", "A (CPU scale)"), ("gpu", "B (GPU, full scale)")):
        counts = dict.fromkeys(CATEGORIES, 0)
        apart = {"beside": 0, "not_comparable": 0}
        for study, claim in _claims(part):
            if claim.role != "primary":
                apart[claim.role] += 1
                continue
            counts[category(judge(claim, study, summary).verdict)] += 1
        lines.append(f"| {title} | {sum(counts.values())} | "
                     + " | ".join(str(counts[k]) for k in CATEGORIES)
                     + f" | {apart['beside']} | {apart['not_comparable']} |")
    return [*lines, ""]


def rescaled_paper_effect(claim: Claim, summary: dict, tag: str = "cpu") -> float | None:
    """The paper's effect times (this study's baseline / the paper's baseline) for a claim
    with a ``paper_baseline``; None without one or before its baseline is measured."""
    if claim.paper_baseline is None or claim.paper_value is None:
        return None
    paper_base, run, metric = claim.paper_baseline
    study = next(s for s in STUDIES.values() if claim in s.claims)
    stem = resolve_study(study, summary.get("choices") or {}).variant(run).stem
    values = seed_values(summary, tag, stem, metric)
    if not values:
        return None
    return claim.paper_value * (sum(values) / len(values)) / paper_base


def _paper_cell(claim: Claim, summary: dict) -> str:
    if claim.paper_value is None:
        return claim.paper
    cell = f"{claim.paper_value:+g}{claim.unit}"
    scaled = rescaled_paper_effect(claim, summary)
    if scaled is not None:
        cell += f" (at this study's scale: {scaled:+.3g})"
    return cell


def _verdict_cell(v: Verdict) -> str:
    """The verdict's category in bold; for a pending claim, its first-round pointer too."""
    kind = category(v.verdict)
    if kind == PENDING:
        return f"**{kind}**<br>{v.verdict[len(PENDING):].lstrip('; ')}"
    if kind == NOT_COMPARABLE:
        return f"**{kind}**<br>{AS_MEASURED}{category(v.verdict.partition(AS_MEASURED)[2])}"
    return f"**{kind}**"


def _measured_cell(v: Verdict) -> str:
    if not v.values:
        return "–"
    if v.t_interval is None:
        return f"{v.mean:+.3g} ({len(v.values)} seed)"
    low, high = v.t_interval
    return (f"{v.mean:+.3g} [{low:+.3g}, {high:+.3g}], d = {standardised(v.values):+.1f} "
            f"({len(v.values)} seeds)")


def _claim_cell(claim: Claim) -> str:
    text = claim.statement
    if claim.role in ROLE_WORDS:
        text = f"*{ROLE_WORDS[claim.role]}* {text}"
    if claim.paper_sentence:
        text += f"<br>*reworded*; the paper: \u201c{claim.paper_sentence}\u201d"
    if claim.role == "not_comparable" and claim.note:
        text += f"<br>{claim.note}"
    return text


def results_lines(summary: dict, part: str = "cpu") -> list[str]:
    """One row per claim of ``part``: tested form (and the paper's words when reworded),
    the paper's effect, the measured effect and the verdict's category."""
    lines = ["## Results (Part A)" if part == "cpu" else "## Results (Part B)", "",
             "Values are oriented so that the paper's claim says *positive*: measured mean "
             "over the seeds with its 95% t-interval and *d*, the mean in units of the seeds' "
             "standard deviation (a standardised effect, comparable between quantities of "
             "different scales). For a geometric quantity whose scale differs between the "
             "paper and this study, the paper's effect is also given rescaled by the ratio of "
             "the two baselines (this study's mean over the paper's). The verdict's reasons "
             "and each seed's value are in the study's section below.", "",
             "| study | claim | paper's effect | measured | verdict |", "|---|---|---|---|---|"]
    for study, claim in _claims(part):
        v = judge(claim, study, summary)
        lines.append(f"| {study.number} | {_claim_cell(claim)} | "
                     f"{_paper_cell(claim, summary)} | {_measured_cell(v)} | "
                     f"{_verdict_cell(v)} |")
    return [*lines, ""]
