"""studies.repro.verdicts: every verdict of Part A's paired-seed rules, and Part B's
single-seed rules, from hand-written summaries."""

from __future__ import annotations

import csv
import dataclasses
import math

import pytest
from repro_summaries import (
    SINCERE_CELL,
    SUPCON_CELL,
    comparison_entry,
    fake_choices,
    fake_sincere_summary,
    run_entry,
)
from scipy import stats

from studies.repro.collection import read_losses
from studies.repro.plan import ROUND_TWO
from studies.repro.report import _signed
from studies.repro.stats import mde
from studies.repro.studies import STUDIES
from studies.repro.superseded import FIRST_ROUND_COMMIT, PENDING, SUPERSEDED, pending_verdict
from studies.repro.verdicts import (
    PIPELINE_CHECK,
    collapsed,
    judge,
    planned_mde,
    untestable_reason,
)

SINCERE = STUDIES["sincere"]
#: The same study as if the second round did not rerun it: the rules without *pending rerun*.
SINCERE_ELSEWHERE = dataclasses.replace(SINCERE, name="sincere_not_rerun")


def _claim(study, cid):
    return next(c for c in study.claims if c.id == cid)


def _margin_verdict(gaps, study=SINCERE):
    """Verdict of the target-noise margin claim for the given per-seed gaps (seeds 0, 1, ...)."""
    runs = {}
    for seed, gap in enumerate(gaps):
        runs |= run_entry(SINCERE_CELL, seed, {"analyze_projector/target_noise_margin": gap})
        runs |= run_entry(SUPCON_CELL, seed, {"analyze_projector/target_noise_margin": 0.0})
    return judge(_claim(study, "sincere-margin"), study,
                 {"runs": runs, "comparisons": {}, "choices": fake_choices()})


def test_paired_verdicts_on_a_fake_summary():
    summary = fake_sincere_summary()
    by_id = {c.id: judge(c, SINCERE, summary) for c in SINCERE.claims}
    margin = by_id["sincere-margin"]
    assert margin.verdict == "reproduced"
    assert margin.seeds == [0, 1, 2] and margin.values == pytest.approx([0.20, 0.21, 0.22])
    half = stats.t.ppf(0.975, 2) * 0.01 / math.sqrt(3)  # sample std of the gaps: 0.01
    assert margin.t_interval == pytest.approx((0.21 - half, 0.21 + half))
    assert margin.positive == 3
    # SINCERE's loss falls by 1, SupCon's by 2 in every seed: the opposite direction
    loss = by_id["sincere-loss"].verdict
    assert loss == ("reversed at this scale (mean -1, 95% t-interval [-1, -1], 0 of 3 seeds "
                    "positive: the interval lies below 0, the opposite direction)")
    # 1-NN: +1.0, +1.1, +1.2 points: the 90% interval within -/+3.5, equivalent
    knn1 = by_id["sincere-knn1"]
    half90 = stats.t.ppf(0.95, 2) * 0.1 / math.sqrt(3)
    assert knn1.tost_interval == pytest.approx((1.1 - half90, 1.1 + half90))
    assert knn1.verdict == (f"reproduced (90% t-interval [{1.1 - half90:+.3g}, "
                            f"{1.1 + half90:+.3g}] within -/+3.5 points)")
    assert knn1.intervals == [(-1.0, 3.0)] * 3  # the per-seed bootstrap
    knn5 = by_id["sincere-knn5"]  # -8, -7, -6 points: beyond the margin, and significant
    low = -7.0 - stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)
    assert knn5.t_interval[0] == pytest.approx(low)
    assert knn5.verdict.startswith("not reproduced (mean -7 points, 90% t-interval [-8.69, ")
    assert knn5.verdict.endswith("reaches beyond -/+3.5 points, the difference is significant "
                                 "at 5%)")
    # no run of the temperature study (rerun by the second round): every claim is pending,
    # with its first-round result and why it was superseded beside
    temperature = STUDIES["temperature"]
    for claim in temperature.claims:
        verdict = judge(claim, temperature, summary)
        assert verdict.verdict == pending_verdict(claim.id) and not verdict.values
        assert verdict.verdict.startswith(f"{PENDING}; first round ({FIRST_ROUND_COMMIT}): ")
    assert judge(_claim(temperature, "t-uniformity"), temperature, summary).verdict.endswith(
        "superseded: it read the backbone's features; the projector's output is now the "
        "claims' primary layer (fixed before the rerun), on runs of one recorded checkout")


