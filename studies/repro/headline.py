"""The first screens of the reproduction report: the headline, the tally of labels and the
results table.

:func:`headline_lines` says on one screen what the study is and shows: its scale first, then
which counted claims are reproduced, which go against the papers, that no accuracy-superiority
claim is reproduced at this scale, every reversal wherever it is counted or shown, the Wang &
Liu claims that flip with the layer, DySTreSS's uniformity over both rounds (6 seeds pooled),
the claims waiting for issue 54's rerun, the counted runs whose records name no clean commit
and how many labels the revised rules changed. :func:`tally_lines` counts the labels of each
part's counted claims (:data:`studies.repro.rules.COUNTED_ROLES`; the others are counted
apart). :func:`results_lines` gives one row per claim: what was tested (with the paper's own
sentence when the tested form is *reworded*), the paper's effect (rescaled to this study's
scale for a geometric quantity whose scale differs), the measured mean with its 95%
t-interval and its standardised effect, and the label, with the label at
:data:`studies.repro.superseded.PREVIOUS_COMMIT` and the reason beside each one that changed.
"""

from __future__ import annotations

from studies.repro.lightly_anchor import anchor_headline
from studies.repro.plan import ROUND_THREE
from studies.repro.rules import COUNTED_ROLES, ROLE_WORDS, change_reason
from studies.repro.schema import Claim, Study
from studies.repro.stats import standardised, t_interval
from studies.repro.studies import CPU_SEEDS, STUDIES
from studies.repro.superseded import (
    FIRST_ROUND_COMMIT,
    PENDING,
    PREVIOUS,
    PREVIOUS_COMMIT,
    superseded_runs,
)
from studies.repro.verdicts import (
    AS_MEASURED,
    CATEGORIES,
    CONTRADICTED,
    DIRECTION_ONLY,
    EXCLUDED,
    NOT_COMPARABLE,
    NOT_TESTABLE,
    NOT_TRAINED,
    REVERSED,
    Verdict,
    above_margin,
    category,
    judge,
    rescaled_paper_effect,
    within_margin,
)

#: The roles a claim may have that the tally counts apart, in column order.
APART = ("beside", "table", "not_comparable")


def _claims(part: str) -> list[tuple[Study, Claim]]:
    return [(s, c) for s in STUDIES.values() if s.part == part for c in s.claims]


def label(v: Verdict) -> str:
    """The claim's label: for a pending claim, that of the runs it replaces."""
    return category((v.superseded or v).verdict)


def label_words(v: Verdict) -> str:
    """:func:`label` as the headline says it (*inconclusive (not trained)* in full)."""
    if (v.superseded or v).verdict.startswith(NOT_TRAINED):
        return f"{NOT_TRAINED})"
    return label(v)


def label_change(claim: Claim, v: Verdict) -> str | None:
    """``was *X* at 0f3dae1: reason`` when the claim's label or role differs from the page at
    :data:`PREVIOUS_COMMIT`; None when neither does, or while it has no label."""
    now = label(v)
    if claim.id not in PREVIOUS or now in ("not yet run", PENDING):
        return None
    rerun = v.superseded is None and any(claim in s.claims for s in STUDIES.values()
                                         if s.name in ROUND_THREE)
    why = change_reason(PREVIOUS[claim.id], now, claim.role, (v.superseded or v).shortfalls,
                        rerun)
    if why is None:
        return None
    old_label, old_role = PREVIOUS[claim.id]
    counted = ", counted" if old_role in COUNTED_ROLES and claim.role not in COUNTED_ROLES else ""
    return f"was *{old_label}*{counted} at {PREVIOUS_COMMIT}: {why}"


