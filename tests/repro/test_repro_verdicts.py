"""contrastkit.repro.verdicts: each claim's verdict from hand-written summaries."""

from __future__ import annotations

import csv

import pytest
from repro_summaries import comparison_entry, fake_sincere_summary, run_entry

from contrastkit.repro.collection import read_losses
from contrastkit.repro.report import _signed, render_report
from contrastkit.repro.studies import STUDIES
from contrastkit.repro.verdicts import PIPELINE_CHECK, collapsed, judge


def test_verdicts_on_a_fake_summary():
    summary = fake_sincere_summary()
    study = STUDIES["sincere_cifar2"]
    by_id = {c.id: judge(c, study, summary) for c in study.claims}
    margin = by_id["cifar2-margin"]
    assert margin.verdict == "reproduced"
    assert margin.seeds == [0, 1] and margin.values == pytest.approx([0.20, 0.21])
    # SINCERE's loss falls by 1, SupCon's by 2: the paper's sign is not met
    loss = by_id["cifar2-loss"].verdict
    assert loss.startswith("not reproduced (measured -1.000 vs paper +4.6, gap -5.600")
    # App. M: intervals containing 0 reproduce "no significant difference"
    assert by_id["cifar2-knn1"].verdict == "reproduced"
    assert by_id["cifar2-knn1"].intervals == [(-1.0, 3.0), (-1.0, 3.0)]
    knn5 = by_id["cifar2-knn5"]
    assert knn5.verdict.startswith(
        "not reproduced (measured +4.000 vs paper +0.4 points, gap +3.600")
    assert "excludes 0" in knn5.verdict
    # no run of the temperature study: every claim is "not yet run"
    temperature = STUDIES["temperature"]
    assert {judge(c, temperature, summary).verdict for c in temperature.claims} == {
        "not yet run"}


def test_claims_on_collapsed_runs_are_inconclusive(tmp_path):
    summary = fake_sincere_summary()
    stuck = {"pretrain/final_positive_similarity": 0.995, "pretrain/initial_loss": 5.54,
             "pretrain/final_loss": 5.53}
    assert collapsed(stuck)
    assert not collapsed(stuck | {"pretrain/final_loss": 5.0})  # the loss fell: learning
    assert not collapsed(stuck | {"pretrain/final_positive_similarity": 0.94})
    assert collapsed(stuck | {"pretrain/final_positive_similarity": 0.96,
                                    "pretrain/final_loss": 5.54 * 0.98})  # fell 2%: nearly
    assert not collapsed({"pretrain/initial_loss": 5.5, "pretrain/final_loss": 5.5})
    for seed in (0, 1):
        summary["runs"][f"cpu/sincere_cifar2_supcon/seed{seed}"]["metrics"] |= stuck
    study = STUDIES["sincere_cifar2"]
    verdicts = {judge(c, study, summary).verdict for c in study.claims}
    assert verdicts == {"inconclusive (SupCon collapsed or nearly: see the run table)"}
    text = render_report(summary)
    assert "Collapsed or nearly (SupCon): in the last epoch" in text
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


def test_sign_claims_need_two_seeds_and_two_standard_errors():
    study = STUDIES["sincere_cifar2"]
    claim = next(c for c in study.claims if c.id == "cifar2-margin")

    def margin_verdict(gaps):
        runs = {}
        for seed, gap in enumerate(gaps):
            runs |= run_entry("sincere_cifar2_sincere", seed, {"analyze/target_noise_margin": gap})
            runs |= run_entry("sincere_cifar2_supcon", seed, {"analyze/target_noise_margin": 0.0})
        return judge(claim, study, {"runs": runs, "comparisons": {}}).verdict

    assert margin_verdict([0.2]).startswith("inconclusive (one seed, measured +0.200: the "
                                            "paper's sign")
    assert margin_verdict([-0.2]).startswith("inconclusive (one seed, measured -0.200: the "
                                             "opposite sign")
    assert margin_verdict([0.20, 0.22]) == "reproduced"  # mean 0.21, standard error 0.01
    noisy = margin_verdict([0.01, 0.50])  # same sign, mean 0.255, standard error 0.245
    assert noisy.startswith("not reproduced") and "within 2 standard errors of 0 over 2" in noisy
    assert "sign differs" in margin_verdict([0.3, -0.1])
    # per-seed values never print as a bare +0.000 when they are not zero
    assert [_signed(v) for v in (0.2, 0.00031, -0.0042, 0.0)] == [
        "+0.200", "+0.00031", "-0.0042", "+0.000"]


