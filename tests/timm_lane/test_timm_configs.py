"""The ViT configs (configs/vit/) through the real ``contrastkit pretrain`` parser, built at
full size with timm: the MoCo v3 optimiser settings they cite reach the built objects."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("timm", reason="timm is not installed: run make test-timm")

from rules.test_configs import _known_class_counts, _parse_and_build  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
VIT_CONFIGS = sorted((REPO / "configs" / "vit").glob("*.yaml"))


def test_vit_configs_exist():
    assert [p.name for p in VIT_CONFIGS] == ["cifar10_sce_vit_tiny.yaml",
                                             "imagenet100_sce_vit_small.yaml"]


@pytest.mark.parametrize("path", VIT_CONFIGS, ids=[p.name for p in VIT_CONFIGS])
def test_vit_config_builds_with_the_moco_v3_recipe(path):
    _, model, data = _parse_and_build(path)
    assert data.dataset_name == path.name.split("_")[0]
    backbone = model.method.backbone
    assert type(backbone).__name__ == "VisionTransformer"
    assert backbone.timm_kwargs["dynamic_img_size"] is True
    assert backbone.out_dim == (192 if "tiny" in path.name else 384)
    spec = model.optimizer_spec
    assert (spec.name, spec.base_lr, spec.weight_decay, spec.warmup_epochs) == (
        "adamw", 1.5e-4, 0.1, 40)
    assert not spec.exclude_bias_and_norm
    assert model.views_spec.crop_scale == (0.08, 1.0)
    assert model.method.base_momentum == 0.99
