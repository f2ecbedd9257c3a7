"""scripts/repro.py: the commands each study runs, the verdicts and the generated report.

Nothing here trains: the dry run lists commands, and the report is rendered from hand-written
summaries whose expected verdicts follow from the rules in the script's docstring.
"""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def repro():
    spec = importlib.util.spec_from_file_location("repro_script", REPO / "scripts" / "repro.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["repro_script"] = module
    spec.loader.exec_module(module)
    return module


def _dry_run(repro, part, names, seeds=None, **kwargs):
    runner = repro.Runner(dry_run=True, log=lambda line: None)
    repro.run_studies(part, [repro.STUDIES[n] for n in names], seeds, runner, **kwargs)
    return runner.commands


def _option(cmd, name):
    return cmd[cmd.index(name) + 1]


# --- studies and configs ---------------------------------------------------------------------
def test_every_repro_config_belongs_to_a_study_and_exists(repro):
    used = {v.config for s in repro.STUDIES.values() for v in s.variants}
    on_disk = {str(p.relative_to(REPO)) for p in (REPO / "configs" / "repro").rglob("*.yaml")}
    assert used == on_disk
    for study in repro.STUDIES.values():
        expected = "configs/repro/cpu/" if study.part == "cpu" else "configs/repro/gpu/"
        assert all(v.config.startswith(expected) for v in study.variants), study.name


def test_claims_reference_known_runs_and_protocols(repro):
    for study in repro.STUDIES.values():
        names = {v.name for v in study.variants}
        for claim in study.claims:
            assert claim.kind in ("better", "same", "not_worse", "sign", "absolute")
            for name, metric in claim.needs:
                assert name in names, (study.name, claim.id)
                protocol = metric.split("/")[0]
                if protocol != "pretrain":
                    assert protocol in study.variant(name).evals, (study.name, claim.id)
            if claim.kind in ("better", "same", "not_worse"):
                assert claim.compare is not None and claim.compare[2] in repro.EVALS


# --- dry run: the public commands of each study ---------------------------------------------
@pytest.mark.parametrize("name", [n for n in ("sincere_cifar2", "sincere_cifar10", "temperature",
                                              "sce_lambda", "sce_tau_m", "dystress",
                                              "baselines")])
def test_dry_run_lists_pretrain_evals_and_compares(repro, name, monkeypatch, tmp_path):
    monkeypatch.setattr(repro, "REPO", tmp_path)  # no checkpoint exists there: no --resume
    study = repro.STUDIES[name]
    commands = _dry_run(repro, "cpu", [name], seeds=[0, 1])
    pretrain = [c for c in commands if c[1] == "pretrain"]
    assert [(_option(c, "--config"), _option(c, "--seed_everything")) for c in pretrain] == [
        (v.config, str(seed)) for seed in (0, 1) for v in study.variants]
    for cmd in pretrain:
        assert "--resume" not in cmd and "--trainer.max_time" not in cmd
        out = _option(cmd, "--output")
        stem = Path(_option(cmd, "--config")).stem
        assert out == f"runs/repro/cpu/{stem}/seed{_option(cmd, '--seed_everything')}/pretrain"
    evals = [c for c in commands if c[1] in ("eval", "analyze")]
    assert len(evals) == 2 * sum(len(v.evals) for v in study.variants)
    for cmd in evals:
        ckpt = _option(cmd, "--checkpoint")
        assert ckpt.startswith("runs/repro/cpu/")
        assert ckpt.endswith("pretrain/checkpoints/last.ckpt")
        assert _option(cmd, "--device") == "cpu"
    compares = [c for c in commands if c[1] == "compare"]
    assert len(compares) == 2 * len(study.all_pairs())
    # every command is a public contrastkit command
    assert {c[0] for c in commands} == {"contrastkit"}
    assert {c[1] for c in commands} <= {"pretrain", "eval", "analyze", "compare"}


def test_dry_run_sincere_cifar2_commands(repro, monkeypatch, tmp_path):
    monkeypatch.setattr(repro, "REPO", tmp_path)
    commands = _dry_run(repro, "cpu", ["sincere_cifar2"], seeds=[0])
    lines = [" ".join(c) for c in commands]
    assert lines[0].startswith("contrastkit pretrain --config "
                               "configs/repro/cpu/sincere_cifar2_sincere.yaml --output "
                               "runs/repro/cpu/sincere_cifar2_sincere/seed0/pretrain "
                               "--seed_everything 0")
    knn1 = commands[1]
    assert knn1[:5] == ["contrastkit", "eval", "knn", "--k", "1"]
    # CIFAR-2 is evaluated on the archive's cat and dog images, in data.classes' order
    assert _option(knn1, "--data") == "image_archive"
    assert _option(knn1, "--root") == repro.ARCHIVE
    for evaluation in commands[1:4]:  # knn1, knn5, analyze
        at = evaluation.index("--classes")
        assert evaluation[at + 1:at + 3] == ["cat", "dog"]
    assert _option(knn1, "--output") == "runs/repro/cpu/sincere_cifar2_sincere/seed0/eval/knn1"
    assert commands[3][1] == "analyze"
    assert [c[1] for c in commands].count("pretrain") == 2
    compare = [c for c in commands if c[1] == "compare"]
    assert [c[2:4] for c in compare] == [
        ["runs/repro/cpu/sincere_cifar2_sincere/seed0/eval/knn1",
         "runs/repro/cpu/sincere_cifar2_supcon/seed0/eval/knn1"],
        ["runs/repro/cpu/sincere_cifar2_sincere/seed0/eval/knn5",
         "runs/repro/cpu/sincere_cifar2_supcon/seed0/eval/knn5"]]


def test_dry_run_cifar10_evaluations_use_the_archive(repro, monkeypatch, tmp_path):
    monkeypatch.setattr(repro, "REPO", tmp_path)
    commands = _dry_run(repro, "cpu", ["temperature"], seeds=[0])
    analyze = [c for c in commands if c[1] == "analyze"]
    assert len(analyze) == 10
    assert all(_option(c, "--data") == "image_archive" and
               _option(c, "--root") == "../shared/data/cifar10-jpg.tar.gz" for c in analyze)
    assert _option(analyze[0], "--temperatures") == "0.05"
    knn = [c for c in commands if c[1:3] == ["eval", "knn"]]
    assert all(_option(c, "--k") == "200" for c in knn)


def test_shared_config_runs_once(repro, monkeypatch, tmp_path):
    """sce_tau_m's tau_m = 0.05 point is sce_lambda's lambda = 0.5 run."""
    monkeypatch.setattr(repro, "REPO", tmp_path)
    commands = _dry_run(repro, "cpu", ["sce_lambda", "sce_tau_m"], seeds=[0])
    configs = [_option(c, "--config") for c in commands if c[1] == "pretrain"]
    assert configs.count("configs/repro/cpu/sce_lambda0.5.yaml") == 1
    assert len(configs) == len(set(configs)) == 7


def test_dry_run_resumes_an_existing_checkpoint(repro, monkeypatch, tmp_path):
    monkeypatch.setattr(repro, "REPO", tmp_path)
    ckpt = tmp_path / "runs/repro/cpu/baselines_moco/seed0/pretrain/checkpoints/last.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"x")
    commands = _dry_run(repro, "cpu", ["baselines"], seeds=[0])
    pretrain = {_option(c, "--config"): c for c in commands if c[1] == "pretrain"}
    assert pretrain["configs/repro/cpu/baselines_moco.yaml"][-2:] == ["--resume", "last"]
    assert "--resume" not in pretrain["configs/repro/cpu/baselines_sce.yaml"]


def test_dry_run_gpu_chunks_and_epoch_override(repro, monkeypatch, tmp_path):
    monkeypatch.setattr(repro, "REPO", tmp_path)
    commands = _dry_run(repro, "gpu", ["gpu_table6"], seeds=[0], chunk_seconds=510,
                        device="cuda")
    pretrain = [c for c in commands if c[1] == "pretrain"]
    assert len(pretrain) == 3
    for cmd in pretrain:
        assert "--trainer.max_time" not in cmd
        assert "--trainer.callbacks+=lightning.pytorch.callbacks.Timer" in cmd
        assert _option(cmd, "--trainer.callbacks.duration") == "00:00:08:30"
        assert _option(cmd, "--trainer.callbacks.interval") == "epoch"
    lin = [c for c in commands if c[1:3] == ["eval", "linear"]]
    assert all(_option(c, "--device") == "cuda" for c in lin)
    assert sorted(_option(c, "--protocol") if "--protocol" in c else "fast" for c in lin) == [
        "fast"] * 3 + ["sce_d1"] * 3
    commands = _dry_run(repro, "cpu", ["dystress"], seeds=[3], epochs=2)
    pretrain = [c for c in commands if c[1] == "pretrain"]
    assert all(_option(c, "--trainer.max_epochs") == "2" for c in pretrain)
    assert _option(pretrain[0], "--output") == "runs/repro/cpu-e2/dystress_simclr/seed3/pretrain"


def test_chunk_duration_adds_the_time_already_trained(repro, tmp_path):
    """Lightning restores the Timer's elapsed time on resume: each chunk's duration is the
    time already trained (from the checkpoint) plus the chunk."""
    ckpt = tmp_path / "last.ckpt"
    assert repro.trained_seconds(ckpt) == 0.0
    torch.save({"callbacks": {"Timer": {"time_elapsed": {"train": 1234.7, "validate": 9.0}}}},
               ckpt)
    assert repro.trained_seconds(ckpt) == pytest.approx(1234.7)
    args = repro.chunk_arguments(repro.parse_duration("00:00:08:30"), repro.trained_seconds(ckpt))
    assert args[args.index("--trainer.callbacks.duration") + 1] == "00:00:29:04"  # 1744 s
    assert repro.format_duration(2 * 86400 + 3 * 3600 + 4 * 60 + 5) == "02:03:04:05"
    with pytest.raises(SystemExit, match="DD:HH:MM:SS"):
        repro.parse_duration("9:30")


def test_step_budget(repro):
    runner = repro.Runner(dry_run=True, log=lambda line: None, max_steps=2)
    assert [runner.spend() for _ in range(3)] == [True, True, False]
    assert repro.Runner(dry_run=True).spend()


def test_unknown_study_is_rejected(repro):
    with pytest.raises(SystemExit, match="unknown cpu study"):
        repro.selected(["gpu_table6"], "cpu")


# --- run state helpers ---------------------------------------------------------------------------
def _fake_ckpt(path, processed, last_batch):
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"loops": {"fit_loop": {
        "epoch_progress": {"current": {"processed": processed, "completed": processed - 1}},
        "epoch_loop.batch_progress": {"is_last_batch": last_batch}}}}, path)


