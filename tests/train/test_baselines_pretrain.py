"""The BYOL, MoCo v3, W-MSE and DCLW configs train through ``contrastkit pretrain``: each digits
config for a few steps in one process and under 2-process DDP (gloo, CPU), and each CIFAR-10
config for two steps on a cut of the shared CIFAR-10 JPEG archive (skipped without it), every
run in a child process, side by side (``child_runs``). Each run must exit 0 with a finite
logged loss and a checkpoint."""

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

REPO = Path(__file__).resolve().parents[2]
ARCHIVE = REPO / ".." / "shared" / "data" / "cifar10-jpg.tar.gz"
DIGITS = [f"configs/cpu/digits_{m}.yaml" for m in ("byol", "mocov3", "wmse", "dclw")]
CIFAR10 = [f"configs/baselines/cifar10_{m}.yaml" for m in (
    "byol_sololearn", "mocov3_sololearn", "wmse_sololearn", "byol_lightly", "dclw_lightly")
] + ["configs/dystress/cifar10_dclw.yaml", "configs/dystress/cifar10_wmse.yaml"]
QUIET = ["--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1"]


def _start(out: Path, *args: str) -> child_runs.Run:
    command = [sys.executable, "-m", "contrastkit.cli", "pretrain", *args, *QUIET,
               "--output", str(out)]
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1",
               GLOO_SOCKET_IFNAME="lo")
    return child_runs.start(command, env, out.with_name(out.name + ".log"))


def _trained(run: Path) -> None:
    with open(run / "metrics.csv", newline="") as handle:
        losses = [float(r["train/loss"]) for r in csv.DictReader(handle) if r.get("train/loss")]
    assert losses and all(math.isfinite(v) for v in losses), run
    assert (run / "checkpoints" / "last.ckpt").is_file(), run


@pytest.mark.slow
def test_digits_configs_train_in_one_process_and_under_ddp(tmp_path: Path) -> None:
    runs, outs = [], []
    for config in DIGITS:
        name = Path(config).stem
        short = ["--config", str(REPO / config), "--data.subset", "256",
                 "--trainer.max_epochs", "1"]
        outs += [tmp_path / f"{name}-one", tmp_path / f"{name}-ddp"]
        runs.append(_start(outs[-2], *short))
        # 2 processes of 64: a global batch of 128, as the config's one process
        runs.append(_start(outs[-1], *short, "--trainer.strategy", "ddp",
                           "--trainer.devices", "2", "--data.batch_size", "64"))
    child_runs.finish(*runs, timeout=1800)
    for out in outs:
        _trained(out)


def _cut_archive(path: Path, train: int = 60, test: int = 10) -> None:
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
def test_cifar10_configs_train_two_steps_on_the_jpeg_archive(tmp_path: Path) -> None:
    """600 training images (two steps of the configs' batches of 256), backbone width 8."""
    small = tmp_path / "cifar10-small.tar.gz"
    _cut_archive(small)
    data = ["--data.dataset", "image_archive", "--data.root", str(small),
            "--data.cache_dir", str(tmp_path / "cache"), "--data.num_workers", "0",
            "--model.method.init_args.backbone.width", "8", "--trainer.max_epochs", "1",
            "--trainer.limit_train_batches", "2"]
    # the first run decodes the archive into the cache; the others start once it is there
    first, *rest = CIFAR10
    child_runs.finish(_start(tmp_path / Path(first).stem, "--config", str(REPO / first), *data))
    runs = [_start(tmp_path / f"{Path(c).parent.name}-{Path(c).stem}", "--config",
                   str(REPO / c), *data) for c in rest]
    child_runs.finish(*runs, timeout=1800)
    _trained(tmp_path / Path(first).stem)
    for config in rest:
        _trained(tmp_path / f"{Path(config).parent.name}-{Path(config).stem}")