def test_every_rerun_claim_points_to_its_first_round_result():
    """No claim of a study the second round reruns is silently without its pointer."""
    rerun = {c.id for name in ROUND_TWO for c in STUDIES[name].claims}
    assert rerun == set(SUPERSEDED)
    assert {"sincere-knn1", "t-uniformity", "dys-knn-best", "cifar2-margin"} <= rerun
    assert pending_verdict("dys-knn-best") == (
        "pending rerun (second-round plan); first round (b27d5e1): -2.70 [-4.80, -0.60] points, "
        "0/3 seeds positive: below 0, shown then as not testable (paper effect below the MDE); "
        "superseded: its SimCLR and DySTreSS records name no checkout (a seed trained again "
        "moved 200-NN by about 1 point); retrained with one recorded checkout")
    assert pending_verdict("cifar2-knn1") == (
        "pending rerun (second-round plan); new in the second round: the first round (b27d5e1) "
        "ran no CIFAR-2 study")
    # a study the second round does not rerun keeps its verdicts: SCE vs MoCo v2, untestable
    baselines = STUDIES["baselines"]
    assert "baselines" not in ROUND_TWO
    assert judge(_claim(baselines, "b-moco"), baselines, {}).verdict.startswith(
        "not testable at this scale")


def test_interval_including_zero_and_signs_that_differ():
    noisy = _margin_verdict([0.30, -0.05, 0.30])
    assert noisy.verdict.startswith("not reproduced (mean +0.183, 95% t-interval [")
    assert noisy.verdict.endswith("2 of 3 seeds positive: the interval includes 0)")
    # ten seeds: an interval above 0 but one seed of the opposite sign is not consistent
    ten = dataclasses.replace(SINCERE, seeds=tuple(range(10)))
    gaps = [1.0] * 9 + [-0.1]
    assert stats.t.interval(0.95, 9, loc=sum(gaps) / 10, scale=stats.sem(gaps))[0] > 0
    assert _margin_verdict(gaps, ten).verdict.endswith(
        "9 of 10 seeds positive: the sign differs between seeds)")
    assert _margin_verdict([1.0] * 10, ten).verdict == "reproduced"


def test_partial_study_is_not_yet_run_but_shows_its_values():
    two = fake_sincere_summary(seeds=(0, 1))
    margin = judge(_claim(SINCERE, "sincere-margin"), SINCERE_ELSEWHERE, two)
    assert margin.verdict == "not yet run (2 of 3 planned seeds finished)"
    assert margin.values == pytest.approx([0.20, 0.21]) and margin.t_interval is not None
    one = _margin_verdict([0.2], SINCERE_ELSEWHERE)
    assert one.verdict == "not yet run (1 of 3 planned seeds finished)"
    assert one.t_interval is None
    # an unfinished pretraining does not count, whatever its metrics
    summary = fake_sincere_summary()
    summary["runs"][f"cpu/{SUPCON_CELL}/seed2"]["pretrain_finished"] = False
    assert judge(SINCERE.claims[0], SINCERE_ELSEWHERE, summary).verdict.startswith(
        "not yet run (2 of 3")
    # in a study the second round reruns, the same partial runs are pending, values shown
    rerun = judge(_claim(SINCERE, "sincere-margin"), SINCERE, two)
    assert rerun.verdict == pending_verdict("sincere-margin")
    assert rerun.values == pytest.approx([0.20, 0.21])
    assert judge(SINCERE.claims[0], SINCERE, summary).verdict.startswith(PENDING)