def test_pretrain_finished(repro, tmp_path):
    ckpt = tmp_path / "last.ckpt"
    assert not repro.pretrain_finished(ckpt, 3)
    _fake_ckpt(ckpt, 3, True)
    assert repro.pretrain_finished(ckpt, 3)
    assert not repro.pretrain_finished(ckpt, 4)
    _fake_ckpt(ckpt, 3, False)  # stopped by max_time inside the last epoch
    assert not repro.pretrain_finished(ckpt, 3)


def test_pretrain_minutes_from_config_to_last_checkpoint(repro, tmp_path):
    import os

    pre = tmp_path / "pretrain"
    (pre / "checkpoints").mkdir(parents=True)
    assert repro.pretrain_minutes(pre) is None  # nothing written yet
    (pre / "config.yaml").write_text("x")
    assert repro.pretrain_minutes(pre) is None  # started, no checkpoint
    (pre / "checkpoints" / "last.ckpt").write_bytes(b"x")
    os.utime(pre / "config.yaml", (1_000.0, 1_000.0))
    os.utime(pre / "checkpoints" / "last.ckpt", (1_450.0, 1_450.0))
    assert repro.pretrain_minutes(pre) == pytest.approx(7.5)


def test_single_seed_accuracy_shows_its_bootstrap_interval(repro, tmp_path):
    import numpy as np

    labels = np.arange(1000) % 10
    pred = np.where(np.arange(1000) % 4 == 0, (labels + 1) % 10, labels)  # 75% correct
    np.savez(tmp_path / "predictions.npz", pred=pred, labels=labels)
    (tmp_path / "results.json").write_text('{"predictions": "predictions.npz"}')  # an eval folder
    ci = repro._accuracy_interval(tmp_path, {"predictions": "predictions.npz"}, "knn200")
    assert ci["knn200/top1_ci_low"] < 0.75 < ci["knn200/top1_ci_high"]
    assert ci["knn200/top1_ci_high"] - ci["knn200/top1_ci_low"] == pytest.approx(
        2 * 1.96 * (0.75 * 0.25 / 1000) ** 0.5, rel=0.15)
    assert repro._accuracy_interval(tmp_path, {}, "knn200") == {}  # no predictions written
    summary = {"runs": _run("baselines_sce", 0, {"knn200/top1": 0.75, **ci})}
    cell = repro._cell(summary, "cpu", "baselines_sce", "knn200/top1", 100, 2)
    low, high = 100 * ci["knn200/top1_ci_low"], 100 * ci["knn200/top1_ci_high"]
    assert cell == f"75.00 [{low:.2f}, {high:.2f}] (1 seed)"
    summary["runs"] |= _run("baselines_sce", 1, {"knn200/top1": 0.77, **ci})
    assert repro._cell(summary, "cpu", "baselines_sce", "knn200/top1", 100, 2) == (
        "76.00 ± 1.41 (2 seeds)")  # several seeds: the spread over seeds instead


