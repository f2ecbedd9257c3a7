"""``contrastkit pretrain`` on sentences under DDP with 2 gloo processes (real command line)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import child_runs
import pytest
import torch

from contrastkit.cli import main

tiny_bert = pytest.importorskip("tiny_bert")

HERE = Path(__file__).parent
SRC = HERE.parents[1] / "src"


def _args(out: Path, bert: Path, text: Path, devices: int, batch: int) -> list[str]:
    """The ``contrastkit pretrain`` arguments of a run on ``devices`` processes."""
    strategy = ["--trainer.strategy", "ddp"] if devices > 1 else []
    return [
        "pretrain", "--data.text_file", str(text),
        "--data.batch_size", str(batch), "--model.method", "contrastkit.methods.simcse.SimCSE",
        "--model.method.encoder", f'{{"name": "{bert}", "max_length": 12}}',
        # SGD, not AdamW: Adam would blow the rounding noise of gradients that are zero in
        # exact arithmetic (attention key biases) up to steps of the learning rate's size.
        # A small rate: each process pads to its own longest sentence, which changes the
        # rounding, and a large one amplifies that in this wide random network (0.5: 0.08).
        "--model.optimizer", '{"name": "sgd", "base_lr": 0.02, "scale_lr": false, '
        '"weight_decay": 0.0, "warmup_epochs": 0}',
        "--trainer.max_epochs", "1", "--trainer.accelerator", "cpu",
        "--trainer.devices", str(devices), *strategy, "--trainer.enable_progress_bar", "false",
        "--output", str(out)]


def _start(out: Path, bert: Path, text: Path, devices: int,
           batch: int) -> child_runs.Run:
    """Start ``contrastkit pretrain`` in a child process (its output in ``out``.log)."""
    command = [sys.executable, "-m", "contrastkit.cli", *_args(out, bert, text, devices, batch)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(HERE.parent / "helpers")]),
               OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", HF_HUB_OFFLINE="1")
    return child_runs.start(command, env, out.with_name(out.name + ".log"))


@pytest.mark.slow
def test_two_processes_train_as_one_on_the_combined_batch(tmp_path, one_thread):
    """Without dropout (so no per-process random draw), 2 processes on batches of 8 end with
    the weights of 1 process on batches of 16: every process sees the other's sentences as
    negatives (gathered with gradient) and the gradients average to the one-process ones."""
    bert = tiny_bert.save_tiny_bert(tmp_path / "bert", dropout=0.0)
    text = tmp_path / "wiki.txt"
    text.write_text("\n".join(tiny_bert.sentences(64)) + "\n")
    # the one-process run trains here (one thread, as in the children) while the two start up
    two_processes = _start(tmp_path / "two", bert, text, devices=2, batch=8)
    with child_runs.killed_on_error(two_processes):
        assert main(_args(tmp_path / "one", bert, text, devices=1, batch=16)) == 0
    child_runs.finish(two_processes)
    two, one = (torch.load(tmp_path / name / "checkpoints" / "last.ckpt", map_location="cpu",
                           weights_only=True) for name in ("two", "one"))
    assert two["global_step"] == one["global_step"] == 4
    start = tiny_bert.transformers.BertModel.from_pretrained(bert).state_dict()
    key = "method.backbone.model.embeddings.word_embeddings.weight"
    assert not torch.allclose(one["state_dict"][key], start["embeddings.word_embeddings.weight"])
    # rounding differs between the runs (each process pads to its own longest sentence) and
    # the CPU's kernels: largest gap 1.2e-5 on an Intel Xeon (AVX-512), against a median weight
    # movement of 9e-3 over the 4 steps (a summed instead of averaged gradient doubles it)
    for name, value in one["state_dict"].items():
        torch.testing.assert_close(two["state_dict"][name], value, rtol=1e-4, atol=5e-5,
                                   msg=name)
