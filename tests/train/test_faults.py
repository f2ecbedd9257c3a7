"""Issue 18: the fault-injection suite of `contrastkit pretrain` (docs/reliability.md counts
these faults). Each test injects one fault and checks that the run ends in one line, keeps what
it had, and resumes."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from pretrain_args import TINY, StopAfterEpochs, method_args

from contrastkit.cli import main
from contrastkit.cli.pretrain import build, pretrain
from contrastkit.outputs import LOCK_FILE
from contrastkit.train import callbacks

DRIVER = Path(__file__).with_name("fault_driver.py")


def _args(out: Path, *extra: str, epochs: int = 1, method: str = "SCE") -> list[str]:
    return [*TINY, *method_args(method), "--trainer.max_epochs", str(epochs),
            "--output", str(out), *extra]


#: No warm-up: a tiny run's clipped warm-up prints its notice beside the one-line errors tested.
NO_WARMUP = ("--model.optimizer.warmup_epochs", "0")


def _interrupted(out: Path, *extra: str, epochs: int, done: int, method: str = "SCE") -> None:
    """A run of ``epochs`` epochs stopped after ``done`` of them (its checkpoints written)."""
    cli, _ = build(_args(out, *extra, epochs=epochs, method=method))
    cli.trainer.callbacks.append(StopAfterEpochs(done))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)


def _weights(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)["state_dict"]


def _loss_steps(path: Path) -> list[int]:
    import csv

    with open(path, newline="") as handle:
        return [int(r["step"]) for r in csv.DictReader(handle) if r.get("train/loss")]


def test_one_full_checkpoint_write_per_epoch(tmp_path, monkeypatch):
    """Issue 21 item 1: latest.ckpt and last.ckpt were two full writes per epoch (and best.ckpt
    a third); now last.ckpt is the one write and best.ckpt a hard link to it."""
    writes: list[str] = []
    save = callbacks.AtomicCheckpointIO.save_checkpoint

    def counting(self, checkpoint, path, storage_options=None):
        writes.append(Path(path).name)
        save(self, checkpoint, path, storage_options)

    monkeypatch.setattr(callbacks.AtomicCheckpointIO, "save_checkpoint", counting)
    out = tmp_path / "run"
    cli = pretrain(_args(out, epochs=3))
    assert writes == ["last.ckpt"] * 3
    ckpts = out / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["best.ckpt", "last.ckpt"]
    best_step = torch.load(ckpts / "best.ckpt", weights_only=True)["global_step"]
    assert best_step in (4, 8, 12)
    if best_step == cli.trainer.global_step:
        assert os.path.samefile(ckpts / "best.ckpt", ckpts / "last.ckpt")


def test_a_cut_off_metrics_row_does_not_block_resume(tmp_path, recwarn):
    out = tmp_path / "run"
    _interrupted(out, epochs=2, done=1)
    with open(out / "metrics.csv", "a") as handle:
        handle.write(",0.04")  # what a full disk or a kill in the middle of a row leaves
    pretrain(_args(out, "--resume", "last", epochs=2))
    assert _loss_steps(out / "metrics.csv") == list(range(8))
    assert any("dropped 1 incomplete row" in str(w.message) for w in recwarn)


def test_a_checkpoint_of_another_method_is_refused_naming_both(tmp_path, capsys):
    out = tmp_path / "run"
    _interrupted(out, *NO_WARMUP, epochs=2, done=1)  # SCE and MoCo have the same modules
    assert main(["pretrain", *_args(out, *NO_WARMUP, "--resume", "last", epochs=2,
                                    method="MoCo")]) == 2
    err = capsys.readouterr().err
    assert "the checkpoint was trained with SCE, the config gives MoCo" in err
    assert err.count("\n") == 1


def test_resume_last_falls_back_and_removes_partial_files(tmp_path, recwarn):
    out = tmp_path / "run"
    _interrupted(out, epochs=3, done=2)
    ckpts = out / "checkpoints"
    step = torch.load(ckpts / "best.ckpt", weights_only=True)["global_step"]
    partial = ckpts / ".last.ckpt.k1ll3d.tmp"
    partial.write_bytes(b"PK\x03\x04 half a checkpoint")
    (ckpts / "last.ckpt").unlink()
    cli = pretrain(_args(out, "--resume", "last", epochs=3))
    assert cli.trainer.global_step == 12 and not partial.exists()
    assert any(f"resuming from {ckpts / 'best.ckpt'} (step {step})" in str(w.message)
               for w in recwarn)


class _FullDisk:
    """A file whose writes fail with ENOSPC once ``room`` bytes are written."""

    def __init__(self, handle, room: int) -> None:
        self.handle, self.room = handle, room

    def write(self, data) -> int:
        if self.room < len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.handle.write(data)

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


def _fill_disk_at(monkeypatch, write: int) -> None:
    """Let checkpoint writes 1..write-1 through; from the write-th on, the disk is full."""
    count = [0]
    fdopen = os.fdopen

    def fake(fd, mode="r", *args, **kw):
        handle = fdopen(fd, mode, *args, **kw)
        if mode != "wb":
            return handle
        count[0] += 1
        return _FullDisk(handle, 10_000) if count[0] >= write else handle

    monkeypatch.setattr(callbacks.os, "fdopen", fake)


def test_a_full_disk_in_a_checkpoint_write_is_one_line_and_keeps_the_last(tmp_path, capsys,
                                                                        monkeypatch):
    out = tmp_path / "run"
    _fill_disk_at(monkeypatch, write=2)
    assert main(["pretrain", *_args(out, *NO_WARMUP, epochs=2)]) == 2
    err = capsys.readouterr().err
    line = f"checkpoint {out / 'checkpoints' / 'last.ckpt'} could not be written: No space left"
    assert line in err and err.count("\n") == 1
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 4
    monkeypatch.undo()
    assert main(["pretrain", *_args(out, *NO_WARMUP, "--resume", "last", epochs=2)]) == 0


def test_a_failed_start_leaves_nothing_that_blocks_the_retry(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    _fill_disk_at(monkeypatch, write=1)
    assert main(["pretrain", *_args(out)]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())
    monkeypatch.undo()
    assert main(["pretrain", *_args(out)]) == 0  # no --overwrite needed


def _lock_holder(folder: Path) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    code = ("import fcntl, os, time\n"
            f"fd = os.open({str(folder / LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, str(os.getpid()).encode())\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.parametrize("command", ["pretrain", "eval"])
def test_a_folder_in_use_is_refused_at_once_naming_the_holder(tmp_path, capsys, command):
    out = tmp_path / "run"
    holder = _lock_holder(out)
    try:
        if command == "pretrain":
            argv = ["pretrain", *_args(out)]
        else:
            pretrain(_args(tmp_path / "src"))
            argv = ["eval", "knn", "--checkpoint",
                    str(tmp_path / "src" / "checkpoints" / "last.ckpt"), "--data", "digits",
                    "--no-cache", "--output", str(out)]
        assert main(argv) == 2
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert f"is in use by another contrastkit process (process id {holder.pid})" in err
    assert [p.name for p in out.iterdir()] == [LOCK_FILE]  # nothing of a run was written


@pytest.fixture
def one_thread():
    """One torch thread in this process, as in the children (``OMP_NUM_THREADS=1``): bit-exact
    comparisons between a child's epochs and this process's need the same reduction order."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _child(out: Path, *extra: str, epochs: int, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(DRIVER), *_args(out, *extra, epochs=epochs)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


