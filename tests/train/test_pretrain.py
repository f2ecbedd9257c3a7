"""End-to-end checks of `contrastkit pretrain` on tiny digits runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch
from pretrain_args import TINY, StopAfterEpochs, method_args
from queue_inspect import staged_rows

from contrastkit.cli.pretrain import build, pretrain
from contrastkit.train.callbacks import check_output_dir
from contrastkit.train.module import NonFiniteLossError


def _run(tmp_path: Path, name: str, *extra: str, method: str = "SCE", **method_kw) -> object:
    args = [*TINY, *method_args(method, **method_kw), "--output", str(tmp_path / name), *extra]
    return pretrain(args)


def _state(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)


@pytest.mark.parametrize(
    ("method", "kw"),
    [
        ("SimCLR", {}),
        ("SimCLR", {"loss": "dcl"}),
        ("SimCLR", {"loss": "hard_contrastive", "num_hard": 4}),
        ("MoCo", {"queue_size": 64}),
        ("ReSSL", {"queue_size": 64}),
        ("SCE", {"queue_size": 64, "symmetric": "true"}),
        ("SupervisedContrastive", {"loss": "sincere"}),
        ("SupervisedContrastive", {"loss": "supcon"}),
    ],
)
def test_every_method_trains_one_epoch(tmp_path, method, kw):
    cli = _run(tmp_path, "run", "--trainer.max_epochs", "1", method=method, **kw)
    metrics = cli.trainer.callback_metrics
    assert torch.isfinite(metrics["train/loss"])
    assert "val/knn_top1" in metrics
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert ckpt.is_file()
    assert _state(ckpt)["contrastkit"]["backbone"]["name"] == "small_convnet"




def _straight_and_resumed(tmp_path: Path, *extra: str) -> tuple[dict, dict]:
    """Tiny SCE runs of 3 epochs: one straight, one stopped after epoch 1 (its last.ckpt then
    at step 4) and resumed; their final last.ckpt states."""
    kw = {"queue_size": 48}
    _run(tmp_path, "straight", "--trainer.max_epochs", "3", *extra, **kw)
    args = [*TINY, *method_args("SCE", **kw), "--output", str(tmp_path / "split"),
            "--trainer.max_epochs", "3", *extra]
    cli, _ = build(args)
    cli.trainer.callbacks.append(StopAfterEpochs(1))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert _state(tmp_path / "split" / "checkpoints" / "last.ckpt")["global_step"] == 4
    pretrain([*args, "--resume", "last"])
    a = _state(tmp_path / "straight" / "checkpoints" / "last.ckpt")
    b = _state(tmp_path / "split" / "checkpoints" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == 12
    return a, b


def test_resume_is_exact(tmp_path):
    """3 epochs straight == 1 epoch, interruption, resume: weights, EMA target, queue,
    optimiser and scheduler state all agree."""
    a, b = _straight_and_resumed(tmp_path)
    assert any(k.startswith("method.target.") for k in a["state_dict"])
    assert "method.queue.keys" in a["state_dict"]
    for key, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][key], value, rtol=1e-5, atol=1e-6, msg=key)
    opt_a, opt_b = a["optimizer_states"][0]["state"], b["optimizer_states"][0]["state"]
    assert opt_a.keys() == opt_b.keys()
    for idx, st in opt_a.items():
        torch.testing.assert_close(opt_b[idx]["momentum_buffer"], st["momentum_buffer"],
                                   rtol=1e-5, atol=1e-6)
    assert a["lr_schedulers"][0]["last_epoch"] == b["lr_schedulers"][0]["last_epoch"]
    torch.testing.assert_close(b["rng_states"]["torch"], a["rng_states"]["torch"])


def test_every_epoch_is_checkpointed_when_validation_is_sparse(tmp_path):
    """With validation every 2 epochs, a stop after epoch 1 (no validation) still finds
    epoch 1 in last.ckpt, and the resumed run ends where an uninterrupted one does."""
    a, b = _straight_and_resumed(tmp_path, "--trainer.check_val_every_n_epoch", "2")
    for key, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][key], value, rtol=1e-5, atol=1e-6, msg=key)
    # the epoch that validated kept best.ckpt beside last.ckpt
    assert (tmp_path / "split" / "checkpoints" / "best.ckpt").is_file()


def test_nan_loss_stops_with_the_step_and_keeps_the_last_checkpoint(tmp_path):
    args = [*TINY, *method_args("SimCLR"), "--output", str(tmp_path / "nan"),
            "--trainer.max_epochs", "3"]
    cli, _ = build(args)
    method = cli.model.method
    original = method.forward

    def poisoned(views, labels, state):
        out = original(views, labels, state)
        if state.step >= 5:
            out.loss = out.loss * float("nan")
        return out

    method.forward = poisoned
    with pytest.raises(NonFiniteLossError, match="at step 5"):
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    last = _state(tmp_path / "nan" / "checkpoints" / "last.ckpt")
    assert last["global_step"] == 4  # written at the end of epoch 1, intact
    assert all(torch.isfinite(v).all() for v in last["state_dict"].values()
               if v.is_floating_point())


def test_unknown_config_key_lists_what_is_allowed(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  views:\n    sise: 32\n")
    with pytest.raises(SystemExit):
        build([*TINY, *method_args("SimCLR"), "--config", str(bad)])
    err = capsys.readouterr().err
    assert "sise" in err and "size" in err


def test_wrong_type_is_reported(capsys):
    with pytest.raises(SystemExit):
        build([*TINY, *method_args("SCE", queue_size="many")])
    assert "queue_size" in capsys.readouterr().err


def test_incompatible_choice_is_explained_before_training(capsys):
    with pytest.raises((SystemExit, ValueError)) as info:
        build([*TINY, *method_args("SimCLR", queue_size=64)])
    message = str(info.value) + capsys.readouterr().err
    assert "SimCLR keeps no queue: queue_size must be 0" in message


def test_unwritable_output_is_reported_before_training(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        with pytest.raises(PermissionError, match="not writable"):
            _run(tmp_path, "locked/run", "--trainer.max_epochs", "1", method="SimCLR")
    finally:
        locked.chmod(0o700)


def test_output_dir_check_reports_too_little_space(tmp_path):
    with pytest.raises(OSError, match="MiB free"):
        check_output_dir(tmp_path, required_bytes=1 << 62)


def test_existing_run_is_not_overwritten(tmp_path):
    _run(tmp_path, "run", "--trainer.max_epochs", "1", method="SimCLR")
    with pytest.raises(FileExistsError, match=r"already holds a finished run.*--extend-to"):
        _run(tmp_path, "run", "--trainer.max_epochs", "1", method="SimCLR")


def test_gradient_accumulation_commits_the_queue_once_per_optimiser_step(tmp_path):
    """4 batches of 32 with accumulate 2: 2 optimiser steps, every key committed once."""
    cli = _run(tmp_path, "accum", "--trainer.max_epochs", "1",
               "--trainer.accumulate_grad_batches", "2", queue_size=512, queue_init="empty")
    state = _state(tmp_path / "accum" / "checkpoints" / "last.ckpt")
    assert state["global_step"] == 2
    assert int(state["state_dict"]["method.queue.filled"]) == 4 * 32
    assert staged_rows(cli.model.method.queue) == 0


@pytest.mark.parametrize(("method", "kw"), [("SCE", {"queue_size": 64}), ("SimCLR", {}),
                                            ("SupervisedContrastive", {})])
def test_bf16_mixed_precision_trains_on_cpu(tmp_path, method, kw):
    cli = _run(tmp_path, "bf16", "--trainer.max_epochs", "1",
               "--trainer.precision", "bf16-mixed", method=method, **kw)
    assert torch.isfinite(cli.trainer.callback_metrics["train/loss"])
    assert cli.trainer.precision == "bf16-mixed"


def test_exploding_learning_rate_stops_in_one_line_naming_step_and_epoch(tmp_path, capsys):
    """Issue 13 item 6: ``--model.optimizer.base_lr 1e8`` used to die in the loss's input check
    with a traceback naming no step; now the run stops with the step, the epoch, the last
    checkpoint and what to try, in one line, and no checkpoint holds the exploded weights."""
    from contrastkit.cli import main

    out = tmp_path / "boom"
    code = main(["pretrain", *TINY, *method_args("SimCLR"), "--output", str(out),
                 "--trainer.max_epochs", "3", "--model.optimizer.warmup_epochs", "0",
                 "--model.optimizer.base_lr", "1e8"])
    err = capsys.readouterr().err
    assert code == 2
    line = next(ln for ln in err.splitlines() if ln.startswith("contrastkit pretrain: error:"))
    # the loss, or before a checkpoint the weights (they can blow up a step before the loss)
    assert re.search(r"NaN or infinite (at|by) step \d+ \(epoch \d+", line)
    assert "try a lower learning rate (model.optimizer.base_lr)" in line
    assert "Traceback" not in err
    last = out / "checkpoints" / "last.ckpt"
    if last.is_file():  # named in the message, written before the blow-up, finite
        assert "last.ckpt, was written before it and is intact" in line
        state = _state(last)["state_dict"]
        assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
