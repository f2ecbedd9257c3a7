"""The nine baselines' configs train through ``contrastkit pretrain`` (slow: whole commands,
several processes). Each digits config of BYOL, MoCo v3, W-MSE, DCLW, SwAV, DINO, NNCLR, Barlow
Twins and VICReg trains an epoch in one process and under 2-process DDP (gloo, CPU); each of
their CIFAR-10 configs (solo-learn's and lightly's recipes, DySTreSS Tables 9 and 13) trains two
steps at its full network size on a cut of the shared CIFAR-10 JPEG archive (skipped without
it), in float32 (the configs ask for mixed precision on a GPU). The DDP runs are child
processes started side by side a few at a time (``child_runs``), while this process runs the
one-process runs (one interpreter start-up for them all). Every run must log a finite loss and
the collapse check's ``train/z_std`` at each step and leave a last checkpoint of those steps."""

from __future__ import annotations

import csv
import io
import math
import os
import sys
import tarfile
from pathlib import Path

import child_runs
import pytest
import torch

from contrastkit.cli import main

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
ARCHIVE = REPO.parent / "shared" / "data" / "cifar10-jpg.tar.gz"
METHODS = ("byol", "mocov3", "wmse", "dclw", "swav", "dino", "nnclr", "barlow_twins", "vicreg")
DIGITS = [CONFIGS / "cpu" / f"digits_{m}.yaml" for m in METHODS]
CIFAR10 = [*sorted((CONFIGS / "baselines").glob("cifar10_*.yaml")),
           *(CONFIGS / "dystress" / f"cifar10_{m}.yaml" for m in ("dclw", "wmse", "dino"))]
LOG_EVERY_STEP = ["--trainer.log_every_n_steps", "1", "--trainer.enable_progress_bar", "false"]
#: DDP runs started at once: each is two processes of about half a GiB.
DDP_AT_ONCE = 3


def _logged(run: Path, key: str) -> list[float]:
    with open(run / "metrics.csv", newline="") as handle:
        return [float(row[key]) for row in csv.DictReader(handle) if row.get(key)]


def _assert_trained(run: Path, steps: int) -> None:
    losses = _logged(run, "train/loss")
    assert len(losses) == steps and all(math.isfinite(v) for v in losses), (run, losses)
    spreads = _logged(run, "train/z_std")
    assert len(spreads) == steps and all(math.isfinite(v) for v in spreads), (run, spreads)
    state = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert state["global_step"] == steps, run


def test_the_lists_cover_every_baseline_method_and_its_cifar10_configs() -> None:
    assert all(p.is_file() for p in DIGITS + CIFAR10)
    assert {m for m in METHODS if any(f"_{m}" in p.stem for p in CIFAR10)} == set(METHODS)


@pytest.mark.slow
def test_the_digits_configs_train_in_one_process_and_under_ddp(tmp_path: Path) -> None:
    """256 images: two steps of the configs' batch of 128, in one process and as two processes
    of 64 (the same global batch)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1",
               GLOO_SOCKET_IFNAME="lo")
    epoch = ["--data.subset", "256", "--trainer.max_epochs", "1", *LOG_EVERY_STEP]
    for start in range(0, len(DIGITS), DDP_AT_ONCE):
        wave = DIGITS[start:start + DDP_AT_ONCE]
        ddp = [child_runs.start(
            [sys.executable, "-m", "contrastkit.cli", "pretrain", "--config", str(config),
             *epoch, "--data.batch_size", "64", "--trainer.strategy", "ddp",
             "--trainer.devices", "2", "--output", str(tmp_path / f"ddp-{config.stem}")],
            env, tmp_path / f"ddp-{config.stem}.log") for config in wave]
        with child_runs.killed_on_error(*ddp):
            for config in wave:  # here, while the two-process runs start up
                out = tmp_path / f"one-{config.stem}"
                assert main(["pretrain", "--config", str(config), *epoch, "--threads", "1",
                             "--output", str(out)]) == 0, config
                _assert_trained(out, steps=2)
        child_runs.finish(*ddp)
        for config in wave:
            _assert_trained(tmp_path / f"ddp-{config.stem}", steps=2)


def _cut_archive(path: Path, train: int = 26, test: int = 4) -> None:
    """The first ``train`` / ``test`` images of every class, in the archive's layout."""
    counts: dict[tuple[str, str], int] = {}
    with tarfile.open(ARCHIVE, "r:gz") as src, tarfile.open(path, "w:gz") as dst:
        for member in src:
            parts = member.name.split("/")
            if len(parts) != 3 or not member.isfile():
                continue
            key = (parts[0], parts[1])
            if counts.get(key, 0) < (train if parts[0] == "train" else test):
                counts[key] = counts.get(key, 0) + 1
                dst.addfile(member, io.BytesIO(src.extractfile(member).read()))


@pytest.mark.slow
@pytest.mark.skipif(not ARCHIVE.is_file(), reason=f"{ARCHIVE} not available")
def test_the_cifar10_configs_train_two_steps_at_full_size(tmp_path: Path) -> None:
    """260 training images, two steps of 32 (W-MSE: 128, its whitening sub-batch), the
    recipe's network, heads, queues and prototypes as configured, then the monitors' epoch
    end on 40 test images and a bank of 64."""
    small = tmp_path / "cifar10-small.tar.gz"
    _cut_archive(small)
    for config in CIFAR10:
        out = tmp_path / f"{config.parent.name}-{config.stem}"
        batch = "128" if "wmse" in config.stem else "32"
        assert main(["pretrain", "--config", str(config), "--data.dataset", "image_archive",
                     "--data.root", str(small), "--data.cache_dir", str(tmp_path / "cache"),
                     "--data.batch_size", batch, "--data.num_workers", "0",
                     "--data.monitor_bank_size", "64", "--trainer.max_epochs", "1",
                     "--trainer.limit_train_batches", "2", "--trainer.precision", "32-true",
                     "--trainer.accelerator", "cpu", "--trainer.devices", "1", *LOG_EVERY_STEP,
                     "--output", str(out)]) == 0, config
        _assert_trained(out, steps=2)
