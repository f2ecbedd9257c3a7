"""`contrastkit pretrain` under DDP with 2 gloo processes, through the real command line.

Lightning's DDP launcher starts the second process by re-running the command, so each test
runs ``python -m contrastkit.cli pretrain --trainer.strategy ddp --trainer.devices 2
--trainer.accelerator cpu ...`` in a subprocess, with the probes of ``ddp_probe.py`` added as
callbacks. They check that

* every process draws its own augmentations (the crop boxes of the first batch differ between
  the processes; with one shared seed they would be equal, as boxes do not depend on pixels);
* an interrupted run resumed with ``--resume last`` ends with exactly the weights, queue and
  augmentation generators of an uninterrupted one, and draws the same views after the resume;
* with deterministic views (the ``eval`` preset) and a network without batch statistics, two
  processes on batches of 16 end with the weights of one process on batches of 32, and the
  online kNN monitor, sharded over the processes, reports the one-process accuracy.
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import child_runs
import pytest
import torch

from contrastkit.cli import main

HERE = Path(__file__).parent
SRC = HERE.parents[1] / "src"

COMMON = [
    "--data.dataset", "digits", "--data.subset", "128", "--data.monitor_bank_size", "64",
    "--model.views.size", "8", "--trainer.accelerator", "cpu",
    "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "2",
    "--model.method", "contrastkit.methods.SCE", "--model.method.queue_size", "48",
    "--model.method.projector", '{"hidden_dim": 16, "out_dim": 8, "batch_norm": "none"}',
]


def start(out: Path, *args: str, devices: int = 2, batch: int = 16,
          resume: bool = False) -> child_runs.Run:
    """Start ``contrastkit pretrain`` in a child process (its output in ``out``.log)."""
    strategy = ["--trainer.strategy", "ddp"] if devices > 1 else []
    command = [sys.executable, "-m", "contrastkit.cli", "pretrain", *COMMON, *strategy,
               "--trainer.devices", str(devices), "--data.batch_size", str(batch),
               "--output", str(out), *args, *(["--resume", "last"] if resume else [])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(HERE)]),
               OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    return child_runs.start(command, env, out.with_name(out.name + ".log"))


def pretrain(out: Path, *args: str, devices: int = 2, batch: int = 16,
             resume: bool = False) -> None:
    child_runs.finish(start(out, *args, devices=devices, batch=batch, resume=resume))


def probe(folder: Path) -> list[str]:
    return ["--trainer.callbacks+", "ddp_probe.RecordViews",
            "--trainer.callbacks.folder", str(folder)]


def checkpoint(run: Path) -> dict:
    return torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)


def metric(run: Path, key: str) -> list[float]:
    with open(run / "metrics.csv", newline="") as handle:
        return [float(row[key]) for row in csv.DictReader(handle) if row.get(key)]


CONVNET = ["--model.method.backbone", '{"name": "small_convnet", "width": 8, "out_dim": 16}']


@pytest.mark.slow
def test_processes_draw_their_own_augmentations_and_resume_exactly(tmp_path: Path) -> None:
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    epochs = ["--trainer.max_epochs", "2"]
    # the uninterrupted run goes on beside the interrupted one and its resume (start-ups
    # dominate these runs: side by side they share the two cores)
    straight = start(whole, *CONVNET, *epochs, *probe(tmp_path / "p-whole"))
    with child_runs.killed_on_error(straight):
        pretrain(cut, *CONVNET, *epochs, "--trainer.callbacks+", "ddp_probe.StopAfter",
                 "--trainer.callbacks.epochs", "1")
        assert checkpoint(cut)["epoch"] == 0
        resumed = start(cut, *CONVNET, *epochs, *probe(tmp_path / "p-cut"), resume=True)
    child_runs.finish(straight, resumed)

    # (a) each process its own draws: the first batch's crop boxes differ between processes
    first = [torch.load(tmp_path / "p-whole" / f"views-r{r}-e0.pt") for r in (0, 1)]
    assert not torch.equal(first[0]["boxes"], first[1]["boxes"])
    # (b) exact resume: the views drawn after the resume, and the final state, are the same
    for r in (0, 1):
        resumed = torch.load(tmp_path / "p-cut" / f"views-r{r}-e1.pt")
        straight = torch.load(tmp_path / "p-whole" / f"views-r{r}-e1.pt")
        assert torch.equal(resumed["boxes"], straight["boxes"])
        for a, b in zip(resumed["views"], straight["views"], strict=True):
            assert torch.equal(a, b)
    a, b = checkpoint(whole), checkpoint(cut)
    assert a["global_step"] == b["global_step"] == 8
    for key, value in a["state_dict"].items():
        assert torch.equal(value, b["state_dict"][key]), key
    states = a["augmentation_rng"]["states"]
    assert len(states) == 2 and not torch.equal(states[0], states[1])
    for x, y in zip(states, b["augmentation_rng"]["states"], strict=True):
        assert torch.equal(x, y)


@pytest.mark.slow
def test_two_processes_equal_one_process_on_the_combined_batch(tmp_path: Path,
                                                               one_thread) -> None:
    deterministic = [
        "--model.method.backbone",
        '{"name": "small_convnet", "width": 8, "out_dim": 16, "norm": "none"}',
        "--model.views.online", "eval", "--model.views.target", "eval",
        "--trainer.max_epochs", "1",
    ]
    two, one = tmp_path / "two", tmp_path / "one"
    # the one-process run trains here (one thread, as in the children) while the two start up
    two_processes = start(two, *deterministic, devices=2, batch=16)
    with child_runs.killed_on_error(two_processes):
        assert main(["pretrain", *COMMON, "--trainer.devices", "1", "--data.batch_size", "32",
                     "--output", str(one), *deterministic]) == 0
    child_runs.finish(two_processes)
    a, b = checkpoint(two), checkpoint(one)
    assert a["global_step"] == b["global_step"] == 4
    child_runs.assert_same_weights(a["state_dict"], b["state_dict"])
    # the kNN monitor: shards of the bank and the queries on two processes, same accuracy
    assert metric(two, "val/knn_top1") == pytest.approx(metric(one, "val/knn_top1"), abs=1e-6)
    assert metric(two, "val/online_linear_top1") == pytest.approx(
        metric(one, "val/online_linear_top1"), abs=1e-6)


@pytest.mark.parametrize(("n", "world", "batch"), [(40, 2, 4), (37, 3, 2), (10, 1, 3)])
def test_process_batches_gather_into_the_one_process_batches(n: int, world: int,
                                                             batch: int) -> None:
    from contrastkit.train.datamodule import EpochShuffleSampler

    one = list(EpochShuffleSampler(n, seed=5, batch_size=batch * world))
    per_rank = [list(EpochShuffleSampler(n, seed=5, rank=r, world_size=world, batch_size=batch))
                for r in range(world)]
    assert all(len(p) == len(per_rank[0]) for p in per_rank)
    steps = len(per_rank[0]) // batch
    gathered = [i for k in range(steps) for p in per_rank for i in p[k * batch:(k + 1) * batch]]
    assert gathered == one[: len(gathered)]
    assert len(gathered) == (n // (batch * world)) * batch * world if world > 1 else n


def _shard_body(rank: int) -> dict:
    from contrastkit.train.datamodule import ShardSampler
    from contrastkit.train.module import _gather_shards

    split = torch.arange(7.0) * 10  # 7 items over 2 processes: shards of 4 and 3
    mine = split[list(ShardSampler(7, rank, 2))]
    return {"shard": mine, "whole": _gather_shards(mine)}


def test_monitor_shards_cover_the_split_once_and_gather_back_in_order(tmp_path: Path) -> None:
    from gloo_harness import run_ranks

    ranks = run_ranks(_shard_body, 2, tmp_path)
    assert [len(r["shard"]) for r in ranks] == [4, 3]
    assert sorted(torch.cat([r["shard"] for r in ranks]).tolist()) == [10.0 * i for i in range(7)]
    for r in ranks:
        assert torch.equal(r["whole"], torch.arange(7.0) * 10)