def test_read_losses_first_and_last_epoch_means(repro, tmp_path):
    path = tmp_path / "metrics.csv"
    rows = [{"epoch": "", "step": "9", "train/loss": ""},
            {"epoch": "0", "step": "9", "train/loss": "6.0"},
            {"epoch": "0", "step": "19", "train/loss": "5.0"},
            {"epoch": "1", "step": "29", "train/loss": "4.0"},
            {"epoch": "2", "step": "39", "train/loss": "2.0"},
            {"epoch": "2", "step": "49", "train/loss": "1.0"}]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["epoch", "step", "train/loss"])
        writer.writeheader()
        writer.writerows(rows)
    assert repro.read_losses(path) == {"initial_loss": 5.5, "final_loss": 1.5,
                                       "logged_epochs": 3}


# --- verdicts and report -------------------------------------------------------------------------
def _run(stem, seed, metrics, tag="cpu", finished=True, epochs=30):
    return {f"{tag}/{stem}/seed{seed}": {
        "part": tag.split("-e")[0], "tag": tag, "config": f"configs/repro/cpu/{stem}.yaml",
        "stem": stem, "seed": seed, "epochs": epochs, "pretrain_finished": finished,
        "evals_done": [], "status": "done", "metrics": metrics, "figures": {}}}


