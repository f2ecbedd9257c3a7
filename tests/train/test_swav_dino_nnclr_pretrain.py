"""The SwAV, DINO and NNCLR configs train through ``contrastkit pretrain``: the digits configs
for an epoch in one process and under 2-process DDP (gloo, CPU), the CIFAR-10 recipes
(solo-learn's, lightly's, DySTreSS Table 9's) for two steps at full size on the shared CIFAR-10
JPEG archive (skipped when it is absent). All slow: whole commands, several processes."""

from __future__ import annotations

import csv
import math
import os
import sys
from pathlib import Path

import child_runs
import pytest
import torch

from contrastkit.cli.pretrain import pretrain

HERE = Path(__file__).parent
REPO = HERE.parents[1]
ARCHIVE = REPO / ".." / "shared" / "data" / "cifar10-jpg.tar.gz"
DIGITS = [REPO / "configs" / "cpu" / f"digits_{m}.yaml" for m in ("swav", "dino", "nnclr")]
CIFAR10 = [*sorted((REPO / "configs" / "baselines").glob("cifar10_*.yaml")),
           REPO / "configs" / "dystress" / "cifar10_dino.yaml"]
SHORT = ["--data.subset", "256", "--trainer.max_epochs", "1", "--trainer.enable_progress_bar",
         "false", "--trainer.log_every_n_steps", "1"]


def _losses(run: Path) -> list[float]:
    with open(run / "metrics.csv", newline="") as handle:
        return [float(row["train/loss"]) for row in csv.DictReader(handle)
                if row.get("train/loss")]


def _trained(run: Path, steps: int) -> None:
    state = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert state["global_step"] == steps
    losses = _losses(run)
    assert losses and all(math.isfinite(v) for v in losses)


@pytest.mark.slow
@pytest.mark.parametrize("config", DIGITS, ids=[p.stem for p in DIGITS])
def test_digits_config_trains_in_one_process(tmp_path: Path, config: Path) -> None:
    pretrain(["--config", str(config), *SHORT, "--output", str(tmp_path / "run")])
    _trained(tmp_path / "run", steps=2)  # 256 images, batch 128


@pytest.mark.slow
def test_digits_configs_train_under_two_process_ddp(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1",
               GLOO_SOCKET_IFNAME="lo")
    runs = []
    for config in DIGITS:
        out = tmp_path / config.stem
        command = [sys.executable, "-m", "contrastkit.cli", "pretrain", "--config", str(config),
                   *SHORT, "--data.batch_size", "64", "--trainer.strategy", "ddp",
                   "--trainer.devices", "2", "--output", str(out)]
        runs.append(child_runs.start(command, env, tmp_path / f"{config.stem}.log"))
    child_runs.finish(*runs)
    for config in DIGITS:
        _trained(tmp_path / config.stem, steps=2)  # 2 processes x 64 = the batch of 128


@pytest.fixture(scope="module")
def cifar_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not ARCHIVE.is_file():
        pytest.skip(f"{ARCHIVE} not available")
    return tmp_path_factory.mktemp("cifar10-jpg-cache")


@pytest.mark.slow
@pytest.mark.parametrize("config", CIFAR10, ids=[p.stem for p in CIFAR10])
def test_cifar10_config_trains_two_steps(tmp_path: Path, cifar_cache: Path, config: Path) -> None:
    """The full-size network of the recipe (ResNet-18, its heads, queue and prototypes), two
    optimiser steps of 32 images, the monitor off; the array cache built once for all."""
    pretrain(["--config", str(config), "--data.dataset", "image_archive", "--data.root",
              str(ARCHIVE), "--data.cache_dir", str(cifar_cache), "--data.subset", "64",
              "--data.batch_size", "32", "--data.num_workers", "0", "--trainer.max_steps", "2",
              "--trainer.limit_val_batches", "0", "--trainer.accelerator", "cpu",
              "--trainer.devices", "1", "--trainer.enable_progress_bar", "false",
              "--trainer.log_every_n_steps", "1", "--output", str(tmp_path / "run")])
    _trained(tmp_path / "run", steps=2)
