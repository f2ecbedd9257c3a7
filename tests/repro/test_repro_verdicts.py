"""studies.repro.verdicts: every label of Part A's paired-seed rules as revised by issue 54, and
Part B's single-seed rules, from hand-written summaries."""

from __future__ import annotations

import csv
import dataclasses
import math

import pytest
from repro_summaries import (
    SINCERE_CELL,
    SUPCON_CELL,
    SUPCON_TUNED,
    comparison_entry,
    fake_choices,
    fake_sincere_summary,
    run_entry,
)
from scipy import stats

from studies.repro.collection import read_losses
from studies.repro.headline import _untestable
from studies.repro.plan import ROUND_THREE
from studies.repro.report import _signed
from studies.repro.stats import mde_at_power
from studies.repro.studies import STUDIES
from studies.repro.superseded import PENDING, PREVIOUS, PREVIOUS_COMMIT, RERUN_WHY
from studies.repro.verdicts import (
    PIPELINE_CHECK,
    category,
    judge,
    planned_effect,
    untestable_reason,
)

SINCERE = STUDIES["sincere"]
#: The same studies as if issue 54's round did not rerun them: the rules without *pending*.
SINCERE_ELSEWHERE = dataclasses.replace(SINCERE, name="sincere_not_rerun")
BASELINES_ELSEWHERE = dataclasses.replace(STUDIES["baselines"], name="baselines_not_rerun")
#: The not-testable threshold of an accuracy difference over 3 seeds (80% power).
POWER_80 = f"the effect 3 seeds detect with 80% power, {mde_at_power(1.37, 3):.3g} points"


def _claim(study, cid):
    return next(c for c in study.claims if c.id == cid)


def _margin_verdict(gaps, study=SINCERE, noise=None):
    """Verdict of the target-noise margin claim for the given per-seed gaps (seeds 0, 1, ...);
    ``noise``: SupCon's median nearest-noise similarity minus SINCERE's, per seed."""
    runs = {}
    for seed, gap in enumerate(gaps):
        extra = {} if noise is None else {
            "analyze_projector/noise_similarity_median": 0.5 - noise[seed]}
        runs |= run_entry(SINCERE_CELL, seed, {"analyze_projector/target_noise_margin": gap,
                                               **extra})
        runs |= run_entry(SUPCON_CELL, seed, {"analyze_projector/target_noise_margin": 0.0,
                                              "analyze_projector/noise_similarity_median": 0.5})
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
    # 1-NN: +1.0, +1.1, +1.2 points, within the margin, but the 3.5-point margin is below the
    # effect 3 seeds detect with 80% power: not testable
    knn1 = by_id["sincere-knn1"]
    half90 = stats.t.ppf(0.95, 2) * 0.1 / math.sqrt(3)
    assert knn1.tost_interval == pytest.approx((1.1 - half90, 1.1 + half90))
    assert knn1.intervals == [(-1.0, 3.0)] * 3  # the per-seed bootstrap
    # beside it, what the seeds measured: the two one-sided tests pass all the same, the 95%
    # interval excludes 0, and no seed's bootstrap interval (the paper's own test) does
    half95 = stats.t.ppf(0.975, 2) * 0.1 / math.sqrt(3)
    assert knn1.verdict == (
        f"not testable at this scale (margin 3.5 < {POWER_80}); at this scale the 90% "
        f"t-interval [{1.1 - half90:+.3g}, {1.1 + half90:+.3g}] lies within -/+3.5 points: "
        f"the two one-sided tests pass all the same; the 95% t-interval [{1.1 - half95:+.3g}, "
        f"{1.1 + half95:+.3g}] excludes 0: the difference is significant at 5%; each seed's "
        "bootstrap 95% interval, the paper's own test, excludes 0 in 0 of 3 seeds")
    # +1, +3, +5 points, each seed's bootstrap interval above 0 but the second: the 90%
    # interval reaches beyond the margin and the 95% one includes 0
    spread = {**summary, "runs": dict(summary["runs"]), "comparisons": dict(summary["comparisons"])}
    for seed, diff in enumerate((1.0, 3.0, 5.0)):
        metrics = dict(spread["runs"][f"cpu/{SINCERE_CELL}/seed{seed}"]["metrics"])
        spread["runs"] |= run_entry(SINCERE_CELL, seed, metrics | {
            "knn1_projector/top1": 0.79 + diff / 100.0})
        low = -0.01 if seed == 0 else 0.01
        spread["comparisons"] |= comparison_entry(SINCERE_CELL, SUPCON_CELL, "knn1_projector",
                                                  seed, low, 0.06, diff / 100.0)
    wide = judge(_claim(SINCERE, "sincere-knn1"), SINCERE, spread)
    tlow, thigh = wide.tost_interval
    assert thigh > 3.5 and wide.t_interval[0] < 0
    assert wide.verdict == (
        f"not testable at this scale (margin 3.5 < {POWER_80}); at this scale the 90% "
        f"t-interval [{tlow:+.3g}, {thigh:+.3g}] reaches beyond -/+3.5 points; each seed's "
        "bootstrap 95% interval, the paper's own test, excludes 0 in 2 of 3 seeds")
    # 5-NN: -8, -7, -6 points: the 90% interval lies wholly below -3.5: contradicted
    knn5 = by_id["sincere-knn5"]
    low = -7.0 - stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)
    assert knn5.t_interval[0] == pytest.approx(low)
    assert knn5.verdict.startswith("contradicted (mean -7 points, 90% t-interval [-8.69, -5.31] "
                                   "wholly outside -/+3.5 points: the runs differ by more than "
                                   "the margin)")
    # a study issue 54's round does not rerun, without runs: not yet run
    temperature = STUDIES["temperature"]
    assert "temperature" not in ROUND_THREE
    assert {judge(c, temperature, summary).verdict for c in temperature.claims} == {"not yet run"}