def _comparison(a, b, protocol, seed, low, high, diff, tag="cpu"):
    return {f"{tag}/{a}__vs__{b}/{protocol}/seed{seed}": {
        "difference": diff, "ci_low": low, "ci_high": high, "confidence": 0.95,
        "verdict": "significant" if low > 0 or high < 0 else "not significant",
        "num_test": 2000, "accuracy_a": 0.8, "accuracy_b": 0.8 - diff, "n_resamples": 1000}}


def _fake_sincere_summary():
    runs, comps = {}, {}
    a, b = "sincere_cifar2_sincere", "sincere_cifar2_supcon"
    for seed in (0, 1):
        runs |= _run(a, seed, {"analyze/target_noise_margin": 0.30 + 0.01 * seed,
                               "pretrain/initial_loss": 6.0, "pretrain/final_loss": 5.0,
                               "knn1/top1": 0.80, "knn5/top1": 0.82})
        runs |= _run(b, seed, {"analyze/target_noise_margin": 0.10,
                               "pretrain/initial_loss": 6.0, "pretrain/final_loss": 4.0,
                               "knn1/top1": 0.79, "knn5/top1": 0.78})
        comps |= _comparison(a, b, "knn1", seed, -0.01, 0.03, 0.01)
        comps |= _comparison(a, b, "knn5", seed, 0.01 + 0.01 * seed, 0.07, 0.04)
    return {"generated": "2026-01-01T00:00:00+00:00", "runs": runs, "comparisons": comps}


