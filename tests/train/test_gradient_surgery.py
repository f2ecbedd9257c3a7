"""The engine's per-parameter gradient clipping and frozen layers in a real ``contrastkit
pretrain`` run (DINO on digits): what the optimiser steps with, and what the captured step
refuses."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from pretrain_args import TINY

from contrastkit.cli.pretrain import build
from contrastkit.gradients import GradientFreeze
from contrastkit.methods import SimCLR
from contrastkit.train.captured_step import check_capturable
from contrastkit.train.specs import OptimizerSpec, PerformanceSpec

DINO_ARGS = [
    "--model.method", "contrastkit.methods.DINO",
    "--model.method.backbone", '{"name": "small_convnet", "width": 8, "out_dim": 16}',
    "--model.method.projector",
    '{"hidden_dim": 16, "bottleneck_dim": 8, "num_prototypes": 32}',
    "--data.subset", "64", "--trainer.max_epochs", "2",  # 2 steps per epoch
]


class StepRecorder(L.Callback):
    """After each optimiser step: every parameter's gradient norm as the optimiser used it
    (``None`` for a dropped one) and the last layer's weights."""

    def __init__(self) -> None:
        self.grads: list[dict[str, float | None]] = []
        self.last_layer: list[torch.Tensor] = []

    def on_train_start(self, trainer, pl_module) -> None:
        def record(optimizer, args, kwargs) -> None:
            self.grads.append({n: None if p.grad is None else float(p.grad.norm())
                               for n, p in pl_module.named_parameters()})
            weight = pl_module.method.projector.last_layer.weight
            self.last_layer.append(weight.detach().clone())

        trainer.optimizers[0].register_step_post_hook(record)


def _fit(tmp_path: Path, *extra: str) -> StepRecorder:
    cli, _ = build([*TINY, *DINO_ARGS, *extra, "--output", str(tmp_path / "run")])
    recorder = StepRecorder()
    cli.trainer.callbacks.append(recorder)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert len(recorder.grads) == 4
    return recorder


def test_each_method_gradient_is_clipped_and_the_last_layer_frozen_for_one_epoch(tmp_path):
    clip = 1e-3
    steps = _fit(tmp_path, "--model.optimizer.clip_grad_per_parameter", str(clip),
                 "--model.optimizer.weight_decay", "0.1")
    last = "method.projector.last_layer.weight"
    assert [step[last] is None for step in steps.grads] == [True, True, False, False]
    for step in steps.grads:
        method = {n: v for n, v in step.items() if n.startswith("method.") and v is not None}
        assert method and max(method.values()) <= clip * (1 + 1e-5)
        assert step["classifier.weight"] > clip  # the monitor's gradients are not clipped
    # frozen: no update, no weight decay, no momentum during epoch 0; then it trains
    first, *rest = steps.last_layer
    assert torch.equal(rest[0], first)
    assert not torch.equal(rest[1], first)


def test_without_the_options_nothing_is_clipped_or_frozen(tmp_path):
    steps = _fit(tmp_path, "--model.method.freeze_last_layer", '{"until": 0}')
    assert all(step["method.projector.last_layer.weight"] is not None for step in steps.grads)
    assert max(v for step in steps.grads for n, v in step.items()
               if n.startswith("method.") and v is not None) > 1e-3


def test_a_bad_clip_value_is_refused_naming_the_key(tmp_path):
    with pytest.raises(ValueError, match=r"optimizer\.clip_grad_per_parameter must be finite"):
        build([*TINY, *DINO_ARGS, "--model.optimizer.clip_grad_per_parameter", "-1",
               "--output", str(tmp_path / "run")])


@pytest.mark.parametrize(("method", "message"), [
    (["--model.method", "contrastkit.methods.SwAV",
      "--model.method.backbone", '{"name": "small_convnet", "width": 8, "out_dim": 16}',
      "--model.method.num_prototypes", "16"], "SwAV keeps state the captured step"),
    (DINO_ARGS, "DINO keeps state the captured step")])
def test_captured_step_refuses_swav_and_dino(tmp_path, method, message):
    with pytest.raises(ValueError, match=message):
        build([*TINY, *method, "--model.performance.step", "captured",
               "--output", str(tmp_path / "run")])


def test_captured_step_refuses_a_frozen_layer():
    """A capturable method with a layer frozen (a user's method, say) is refused too."""
    method = SimCLR()
    method.gradient_freezes["projector"] = GradientFreeze(10, "step")
    module = SimpleNamespace(method=method, views_spec=SimpleNamespace(video=None),
                             optimizer_spec=OptimizerSpec(), performance=PerformanceSpec())
    trainer = SimpleNamespace(gradient_clip_val=None, accumulate_grad_batches=1,
                              precision="32-true")
    with pytest.raises(ValueError, match=r"does not freeze layers \(projector of SimCLR\)"):
        check_capturable(module, trainer)  # type: ignore[arg-type]
    method.gradient_freezes["projector"] = GradientFreeze(0, "step")
    check_capturable(module, trainer)  # type: ignore[arg-type]