def test_every_claim_keeps_its_previous_label_and_a_pending_one_judges_the_runs_it_replaces():
    """The page at 0f3dae1's label of every Part A claim is kept; a claim of a rerun study
    without its new runs is pending, with the revised rules' verdict on the runs at 0f3dae1
    (the committed extract) and why they were replaced."""
    part_a = {c.id for s in STUDIES.values() if s.part == "cpu" for c in s.claims}
    assert set(PREVIOUS) == part_a and len(PREVIOUS) == 26
    knn1 = judge(_claim(SINCERE, "sincere-knn1"), SINCERE, {})
    assert not knn1.values and knn1.superseded is not None
    assert knn1.superseded.values == pytest.approx([11.76, 6.06, 10.59], abs=1e-6)
    # the numbers: the 90% interval [+4.39, +14.5] wholly above +3.5, and a half-width
    # of about 5.1 at the observed spread, above the margin
    assert knn1.verdict == (
        f"{PENDING}; {PREVIOUS_COMMIT}'s runs under the revised rules: contradicted (mean "
        "+9.47 points, 90% t-interval [+4.39, +14.5] wholly outside -/+3.5 points: the runs "
        "differ by more than the margin; the 90% interval's half-width at the seeds' spread, "
        "5.08 points, is at least the margin 3.5: with this spread the test could not have "
        f"passed even at a true difference of 0); superseded: {RERUN_WHY['sincere']}")
    # SINCERE's margin at 0f3dae1: about 38 times below the paper's, and SINCERE's median
    # nearest-noise similarity higher than SupCon's in every seed: direction only
    margin = judge(_claim(SINCERE, "sincere-margin"), SINCERE, {}).superseded
    assert margin.verdict.startswith("direction only (mean +0.0155, 95% t-interval")
    assert "(38 times smaller)" in margin.verdict
    (noise,) = margin.mechanisms
    assert noise.reversed and all(v < 0 for v in noise.values)
    assert noise.values == pytest.approx([0.4976 - 0.6379, 0.5128 - 0.6329, 0.5071 - 0.6351],
                                         abs=1e-3)
    assert noise.inputs[0] == pytest.approx({"sincere noise_similarity_median": 0.6379,
                                             "supcon noise_similarity_median": 0.4976},
                                            abs=1e-4)
    # CIFAR-2: SupCon's 1-NN not shown past its random init: inconclusive (not trained)
    cifar2 = STUDIES["cifar2"]
    for claim in cifar2.claims:
        verdict = judge(claim, cifar2, {})
        assert verdict.superseded.verdict.startswith("inconclusive (not trained: ")
        assert "-1.85 [-5.14, +1.44] points" in verdict.superseded.verdict
    # study 5: ReSSL vs MoCo v2, read off a table, still reversed; SCE not worse than ReSSL:
    # its margin is below the 80%-power effect, not testable; its interval lies above minus
    # the margin and above 0 all the same
    baselines = STUDIES["baselines"]
    assert category(judge(_claim(baselines, "b-ressl-moco"), baselines, {}).superseded
                    .verdict) == "reversed at this scale"
    assert judge(_claim(baselines, "b-ressl"), baselines, {}).superseded.verdict == (
        f"not testable at this scale (margin 3.5 < {POWER_80}); at this scale the measured "
        "mean +4.94 points has its 95% t-interval [+1.93, +7.95] above -3.5 points: the "
        "not-worse test passes all the same, and above 0 with all 3 seeds positive: better, "
        "not only not worse, at this scale")


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