def test_verdicts_on_a_fake_summary(repro):
    summary = _fake_sincere_summary()
    study = repro.STUDIES["sincere_cifar2"]
    by_id = {c.id: repro.judge(c, study, summary) for c in study.claims}
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
    temperature = repro.STUDIES["temperature"]
    assert {repro.judge(c, temperature, summary).verdict for c in temperature.claims} == {
        "not yet run"}


def test_claims_on_collapsed_runs_are_inconclusive(repro, tmp_path):
    summary = _fake_sincere_summary()
    stuck = {"pretrain/final_positive_similarity": 0.995, "pretrain/initial_loss": 5.54,
             "pretrain/final_loss": 5.53}
    assert repro.collapsed(stuck)
    assert not repro.collapsed(stuck | {"pretrain/final_loss": 5.0})  # the loss fell: learning
    assert not repro.collapsed(stuck | {"pretrain/final_positive_similarity": 0.94})
    assert repro.collapsed(stuck | {"pretrain/final_positive_similarity": 0.96,
                                    "pretrain/final_loss": 5.54 * 0.98})  # fell 2%: nearly
    assert not repro.collapsed({"pretrain/initial_loss": 5.5, "pretrain/final_loss": 5.5})
    for seed in (0, 1):
        summary["runs"][f"cpu/sincere_cifar2_supcon/seed{seed}"]["metrics"] |= stuck
    study = repro.STUDIES["sincere_cifar2"]
    verdicts = {repro.judge(c, study, summary).verdict for c in study.claims}
    assert verdicts == {"inconclusive (SupCon collapsed or nearly: see the run table)"}
    text = repro.render_report(summary)
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
    assert repro.read_losses(path)["final_positive_similarity"] == pytest.approx(0.985)


def test_sincere_loss_curves_figure(repro, monkeypatch, tmp_path):
    monkeypatch.setattr(repro, "REPO", tmp_path)
    for stem, start in (("sincere_cifar2_sincere", 6.0), ("sincere_cifar2_supcon", 7.0)):
        pre = tmp_path / "runs" / "repro" / "cpu" / stem / "seed0" / "pretrain"
        pre.mkdir(parents=True)
        (pre / "metrics.csv").write_text("epoch,step,train/loss\n,9,\n"
                                         f"0,9,{start}\n1,19,{start - 1}\n")
    made = repro.make_figures(repro.STUDIES["sincere_cifar2"], _fake_sincere_summary(),
                              tmp_path / "figures")
    assert ("repro_sincere_cifar2_loss.png" in [name for name, _ in made])
    assert (tmp_path / "figures" / "repro_sincere_cifar2_loss.png").stat().st_size > 0


