"""The verdict rules of the reproduction report, in plain words, as revised by issue 54: the
rules of :mod:`studies.repro.verdicts`, the run checks of :mod:`studies.repro.trained`, the
statistics of :mod:`studies.repro.stats` (the minimum detectable effect, the effect at 80%
power, standardised effects), the counting rule (:data:`COUNTED_ROLES`) and what changed from
the page at :data:`studies.repro.superseded.PREVIOUS_COMMIT` (:func:`change_reason`)."""

from __future__ import annotations

from studies.repro.plan import ROUND_THREE
from studies.repro.stats import SEED_SD, mde, mde_at_power, power
from studies.repro.studies import CPU_SEEDS, EQUIVALENCE_MARGIN, NOT_WORSE_MARGIN
from studies.repro.superseded import PENDING, PREVIOUS_COMMIT
from studies.repro.trained import COLLAPSE_MAX_DROP, COLLAPSE_SIMILARITY, NEAR_CHANCE
from studies.repro.verdicts import (
    ABSOLUTE_TOLERANCE,
    CONTRADICTED,
    DIRECTION_ONLY,
    EQUIVALENCE_CONFIDENCE,
    EXCLUDED,
    NOT_TESTABLE,
    ORDER_OF_MAGNITUDE,
    PLANNED_POWER,
    REVERSED,
    SIGN_STANDARD_ERRORS,
)

#: The one counting rule: only claims a paper states in its own words are counted; a claim
#: read off a table that no sentence states (role ``table``) is shown and not counted, as are
#: a claim beside another (a second layer, a stricter baseline) and one not comparable.
COUNTED_ROLES = ("primary",)
#: How the page names the roles that are not counted.
ROLE_WORDS = {"beside": "beside (not counted)", "table": "read off a table (not counted)",
              "not_comparable": "not comparable (not counted)"}

#: Why a label differs from the page at :data:`PREVIOUS_COMMIT`, by the label now.
_NEW_LABEL = {
    "inconclusive": "a run it reads is not shown past its random initialisation, so it "
                    "carries no evidence either way (new rule)",
    CONTRADICTED: "its equivalence interval lies wholly outside the margin: the data "
                  "contradict the paper's \"no difference\", which *not reproduced* hid (new "
                  "label)",
    EXCLUDED: "its interval excludes the paper's effect: evidence against that effect, which "
              "plain *not testable* hid (new label)",
    DIRECTION_ONLY: "the sign agrees, but the size is an order below the paper's or the "
                    "paper's mechanism or property is reversed (new label; the verdict says "
                    "which)",
}


def change_reason(before: tuple[str, str], label: str, role: str,
                  shortfalls: list[str] | None = None, rerun: bool = False) -> str | None:
    """Why ``(label, role)`` now differs from ``before`` (the label and role at
    :data:`PREVIOUS_COMMIT`), or None when neither changed; ``shortfalls``: why a claim is
    *direction only*, when it is; ``rerun``: its label is measured on runs trained again
    since (issue 54's round), which may move it as much as the rules."""
    old_label, old_role = before
    reasons = []
    if role != old_role:
        reasons.append(f"{ROLE_WORDS.get(role, 'counted')} now, by the one counting rule: "
                       + ("read off a table, no sentence of the paper states it"
                          if role == "table" else "its role changed"))
    if label != old_label:
        if label == NOT_TESTABLE:
            sigma, n = SEED_SD["accuracy"][0], len(CPU_SEEDS)
            reasons.append(f"the threshold is now the effect detected with "
                           f"{PLANNED_POWER:.0%} power ({mde_at_power(sigma, n):.2f} points "
                           f"for an accuracy over {n} seeds), not the MDE "
                           f"({mde(sigma, n):.2f}, {power(mde(sigma, n), sigma, n):.0%} power)")
        elif label == DIRECTION_ONLY and shortfalls:
            reasons.append(f"the sign agrees, but {' and '.join(shortfalls)} (new label)")
        elif label in _NEW_LABEL:
            reasons.append(_NEW_LABEL[label])
        elif not rerun:
            reasons.append("the revised rules")
        if rerun:
            reasons.append("measured on the runs issue 54's round trained again")
    return "; ".join(reasons) or None