def test_a_rerun_claim_planned_untestable_stays_pending_until_every_seed_has_run():
    """DySTreSS vs SimCLR at t = 0.2: paper effect below the MDE, but no verdict, not even
    *not testable*, before the rerun's 3 seeds: a finished rerun may still be reversed."""
    dystress = STUDIES["dystress"]
    claim = _claim(dystress, "dys-knn")
    assert untestable_reason(claim, dystress) is not None
    runs, comps = {}, {}
    for seed in (0, 1, 2):
        runs |= run_entry("dystress", seed, {"knn200/top1": 0.40 + 0.001 * seed})
        runs |= run_entry("simclr_t0.2", seed, {"knn200/top1": 0.50})
        comps |= comparison_entry("dystress", "simclr_t0.2", "knn200", seed, -0.12, -0.08,
                                  -0.10)
    assert judge(claim, dystress, {}).verdict == pending_verdict("dys-knn")
    two = {k: v for k, v in runs.items() if not k.endswith("seed2")}
    assert judge(claim, dystress, {"runs": two, "comparisons": comps}).verdict == (
        pending_verdict("dys-knn"))
    finished = judge(claim, dystress, {"runs": runs, "comparisons": comps}).verdict
    assert finished.startswith("reversed at this scale (mean -9.9 points")


def test_a_not_comparable_claim_says_so_before_what_it_measured():
    """DySTreSS's alignment: measured on every seed, but its verdict is *not comparable*, with
    the rules' outcome after it as what was measured; a claim still waiting stays pending."""
    dystress = STUDIES["dystress"]
    claim = _claim(dystress, "dys-align")
    assert claim.role == "not_comparable"
    runs = {}
    for seed in (0, 1, 2):
        runs |= run_entry("dystress", seed, {"analyze/alignment": 0.20 + 0.01 * (seed - 1)})
        runs |= run_entry("simclr_t0.2", seed, {"analyze/alignment": 0.20})
    verdict = judge(claim, dystress, {"runs": runs, "comparisons": {}}).verdict
    assert verdict.startswith("not comparable (the claim's note says why); as measured: not "
                              "reproduced (mean +0, 95% t-interval")
    two = {k: v for k, v in runs.items() if not k.endswith("seed2")}
    assert judge(claim, dystress, {"runs": two, "comparisons": {}}).verdict == (
        pending_verdict("dys-align"))
    primary = dataclasses.replace(claim, role="primary")  # the same numbers, counted
    assert judge(primary, dystress, {"runs": runs, "comparisons": {}}).verdict == (
        verdict.partition("as measured: ")[2])


def test_claims_below_the_minimum_detectable_effect_are_not_testable():
    baselines = STUDIES["baselines"]
    moco = _claim(baselines, "b-moco")
    limit = mde(1.37, 3)
    assert planned_mde(moco, baselines) == pytest.approx(limit)
    assert untestable_reason(moco, baselines) == f"paper effect +2.7 < MDE {limit:.3g} points"
    runs, comps = {}, {}
    for seed in (0, 1, 2):  # SCE 6 points above MoCo v2 in every seed: still not testable
        runs |= run_entry("sce", seed, {"knn200/top1": 0.60}) | run_entry(
            "moco", seed, {"knn200/top1": 0.54 - 0.001 * seed})
        comps |= comparison_entry("sce", "moco", "knn200", seed, 0.04, 0.08, 0.06)
    verdict = judge(moco, baselines, {"runs": runs, "comparisons": comps})
    untestable = "not testable at this scale (paper effect +2.7 < MDE 3.4 points)"
    assert judge(moco, baselines, {}).verdict == untestable  # decided before the runs
    assert verdict.values == pytest.approx([6.0, 6.1, 6.2])  # measured, and reported
    # what the study shows at its own scale is stated beside it: mean 6.1, sd 0.1, 3 seeds
    half = stats.t.ppf(0.975, 2) * 0.1 / math.sqrt(3)
    assert verdict.verdict == (
        f"{untestable}; at this scale the measured mean +6.1 points has its 95% t-interval "
        f"[{6.1 - half:+.3g}, {6.1 + half:+.3g}] above 0, the claimed direction")
    # the opposite direction in every seed
    opposite = {"runs": {**runs, **run_entry("sce", 1, {"knn200/top1": 0.40})}
                | run_entry("sce", 0, {"knn200/top1": 0.41})
                | run_entry("sce", 2, {"knn200/top1": 0.42}), "comparisons": comps}
    # is reversed at this scale, whatever the MDE, and says it was planned as untestable
    reversed_ = judge(moco, baselines, opposite).verdict
    assert reversed_.startswith("reversed at this scale (mean -12.9 points, 95% t-interval [")
    assert reversed_.endswith("the interval lies below 0, the opposite direction; planned as "
                              "not testable, paper effect +2.7 < MDE 3.4 points: the paper's "
                              "effect could not have been detected, but this direction was)")
    # signs that differ between seeds, or a missing seed: the verdict alone
    mixed = {"runs": runs | run_entry("sce", 1, {"knn200/top1": 0.50}), "comparisons": comps}
    assert judge(moco, baselines, mixed).verdict == untestable
    two_seeds = {k: v for k, v in runs.items() if not k.endswith("seed2")}
    assert judge(moco, baselines, {"runs": two_seeds, "comparisons": comps}).verdict == untestable
    # SCE's lambda / tau_m claims are not run at all
    sce = STUDIES["sce_lambda_tau"]
    assert not sce.variants
    assert judge(sce.claims[0], sce, {}).verdict == (
        "not testable at this scale (paper effect +1.4 < MDE 3.4 points; not run)")
    # a claim without a paper number, or without a noise estimate, is testable
    assert untestable_reason(_claim(STUDIES["temperature"], "t-uniformity"),
                             STUDIES["temperature"]) is None
    assert planned_mde(_claim(SINCERE, "sincere-margin"), SINCERE) is None
    # with many more seeds the same paper effect becomes testable
    eight = dataclasses.replace(baselines, seeds=tuple(range(8)))
    assert untestable_reason(moco, eight) is None