@pytest.mark.slow
def test_two_runs_started_together_on_one_folder(tmp_path):
    out = tmp_path / "run"
    runs = [_child(out, epochs=1) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in runs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    assert "is in use by another contrastkit process" in loser or "already holds a" in loser
    assert _loss_steps(out / "metrics.csv") == list(range(4))  # one run's rows, not interleaved


def _png_width(path: Path) -> int:
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    return int.from_bytes(data[16:20], "big")  # the IHDR chunk's width


@pytest.mark.slow
def test_a_signal_exits_with_its_status_and_one_line_on_how_to_resume(tmp_path):
    """SIGTERM (status 143) and SIGINT (130), each to its own run; the two runs go side by side
    (their start-ups dominate)."""
    cases = [(signal.SIGTERM, 143), (signal.SIGINT, 130)]
    outs = [tmp_path / signum.name for signum, _ in cases]
    procs = [_child(out, epochs=30) for out in outs]
    try:
        for proc, out, (signum, _) in zip(procs, outs, cases, strict=True):
            last = out / "checkpoints" / "last.ckpt"
            deadline = time.monotonic() + 240
            while not last.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.send_signal(signum)
        ended = [(proc.wait(timeout=120), proc.stderr.read()) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for (code, err), out, (signum, status) in zip(ended, outs, cases, strict=True):
        assert code == status, err
        assert "Traceback" not in err
        line = err.strip().splitlines()[-1]
        assert line.startswith(f"contrastkit pretrain: stopped by {signum.name} in epoch ")
        assert f"--output {out} --resume last" in line
        assert (out / "loss_curve.png").is_file()
        # summary.png of what was logged: epoch 1's loss beside its kNN monitor (10 in, 120 dpi)
        assert _png_width(out / "summary.png") == 1200
        assert not (out / LOCK_FILE).exists()
        epoch = int(line.split(" holds epoch ")[1].split()[0])
        last = out / "checkpoints" / "last.ckpt"
        assert torch.load(last, weights_only=True)["global_step"] == 4 * epoch  # resumable


@pytest.mark.slow
def test_a_kill_in_the_middle_of_a_checkpoint_write_resumes_exactly(tmp_path, one_thread):
    out = tmp_path / "killed"
    killed = _child(out, epochs=3, env={"KILL_IN_WRITE": "2"})  # during epoch 2's checkpoint
    straight = tmp_path / "straight"  # trained here while the child starts up
    try:
        pretrain(_args(straight, epochs=3))
    except BaseException:
        killed.kill()
        killed.wait()
        raise
    assert killed.wait(timeout=300) == -signal.SIGKILL
    partial = list((out / "checkpoints").glob(".*.tmp"))
    assert partial  # the write was cut off midway
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 4
    pretrain(_args(out, "--resume", "last", epochs=3))
    assert not list((out / "checkpoints").glob(".*.tmp"))
    a, b = _weights(straight / "checkpoints" / "last.ckpt"), _weights(out / "checkpoints" /
                                                                        "last.ckpt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert _loss_steps(out / "metrics.csv") == list(range(12))
