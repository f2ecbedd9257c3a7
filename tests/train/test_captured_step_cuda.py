"""The captured step on a CUDA device: a CUDA graph replayed (skipped without CUDA; run by
``make bench-gpu``, which selects the tests named ``cuda``).

* a run with ``model.performance.step captured`` ends with the eager run's weights, EMA
  weights, queue and augmentation-generator state (to float tolerance: the multi-tensor
  optimiser and EMA kernels round once more than the eager ones);
* the replays read nothing on the host (``torch.cuda.set_sync_debug_mode("error")`` over every
  batch after the capture, no logging step among them);
* the graph is captured once and replayed at every later step, with the shuffle-BN
  statistics by the native kernel, and also with the forward compiled.
"""

from __future__ import annotations

import lightning as L
import pytest
import torch
from pretrain_args import TINY, method_args

from contrastkit.train.cli import build

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

CUDA = ["--trainer.accelerator", "gpu", "--trainer.devices", "1"]


class Watch(L.Callback):
    """Replays under the sync debug mode 'error'; records the captured step."""

    def __init__(self) -> None:
        self.step = None
        self.replayed = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        captured = pl_module._captured
        if captured is not None and captured.graph is not None:
            torch.cuda.set_sync_debug_mode("error")
            self.replayed += 1

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        torch.cuda.set_sync_debug_mode(0)
        self.step = pl_module._captured


def _run(tmp_path, name: str, *extra: str) -> tuple[dict, object, Watch]:
    args = [*TINY, *CUDA, *method_args("SCE", queue_size=64, shuffle_bn=4),
            "--trainer.max_epochs", "3", "--trainer.log_every_n_steps", "1000", *extra]
    cli, _ = build([*args, "--output", str(tmp_path / name)])
    watch = Watch()
    cli.trainer.callbacks.append(watch)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    state = {k: v.detach().cpu().clone() for k, v in cli.model.state_dict().items()}
    return state, cli, watch


@pytest.mark.parametrize("compiled", [False, True])
def test_cuda_captured_run_follows_the_eager_run(tmp_path, compiled: bool) -> None:
    eager, eager_cli, _ = _run(tmp_path, "eager")
    extra = ["--model.performance.step", "captured"]
    if compiled:
        extra += ["--model.performance.compile", "true"]
    captured, cli, watch = _run(tmp_path, "captured", *extra)
    step = watch.step
    assert step.graph is None and step.warm == step.warmup  # released after fit, was used
    assert watch.replayed == 12 - step.warmup - 1  # every step after the warm-up and capture
    assert step.key_shuffle.kernel == "formula"  # given back to eager steps
    for key, value in eager.items():
        if value.is_floating_point():
            torch.testing.assert_close(captured[key], value, rtol=2e-4, atol=2e-5, msg=key)
        else:
            assert torch.equal(captured[key], value), key
    a = eager_cli.model.augmentation_rng.generator.get_state()
    b = cli.model.augmentation_rng.generator.get_state()
    assert torch.equal(a, b)  # the graph advanced the generator as the eager draws did