def tally_lines(summary: dict) -> list[str]:
    """The count of labels per part, counted claims only, and what is counted apart."""
    apart_words = {"beside": "beside", "table": "read off a table",
                   "not_comparable": "not comparable"}
    lines = ["## At a glance", "",
             "Counted claims per label (a claim *beside* another, one *read off a table* that "
             "no sentence of the paper states, and one *not comparable* with the paper's "
             "number are shown in the results table but counted apart, by the counting rule "
             "above). A claim whose rerun (issue 54) is not finished is counted as *pending*; "
             f"the results table gives what the revised rules make of the {PREVIOUS_COMMIT} "
             "runs it replaces.", "",
             "| part | claims | " + " | ".join(CATEGORIES) + " | "
             + " | ".join(apart_words[r] for r in APART) + " |",
             "|---|---|" + "---|" * (len(CATEGORIES) + len(APART))]
    for part, title in (("cpu", "A (CPU scale)"), ("gpu", "B (GPU, full scale)")):
        counts = dict.fromkeys(CATEGORIES, 0)
        apart = dict.fromkeys(APART, 0)
        for study, claim in _claims(part):
            if claim.role not in COUNTED_ROLES:
                apart[claim.role] += 1
                continue
            counts[category(judge(claim, study, summary).verdict)] += 1
        lines.append(f"| {title} | {sum(counts.values())} | "
                     + " | ".join(str(counts[k]) for k in CATEGORIES) + " | "
                     + " | ".join(str(apart[r]) for r in APART) + " |")
    return [*lines, ""]


def _paper_cell(claim: Claim, study: Study, summary: dict) -> str:
    if claim.paper_value is None:
        return claim.paper
    cell = f"{claim.paper_value:+g}{claim.unit}"
    scaled = rescaled_paper_effect(claim, study, summary)
    if scaled is not None:
        cell += f" (at this study's scale: {scaled:+.3g})"
    return cell


def _verdict_cell(claim: Claim, v: Verdict) -> str:
    """The label in bold, the previous label and reason where it changed; for a pending claim,
    the label of the runs it replaces."""
    kind = category(v.verdict)
    if kind == NOT_COMPARABLE:
        cell = f"**{kind}**<br>{AS_MEASURED}{category(v.verdict.partition(AS_MEASURED)[2])}"
    elif v.superseded is not None:
        cell = (f"**{PENDING}**<br>{PREVIOUS_COMMIT}'s runs, revised rules: "
                f"**{category(v.superseded.verdict)}**")
    else:
        cell = f"**{kind}**"
    change = label_change(claim, v)
    return cell + (f"<br>{change}" if change else "")


def _measured_cell(v: Verdict) -> str:
    shown, prefix = v, ""
    if v.superseded is not None and not v.values:
        shown, prefix = v.superseded, f"{PREVIOUS_COMMIT}'s runs: "
    if not shown.values:
        return "–"
    if shown.t_interval is None:
        return f"{prefix}{shown.mean:+.3g} ({len(shown.values)} seed)"
    low, high = shown.t_interval
    return (f"{prefix}{shown.mean:+.3g} [{low:+.3g}, {high:+.3g}], "
            f"d = {standardised(shown.values):+.1f} ({len(shown.values)} seeds)")


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
    the paper's effect, the measured effect and the label (with the previous one where it
    changed)."""
    lines = ["## Results (Part A)" if part == "cpu" else "## Results (Part B)", "",
             "Values are oriented so that the paper's claim says *positive*: measured mean "
             "over the seeds with its 95% t-interval and *d*, the mean in units of the seeds' "
             "standard deviation (a standardised effect, comparable between quantities of "
             "different scales). For a geometric quantity whose scale differs between the "
             "paper and this study, the paper's effect is also given rescaled by the ratio of "
             "the two baselines (this study's mean over the paper's). Where a label differs "
             f"from the page at {PREVIOUS_COMMIT}, the old one and the reason follow it. The "
             "verdict's reasons and each seed's value are in the study's section below.", "",
             "| study | claim | paper's effect | measured | label |", "|---|---|---|---|---|"]
    for study, claim in _claims(part):
        v = judge(claim, study, summary)
        lines.append(f"| {study.number} | {_claim_cell(claim)} | "
                     f"{_paper_cell(claim, study, summary)} | {_measured_cell(v)} | "
                     f"{_verdict_cell(claim, v)} |")
    return [*lines, ""]


def _short(claim: Claim) -> str:
    return claim.short or claim.statement


def _pooled_uniformity(summary: dict) -> str:
    """DySTreSS's uniformity against SimCLR at t = 0.2 in both rounds and pooled."""
    study = STUDIES["dystress"]
    claim = next(c for c in study.claims if c.id == "dys-unif")
    rounds = [(f"first round ({FIRST_ROUND_COMMIT})",
               judge(claim, study, superseded_runs(FIRST_ROUND_COMMIT))),
              ("second", judge(claim, study, summary))]
    parts = []
    for name, v in rounds:
        if v.t_interval is None:
            return ""
        parts.append(f"{name} {v.mean:+.3f} [{v.t_interval[0]:+.3f}, {v.t_interval[1]:+.3f}] "
                     f"({category(v.verdict)})")
    values = [x for _, v in rounds for x in v.values]
    mean, low, high = t_interval(values)
    where = ("includes 0" if low <= 0 <= high else "lies above 0" if low > 0 else
             "lies below 0")
    effect = rescaled_paper_effect(claim, study, summary) or claim.paper_value
    assert effect is not None
    return (f"* **DySTreSS's uniformity flipped between rounds** on identical configs (Table "
            f"13's direction, backbone features): {'; '.join(parts)}. The {len(values)} seeds "
            f"pooled: {mean:+.3f} [{low:+.3f}, {high:+.3f}], whose 95% t-interval {where} and "
            f"{'lies below' if high < effect else 'reaches'} the paper's effect at this "
            f"study's scale, {effect:+.2f}.")


