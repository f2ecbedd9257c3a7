"""Checkpoints written by a background thread (``BackgroundCheckpointIO``, the default).

The epoch end hands the write over and goes on: the file holds the state at the checkpoint
(the tensors are copied first, the training then changes them in place), writes stay one at a
time and in order, a link or a read waits for the pending write, and a failed write raises its
one-line ``OSError`` at the next checkpoint operation or when training ends. The promises of
``docs/reliability.md`` are checked by ``test_faults.py`` and ``test_checkpoint_safety.py``
unchanged, on this writer.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest
import torch

from contrastkit.train import callbacks
from contrastkit.train.background_checkpoints import BackgroundCheckpointIO, detached_copy


def test_a_detached_copy_shares_nothing_with_the_training_state() -> None:
    weight = torch.ones(3)
    checkpoint = {"state_dict": {"w": weight, "again": weight}, "opt": [{"m": torch.zeros(2)}],
                  "step": 4, "nested": ({"name": "x"},)}
    copied = detached_copy(checkpoint)
    weight.add_(1)
    checkpoint["opt"][0]["m"].add_(5)
    checkpoint["nested"][0]["name"] = "changed"
    assert torch.equal(copied["state_dict"]["w"], torch.ones(3))
    assert copied["state_dict"]["again"] is copied["state_dict"]["w"]  # shared once, as before
    assert torch.equal(copied["opt"][0]["m"], torch.zeros(2))
    assert copied["nested"][0]["name"] == "x" and copied["step"] == 4


def _checkpoint(value: float) -> dict:
    return {"state_dict": {"w": torch.full((4,), value)}, "contrastkit": {}, "global_step": 1}


def test_the_write_runs_behind_and_keeps_the_state_of_the_checkpoint(tmp_path, monkeypatch):
    gate, started = threading.Event(), threading.Event()
    save = callbacks.torch.save

    def held(obj, handle):
        started.set()
        gate.wait(timeout=30)
        save(obj, handle)

    monkeypatch.setattr(callbacks.torch, "save", held)
    io = BackgroundCheckpointIO()
    state = _checkpoint(1.0)
    io.save_checkpoint(state, tmp_path / "last.ckpt")  # returns while the write waits
    assert started.wait(timeout=30) and not (tmp_path / "last.ckpt").exists()
    state["state_dict"]["w"].add_(10)  # training goes on in place
    gate.set()
    io.link(tmp_path / "last.ckpt", tmp_path / "best.ckpt")  # waits for the write first
    written = torch.load(tmp_path / "best.ckpt", weights_only=True)
    assert torch.equal(written["state_dict"]["w"], torch.full((4,), 1.0))
    assert written["contrastkit"]["weights_sha256"]  # the digest, computed behind too
    io.teardown()


def test_writes_stay_in_order_and_the_last_one_ends_before_teardown(tmp_path) -> None:
    io = BackgroundCheckpointIO()
    for value in (1.0, 2.0, 3.0):
        io.save_checkpoint(_checkpoint(value), tmp_path / "last.ckpt")
    io.teardown()
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["state_dict"]["w"][0] == 3.0
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def test_a_failed_write_raises_its_one_line_at_the_next_operation(tmp_path, monkeypatch):
    def full(obj, handle):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    io = BackgroundCheckpointIO()
    io.save_checkpoint(_checkpoint(1.0), tmp_path / "last.ckpt")
    io.wait()
    monkeypatch.setattr(callbacks.torch, "save", full)
    io.save_checkpoint(_checkpoint(2.0), tmp_path / "last.ckpt")  # fails behind
    with pytest.raises(OSError, match=r"checkpoint .*last\.ckpt could not be written: No space"):
        io.teardown()
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["state_dict"]["w"][0] == 1.0
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["last.ckpt"]  # no .tmp left
