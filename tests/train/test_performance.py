"""channels_last and torch.compile change how the step runs, not what it computes."""

from __future__ import annotations

import pytest
import torch
from pretrain_args import TINY, method_args

from contrastkit.cli.pretrain import build, pretrain
from contrastkit.methods import SCE, SimCLR
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import ScheduleState
from contrastkit.train.performance import compile_encoders, use_channels_last
from contrastkit.train.specs import PerformanceSpec

SMALL = {"backbone": BackboneSpec(name="resnet18", cifar_stem=True, width=4),
         "projector": HeadSpec(hidden_dim=16, out_dim=8)}


def step(method: torch.nn.Module, views: list[torch.Tensor]) -> tuple[float, dict]:
    labels = torch.zeros(views[0].shape[0], dtype=torch.long)
    method.zero_grad()
    loss = method(views, labels, ScheduleState(step=0, total_steps=10)).loss
    loss.backward()
    grads = {n: p.grad.clone() for n, p in method.named_parameters() if p.grad is not None}
    return loss.item(), grads


def views(dtype: torch.dtype = torch.float64) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.rand(6, 3, 16, 16, generator=g, dtype=dtype) for _ in range(2)]


@pytest.mark.parametrize("cls", [SimCLR, SCE])
def test_channels_last_gives_the_same_loss_and_gradients(cls) -> None:
    kw = {"momentum": 0.9, "queue_size": 12} if cls is SCE else {}
    torch.manual_seed(0)
    plain = cls(**SMALL, **kw).double()
    torch.manual_seed(0)
    nhwc = cls(**SMALL, **kw).double().to(memory_format=torch.channels_last)
    assert nhwc.backbone.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    loss_a, grads_a = step(plain, views())
    loss_b, grads_b = step(nhwc, [v.contiguous(memory_format=torch.channels_last)
                                  for v in views()])
    assert loss_b == pytest.approx(loss_a, rel=1e-12)
    for name, grad in grads_a.items():
        torch.testing.assert_close(grads_b[name], grad, rtol=1e-9, atol=1e-12)


def test_channels_last_default_is_cuda_and_images_only() -> None:
    auto = PerformanceSpec()
    assert use_channels_last(auto, torch.device("cuda", 0), images=True)
    assert not use_channels_last(auto, torch.device("cpu"), images=True)
    assert not use_channels_last(auto, torch.device("cuda", 0), images=False)
    assert use_channels_last(PerformanceSpec(channels_last=True), torch.device("cpu"), True)
    assert not use_channels_last(PerformanceSpec(channels_last=False), torch.device("cuda"), True)


def test_pretrain_runs_channels_last_on_cpu(tmp_path) -> None:
    cli = pretrain([*TINY, *method_args("SCE", queue_size=64), "--output", str(tmp_path / "r"),
                    "--trainer.max_epochs", "1", "--model.performance.channels_last", "true"])
    weight = next(p for p in cli.model.method.backbone.parameters() if p.dim() == 4)
    assert weight.is_contiguous(memory_format=torch.channels_last)
    assert torch.isfinite(cli.trainer.callback_metrics["train/loss"])


def test_validation_views_are_channels_last_too(tmp_path) -> None:
    """The kNN monitor's views have the training views' layout (a compiled backbone would
    otherwise recompile for them)."""
    cli, _ = build([*TINY, *method_args("SimCLR"), "--output", str(tmp_path / "r"),
                    "--trainer.max_epochs", "1", "--model.performance.channels_last", "true"])
    layouts: list[tuple[bool, bool]] = []
    backbone = cli.model.method.backbone
    backbone.register_forward_pre_hook(lambda module, args: layouts.append(
        (module.training, args[0].is_contiguous(memory_format=torch.channels_last))))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    evaluated = [cl for training, cl in layouts if not training]
    assert evaluated and all(evaluated), layouts
    assert all(cl for training, cl in layouts if training)


def test_compiled_encoders_give_the_same_loss_and_gradients() -> None:
    """A tiny convnet (a cold compilation of the ResNet takes minutes on 2 cores)."""
    tiny = {"backbone": BackboneSpec(name="small_convnet", width=4, out_dim=8),
            "projector": HeadSpec(hidden_dim=8, out_dim=6)}
    torch.manual_seed(0)
    eager = SCE(**tiny, momentum=0.9, queue_size=12)
    torch.manual_seed(0)
    compiled = SCE(**tiny, momentum=0.9, queue_size=12)
    names = compile_encoders(compiled)
    assert names == ["backbone", "projector", "target"]
    assert list(compiled.state_dict()) == list(eager.state_dict())  # checkpoints unchanged
    loss_a, grads_a = step(eager, views(torch.float32))
    loss_b, grads_b = step(compiled, views(torch.float32))
    assert loss_b == pytest.approx(loss_a, rel=1e-4)
    for name, grad in grads_a.items():
        torch.testing.assert_close(grads_b[name], grad, rtol=1e-3, atol=1e-5)