def _layer_flip(judged: dict[str, tuple[Claim, Verdict]]) -> str:
    """The Wang & Liu claims whose label differs between the projector's output and the
    backbone's features."""
    flips = []
    for cid, (claim, v) in judged.items():
        beside = judged.get(f"{cid}-backbone")
        if beside is not None and label(v) != label(beside[1]):
            flips.append(f"{_short(claim).split(' (')[0]}: *{label(v)}* on the projector's "
                         f"output, *{label(beside[1])}* on the backbone's features")
    if not flips:
        return ""
    return ("* **Wang & Liu's claims flip with the layer**: " + "; ".join(flips) + ". The "
            "projector's output is the claims' layer (the loss's embedding), fixed after the "
            f"first round ({FIRST_ROUND_COMMIT}), which read the backbone and found the other "
            "direction.")


def uncommitted_counted_runs(summary: dict,
                             judged: dict[str, tuple[Claim, Verdict]] | None = None) -> list[str]:
    """The counted runs (those counted claims read, the random inits of their studies among
    them) whose records name no clean commit (``judged``: the Part A claims' verdicts, by id,
    when already made)."""
    if judged is None:
        judged = {c.id: (c, judge(c, s, summary)) for s, c in _claims("cpu")}
    return sorted({run for claim, v in judged.values() if claim.role in COUNTED_ROLES
                   for run in v.uncommitted})


def _grouped(items: list[tuple[str, str]]) -> str:
    """``*label*: a, b; *other*: c`` from ``(label, text)`` pairs, labels in first-seen
    order; ``none`` when empty."""
    groups: dict[str, list[str]] = {}
    for name, text in items:
        groups.setdefault(name, []).append(text)
    return "; ".join(f"*{name}*: {', '.join(texts)}" for name, texts in groups.items()) or "none"


def _untestable(c: Claim, v: Verdict) -> str:
    """A not-testable claim's short text, with what its seeds show all the same: an
    equivalence whose 90% t-interval lies within the margin, a *not worse* whose 95%
    t-interval lies above minus the margin, or no run at all."""
    if not v.values:
        return f"{_short(c)} (not run)"
    if c.kind == "equivalent" and v.tost_interval is not None and within_margin(
            v.tost_interval):
        return f"{_short(c)} (its 90% t-interval lies within the margin all the same)"
    if c.kind == "not_worse" and v.t_interval is not None and above_margin(v.t_interval):
        return f"{_short(c)} (its 95% t-interval lies above minus the margin all the same)"
    return _short(c)


#: Marks a claim judged on the runs its pending rerun replaces.
_ON_PREVIOUS = "\u2020"


