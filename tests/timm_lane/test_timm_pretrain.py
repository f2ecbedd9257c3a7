"""timm backbones in pretraining (the issue's lane): a timm ResNet-18 and a ViT-Tiny pretrain
with SCE and SimCLR (the ViT with multi-crop under SCE) for a few steps, channels-last and bf16
as for contrastkit's own ResNets, then export to timm's layout and load back into
``timm.create_model`` with identical features; a compiled timm ViT computes what the eager one
does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

timm = pytest.importorskip("timm", reason="timm is not installed: run make test-timm")

from contrastkit.checkpoints import load_backbone  # noqa: E402
from contrastkit.cli import main  # noqa: E402
from contrastkit.cli.pretrain import pretrain  # noqa: E402
from contrastkit.methods import SCE  # noqa: E402
from contrastkit.models.factory import BackboneSpec, HeadSpec  # noqa: E402
from contrastkit.schedules import ScheduleState  # noqa: E402
from contrastkit.train.performance import compile_encoders  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

VIT = {"name": "timm:vit_tiny_patch16_224", "timm_kwargs": {"img_size": 32, "patch_size": 4}}
RESNET = {"name": "timm:resnet18"}
#: SCE's multi-crop scaled to 32 px: two global views, four local ones (27, 23, 18, 14 px)
MULTICROP = {"local_sizes": [27, 23, 18, 14]}


def _pretrain(out: Path, method: str, backbone: dict, *extra: str) -> Path:
    momentum = ["--model.method.momentum", "0.99"] if method == "SCE" else []
    pretrain([
        "--data.dataset", "digits", "--data.batch_size", "8", "--data.subset", "32",
        "--data.monitor_bank_size", "32", "--model.views.size", "32",
        "--model.method", f"contrastkit.methods.{method}",
        "--model.method.backbone", json.dumps(backbone),
        "--model.method.projector", '{"hidden_dim": 32, "out_dim": 16}', *momentum,
        "--model.optimizer", '{"name": "adamw", "base_lr": 1.5e-4, "weight_decay": 0.1}',
        "--trainer.max_epochs", "1", "--trainer.accelerator", "cpu", "--trainer.devices", "1",
        "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1",
        "--output", str(out), *extra])
    return out / "checkpoints" / "last.ckpt"


def _timm_model(backbone: dict, weights: Path) -> torch.nn.Module:
    """The exported file loaded by timm itself, as the docs show (the ViTs with the two
    arguments contrastkit adds)."""
    model = backbone["name"].removeprefix("timm:")
    kwargs = dict(backbone.get("timm_kwargs") or {})
    if "vit" in model:
        kwargs.update(dynamic_img_size=True, dynamic_img_pad=True)
    return timm.create_model(model, pretrained=True, num_classes=0,
                             pretrained_cfg_overlay={"file": str(weights)}, **kwargs).eval()


CASES = {
    "resnet18-sce": ("SCE", RESNET, []),
    "resnet18-simclr-bf16-channels-last": (
        "SimCLR", RESNET, ["--trainer.precision", "bf16-mixed",
                           "--model.performance.channels_last", "true"]),
    "vit-tiny-sce-multicrop": ("SCE", VIT, ["--model.views.multicrop", json.dumps(MULTICROP)]),
    "vit-tiny-simclr-bf16-channels-last": (
        "SimCLR", VIT, ["--trainer.precision", "bf16-mixed",
                        "--model.performance.channels_last", "true"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_pretrain_then_timm_loads_the_export(tmp_path, case):
    method, backbone, extra = CASES[case]
    ckpt = _pretrain(tmp_path / "run", method, backbone, *extra)
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert state["global_step"] == 4
    assert torch.isfinite(state["state_dict"][next(k for k in state["state_dict"]
                                                  if k.startswith("method.backbone."))]).all()
    exported = tmp_path / "backbone.safetensors"
    assert main(["export", "--checkpoint", str(ckpt), "--output", str(exported)]) == 0
    ours, spec = load_backbone(ckpt)
    assert spec.name == backbone["name"]
    theirs = _timm_model(backbone, exported)
    images = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(ours(images), theirs(images))
        if "vit" in backbone["name"]:  # other sizes: position embedding and padding alike
            for side in (16, 27):
                small = torch.randn(3, 3, side, side)
                assert torch.equal(ours(small), theirs(small))


def _step(method: torch.nn.Module, views: list[torch.Tensor]) -> tuple[float, dict]:
    method.zero_grad()
    loss = method(views, torch.zeros(views[0].shape[0], dtype=torch.long),
                  ScheduleState(step=0, total_steps=10)).loss
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in method.named_parameters()
                         if p.grad is not None}


def test_a_compiled_timm_vit_gives_the_same_loss_and_gradients():
    """``performance.compile`` on a timm ViT, as tests/train/test_performance.py checks it on
    contrastkit's backbones (one block of width 32: a cold compilation of the full ViT-Tiny
    takes many minutes on 2 shared cores)."""
    tiny = {"backbone": BackboneSpec(name=VIT["name"], timm_kwargs={
                **VIT["timm_kwargs"], "depth": 1, "embed_dim": 32, "num_heads": 2}),
            "projector": HeadSpec(hidden_dim=16, out_dim=8), "momentum": 0.9, "queue_size": 12}
    torch.manual_seed(0)
    eager = SCE(**tiny)
    torch.manual_seed(0)
    compiled = SCE(**tiny)
    assert compile_encoders(compiled) == ["backbone", "projector", "target"]
    assert list(compiled.state_dict()) == list(eager.state_dict())  # checkpoints unchanged
    g = torch.Generator().manual_seed(0)
    views = [torch.rand(6, 3, 32, 32, generator=g) for _ in range(2)]
    loss_a, grads_a = _step(eager, views)
    loss_b, grads_b = _step(compiled, views)
    assert loss_b == pytest.approx(loss_a, rel=1e-4)
    assert grads_a.keys() == grads_b.keys()
    # Fused float32 kernels (layer norm, softmax) round differently; element-wise that reaches
    # 20% on near-zero elements, so each gradient is compared as a whole: the difference
    # within 1% of its norm, or of a thousandth of the whole gradient's norm for gradients that
    # are zero in exact arithmetic (the final layer norm's bias: the projector's batch norm
    # removes any constant shift of the features)
    norm = torch.linalg.vector_norm
    floor = 1e-3 * norm(torch.cat([g.flatten() for g in grads_a.values()]))
    for name, grad in grads_a.items():
        assert norm(grads_b[name] - grad) <= 1e-2 * max(norm(grad), floor), name


def test_hub_folder_of_a_vit_loads_in_timm(tmp_path):
    ckpt = _pretrain(tmp_path / "run", "SimCLR", VIT)
    folder = tmp_path / "hub"
    assert main(["export", "--checkpoint", str(ckpt), "--format", "hf",
                 "--output", str(folder)]) == 0
    config = json.loads((folder / "config.json").read_text())
    assert config["architecture"] == "vit_tiny_patch16_224" and config["num_features"] == 192
    assert config["model_args"] == {"img_size": 32, "patch_size": 4, "dynamic_img_size": True,
                                    "dynamic_img_pad": True}
    # timm's Hub loader reads the same two files (config.json for the architecture and its
    # arguments, model.safetensors for the weights); offline, a local folder stands for the repo
    model = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    ours, _ = load_backbone(folder)
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(ours(images), model(images))
