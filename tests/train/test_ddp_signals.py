"""Issue 52 item 6: SIGTERM to a 2-process (DDP, gloo) run stops every process after the same
step, in seconds, with a checkpoint that resumes exactly.

At 0f3dae1 Lightning's SIGTERM handler forwarded the signal and ran a collective inside the
handler, wherever the process was, and each process stopped at its own next batch end: 1 of 5
trials hung with both processes idle in a collective, another ended in gloo's "collective
mismatch", and the two closing lines named different steps.

One ``torchrun`` launch (``signal_driver.py`` in each process) trains an uninterrupted run,
then the same run 10 times in a row, each after the first resumed with ``--resume last``, each
stopped by SIGTERM a random moment after it wrote a checkpoint, delivered as the launchers do:
to both processes a few milliseconds apart (SLURM signals every task; torchrun forwards the
signal it gets to every process), to global rank 0 alone (Lightning's own launcher is that
process: ``kill PID`` of a ``--trainer.devices 2`` run), to rank 1 alone, and last to
``torchrun`` itself, which forwards it. Lightning's launcher then finishes the run with
``--resume last``, and it must equal the uninterrupted one bit for bit.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import child_runs
import lightning as L
import pytest
import torch
from pretrain_args import TINY, method_args

from contrastkit.cli.pretrain import pretrain
from contrastkit.errors import RunInterrupted

HERE = Path(__file__).parent
SRC = HERE.parents[1] / "src"
EPOCHS = 30  # 2 steps an epoch; the 10 trials took 15 of them
TRIALS = 10

ARGS = [
    "--data.dataset", "digits", "--data.subset", "64", "--data.monitor_bank_size", "32",
    "--model.views.size", "8", "--trainer.accelerator", "cpu",
    "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1",
    "--trainer.max_epochs", str(EPOCHS), "--trainer.strategy", "ddp",
    "--trainer.devices", "2", "--data.batch_size", "16",
    "--model.method", "contrastkit.methods.SCE", "--model.method.queue_size", "48",
    "--model.method.projector", '{"hidden_dim": 16, "out_dim": 8, "batch_norm": "none"}',
    "--model.method.backbone", '{"name": "small_convnet", "width": 8, "out_dim": 16}',
]
ENV = dict(os.environ, PYTHONPATH=str(SRC), OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
LINE = re.compile(r"^contrastkit pretrain: stopped by SIGTERM in epoch \d+ \(step (\d+)\); "
                  r"last\.ckpt holds epoch (\d+) \(step (\d+)\): resume with ")


def _wait_for(paths: list[Path], proc: subprocess.Popen, log: Path, what: str,
              timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert proc.poll() is None, f"torchrun ended before {what}:\n{log.read_text()[-6000:]}"
        assert time.monotonic() < deadline, f"no {what} in {timeout} s:\n" + \
            log.read_text()[-6000:]
        time.sleep(0.02)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _kill_all(proc: subprocess.Popen, folder: Path) -> None:
    """Leave nothing running: torchrun and the processes it started (in sessions of their
    own), whatever happened."""
    for start in folder.glob("start-*-r*"):
        pid = start.read_text()
        try:  # only a process of this test (a process id may have been reused since)
            if str(folder) in Path(f"/proc/{pid}/cmdline").read_text():
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _send(trial: int, pids: list[int], launcher: int, rng: random.Random) -> str:
    """Deliver SIGTERM for ``trial`` as one launcher or another does; returns how."""
    if trial == TRIALS - 1:
        os.kill(launcher, signal.SIGTERM)  # torchrun forwards it to both processes
        return "torchrun"
    how = ("both", "rank 0", "rank 1")[trial % 3]
    if how == "both":
        first, second = rng.sample(pids, 2)
        os.kill(first, signal.SIGTERM)
        time.sleep(rng.uniform(0, 0.05))
        os.kill(second, signal.SIGTERM)
    else:
        os.kill(pids[int(how[-1])], signal.SIGTERM)
    return how


@pytest.mark.slow
def test_sigterm_stops_both_processes_at_one_step_ten_times_and_resumes_exactly(tmp_path):
    rng = random.Random(52)
    log = tmp_path / "torchrun.log"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", "2", "--monitor-interval", "0.2",
               str(HERE / "signal_driver.py"), str(tmp_path), str(TRIALS), *ARGS]
    proc, _ = child_runs.start(command, ENV, log)
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    before, saved = None, 0
    try:
        for trial in range(TRIALS):
            starts = [tmp_path / f"start-{trial}-r{r}" for r in (0, 1)]
            _wait_for(starts, proc, log, f"start of trial {trial}")
            pids = [int(p.read_text()) for p in starts]
            deadline = time.monotonic() + 300
            while _inode(last) in (None, before):  # a checkpoint of this trial is written
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.4))
            how = _send(trial, pids, proc.pid, rng)
            results = [tmp_path / f"trial-{trial}-r{r}.json" for r in (0, 1)]
            # a bound that only a hang exceeds (they lasted over 10 minutes)
            _wait_for(results, proc, log, f"stop of trial {trial} ({how})", timeout=120)
            ends = [json.loads(p.read_text()) for p in results]
            assert [e["status"] for e in ends] == [143, 143], (trial, how, ends)
            assert ends[0]["line"] == ends[1]["line"], (trial, how, ends)
            match = LINE.match(ends[0]["line"])
            assert match, (trial, how, ends)
            stopped, epoch, step = map(int, match.groups())
            state = torch.load(last, map_location="cpu", weights_only=True)
            assert state["global_step"] == step == 2 * epoch and saved < step <= stopped, (
                trial, how, ends)
            saved, before = step, _inode(last)
        proc.wait(timeout=120)
    finally:
        _kill_all(proc, tmp_path)
    assert saved < 2 * EPOCHS  # every trial was stopped before the run's end

    # Lightning's own launcher finishes the run: it equals the uninterrupted one bit for bit
    finish = [sys.executable, "-m", "contrastkit.cli", "pretrain", *ARGS,
              "--output", str(tmp_path / "run"), "--resume", "last"]
    child_runs.finish(child_runs.start(finish, ENV, tmp_path / "finish.log"))
    a = torch.load(last, map_location="cpu", weights_only=True)
    b = torch.load(tmp_path / "straight" / "checkpoints" / "last.ckpt", map_location="cpu",
                   weights_only=True)
    assert a["global_step"] == b["global_step"] == 2 * EPOCHS
    for key, value in b["state_dict"].items():
        assert torch.equal(a["state_dict"][key], value), key


class _SignalAt(L.Callback):
    """Send SIGTERM to this process at the start of training batch ``batch`` and record the
    SIGTERM handler that training runs under."""

    def __init__(self, batch: int) -> None:
        self.batch, self.handler = batch, None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.handler = signal.getsignal(signal.SIGTERM)
        if trainer.global_step == self.batch:
            os.kill(os.getpid(), signal.SIGTERM)


def test_the_sigterm_handler_only_records_the_signal_and_the_stop_comes_at_the_batch_end(
        tmp_path, monkeypatch):
    """Lightning's own handler (which forwarded the signal and ran a collective inside the
    handler) is not the one training runs under; the stop comes at the end of the batch the
    signal arrived in."""
    from contrastkit.cli import pretrain as command

    probe = _SignalAt(5)
    build = command.build

    def build_with_probe(argv):
        cli, ckpt_path = build(argv)
        cli.trainer.callbacks.append(probe)
        return cli, ckpt_path

    monkeypatch.setattr(command, "build", build_with_probe)
    out = tmp_path / "run"
    with pytest.raises(RunInterrupted) as stopped:
        pretrain([*TINY, *method_args("SimCLR"), "--trainer.max_epochs", "3",
                  "--output", str(out)])
    assert stopped.value.status == 143
    assert getattr(probe.handler, "__func__", None) is command.SignalStop._request
    assert str(stopped.value).startswith("stopped by SIGTERM in epoch 2 (step 6); last.ckpt "
                                         "holds epoch 1 (step 4)")