def headline_lines(summary: dict) -> list[str]:
    """The one-screen headline (see the module docstring)."""
    judged = {c.id: (c, judge(c, s, summary)) for s, c in _claims("cpu")}
    counted = [(c, v) for c, v in judged.values() if c.role in COUNTED_ROLES]
    settled = [(c, v) for c, v in counted if v.superseded is None]
    pending = [(c, v) for c, v in counted if v.superseded is not None]

    def among(labels: tuple[str, ...], claims: list[tuple[Claim, Verdict]]
              ) -> list[tuple[str, str]]:
        return [(label_words(v), _short(c)) for c, v in claims if label(v) in labels]

    def marked(c: Claim, v: Verdict) -> str:
        return _short(c) + (_ON_PREVIOUS if v.superseded is not None else "")

    superiority = [(label_words(v), marked(c, v)) for c, v in counted
                   if c.kind in ("better", "not_worse") and c.unit == " points"]
    shown = "reproduced" in {name for name, _ in superiority}
    reversals = []
    for role in ("primary", "beside", "table"):
        found = [marked(c, v) for c, v in judged.values()
                 if c.role == role and label(v) == REVERSED]
        reversals.append(f"{'counted' if role == 'primary' else ROLE_WORDS[role]}: "
                         f"{', '.join(found) or 'none'}")
    changed = sum(label_change(c, v) is not None for c, v in judged.values())
    uncommitted = uncommitted_counted_runs(summary, judged)
    reproduced = among(("reproduced",), settled)
    untestable = [_untestable(c, v) for c, v in settled if label(v) == NOT_TESTABLE]
    bullets = [
        "* **Scale.** Part A, every number below: ResNet-18 at width 16 (a quarter of its "
        "width) trained on 10,000 CIFAR-10 images (a fifth; CIFAR-2: 4,000) for 30 epochs "
        "(1,170 steps; the papers train 200 to 800 epochs on all 50,000), evaluated by kNN "
        "classifiers (1-, 5-, 200-NN) where SCE and Wang & Liu report linear probes, "
        f"{len(CPU_SEEDS)} paired seeds per claim. It tests directions at this scale, not the "
        "papers' numbers; Part B, the papers' scale on a GPU, has no run yet.",
        f"* **Reproduced**, {len(reproduced)} of the {len(counted)} counted claims: "
        f"{', '.join(t for _, t in reproduced) or 'none'}.",
        "* **Direction only**, the sign and no more: "
        f"{', '.join(t for _, t in among((DIRECTION_ONLY,), settled)) or 'none'}.",
        "* **Against the paper**: "
        f"{_grouped(among((REVERSED, CONTRADICTED, EXCLUDED, 'not reproduced'), settled))}.",
        "* **Not testable at this scale**: "
        f"{', '.join(untestable) or 'none'}.",
        "* **Evidence neither way** (a run not shown to learn): "
        f"{_grouped(among(('inconclusive', 'collapsed'), settled))}.",
        ("* **Accuracy-superiority claims**: " if shown else
         "* **No accuracy-superiority claim of any paper is reproduced at this scale**: ")
        + _grouped(superiority) + ".",
        f"* **Reversals**: {'; '.join(reversals)}.",
        _layer_flip(judged),
        _pooled_uniformity(summary),
        anchor_headline(summary),
    ]
    if pending:
        replaced = _grouped([(label_words(v), _short(c)) for c, v in pending])
        bullets.append(f"* **Pending issue 54's rerun** ({len(pending)} counted claims, "
                       f"{_ON_PREVIOUS} above): on the {PREVIOUS_COMMIT} runs they replace the "
                       f"revised rules give {replaced}.")
    bullets += [
        "* **Provenance**: " + (
            (f"{len(uncommitted)} counted runs' records name" if len(uncommitted) > 1 else
             "1 counted run's record names") + f" no clean commit: {', '.join(uncommitted)}."
            if uncommitted else "every counted run's record names a clean commit."),
        f"* **Labels**: {changed} of the {len(judged)} Part A rows have another label than at "
        f"{PREVIOUS_COMMIT} under the revised rules below; the results table gives each old "
        "label and the reason.",
    ]
    return ["## Headline", "", *(b for b in bullets if b), "",
            "The details follow: the rules, the results, each study's runs, Part B's plan and "
            "the cost.", ""]