def test_collapsed_runs_give_the_collapsed_verdict_with_evidence(tmp_path):
    summary = fake_sincere_summary()
    stuck = {"pretrain/final_positive_similarity": 0.98, "pretrain/initial_loss": 6.24,
             "pretrain/final_loss": 6.20}
    assert collapsed(stuck)
    assert not collapsed(stuck | {"pretrain/final_loss": 5.0})  # the loss fell: learning
    assert not collapsed(stuck | {"pretrain/final_positive_similarity": 0.94})
    assert not collapsed({"pretrain/initial_loss": 5.5, "pretrain/final_loss": 5.5})
    for seed in (1, 2):
        summary["runs"][f"cpu/{SUPCON_CELL}/seed{seed}"]["metrics"] |= stuck
    verdicts = {judge(c, SINCERE, summary).verdict for c in SINCERE.claims}
    assert verdicts == {"collapsed (SupCon (tuned: t=0.05, lr=0.05) seed 1: last-epoch "
                        "positive cosine 0.980, loss 6.24 -> 6.20)"}
    # the collapse test reads the last epoch's logged positive similarity
    path = tmp_path / "metrics.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["epoch", "train/loss",
                                                    "train/positive_similarity"])
        writer.writeheader()
        writer.writerows([{"epoch": "0", "train/loss": "5.5", "train/positive_similarity": "0.5"},
                          {"epoch": "1", "train/loss": "5.4", "train/positive_similarity": "0.97"},
                          {"epoch": "1", "train/loss": "5.4", "train/positive_similarity": "1.0"}])
    assert read_losses(path)["final_positive_similarity"] == pytest.approx(0.985)


def test_epoch_override_runs_never_give_a_verdict():
    """A shortened pipeline-check run shows its numbers but the verdict stays 'not yet run'."""
    summary = fake_sincere_summary()
    summary["runs"] = {k.replace("cpu/", "cpu-e2/", 1): {**v, "tag": "cpu-e2", "epochs": 2}
                       for k, v in summary["runs"].items()}
    summary["comparisons"] = {k.replace("cpu/", "cpu-e2/", 1): v
                              for k, v in summary["comparisons"].items()}
    verdict = judge(SINCERE.claims[0], SINCERE_ELSEWHERE, summary)
    assert verdict.verdict == PIPELINE_CHECK and verdict.tag == "cpu-e2"
    assert verdict.verdict.startswith("not yet run") and verdict.values
    rerun = judge(SINCERE.claims[0], SINCERE, summary)  # a second-round study: pending
    assert rerun.verdict.startswith(PENDING) and rerun.values and rerun.tag == "cpu-e2"