def test_better_claim_needs_every_seed_significant():
    study = STUDIES["baselines"]
    claim = next(c for c in study.claims if c.id == "b-moco")
    runs = {}
    for seed in (0, 1):
        runs |= run_entry("baselines_sce", seed, {"linear/top1": 0.70})
        runs |= run_entry("baselines_moco", seed, {"linear/top1": 0.66})
    both = comparison_entry("baselines_sce", "baselines_moco", "linear", 0, 0.02, 0.06, 0.04) | \
        comparison_entry("baselines_sce", "baselines_moco", "linear", 1, 0.01, 0.07, 0.04)
    assert judge(claim, study, {"runs": runs, "comparisons": both}).verdict == "reproduced"
    one = comparison_entry("baselines_sce", "baselines_moco", "linear", 0, 0.02, 0.06, 0.04) | \
        comparison_entry("baselines_sce", "baselines_moco", "linear", 1, -0.01, 0.07, 0.03)
    verdict = judge(claim, study, {"runs": runs, "comparisons": one}).verdict
    assert verdict.startswith("not reproduced (measured +4.000 vs paper +2.7 points, gap +1.300")
    assert "not above 0 in every seed" in verdict
    # an unfinished pretraining does not count, whatever its metrics
    runs["cpu/baselines_moco/seed1"]["pretrain_finished"] = False
    runs["cpu/baselines_moco/seed0"]["pretrain_finished"] = False
    assert judge(claim, study, {"runs": runs, "comparisons": both}).verdict == \
        "not yet run"


def test_not_worse_and_absolute_claims():
    study = STUDIES["dystress"]
    claim = next(c for c in study.claims if c.id == "dys-shift")
    runs = run_entry("dystress_vanilla", 0, {"knn200/top1": 0.6}) | \
        run_entry("dystress_shifted", 0, {"knn200/top1": 0.61})
    close = comparison_entry("dystress_vanilla", "dystress_shifted", "knn200", 0, -0.03, 0.01,
                             -0.01)
    assert judge(claim, study, {"runs": runs, "comparisons": close}).verdict == "reproduced"
    worse = comparison_entry("dystress_vanilla", "dystress_shifted", "knn200", 0, -0.03, -0.001,
                        -0.01)
    assert judge(claim, study, {"runs": runs, "comparisons": worse}).verdict.startswith(
        "not reproduced")
    gpu = STUDIES["gpu_table6"]
    sce = next(c for c in gpu.claims if c.id == "g-sce")
    near = run_entry("table6_sce", 0, {"linear_d1/top1": 0.895}, tag="gpu")
    assert judge(sce, gpu, {"runs": near, "comparisons": {}}).verdict == "reproduced"
    far = run_entry("table6_sce", 0, {"linear_d1/top1": 0.88}, tag="gpu")
    assert judge(sce, gpu, {"runs": far, "comparisons": {}}).verdict == (
        "not reproduced (measured +88.000 vs paper +90.3 points, gap -2.300; more than 1 point "
        "below the paper)")


def test_epoch_override_runs_are_labelled_and_never_give_a_verdict():
    """A shortened pipeline-check run shows its numbers but the verdict stays 'not yet run'."""
    summary = fake_sincere_summary()
    summary["runs"] = {k.replace("cpu/", "cpu-e2/", 1): {**v, "tag": "cpu-e2", "epochs": 2}
                       for k, v in summary["runs"].items()}
    summary["comparisons"] = {k.replace("cpu/", "cpu-e2/", 1): v
                              for k, v in summary["comparisons"].items()}
    study = STUDIES["sincere_cifar2"]
    verdict = judge(study.claims[0], study, summary)
    assert verdict.verdict == PIPELINE_CHECK and verdict.tag == "cpu-e2"
    assert verdict.verdict.startswith("not yet run") and verdict.values
    text = render_report(summary)
    assert "(cpu-e2: 2 epochs instead of the configs': a pipeline check, not evidence)" in text
    assert "Runs under `runs/repro/cpu-e2/`" in text
