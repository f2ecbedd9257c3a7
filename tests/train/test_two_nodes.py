"""Several nodes on one machine (issue 36): two torchrun "nodes" of one gloo process each on
localhost (``--nnodes 2 --node-rank 0/1``, c10d rendezvous on 127.0.0.1), the way
docs/configs.md launches a multi-node run, with one run folder as a shared file system gives.

One test, in steps: the two nodes train SCE (deterministic views, no batch statistics) while a
single process trains here on their combined batch; both nodes stop at the start of epoch 2
(epoch 1's checkpoint written) and node 1 is killed: node 0 must stop too, not hang, and the
checkpoint stays intact; ``--resume last`` on both then restores exactly what the checkpoint
holds, and the finished run equals the single process's. Only rank 0 locks the folder and
writes in it.
"""

from __future__ import annotations

import csv
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import child_runs
import pytest
import torch

from contrastkit.cli import main
from contrastkit.outputs import LOCK_FILE

HERE = Path(__file__).parent
SRC = HERE.parents[1] / "src"

COMMON = [
    "--data.dataset", "digits", "--data.subset", "64", "--data.monitor_bank_size", "32",
    "--model.views.size", "8", "--model.views.online", "eval", "--model.views.target", "eval",
    "--trainer.accelerator", "cpu", "--trainer.enable_progress_bar", "false",
    "--trainer.log_every_n_steps", "1", "--trainer.max_epochs", "2",
    "--model.method", "contrastkit.methods.SCE", "--model.method.queue_size", "48",
    "--model.method.projector", '{"hidden_dim": 16, "out_dim": 8, "batch_norm": "none"}',
    "--model.method.backbone",
    '{"name": "small_convnet", "width": 8, "out_dim": 16, "norm": "none"}',
]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node(rank: int, port: int, out: Path, probes: Path, *extra: str) -> subprocess.Popen:
    """One node: ``torchrun`` (in its own process group) starting one ``contrastkit pretrain``
    process; its output in ``out``-node<rank>.log."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
        "--node-rank", str(rank), "--rdzv-backend", "c10d",
        "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"two-nodes-{port}",
        "--rdzv-conf", f"is_host={int(rank == 0)},join_timeout=300", "--local-addr", "127.0.0.1",
        "--max-restarts", "0", "--monitor-interval", "0.5",
        "-m", "contrastkit.cli", "pretrain", *COMMON, "--trainer.strategy", "ddp",
        "--trainer.devices", "1", "--trainer.num_nodes", "2", "--data.batch_size", "16",
        "--output", str(out), "--trainer.callbacks+", "node_probe.RecordStart",
        "--trainer.callbacks.folder", str(probes), *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(HERE)]),
               OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    log = out.parent / f"{out.name}-node{rank}.log"
    with open(log, "a") as handle:
        return subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop(nodes: list[subprocess.Popen]) -> None:
    for node in nodes:
        if node.poll() is None:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait()


def _logs(out: Path) -> str:
    return "\n".join(f"--- node {r}:\n" + (out.parent / f"{out.name}-node{r}.log").read_text()
                     [-4000:] for r in (0, 1))


def _wait(nodes: list[subprocess.Popen], out: Path, timeout: float = 420) -> list[int]:
    deadline = time.monotonic() + timeout
    while any(n.poll() is None for n in nodes) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(n.poll() is not None for n in nodes), "a node hangs:\n" + _logs(out)
    return [n.returncode for n in nodes]


def _logged_steps(run: Path) -> list[int]:
    with open(run / "metrics.csv", newline="") as handle:
        return [int(r["step"]) for r in csv.DictReader(handle) if r.get("train/loss")]


def _locked(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.mark.slow
def test_two_nodes_on_one_machine_train_stop_and_resume_as_one(tmp_path, one_thread):
    out, one, probes = tmp_path / "run", tmp_path / "one", tmp_path / "probes"
    hold = ["--trainer.callbacks+", "node_probe.HoldAtEpoch",
            "--trainer.callbacks.folder", str(probes / "hold"), "--trainer.callbacks.epoch", "1"]
    port = _free_port()
    nodes = [_node(rank, port, out, probes / "first", *hold) for rank in (0, 1)]
    try:
        # the single process on the combined batch trains here while the nodes start up
        assert main(["pretrain", *COMMON, "--trainer.devices", "1", "--data.batch_size", "32",
                     "--output", str(one)]) == 0
        deadline = time.monotonic() + 420
        ready = [probes / "hold" / f"ready-r{r}" for r in (0, 1)]
        while not all(p.exists() for p in ready) and time.monotonic() < deadline:
            assert all(n.poll() is None for n in nodes), "a node ended:\n" + _logs(out)
            time.sleep(0.1)
        assert all(p.exists() for p in ready), "the nodes did not reach epoch 2:\n" + _logs(out)
        # node 1 dies: its torchrun and its process (which torchrun starts in a session of its
        # own), whatever rank the rendezvous gave it
        pids = [tuple(map(int, p.read_text().split())) for p in ready]
        [worker] = [pid for pid, parent in pids if parent == nodes[1].pid]
        os.kill(worker, signal.SIGKILL)
        os.killpg(nodes[1].pid, signal.SIGKILL)
        (probes / "hold" / "go").touch()
        codes = _wait(nodes, out)
    finally:
        _stop(nodes)
    assert codes[1] == -signal.SIGKILL and codes[0] != 0, _logs(out)  # node 0 stopped as well
    # in one line (a gloo error with a 190-line traceback before)
    log = (out.parent / f"{out.name}-node0.log").read_text()
    assert "contrastkit pretrain: error: another process of this 2-process run stopped, so " \
           "process" in log and "last.ckpt holds epoch 1 (step 2): resume with --resume last " \
           "on every node" in log, _logs(out)
    assert "]: Traceback" not in log, _logs(out)

    # one lock, held by rank 0's process; the other node's process never took it
    first = [torch.load(probes / "first" / f"start-r{r}.pt", weights_only=False)
             for r in (0, 1)]
    assert [f["rank"] for f in first] == [0, 1]
    assert first[0]["lock"] == first[1]["lock"] == str(first[0]["pid"]) != str(first[1]["pid"])
    assert not (out / LOCK_FILE).exists() or not _locked(out / LOCK_FILE)
    # the last checkpoint is intact: epoch 1's, complete and verified
    ckpts = out / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir() if not p.name.startswith(".")) == [
        "best.ckpt", "last.ckpt"]
    saved = torch.load(ckpts / "last.ckpt", map_location="cpu", weights_only=True)
    assert saved["global_step"] == 2 and saved["epoch"] == 0

    port = _free_port()
    nodes = [_node(rank, port, out, probes / "resumed", "--resume", "last") for rank in (0, 1)]
    try:
        assert _wait(nodes, out) == [0, 0], _logs(out)
    finally:
        _stop(nodes)
    # both processes restored exactly what the checkpoint holds
    for rank in (0, 1):
        start = torch.load(probes / "resumed" / f"start-r{rank}.pt", weights_only=False)
        assert start["state_dict"].keys() == saved["state_dict"].keys()
        for key, value in saved["state_dict"].items():
            assert torch.equal(start["state_dict"][key], value), (rank, key)
        restored = start["optimizer"]["state"]
        for index, moments in saved["optimizer_states"][0]["state"].items():
            for name, value in moments.items():
                assert torch.equal(restored[index][name], value), (rank, index, name)
    # the finished run equals the one process on the combined batch
    a = torch.load(ckpts / "last.ckpt", map_location="cpu", weights_only=True)
    b = torch.load(one / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert a["global_step"] == b["global_step"] == 4
    child_runs.assert_same_weights(a["state_dict"], b["state_dict"])
    # one writer: each logged step once, one TensorBoard file per start, nothing left over
    assert _logged_steps(out) == _logged_steps(one)
    assert len(list((out / "tensorboard").glob("events.out.tfevents.*"))) == 2
    assert not (out / LOCK_FILE).exists() and not list(ckpts.glob(".*.tmp"))