def test_tuned_claims_wait_for_their_grid():
    """Without a choice in the summary, the tuned runs have no folder: not yet run, even
    when runs of some grid cell exist."""
    summary = fake_sincere_summary()
    summary.pop("choices")
    assert {judge(c, SINCERE_ELSEWHERE, summary).verdict for c in SINCERE.claims} == {
        "not yet run"}
    assert [judge(c, SINCERE, summary).verdict for c in SINCERE.claims] == [
        pending_verdict(c.id) for c in SINCERE.claims]


def test_not_worse_claims_reverse_only_beyond_the_margin():
    baselines = STUDIES["baselines"]
    claim = _claim(baselines, "b-ressl")
    runs, comps = {}, {}
    for seed, (sce, ressl) in enumerate(((0.50, 0.56), (0.50, 0.555), (0.50, 0.565))):
        runs |= run_entry("sce", seed, {"knn200/top1": sce}) | run_entry(
            "ressl", seed, {"knn200/top1": ressl})
        comps |= comparison_entry("sce", "ressl", "knn200", seed, -0.08, -0.03, sce - ressl)
    worse = judge(claim, baselines, {"runs": runs, "comparisons": comps}).verdict
    assert worse.startswith("reversed at this scale (mean -6 points")
    assert "below -3.5, worse by more than the margin" in worse
    slightly = {k: {**v, "metrics": {"knn200/top1": 0.52}} if k.startswith("cpu/ressl") else v
                for k, v in runs.items()}  # 2 points worse: below 0, not beyond -3.5
    assert judge(claim, baselines, {"runs": slightly, "comparisons": comps}).verdict == (
        "reproduced")


def test_part_b_keeps_its_single_seed_rules():
    gpu = STUDIES["gpu_table6"]
    sce = _claim(gpu, "g-sce")
    near = run_entry("table6_sce", 0, {"linear_d1/top1": 0.895}, tag="gpu")
    assert judge(sce, gpu, {"runs": near, "comparisons": {}}).verdict == "reproduced"
    far = run_entry("table6_sce", 0, {"linear_d1/top1": 0.88}, tag="gpu")
    assert judge(sce, gpu, {"runs": far, "comparisons": {}}).verdict == (
        "not reproduced (measured +88.000 vs paper +90.3 points, gap -2.300; more than 1 point "
        "below the paper)")
    better = _claim(gpu, "g-sce-moco")
    runs = run_entry("table6_sce", 0, {"linear_d1/top1": 0.90}, tag="gpu") | run_entry(
        "table6_moco", 0, {"linear_d1/top1": 0.87}, tag="gpu")
    above = comparison_entry("table6_sce", "table6_moco", "linear_d1", 0, 0.01, 0.05, 0.03,
                             tag="gpu")
    assert judge(better, gpu, {"runs": runs, "comparisons": above}).verdict == "reproduced"
    across = comparison_entry("table6_sce", "table6_moco", "linear_d1", 0, -0.01, 0.05, 0.03,
                              tag="gpu")
    assert "not above 0 in every seed" in judge(better, gpu,
                                                {"runs": runs, "comparisons": across}).verdict
    table3 = STUDIES["gpu_table3"]
    unif = _claim(table3, "g-dys-unif")
    one = run_entry("table3_dystress", 0, {"analyze/uniformity": -2.8}, tag="gpu") | run_entry(
        "table3_simclr", 0, {"analyze/uniformity": -2.2}, tag="gpu")
    assert judge(unif, table3, {"runs": one, "comparisons": {}}).verdict.startswith(
        "inconclusive (one seed, measured +0.600: the paper's sign")
    # per-seed values never print as a bare +0.000 when they are not zero
    assert [_signed(v) for v in (0.2, 0.00031, -0.0042, 0.0)] == [
        "+0.200", "+0.00031", "-0.0042", "+0.000"]