def verdict_rule_lines() -> list[str]:
    """The verdict rules in plain words (the rules of :mod:`studies.repro.verdicts`)."""
    n = len(CPU_SEEDS)
    sigma = SEED_SD["accuracy"][0]
    acc_mde, acc_80 = mde(sigma, n), mde_at_power(sigma, n, PLANNED_POWER)
    return [
        "## Verdict rules (revised by issue 54, before these results)",
        "",
        f"The page at {PREVIOUS_COMMIT} labelled claims by rules that hid evidence (a review "
        "found 14 of its 26 rows overreaching, understating or hiding it). The rules below "
        "replace them; they were written before this page was generated, and every claim is "
        f"labelled by them. Where a label differs from the one at {PREVIOUS_COMMIT}, the "
        "results table gives the old label and the reason beside it.",
        "",
        f"Part A (CPU): every claim is measured on {n} seeds "
        f"({', '.join(map(str, CPU_SEEDS))}), the same seeds for every run it compares, so "
        "each seed gives one paired value (for an accuracy claim: run A's top-1 minus run B's, "
        "in points). Values are oriented so that the paper's claim says *positive*. A claim "
        "whose tested form differs from the paper's sentence is marked *reworded*, with that "
        "sentence quoted. The rules apply in this order:",
        "",
        "1. **Collapsed**: a run the claim reads collapsed in pretraining: in its last epoch the "
        f"two views' mean cosine similarity was >= {COLLAPSE_SIMILARITY} (every embedding "
        f"nearly the same vector) and either its loss fell by less than "
        f"{COLLAPSE_MAX_DROP:.0%} or its kNN accuracy (its validation 1-NN for a grid cell) "
        f"was within {NEAR_CHANCE:g} points of chance. The same rule labels the grids' cells.",
        "2. **Not yet run**: fewer seeds than planned have every number the claim needs (the "
        "finished seeds' values are shown), or only runs shortened with `--epochs` have.",
        "3. **Inconclusive (not trained)**: a trained run the claim reads is not shown past its "
        "random initialisation: its gain over the same network untrained with the same seed "
        "(the claims' layer and protocol) has a 95% t-interval not above 0. It compares "
        "networks not shown to have learned: evidence neither way.",
        f"4. **{REVERSED.capitalize()}**: the 95% t-interval lies entirely on the side "
        "opposite the paper (below 0; for *not worse*: below minus the margin), whatever the "
        "power planned: the study shows the other direction at its scale, which says nothing "
        "of the papers' scale but is not hidden among the untestable.",
        f"5. **{CONTRADICTED.capitalize()}**: a claim that two runs are equivalent whose "
        f"{EQUIVALENCE_CONFIDENCE:.0%} t-interval lies wholly outside -/+"
        f"{EQUIVALENCE_MARGIN:g} points: they differ by more than the margin. Its verdict "
        "also says when the interval's half-width at the seeds' spread is at least the "
        "margin, i.e. when the test could not have passed even at a true difference of 0.",
        f"6. **{NOT_TESTABLE.capitalize()}**: fixed before the runs, the paper's effect is "
        f"below the effect {n} seeds detect with {PLANNED_POWER:.0%} power (for a *not "
        "worse* or *equivalent* claim: its margin is). **Not testable, the paper's effect "
        "excluded**: such a claim whose 95% t-interval nonetheless lies below the paper's "
        "effect (at this study's scale where the paper's baseline differs): evidence against "
        "the effect the paper reports, not against its direction. Either way a t-interval "
        "that excludes 0 is stated beside, as what the study shows at its own scale; for an "
        "*equivalent* claim also whether its 90% t-interval lies within the margin all the "
        "same, and in how many seeds the paper's own per-seed bootstrap test finds a "
        "difference.",
        "7. **Reproduced** (*A beats B*, or a quantity has the paper's sign): the 95% Student "
        "t-interval of the mean paired value lies above 0 *and* every seed's value is positive "
        f"(sign consistency). *A is not worse than B*: the interval lies above -"
        f"{NOT_WORSE_MARGIN:g} points. *A and B are equivalent*: the "
        f"{EQUIVALENCE_CONFIDENCE:.0%} t-interval lies within -/+{EQUIVALENCE_MARGIN:g} "
        f"points (two one-sided tests at 5% each). **{DIRECTION_ONLY.capitalize()}** instead "
        "when the sign agrees but the measured mean is below a "
        f"{'tenth' if ORDER_OF_MAGNITUDE == 10 else ORDER_OF_MAGNITUDE} of the paper's effect, "
        "or the paper's stated mechanism or property, measured seed by seed like the claim, "
        "has its 95% t-interval below 0 (SINCERE's margin: the paper says SINCERE lowers the "
        "similarity to the nearest noise image; Wang & Liu's local separation: the positive "
        "lies above its nearest negative).",
        "8. **Not reproduced**: otherwise, with the mean, the interval, the number of positive "
        "seeds and the reason (interval includes 0, signs differ), and whether the interval "
        "excludes the paper's effect.",
        f"9. **{PENDING.capitalize()}**: a claim of a study issue 54's round trains again "
        f"({', '.join(f'`{s}`' for s in ROUND_THREE)}) has no verdict of its own until every "
        "planned seed has every number it needs from runs whose records name a clean commit "
        f"(a collapse aside); beside it, what these rules make of the runs at "
        f"{PREVIOUS_COMMIT} that it replaces, and why they were replaced.",
        "",
        "**Counting**: one rule for every claim: a claim the paper states in its own words "
        "is counted; one read off a paper's table that no sentence states is shown, *read off "
        "a table (not counted)*, because a table lists numbers its authors may not claim as "
        "findings (Table 6 of SCE reproduces ReSSL and MoCo v2 as baselines; Table 13 of "
        "DySTreSS reports an alignment its text does not claim). A claim *beside* a primary "
        "one (the same quantity in a second layer, a stricter baseline) and one *not "
        "comparable* with the paper's number (the reason stated) are shown, not counted.",
        "",
        "**Tuned runs** (SINCERE, SupCon, ReSSL): each setting is the cell of its grid with the "
        "highest score on a validation split held out of the training split (never the test "
        "split), seed 0; ties go to the first cell. Fixed before the runs. A grid's choice is "
        "*interior* when, on each setting it sweeps, the nearest cells below and above it "
        "(of the grid or of an earlier grid that bounds it) both score lower; each grid's "
        "section says whether, and when not, what to run next or why the grid stops there.",
        "",
        f"**The thresholds.** The minimum detectable effect (MDE) = t(0.975, n - 1) x sigma / "
        "sqrt(n), with n the planned seeds and sigma an assumed seed standard deviation of the "
        "paired value, is the true effect at which the 95% interval's lower end is *expected* "
        f"at 0: a power of only about {power(acc_mde, sigma, n):.0%} (noncentral t). The "
        f"not-testable threshold is the effect detected with {PLANNED_POWER:.0%} power "
        f"instead: for an accuracy difference (sigma = {sigma:g} points) {acc_80:.2f} points "
        f"over {n} seeds, against the MDE's {acc_mde:.2f}; so the {NOT_WORSE_MARGIN:g}-point "
        "margins are not testable either.",
        "",
        "* **Standardised effects.** Geometric quantities (uniformity, tolerance, margins) "
        "have other scales here than in the papers (uniformity about -1 in the backbone, -3 "
        "to -4 in the projector's output, -2.2 to -2.8 in DySTreSS Table 13). The results "
        "table gives each measured effect as *d* = mean / sd over the seeds, and the paper's "
        "effect rescaled by the ratio of the two baselines where both are known.",
        "* Each seed's paired bootstrap 95% interval of an accuracy difference (`contrastkit "
        "compare`, 1,000 test-set resamples) is reported beside its value: it is test-set "
        "noise within one seed, not the seed noise the verdict rests on.",
        "",
        "Assumed seed standard deviations (pooled paired-difference spread of the earlier "
        "Part A runs, ResNet-18 width 8, 156 steps, `docs/reproduction.json` as of commit "
        "e5c16f6 (`git show e5c16f6:docs/reproduction.json`): for each pair "
        "of runs of a study with two seeds, (d0 - d1)^2 / 2 estimates sigma^2):",
        "",
        f"| quantity | sigma | MDE, {n} seeds | effect at 80% power, {n} seeds (the threshold) "
        "| from |",
        "|---|---|---|---|---|",
        *(f"| {key} | {sd:g} | {mde(sd, n):.3g} | {mde_at_power(sd, n):.3g} | {source} |"
          for key, (sd, source) in SEED_SD.items()),
        "",
        "Part B (GPU, one seed per run) keeps its own rules: *A beats B* when the seed's "
        "bootstrap interval lies above 0, *not worse* when it does not lie below 0, other "
        "quantities are *inconclusive* with one seed (with more: the paper's sign in every seed "
        f"and a mean above {SIGN_STANDARD_ERRORS:g} standard errors), absolute numbers are "
        f"reproduced at most {ABSOLUTE_TOLERANCE:g} point below the paper's.",
        "",
    ]