def test_direction_only_when_the_size_is_an_order_smaller_or_the_mechanism_reversed():
    """SINCERE's margin claim (paper effect +0.584): above 0 in every seed is *reproduced*
    only at a size within a tenth of the paper's and with SINCERE lowering the nearest-noise
    similarity, the paper's mechanism."""
    assert _margin_verdict([0.20, 0.21, 0.22], noise=[0.1, 0.12, 0.11]).verdict == "reproduced"
    small = _margin_verdict([0.02, 0.021, 0.022]).verdict  # 0.021 < 0.0584
    assert small.startswith("direction only (mean +0.021, 95% t-interval [")
    assert "below a tenth of the paper's effect +0.584 (28 times smaller)" in small
    against = _margin_verdict([0.20, 0.21, 0.22], noise=[-0.1, -0.12, -0.11])
    assert against.verdict.startswith("direction only (")
    assert "the paper's mechanism or property is reversed: SINCERE lowers" in against.verdict
    assert against.shortfalls == ["the paper's mechanism, SINCERE lowering the nearest-noise "
                                  "similarity reversed (-0.11 [-0.135, -0.0852])"]
    # a mechanism whose interval includes 0 is not reversed
    assert _margin_verdict([0.20, 0.21, 0.22], noise=[-0.1, 0.12, 0.0]).verdict == "reproduced"


def test_local_separation_without_the_property_is_direction_only():
    """The gap between positive and nearest negative wider at t = 0.1 than at t = 0.5, but
    negative at both: the property Wang & Liu draw is absent."""
    temperature = STUDIES["temperature"]
    claim = _claim(temperature, "t-local-separation")
    runs = {}
    for seed in (0, 1, 2):
        for stem, positive in (("simclr_t0.1", 0.585), ("simclr_t0.5", 0.682)):
            nearest = 0.759 if stem == "simclr_t0.1" else 0.951 + 0.001 * seed
            runs |= run_entry(stem, seed, {
                "analyze_projector/positive_similarity_mean": positive,
                "analyze_projector/nearest_negative_similarity_mean": nearest})
    verdict = judge(claim, temperature, {"runs": runs, "comparisons": {}})
    assert verdict.verdict.startswith("direction only (mean +0.096")
    assert [m.reversed for m in verdict.mechanisms] == [True, True]
    assert verdict.mechanisms[0].values == pytest.approx([-0.174] * 3)
    # with the positive above its nearest negative at both temperatures: reproduced
    lifted = {k: {**r, "metrics": {**r["metrics"],
                                   "analyze_projector/positive_similarity_mean": 0.99}}
              for k, r in runs.items()}
    lifted |= {k: {**r, "metrics": {**r["metrics"],
                                    "analyze_projector/positive_similarity_mean": 0.998}}
               for k, r in runs.items() if "t0.5" in k}
    assert judge(claim, temperature, {"runs": lifted, "comparisons": {}}).verdict == (
        "reproduced")


