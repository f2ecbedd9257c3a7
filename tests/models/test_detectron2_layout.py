"""`contrastkit export --format detectron2|torchvision`: detectron2's R50-C4 keys and shapes
(the fixed list in detectron2_r50_c4_keys.txt) and torchvision's detection backbones."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from contrastkit.cli import main
from contrastkit.models.detectron2_layout import detectron2_key, to_detectron2_state_dict
from contrastkit.models.resnet import resnet18, resnet50
from contrastkit.models.torchvision_layout import to_torchvision_state_dict

KEYS_FILE = Path(__file__).with_name("detectron2_r50_c4_keys.txt")


def _r50_c4() -> dict[str, tuple[int, ...]]:
    rows = [line.split() for line in KEYS_FILE.read_text().splitlines()
            if line and not line.startswith("#")]
    return {key: tuple(int(d) for d in shape.split(",")) for key, shape in rows}


@pytest.fixture(scope="module")
def r50_state() -> tuple[torch.nn.Module, dict[str, np.ndarray]]:
    torch.manual_seed(0)
    backbone = resnet50()
    return backbone, to_detectron2_state_dict(backbone)


def test_keys_and_shapes_are_detectron2_r50_c4(r50_state):
    _, state = r50_state
    model = _r50_c4()
    assert len(model) == 265
    without_owner = {k.split(".", 1)[1]: v for k, v in model.items()}  # backbone./roi_heads.
    assert {k: v.shape for k, v in state.items()} == without_owner


def test_every_model_key_matches_exactly_one_exported_key_by_suffix(r50_state):
    # what detectron2's matching heuristics rely on: res5.* reaches roi_heads.res5.*
    _, state = r50_state
    for key, shape in _r50_c4().items():
        found = [k for k in state if key == k or key.endswith("." + k)]
        assert len(found) == 1, (key, found)
        assert state[found[0]].shape == shape


def test_values_are_carried_over(r50_state):
    backbone, state = r50_state
    own = backbone.state_dict()
    pairs = {"conv1.weight": "stem.conv1.weight", "bn1.running_var": "stem.conv1.norm.running_var",
             "layer4.2.bn3.bias": "res5.2.conv3.norm.bias",
             "layer2.0.downsample.0.weight": "res3.0.shortcut.weight",
             "layer3.0.downsample.1.running_mean": "res4.0.shortcut.norm.running_mean"}
    for ours, theirs in pairs.items():
        assert detectron2_key(ours) == theirs
        np.testing.assert_array_equal(state[theirs], own[ours].numpy())
    assert not any("num_batches_tracked" in k or k.startswith("fc") for k in state)


@pytest.fixture(scope="module")
def narrow_r50(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("d2") / "r50w8.pth"
    torch.manual_seed(0)
    torch.save(to_torchvision_state_dict(resnet50(width=8)), path)
    return path


def test_export_command_writes_the_detectron2_pickle(narrow_r50, tmp_path, capsys):
    out = tmp_path / "r50.pkl"
    assert main(["export", "--checkpoint", str(narrow_r50), "--output", str(out),
                 "--format", "detectron2"]) == 0
    with out.open("rb") as handle:
        data = pickle.load(handle, encoding="latin1")  # as detectron2 reads it
    assert data["matching_heuristics"] is True and data["__author__"] == "contrastkit"
    assert set(data["model"]) == {k.split(".", 1)[1] for k in _r50_c4()}
    assert all(isinstance(v, np.ndarray) and v.dtype == np.float32
               for v in data["model"].values())
    capsys.readouterr()


def test_export_refuses_a_cifar_stem_and_a_wrong_extension(tmp_path, narrow_r50, capsys):
    cifar = tmp_path / "cifar.pth"
    torch.save(to_torchvision_state_dict(resnet18(cifar_stem=True, width=8)), cifar)
    assert main(["export", "--checkpoint", str(cifar), "--output", str(tmp_path / "c.pkl"),
                 "--format", "detectron2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(cifar) in err and "CIFAR stem" in err
    assert not (tmp_path / "c.pkl").exists()
    assert main(["export", "--checkpoint", str(narrow_r50), "--output",
                 str(tmp_path / "r.pth"), "--format", "detectron2"]) == 2
    assert ".pkl" in capsys.readouterr().err


def test_torchvision_format_loads_into_torchvision_detection_backbones(narrow_r50, tmp_path):
    try:
        from torchvision.models import detection
    except Exception:  # torchvision does not import against every torch build
        pytest.skip("torchvision does not import here")
    torch.manual_seed(0)
    out = tmp_path / "r50.pth"
    state = to_torchvision_state_dict(resnet50())
    torch.save(state, tmp_path / "src.pth")
    assert main(["export", "--checkpoint", str(tmp_path / "src.pth"), "--output", str(out),
                 "--format", "torchvision"]) == 0
    model = detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None)
    model.backbone.body.load_state_dict(torch.load(out), strict=True)
    loaded = model.backbone.body.layer4[2].bn3.running_var
    torch.testing.assert_close(loaded, state["layer4.2.bn3.running_var"])
