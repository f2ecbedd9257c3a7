"""The captured step on a CUDA device: a CUDA graph replayed (skipped without CUDA; run by
``make bench-gpu``, which selects the tests named ``cuda``).

* replaying the graph computes what the same step run uncaptured computes (cuDNN made
  deterministic): the weights, EMA weights, queue and optimiser state of a captured run equal,
  bit for bit, those of a run whose steps all stay uncaptured, with the forward compiled or not;
* the replays read nothing on the host (``torch.cuda.set_sync_debug_mode("error")`` over every
  batch after the capture, no logging step among them);
* the augmentation generator, registered with the graph, ends in the state the eager path's
  draws leave it in, and the run trains as the eager one does (to a loose tolerance: the
  native shuffle-BN kernel and the multi-tensor optimiser round differently, and an untrained
  contrastive step multiplies such differences from step to step).
"""

from __future__ import annotations

import lightning as L
import pytest
import torch
from pretrain_args import TINY, method_args

from contrastkit.cli.pretrain import build

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

CUDA = ["--trainer.accelerator", "gpu", "--trainer.devices", "1"]
CAPTURED = ["--model.performance.step", "captured"]


class Watch(L.Callback):
    """Batches after the capture run under the sync debug mode 'error'; ``uncaptured`` keeps
    every step of the run out of a graph (an endless warm-up)."""

    def __init__(self, uncaptured: bool = False) -> None:
        self.uncaptured = uncaptured
        self.step = None
        self.replayed = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        captured = pl_module._captured
        if captured is not None and self.uncaptured:
            captured.warmup = 10**9
        if captured is not None and captured.graph is not None:
            torch.cuda.set_sync_debug_mode("error")
            self.replayed += 1

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        torch.cuda.set_sync_debug_mode(0)
        self.step = pl_module._captured


def _run(tmp_path, name: str, *extra: str, uncaptured: bool = False) -> tuple[dict, object,
                                                                               Watch]:
    args = [*TINY, *CUDA, *method_args("SCE", queue_size=64, shuffle_bn=4),
            "--trainer.max_epochs", "3", "--trainer.log_every_n_steps", "1000", *extra]
    cli, _ = build([*args, "--output", str(tmp_path / name)])
    watch = Watch(uncaptured)
    cli.trainer.callbacks.append(watch)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    state = {k: v.detach().cpu().clone() for k, v in cli.model.state_dict().items()}
    return state, cli, watch


@pytest.mark.parametrize("compiled", [False, True])
def test_cuda_graph_replays_compute_the_uncaptured_steps(tmp_path, monkeypatch,
                                                         compiled: bool) -> None:
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    extra = [*CAPTURED, *(["--model.performance.compile", "true"] if compiled else [])]
    plain, plain_cli, _ = _run(tmp_path, "plain", *extra, uncaptured=True)
    graphed, cli, watch = _run(tmp_path, "graphed", *extra)
    step = watch.step
    assert step.graph is None and step.warm == step.warmup  # used, then released after fit
    assert watch.replayed == 12 - step.warmup - 1  # every step after the warm-up and capture
    assert step.key_shuffle.kernel == "formula"  # given back to eager steps
    assert [k for k in plain if not torch.equal(plain[k], graphed[k])] == []
    a = plain_cli.trainer.optimizers[0].state_dict()["state"]
    b = cli.trainer.optimizers[0].state_dict()["state"]
    assert all(torch.equal(a[i]["momentum_buffer"], b[i]["momentum_buffer"]) for i in a)


def test_cuda_captured_run_draws_and_trains_as_the_eager_run(tmp_path) -> None:
    eager, eager_cli, _ = _run(tmp_path, "eager")
    captured, cli, watch = _run(tmp_path, "captured", *CAPTURED)
    assert watch.replayed == 8
    a = eager_cli.model.augmentation_rng.generator.get_state()
    b = cli.model.augmentation_rng.generator.get_state()
    assert torch.equal(a, b)  # the replays advanced the generator as the eager draws did
    assert eager_cli.trainer.global_step == cli.trainer.global_step == 12
    for key, value in eager.items():
        if value.is_floating_point() and "queue" not in key:
            torch.testing.assert_close(captured[key], value, rtol=1e-2, atol=1e-3, msg=key)