def test_runs_not_trained_past_random_init_make_their_claims_inconclusive():
    summary = fake_sincere_summary()
    for seed, gain in enumerate((-1.0, 0.5, -0.2)):  # SupCon at its random init's level
        base = summary["runs"][f"cpu/random_init/seed{seed}"]["metrics"]["knn1_projector/top1"]
        summary["runs"][f"cpu/{SUPCON_CELL}/seed{seed}"]["metrics"]["knn1_projector/top1"] = (
            base + gain / 100)
    for claim in SINCERE.claims:
        verdict = judge(claim, SINCERE, summary).verdict
        assert verdict.startswith(f"inconclusive (not trained: {SUPCON_TUNED}: 1-NN -0.23 [")
        assert verdict.endswith("evidence neither way)")


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
    # a failed run is named with its error: the claim waits on it
    summary["runs"][f"cpu/{SUPCON_CELL}/seed2"].update(status="failed", failure={
        "step": "pretrain", "exit_status": 2,
        "error": "contrastkit pretrain: error: the training loss became NaN or infinite at "
                 "step 9; the run stops here"})
    assert judge(SINCERE.claims[0], SINCERE_ELSEWHERE, summary).verdict == (
        f"not yet run (2 of 3 planned seeds finished; {SUPCON_CELL} s2: pretrain failed with "
        "exit status 2 (the training loss became NaN or infinite at step 9))")
    # with no seed finished, the same
    dystress = STUDIES["dystress"]
    lone = {"runs": {"cpu/dystress/seed0": {
        "tag": "cpu", "stem": "dystress", "seed": 0, "pretrain_finished": False,
        "status": "failed", "metrics": {},
        "failure": {"step": "knn200", "exit_status": 1, "error": None}}}, "comparisons": {}}
    assert judge(_claim(dystress, "dys-unif"), dystress, lone).verdict == (
        "not yet run (dystress s0: knn200 failed with exit status 1 (its error line was not "
        "recorded))")
    # in a study issue 54's round reruns, the same partial runs are pending, values shown
    rerun = judge(_claim(SINCERE, "sincere-margin"), SINCERE, two)
    assert rerun.verdict.startswith(f"{PENDING}; {PREVIOUS_COMMIT}'s runs under the revised "
                                    "rules: direction only (")
    assert rerun.values == pytest.approx([0.20, 0.21])
    assert judge(SINCERE.claims[0], SINCERE, summary).verdict.startswith(PENDING)


def test_a_rerun_claim_waits_for_runs_that_name_a_clean_commit():
    """SCE vs MoCo v2 (study 5, retrained by issue 54's round): three finished seeds whose
    records name no commit, or a dirty one, leave it pending; named, it is judged (here
    reversed, though planned as not testable)."""
    baselines = STUDIES["baselines"]
    claim = _claim(baselines, "b-moco")
    assert untestable_reason(claim, baselines) is not None

    def summary(provenance):
        runs, comps = {}, {}
        for seed in (0, 1, 2):
            runs |= run_entry("sce", seed, {"knn200/top1": 0.40 + 0.001 * seed},
                              provenance=provenance)
            runs |= run_entry("moco", seed, {"knn200/top1": 0.50}, provenance=provenance)
            comps |= comparison_entry("sce", "moco", "knn200", seed, -0.12, -0.08, -0.10)
        return {"runs": runs, "comparisons": comps, "choices": fake_choices()}

    clean = {"commits": ["9b039b4" + "0" * 33], "dirty": False}
    for unclean in ({}, {"commits": ["None"], "dirty": False},
                    {**clean, "dirty": True}):
        verdict = judge(claim, baselines, summary(unclean))
        assert verdict.verdict.startswith(PENDING)
        assert verdict.uncommitted == [f"{s} s{n}" for s in ("moco", "sce") for n in (0, 1, 2)]
    finished = judge(claim, baselines, summary(clean))
    assert finished.verdict.startswith("reversed at this scale (mean -9.9 points")
    assert not finished.uncommitted and finished.superseded is None
    # the study's random init, which its gains over random init read, must name one too
    first_round = summary(clean)
    for seed in (0, 1, 2):
        first_round["runs"] |= run_entry("random_init", seed, {"knn200/top1": 0.3},
                                         provenance={})
    waiting = judge(claim, baselines, first_round)
    assert waiting.verdict.startswith(PENDING)
    assert waiting.uncommitted == ["random_init s0", "random_init s1", "random_init s2"]


def test_a_not_comparable_claim_says_so_before_what_it_measured():
    """DySTreSS's alignment: measured on every seed, but its verdict is *not comparable*, with
    the rules' outcome after it as what was measured."""
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
        "not yet run (2 of 3 planned seeds finished)")
    primary = dataclasses.replace(claim, role="primary")  # the same numbers, counted
    assert judge(primary, dystress, {"runs": runs, "comparisons": {}}).verdict == (
        verdict.partition("as measured: ")[2])