def test_sign_claims_need_two_seeds_and_two_standard_errors(repro):
    study = repro.STUDIES["sincere_cifar2"]
    claim = next(c for c in study.claims if c.id == "cifar2-margin")

    def margin_verdict(gaps):
        runs = {}
        for seed, gap in enumerate(gaps):
            runs |= _run("sincere_cifar2_sincere", seed, {"analyze/target_noise_margin": gap})
            runs |= _run("sincere_cifar2_supcon", seed, {"analyze/target_noise_margin": 0.0})
        return repro.judge(claim, study, {"runs": runs, "comparisons": {}}).verdict

    assert margin_verdict([0.2]).startswith("inconclusive (one seed, measured +0.200: the "
                                            "paper's sign")
    assert margin_verdict([-0.2]).startswith("inconclusive (one seed, measured -0.200: the "
                                             "opposite sign")
    assert margin_verdict([0.20, 0.22]) == "reproduced"  # mean 0.21, standard error 0.01
    noisy = margin_verdict([0.01, 0.50])  # same sign, mean 0.255, standard error 0.245
    assert noisy.startswith("not reproduced") and "within 2 standard errors of 0 over 2" in noisy
    assert "sign differs" in margin_verdict([0.3, -0.1])
    # per-seed values never print as a bare +0.000 when they are not zero
    assert [repro._signed(v) for v in (0.2, 0.00031, -0.0042, 0.0)] == [
        "+0.200", "+0.00031", "-0.0042", "+0.000"]


def test_a_part_without_runs_says_why(repro):
    text = repro.render_report(_fake_sincere_summary())  # Part A runs only
    part_b = text[text.index("## Part B"):]
    assert part_b.splitlines()[2].startswith("No run of this part exists yet. It needs a GPU")
    part_a = text[text.index("## Part A"):text.index("## Part B")]
    assert "No run of this part exists yet" not in part_a


def test_better_claim_needs_every_seed_significant(repro):
    study = repro.STUDIES["baselines"]
    claim = next(c for c in study.claims if c.id == "b-moco")
    runs = {}
    for seed in (0, 1):
        runs |= _run("baselines_sce", seed, {"linear/top1": 0.70})
        runs |= _run("baselines_moco", seed, {"linear/top1": 0.66})
    both = _comparison("baselines_sce", "baselines_moco", "linear", 0, 0.02, 0.06, 0.04) | \
        _comparison("baselines_sce", "baselines_moco", "linear", 1, 0.01, 0.07, 0.04)
    assert repro.judge(claim, study, {"runs": runs, "comparisons": both}).verdict == "reproduced"
    one = _comparison("baselines_sce", "baselines_moco", "linear", 0, 0.02, 0.06, 0.04) | \
        _comparison("baselines_sce", "baselines_moco", "linear", 1, -0.01, 0.07, 0.03)
    verdict = repro.judge(claim, study, {"runs": runs, "comparisons": one}).verdict
    assert verdict.startswith("not reproduced (measured +4.000 vs paper +2.7 points, gap +1.300")
    assert "not above 0 in every seed" in verdict
    # an unfinished pretraining does not count, whatever its metrics
    runs["cpu/baselines_moco/seed1"]["pretrain_finished"] = False
    runs["cpu/baselines_moco/seed0"]["pretrain_finished"] = False
    assert repro.judge(claim, study, {"runs": runs, "comparisons": both}).verdict == \
        "not yet run"


def test_not_worse_and_absolute_claims(repro):
    study = repro.STUDIES["dystress"]
    claim = next(c for c in study.claims if c.id == "dys-shift")
    runs = _run("dystress_vanilla", 0, {"knn200/top1": 0.6}) | \
        _run("dystress_shifted", 0, {"knn200/top1": 0.61})
    close = _comparison("dystress_vanilla", "dystress_shifted", "knn200", 0, -0.03, 0.01, -0.01)
    assert repro.judge(claim, study, {"runs": runs, "comparisons": close}).verdict == "reproduced"
    worse = _comparison("dystress_vanilla", "dystress_shifted", "knn200", 0, -0.03, -0.001,
                        -0.01)
    assert repro.judge(claim, study, {"runs": runs, "comparisons": worse}).verdict.startswith(
        "not reproduced")
    gpu = repro.STUDIES["gpu_table6"]
    sce = next(c for c in gpu.claims if c.id == "g-sce")
    near = _run("table6_sce", 0, {"linear_d1/top1": 0.895}, tag="gpu")
    assert repro.judge(sce, gpu, {"runs": near, "comparisons": {}}).verdict == "reproduced"
    far = _run("table6_sce", 0, {"linear_d1/top1": 0.88}, tag="gpu")
    assert repro.judge(sce, gpu, {"runs": far, "comparisons": {}}).verdict == (
        "not reproduced (measured +88.000 vs paper +90.3 points, gap -2.300; more than 1 point "
        "below the paper)")


