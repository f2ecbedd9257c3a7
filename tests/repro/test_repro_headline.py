"""studies.repro.headline: the page's first screen says the scale first, what is reproduced and
what is not, every reversal, the layer flip, DySTreSS's uniformity over both rounds, the
pending claims, the counted runs without a clean commit and how many labels changed."""

from __future__ import annotations

import re

import pytest
from repro_summaries import fake_sincere_summary, run_entry
from scipy import stats

from studies.repro.report import render_report
from studies.repro.superseded import FIRST_ROUND_COMMIT, superseded_runs


def _summary():
    """Study 1 (margin reproduced, loss reversed), the temperature study (uniformity
    reproduced on the projector's output, reversed on the backbone's features) and DySTreSS's
    uniformity against SimCLR at t = 0.2 (+0.05, -0.03, +0.02); SimCLR t = 0.1's seed 0 names
    no commit."""
    summary = fake_sincere_summary()
    for seed in (0, 1, 2):
        for stem, projector, backbone in (("simclr_t0.1", -3.67, -0.80),
                                          ("simclr_t0.5", -2.99, -1.12)):
            summary["runs"] |= run_entry(stem, seed, {
                "analyze_projector/uniformity": projector + 0.01 * seed * (stem[-1] == "1"),
                "analyze/uniformity": backbone - 0.01 * seed * (stem[-1] == "5")})
        summary["runs"] |= run_entry("simclr_t0.2", seed, {"analyze/uniformity": -1.0})
        summary["runs"] |= run_entry("dystress", seed, {
            "analyze/uniformity": -1.0 - (0.05, -0.03, 0.02)[seed]})
    summary["runs"]["cpu/simclr_t0.1/seed0"]["provenance"] = {}
    return summary


def test_the_headline_says_the_scale_first_and_what_is_and_is_not_reproduced():
    text = render_report(_summary())
    head = text[text.index("## Headline"):text.index("## Verdict rules")]
    bullets = [line for line in head.splitlines() if line.startswith("* ")]
    assert bullets[0].startswith("* **Scale.** Part A, every number below: ResNet-18 at width "
                                 "16 (a quarter of its width) trained on 10,000 CIFAR-10 images")
    assert "kNN classifiers (1-, 5-, 200-NN) where SCE and Wang & Liu report linear " \
           "probes, 3 paired seeds per claim" in bullets[0]
    assert ("* **Reproduced**, 2 of the 20 counted claims: SINCERE's wider target-noise margin, "
            "a smaller temperature gives a more uniform embedding (projector's output).") in head
    assert ("* **No accuracy-superiority claim of any paper is reproduced at this scale**: "
            "*not testable at this scale*: SCE's lambda = 0.5 beats lambda = 0, ") in head
    assert "SCE beats MoCo v2\u2020, SCE is not worse than ReSSL\u2020" in head
    # what an untestable claim's seeds show all the same: an equivalence within the margin
    assert ("* **Not testable at this scale**: SINCERE's 1-NN accuracy equals SupCon's (its "
            "90% t-interval lies within the margin all the same), SCE's lambda = 0.5 beats "
            "lambda = 0 (not run), ") in head
    # claims whose runs are not shown to learn are named too (here only pending ones are)
    assert "* **Evidence neither way** (a run not shown to learn): none." in head
    # every reversal, counted or not
    assert ("* **Reversals**: counted: SINCERE's training loss falls further than SupCon's; "
            "beside (not counted): a smaller temperature gives a more uniform embedding "
            "(backbone's features); read off a table (not counted): ReSSL beats MoCo "
            "v2\u2020.") in head
    assert ("* **Wang & Liu's claims flip with the layer**: a smaller temperature gives a more "
            "uniform embedding: *reproduced* on the projector's output, *reversed at this "
            "scale* on the backbone's features.") in head
    assert ("* **Pending issue 54's rerun** (6 counted claims, \u2020 above): on the 0f3dae1 "
            "runs they replace the revised rules give *inconclusive (not trained)*: SINCERE's "
            "wider target-noise margin (CIFAR-2), ") in head
    assert "* **Provenance**: 1 counted run's record names no clean commit: simclr_t0.1 s0." \
        in head
    # as many changed labels as the results table gives old ones
    results = text[text.index("## Results (Part A)"):text.index("## Deviations")]
    changed = int(re.search(r"\* \*\*Labels\*\*: (\d+) of the 26 Part A rows", head).group(1))
    assert changed == results.count("<br>was *") > 0


def test_the_headline_pools_dystress_uniformity_over_both_rounds():
    """The first round (b27d5e1, the extract kept in git) went the paper's way, the second
    not: both given, and the 6 seeds pooled."""
    first = [r["metrics"]["analyze/uniformity"] for r in (
        superseded_runs(FIRST_ROUND_COMMIT)["runs"][f"cpu/{stem}/seed{s}"]
        for s in (0, 1, 2) for stem in ("simclr_t0.2", "dystress"))]
    values = [first[i] - first[i + 1] for i in (0, 2, 4)] + [0.05, -0.03, 0.02]
    assert values[:3] == pytest.approx([0.0756, 0.0401, 0.0560], abs=1e-4)
    mean = sum(values) / 6
    half = stats.t.ppf(0.975, 5) * stats.tstd(values) / 6 ** 0.5
    text = render_report(_summary())
    assert ("* **DySTreSS's uniformity flipped between rounds** on identical configs (Table "
            "13's direction, backbone features): first round (b27d5e1) +0.057 [+0.013, +0.101] "
            "(reproduced); second +0.013 [-0.087, +0.114] (not reproduced). The 6 seeds pooled: "
            f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}], whose 95% t-interval "
            "includes 0 and lies below the paper's effect at this study's scale, +0.28.") in text