def test_claims_below_the_effect_detected_with_80_percent_power_are_not_testable():
    baselines = BASELINES_ELSEWHERE
    moco = _claim(baselines, "b-moco")
    limit = mde_at_power(1.37, 3)
    assert planned_effect(moco, baselines) == pytest.approx(limit)
    assert untestable_reason(moco, baselines) == f"paper effect +2.7 < {POWER_80}"
    runs, comps = {}, {}
    for seed in (0, 1, 2):  # SCE 6 points above MoCo v2 in every seed: still not testable
        runs |= run_entry("sce", seed, {"knn200/top1": 0.60}) | run_entry(
            "moco", seed, {"knn200/top1": 0.54 - 0.001 * seed})
        comps |= comparison_entry("sce", "moco", "knn200", seed, 0.04, 0.08, 0.06)
    verdict = judge(moco, baselines, {"runs": runs, "comparisons": comps})
    untestable = f"not testable at this scale (paper effect +2.7 < {POWER_80})"
    assert judge(moco, baselines, {}).verdict == untestable  # decided before the runs
    assert verdict.values == pytest.approx([6.0, 6.1, 6.2])  # measured, and reported
    # what the study shows at its own scale is stated beside it: mean 6.1, sd 0.1, 3 seeds
    half = stats.t.ppf(0.975, 2) * 0.1 / math.sqrt(3)
    assert verdict.verdict == (
        f"{untestable}; at this scale the measured mean +6.1 points has its 95% t-interval "
        f"[{6.1 - half:+.3g}, {6.1 + half:+.3g}] above 0, the claimed direction")
    # an interval below the paper's +2.7, though it includes 0: the paper's effect excluded
    near = {"runs": {**runs} | run_entry("sce", 0, {"knn200/top1": 0.54})
            | run_entry("sce", 1, {"knn200/top1": 0.541}) | run_entry("sce", 2, {
                "knn200/top1": 0.5225}), "comparisons": comps}
    excluded = judge(moco, baselines, near)
    low, high = excluded.t_interval
    assert low < 0 < high < 2.7
    assert excluded.verdict == (
        f"not testable at this scale, the paper's effect excluded (paper effect +2.7 < "
        f"{POWER_80}; the 95% t-interval [{low:+.3g}, {high:+.3g}] lies below the paper's "
        "effect +2.7 points)")
    # the opposite direction in every seed
    opposite = {"runs": {**runs, **run_entry("sce", 1, {"knn200/top1": 0.40})}
                | run_entry("sce", 0, {"knn200/top1": 0.41})
                | run_entry("sce", 2, {"knn200/top1": 0.42}), "comparisons": comps}
    # is reversed at this scale, whatever the planned power, and says it was planned untestable
    reversed_ = judge(moco, baselines, opposite).verdict
    assert reversed_.startswith("reversed at this scale (mean -12.9 points, 95% t-interval [")
    assert reversed_.endswith(f"the interval lies below 0, the opposite direction; planned as "
                              f"not testable, paper effect +2.7 < {POWER_80}: the paper's "
                              "effect could not have been detected, but this direction was)")
    # a missing seed: the verdict alone
    two_seeds = {k: v for k, v in runs.items() if not k.endswith("seed2")}
    assert judge(moco, baselines, {"runs": two_seeds, "comparisons": comps}).verdict == untestable
    # SCE's lambda / tau_m claims are not run at all; the Ceil term's effect is the paper's +0.9
    sce = STUDIES["sce_lambda_tau"]
    assert not sce.variants
    assert judge(sce.claims[0], sce, {}).verdict == (
        f"not testable at this scale (paper effect +1.4 < {POWER_80}; not run)")
    assert _claim(sce, "sce-ceil").paper_value == pytest.approx(83.37 - 82.49)
    # a claim without a paper number, or without a noise estimate, is testable
    assert untestable_reason(_claim(STUDIES["temperature"], "t-uniformity"),
                             STUDIES["temperature"]) is None
    assert planned_effect(_claim(SINCERE, "sincere-margin"), SINCERE) is None
    # with many more seeds the same paper effect becomes testable
    eight = dataclasses.replace(baselines, seeds=tuple(range(8)))
    assert untestable_reason(moco, eight) is None


