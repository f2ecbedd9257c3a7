"""timm backbones by name (``backbone.name: timm:<model>``): built without classifier, their
feature size read from the model, ViTs taking every view size (multi-crop)."""

from __future__ import annotations

import pytest
import torch

timm = pytest.importorskip("timm", reason="timm is not installed: run make test-timm")

from contrastkit.models.factory import BackboneSpec, build_backbone  # noqa: E402

VIT = BackboneSpec(name="timm:vit_tiny_patch16_224",
                   timm_kwargs={"img_size": 32, "patch_size": 4})


@pytest.mark.parametrize(("name", "kwargs", "dim"), [
    ("timm:resnet18", None, 512),
    ("timm:vit_tiny_patch16_224", {"img_size": 32, "patch_size": 4}, 192),
    ("timm:convnext_atto", None, 320),
])
def test_feature_size_is_the_models_own(name, kwargs, dim):
    backbone = build_backbone(BackboneSpec(name=name, timm_kwargs=kwargs)).eval()
    with torch.no_grad():
        out = backbone(torch.randn(2, 3, 32, 32))
    assert backbone.out_dim == dim == out.shape[1] and out.shape == (2, dim)
    assert not list(backbone.get_classifier().parameters())  # num_classes=0: no classifier


def test_a_vit_takes_the_sizes_of_multicrop():
    backbone = build_backbone(VIT).eval()
    assert backbone.timm_kwargs == {**VIT.timm_kwargs, "dynamic_img_size": True,
                                    "dynamic_img_pad": True}
    with torch.no_grad():  # SCE's local sides scaled to 32 px: 27, 23, 18, 14
        shapes = [backbone(torch.randn(2, 3, s, s)).shape for s in (32, 27, 23, 18, 14)]
        assert shapes == [(2, 192)] * 5
        # a side that is a multiple of the patch size is not padded: timm's own unpadded ViT
        # of the same weights gives the same features
        plain = timm.create_model("vit_tiny_patch16_224", num_classes=0, img_size=32,
                                  patch_size=4, dynamic_img_size=True).eval()
        plain.load_state_dict(backbone.state_dict())
        x = torch.randn(2, 3, 16, 16)
        assert torch.equal(plain(x), backbone(x))
    fixed = build_backbone(BackboneSpec(name=VIT.name, timm_kwargs={
        **VIT.timm_kwargs, "dynamic_img_size": False, "dynamic_img_pad": False})).eval()
    with pytest.raises(AssertionError):  # timm's own check of a fixed-size ViT
        fixed(torch.randn(2, 3, 16, 16))


def test_the_keys_are_timms_own():
    ours = build_backbone(BackboneSpec(name="timm:resnet18")).state_dict()
    theirs = timm.create_model("resnet18", num_classes=0).state_dict()
    assert list(ours) == list(theirs)
    assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in theirs.items()}


@pytest.mark.parametrize(("spec", "message"), [
    (BackboneSpec(name="timm:resnet_18"), "timm:resnet_18: timm .* has no model 'resnet_18'"),
    (BackboneSpec(name="timm:resnet18", timm_kwargs={"num_classes": 10}),
     "timm_kwargs.num_classes: not allowed"),
    (BackboneSpec(name="timm:resnet18", timm_kwargs={"pretrained": True}),
     "timm_kwargs.pretrained: not allowed"),
    (BackboneSpec(name="timm:resnet18", timm_kwargs={"patch_size": 4}),
     "backbone.timm_kwargs for timm:resnet18: .*patch_size"),
    (BackboneSpec(name="timm:resnet18", width=32), "width=32: not for timm backbones"),
])
def test_bad_timm_settings_are_one_line_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        build_backbone(spec)
