"""The Barlow Twins and VICReg configs train through ``contrastkit pretrain``: each digits config
for a few steps in one process and under 2-process DDP (gloo, CPU), each CIFAR-10 config
(solo-learn's, lightly's) for two steps on the CIFAR-10 JPEG archive
(``../shared/data/cifar10-jpg.tar.gz``; skipped when it is absent), at its full network size, in
float32 (the configs ask for 16-bit mixed precision on a GPU). Each run must end with finite
losses and log the collapse check's ``train/z_std``."""

from __future__ import annotations

import csv
import math
import os
import sys
from pathlib import Path

import child_runs
import pytest

from contrastkit.cli import main

HERE = Path(__file__).parent
REPO = HERE.parents[1]
ARCHIVE = REPO.parent / "shared" / "data" / "cifar10-jpg.tar.gz"
DIGITS = ["cpu/digits_barlow_twins.yaml", "cpu/digits_vicreg.yaml"]
CIFAR10 = ["baselines/cifar10_barlow_twins_sololearn.yaml",
           "baselines/cifar10_vicreg_sololearn.yaml", "baselines/cifar10_barlow_twins_lightly.yaml"]
FEW_STEPS = ["--data.subset", "64", "--data.batch_size", "16", "--trainer.max_epochs", "1",
             "--trainer.log_every_n_steps", "1", "--trainer.enable_progress_bar", "false"]


def _logged(run: Path, key: str) -> list[float]:
    with open(run / "metrics.csv", newline="") as handle:
        return [float(row[key]) for row in csv.DictReader(handle) if row.get(key)]


def _assert_trained(run: Path, steps: int) -> None:
    losses = _logged(run, "train/loss")
    assert len(losses) == steps and all(math.isfinite(v) for v in losses), run
    assert len(_logged(run, "train/z_std")) == steps, run
    assert (run / "checkpoints" / "last.ckpt").is_file(), run


@pytest.mark.slow
def test_the_digits_configs_train_in_one_process_and_under_ddp(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1",
               GLOO_SOCKET_IFNAME="lo")
    ddp = [child_runs.start(
        [sys.executable, "-m", "contrastkit.cli", "pretrain", "--config",
         str(REPO / "configs" / name), *FEW_STEPS, "--data.batch_size", "8",
         "--trainer.strategy", "ddp", "--trainer.devices", "2",
         "--output", str(tmp_path / f"ddp-{Path(name).stem}")],
        env, tmp_path / f"ddp-{Path(name).stem}.log") for name in DIGITS]
    with child_runs.killed_on_error(*ddp):
        for name in DIGITS:  # one process here while the two-process runs start up
            out = tmp_path / f"one-{Path(name).stem}"
            assert main(["pretrain", "--config", str(REPO / "configs" / name), *FEW_STEPS,
                         "--output", str(out)]) == 0
            _assert_trained(out, steps=4)
    child_runs.finish(*ddp)
    for name in DIGITS:  # 64 images, 8 per process: 4 steps of a global batch of 16
        _assert_trained(tmp_path / f"ddp-{Path(name).stem}", steps=4)


@pytest.mark.slow
@pytest.mark.skipif(not ARCHIVE.is_file(), reason=f"{ARCHIVE} not available")
def test_the_cifar10_configs_train_two_steps_on_the_jpeg_archive(tmp_path: Path) -> None:
    for name in CIFAR10:
        out = tmp_path / Path(name).stem
        assert main(["pretrain", "--config", str(REPO / "configs" / name),
                     "--data.dataset", "image_archive", "--data.root", str(ARCHIVE),
                     "--data.cache_dir", str(tmp_path / "cache"), "--data.subset", "32",
                     "--data.batch_size", "16", "--data.num_workers", "0",
                     "--data.monitor_bank_size", "64", "--trainer.limit_val_batches", "2",
                     "--trainer.max_epochs", "1", "--trainer.precision", "32-true",
                     "--trainer.accelerator", "cpu", "--trainer.devices", "1",
                     "--trainer.log_every_n_steps", "1", "--trainer.enable_progress_bar",
                     "false", "--output", str(out)]) == 0, name
        _assert_trained(out, steps=2)