def test_epoch_override_runs_are_labelled_and_never_give_a_verdict(repro):
    """A shortened pipeline-check run shows its numbers but the verdict stays 'not yet run'."""
    summary = _fake_sincere_summary()
    summary["runs"] = {k.replace("cpu/", "cpu-e2/", 1): {**v, "tag": "cpu-e2", "epochs": 2}
                       for k, v in summary["runs"].items()}
    summary["comparisons"] = {k.replace("cpu/", "cpu-e2/", 1): v
                              for k, v in summary["comparisons"].items()}
    study = repro.STUDIES["sincere_cifar2"]
    verdict = repro.judge(study.claims[0], study, summary)
    assert verdict.verdict == repro.PIPELINE_CHECK and verdict.tag == "cpu-e2"
    assert verdict.verdict.startswith("not yet run") and verdict.values
    text = repro.render_report(summary)
    assert "(cpu-e2: 2 epochs instead of the configs': a pipeline check, not evidence)" in text
    assert "Runs under `runs/repro/cpu-e2/`" in text


def test_report_tables_and_figures(repro, tmp_path):
    summary = _fake_sincere_summary()
    for seed in (0, 1):
        for stem, acc in (("baselines_sce", 0.70), ("baselines_moco", 0.66),
                          ("baselines_ressl", 0.69)):
            summary["runs"] |= _run(stem, seed, {"linear/top1": acc + 0.01 * seed,
                                                 "knn200/top1": acc - 0.02})
    figures = tmp_path / "docs" / "figures"
    doc = repro.write_report(summary, tmp_path / "docs" / "reproduction.md", figures)
    text = doc.read_text()
    # every claim of every study is listed with its source and the paper's numbers
    for study in repro.STUDIES.values():
        assert f"### {study.title}" in text
        for claim in study.claims:
            assert f"| {claim.statement} | {claim.source} | {claim.paper} |" in text
    row = next(line for line in text.splitlines()
               if line.startswith("| SINCERE widens the target-noise margin"))
    assert row.endswith("| reproduced |") and "s0: +0.200" in row and "s1: +0.210" in row
    row = next(line for line in text.splitlines() if "5-NN accuracy of SINCERE" in line
               and "CIFAR-2" in line)
    assert "[+1.00, +7.00]" in row and "| not reproduced (measured +4.000" in row
    assert text.count("| not yet run |") >= 20
    # the overview counts every claim once, by the first words of its verdict
    n_gpu = sum(len(st.claims) for st in repro.STUDIES.values() if st.part == "gpu")
    assert f"| B (GPU, full scale) | {n_gpu} | 0 | 0 | 0 | {n_gpu} |" in text
    row = next(line for line in text.splitlines() if line.startswith("| A (CPU scale) |"))
    cells = [int(c) for c in row.strip("|").split("|")[1:]]
    assert cells[0] == sum(cells[1:]) == sum(
        len(st.claims) for st in repro.STUDIES.values() if st.part == "cpu")
    assert cells[1] >= 2 and cells[2] >= 1  # the fake margins reproduce, the fake 5-NN does not
    # per-run tables: mean ± sample std over seeds, "not yet run" where nothing was measured
    assert "| SINCERE | 30 | 0.305 ± 0.007 (2 seeds) |" in text
    assert "| SCE | 30 | 68.00 ± 0.00 (2 seeds) | 70.50 ± 0.71 (2 seeds) |" in text
    assert "| MoCo v2 | 30 |" in text
    assert "| ordinary t=0.05 | – | not yet run |" in text
    # the bar chart of the measured study exists and is linked relative to the document
    assert (figures / "repro_baselines.png").is_file()
    assert "![Study baselines" in text and "(figures/repro_baselines.png)" in text
    assert not (figures / "repro_temperature.png").exists()  # nothing measured, no figure
