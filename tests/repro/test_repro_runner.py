"""contrastkit.repro.commands and .runner: the public commands each study runs (dry runs:
nothing trains), chunked Part B training and the step budget."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from contrastkit.repro import layout
from contrastkit.repro.commands import (
    chunk_arguments,
    format_duration,
    parse_duration,
    trained_seconds,
)
from contrastkit.repro.layout import ARCHIVE
from contrastkit.repro.runner import Runner, run_studies, selected
from contrastkit.repro.studies import STUDIES


def _dry_run(part, names, seeds=None, **kwargs):
    runner = Runner(dry_run=True, log=lambda line: None)
    run_studies(part, [STUDIES[n] for n in names], seeds, runner, **kwargs)
    return runner.commands


def _option(cmd, name):
    return cmd[cmd.index(name) + 1]


@pytest.mark.parametrize("name", [n for n in ("sincere_cifar2", "sincere_cifar10", "temperature",
                                              "sce_lambda", "sce_tau_m", "dystress",
                                              "baselines")])
def test_dry_run_lists_pretrain_evals_and_compares(name, monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)  # no checkpoint exists there: no --resume
    study = STUDIES[name]
    commands = _dry_run("cpu", [name], seeds=[0, 1])
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


def test_dry_run_sincere_cifar2_commands(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    commands = _dry_run("cpu", ["sincere_cifar2"], seeds=[0])
    lines = [" ".join(c) for c in commands]
    assert lines[0].startswith("contrastkit pretrain --config "
                               "configs/repro/cpu/sincere_cifar2_sincere.yaml --output "
                               "runs/repro/cpu/sincere_cifar2_sincere/seed0/pretrain "
                               "--seed_everything 0")
    knn1 = commands[1]
    assert knn1[:5] == ["contrastkit", "eval", "knn", "--k", "1"]
    # CIFAR-2 is evaluated on the archive's cat and dog images, in data.classes' order
    assert _option(knn1, "--data") == "image_archive"
    assert _option(knn1, "--root") == ARCHIVE
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


def test_dry_run_cifar10_evaluations_use_the_archive(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    commands = _dry_run("cpu", ["temperature"], seeds=[0])
    analyze = [c for c in commands if c[1] == "analyze"]
    assert len(analyze) == 10
    assert all(_option(c, "--data") == "image_archive" and
               _option(c, "--root") == "../shared/data/cifar10-jpg.tar.gz" for c in analyze)
    assert _option(analyze[0], "--temperatures") == "0.05"
    knn = [c for c in commands if c[1:3] == ["eval", "knn"]]
    assert all(_option(c, "--k") == "200" for c in knn)


def test_shared_config_runs_once(monkeypatch, tmp_path):
    """sce_tau_m's tau_m = 0.05 point is sce_lambda's lambda = 0.5 run."""
    monkeypatch.setattr(layout, "REPO", tmp_path)
    commands = _dry_run("cpu", ["sce_lambda", "sce_tau_m"], seeds=[0])
    configs = [_option(c, "--config") for c in commands if c[1] == "pretrain"]
    assert configs.count("configs/repro/cpu/sce_lambda0.5.yaml") == 1
    assert len(configs) == len(set(configs)) == 7


def test_dry_run_resumes_an_existing_checkpoint(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    ckpt = tmp_path / "runs/repro/cpu/baselines_moco/seed0/pretrain/checkpoints/last.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"x")
    commands = _dry_run("cpu", ["baselines"], seeds=[0])
    pretrain = {_option(c, "--config"): c for c in commands if c[1] == "pretrain"}
    assert pretrain["configs/repro/cpu/baselines_moco.yaml"][-2:] == ["--resume", "last"]
    assert "--resume" not in pretrain["configs/repro/cpu/baselines_sce.yaml"]


def test_dry_run_gpu_chunks_and_epoch_override(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    commands = _dry_run("gpu", ["gpu_table6"], seeds=[0], chunk_seconds=510,
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
    commands = _dry_run("cpu", ["dystress"], seeds=[3], epochs=2)
    pretrain = [c for c in commands if c[1] == "pretrain"]
    assert all(_option(c, "--trainer.max_epochs") == "2" for c in pretrain)
    assert _option(pretrain[0], "--output") == "runs/repro/cpu-e2/dystress_simclr/seed3/pretrain"


def test_chunk_duration_adds_the_time_already_trained(tmp_path):
    """Lightning restores the Timer's elapsed time on resume: each chunk's duration is the
    time already trained (from the checkpoint) plus the chunk."""
    ckpt = tmp_path / "last.ckpt"
    assert trained_seconds(ckpt) == 0.0
    torch.save({"callbacks": {"Timer": {"time_elapsed": {"train": 1234.7, "validate": 9.0}}}},
               ckpt)
    assert trained_seconds(ckpt) == pytest.approx(1234.7)
    args = chunk_arguments(parse_duration("00:00:08:30"), trained_seconds(ckpt))
    assert args[args.index("--trainer.callbacks.duration") + 1] == "00:00:29:04"  # 1744 s
    assert format_duration(2 * 86400 + 3 * 3600 + 4 * 60 + 5) == "02:03:04:05"
    with pytest.raises(SystemExit, match="DD:HH:MM:SS"):
        parse_duration("9:30")


def test_step_budget():
    runner = Runner(dry_run=True, log=lambda line: None, max_steps=2)
    assert [runner.spend() for _ in range(3)] == [True, True, False]
    assert Runner(dry_run=True).spend()


def test_unknown_study_is_rejected():
    with pytest.raises(SystemExit, match="unknown cpu study"):
        selected(["gpu_table6"], "cpu")