def test_collapsed_runs_give_the_collapsed_verdict_with_evidence(tmp_path):
    summary = fake_sincere_summary()
    stuck = {"pretrain/final_positive_similarity": 0.98, "pretrain/initial_loss": 6.24,
             "pretrain/final_loss": 6.20}
    for seed in (1, 2):
        summary["runs"][f"cpu/{SUPCON_CELL}/seed{seed}"]["metrics"] |= stuck
    verdicts = {judge(c, SINCERE, summary).verdict for c in SINCERE.claims}
    assert verdicts == {f"collapsed ({SUPCON_TUNED} seed 1: last-epoch positive cosine 0.980, "
                        "loss 6.24 -> 6.20, knn1_projector 79.0% (chance 10%))"}
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
    rerun = judge(SINCERE.claims[0], SINCERE, summary)  # a rerun study: pending
    assert rerun.verdict.startswith(PENDING) and rerun.values and rerun.tag == "cpu-e2"


def test_tuned_claims_wait_for_their_grid():
    """Without a choice in the summary, the tuned runs have no folder: not yet run, even
    when runs of some grid cell exist (pending, in a study issue 54's round reruns)."""
    summary = fake_sincere_summary()
    summary.pop("choices")
    assert {judge(c, SINCERE_ELSEWHERE, summary).verdict for c in SINCERE.claims} == {
        "not yet run", f"not testable at this scale (margin 3.5 < {POWER_80})"}
    assert all(judge(c, SINCERE, summary).verdict.startswith(PENDING) for c in SINCERE.claims)


def test_not_worse_claims_reverse_only_beyond_the_margin():
    baselines = BASELINES_ELSEWHERE
    claim = _claim(baselines, "b-ressl")
    runs, comps = {}, {}
    for seed, (sce, ressl) in enumerate(((0.50, 0.56), (0.50, 0.555), (0.50, 0.565))):
        runs |= run_entry("sce", seed, {"knn200/top1": sce}) | run_entry(
            "ressl", seed, {"knn200/top1": ressl})
        comps |= comparison_entry("sce", "ressl", "knn200", seed, -0.08, -0.03, sce - ressl)
    summary = {"runs": runs, "comparisons": comps, "choices": fake_choices()}
    worse = judge(claim, baselines, summary).verdict
    assert worse.startswith("reversed at this scale (mean -6 points")
    assert "below -3.5, worse by more than the margin" in worse
    slightly = {k: {**v, "metrics": {"knn200/top1": 0.52}} if k.startswith("cpu/ressl") else v
                for k, v in runs.items()}  # 2 points worse: below 0, not beyond -3.5
    assert judge(claim, baselines, {**summary, "runs": slightly}).verdict == (
        f"not testable at this scale (margin 3.5 < {POWER_80}); at this scale the measured "
        "mean -2 points has its 95% t-interval [-2, -2] above -3.5 points: the not-worse test "
        "passes all the same")
    # SCE above ReSSL in every seed (study 5 at e5942a8: +4.34, +5.08, +4.50): said beside
    gap = {"0": 0.0434, "1": 0.0508, "2": 0.0450}
    better = {k: {**v, "metrics": {"knn200/top1": 0.50 - gap[k[-1]]}}
              if k.startswith("cpu/ressl") else v for k, v in runs.items()}
    half = stats.t.ppf(0.975, 2) * stats.tstd([4.34, 5.08, 4.50]) / math.sqrt(3)
    assert judge(claim, baselines, {**summary, "runs": better}).verdict == (
        f"not testable at this scale (margin 3.5 < {POWER_80}); at this scale the measured "
        f"mean +4.64 points has its 95% t-interval [{4.64 - half:+.3g}, {4.64 + half:+.3g}] "
        "above -3.5 points: the not-worse test passes all the same, and above 0 with all 3 "
        "seeds positive: better, not only not worse, at this scale")
    # the headline says it too, in short
    assert _untestable(claim, judge(claim, baselines, {**summary, "runs": better})) == (
        "SCE is not worse than ReSSL (its 95% t-interval lies above minus the margin all the "
        "same)")
    # 2 points worse with a wide spread reaching below -3.5: nothing beside
    spread = {"0": 0.0, "1": 0.02, "2": 0.04}
    wide = {k: {**v, "metrics": {"knn200/top1": 0.50 + spread[k[-1]]}}
            if k.startswith("cpu/ressl") else v for k, v in runs.items()}
    unsure = judge(claim, baselines, {**summary, "runs": wide})
    assert unsure.verdict == f"not testable at this scale (margin 3.5 < {POWER_80})"
    assert _untestable(claim, unsure) == "SCE is not worse than ReSSL"


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
