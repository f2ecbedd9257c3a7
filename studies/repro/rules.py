"""The verdict rules of the reproduction report, in plain words: the rules of
:mod:`studies.repro.verdicts` and the statistics of :mod:`studies.repro.stats` (the
minimum detectable effect, its power, the effect at 80% power, standardised effects), as the
report prints them."""

from __future__ import annotations

from studies.repro.plan import ROUND_TWO
from studies.repro.stats import SEED_SD, mde, mde_at_power, power
from studies.repro.studies import CPU_SEEDS, EQUIVALENCE_MARGIN, NOT_WORSE_MARGIN
from studies.repro.superseded import FIRST_ROUND_COMMIT, PENDING
from studies.repro.verdicts import (
    ABSOLUTE_TOLERANCE,
    COLLAPSE_MAX_DROP,
    COLLAPSE_SIMILARITY,
    EQUIVALENCE_CONFIDENCE,
    SIGN_STANDARD_ERRORS,
)


def verdict_rule_lines() -> list[str]:
    """The verdict rules in plain words (the rules of :mod:`studies.repro.verdicts`)."""
    n = len(CPU_SEEDS)
    sigma = SEED_SD["accuracy"][0]
    acc_mde = mde(sigma, n)
    return [
        "## Verdict rules",
        "",
        f"Part A (CPU): every claim is measured on {n} seeds "
        f"({', '.join(map(str, CPU_SEEDS))}), the same seeds for every run it compares, so "
        "each seed gives one paired value (for an accuracy claim: run A's top-1 minus run B's, "
        "in points). Values are oriented so that the paper's claim says *positive*. Only "
        "*primary* claims enter the tally; a claim *beside* a primary one (the same quantity "
        "in a second layer, a stricter baseline) and one *not comparable* with the paper's "
        "number (the reason stated) are shown, not counted. A claim whose tested form differs "
        "from the paper's sentence is marked *reworded*, with that sentence quoted.",
        "",
        "* **Minimum detectable effect (MDE), fixed before the runs.** MDE = t(0.975, n - 1) x "
        "sigma / sqrt(n), with n the planned seeds and sigma an assumed seed standard deviation "
        "of the paired value: the true effect at which, with that spread, the 95% interval's "
        "lower end is *expected* at 0, which is a power of about "
        f"{power(acc_mde, sigma, n):.0%} (noncentral t), not 50%. For an accuracy difference "
        f"sigma = {sigma:g} points, so MDE = {acc_mde:.2f} points over {n} seeds; the effect "
        f"detected with 80% power is {mde_at_power(sigma, n):.2f} points (both in the table "
        "below).",
        "* **Not testable at this scale**: the paper's effect is smaller than the MDE (for a "
        "*not worse* or *equivalent* claim: its margin is). Decided before the runs; the "
        "measured values are still shown.",
        "* **Reproduced** (*A beats B*, or a quantity has the paper's sign): the 95% Student "
        "t-interval of the mean paired value lies above 0 *and* every seed's value is positive "
        f"(sign consistency). *A is not worse than B*: the interval lies above -"
        f"{NOT_WORSE_MARGIN:g} points (the margin: the smallest that {n} seeds can test, at "
        f"least the MDE). *A and B are equivalent* (the paper: no significant difference): "
        f"the {EQUIVALENCE_CONFIDENCE:.0%} t-interval lies within -/+{EQUIVALENCE_MARGIN:g} "
        "points (two one-sided tests at 5% each).",
        "* **Reversed at this scale**: once every planned seed has run, the 95% t-interval "
        "lies entirely on the side opposite the paper (below 0; for *not worse*: below minus "
        "the margin), whatever the MDE: the study shows the other direction at its scale, "
        "which says nothing of the papers' scale but is not hidden among the untestable.",
        "* **Not reproduced**: otherwise, with the mean, the interval, the number of positive "
        "seeds and the reason (interval includes 0, signs differ, an equivalence interval "
        "beyond its margin).",
        "* **Collapsed**: a run the claim reads collapsed in pretraining (last epoch: the views' "
        f"mean cosine similarity >= {COLLAPSE_SIMILARITY}, the loss down by less than "
        f"{COLLAPSE_MAX_DROP:.0%}); the evidence is printed.",
        "* **Not yet run**: fewer seeds than planned have every number the claim needs (the "
        "finished seeds' values are shown), or only runs shortened with `--epochs` have.",
        f"* **{PENDING.capitalize()}**: a claim of a study the second round reruns "
        f"({', '.join(f'`{n}`' for n in ROUND_TWO)}) has no verdict, not even *not testable*, "
        "until every planned seed has every number it needs (a finished rerun may still be "
        f"*reversed*); beside it, the first round's result (commit {FIRST_ROUND_COMMIT}, "
        "superseded) and why it was superseded.",
        "* **Standardised effects.** Geometric quantities (uniformity, tolerance, margins) "
        "have other scales here than in the papers (uniformity about -1 in the backbone, -3 "
        "to -4 in the projector's output, -2.2 to -2.8 in DySTreSS Table 13). The results "
        "table gives each measured effect as *d* = mean / sd over the seeds, and the paper's "
        "effect rescaled by the ratio of the two baselines where both are known; the verdicts "
        "themselves rest on the intervals.",
        "* Each seed's paired bootstrap 95% interval of an accuracy difference (`contrastkit "
        "compare`, 1,000 test-set resamples) is reported beside its value: it is test-set "
        "noise within one seed, not the seed noise the verdict rests on.",
        "* **Tuned runs** (SINCERE and SupCon, issue 38): each loss's setting is the cell of "
        "its grid with the highest 1-NN accuracy in the projector's output on a validation "
        "split held out of the training split (never the test split), seed 0; ties go to the "
        "first cell. Fixed before the runs.",
        "",
        "Assumed seed standard deviations (pooled paired-difference spread of the earlier "
        "Part A runs, ResNet-18 width 8, 156 steps, `docs/reproduction.json` as of commit "
        "e5c16f6 (`git show e5c16f6:docs/reproduction.json`): for each pair "
        "of runs of a study with two seeds, (d0 - d1)^2 / 2 estimates sigma^2):",
        "",
        f"| quantity | sigma | MDE, {n} seeds | effect at 80% power, {n} seeds | from |",
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
