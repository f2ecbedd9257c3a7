"""Issue 18 item 8, evaluation side: a checkpoint that does not fit what the command is told
(its run's config, the data, its own record) is one line naming both sides."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import torch
import yaml

from contrastkit.checkpoints import load_backbone
from contrastkit.cli import main
from contrastkit.models.factory import BackboneSpec, build_backbone

SPEC = BackboneSpec(name="small_convnet", width=8, out_dim=16)


def _checkpoint(folder: Path, spec: BackboneSpec = SPEC, method: str = "SCE",
                weights: BackboneSpec | None = None, backbone: dict | None = None) -> Path:
    """``folder/checkpoints/last.ckpt`` recording ``method`` / ``spec`` (weights of ``weights``,
    default ``spec``), and the run's ``config.yaml`` giving the same."""
    state = build_backbone(weights or spec).state_dict()
    path = folder / "checkpoints" / "last.ckpt"
    path.parent.mkdir(parents=True)
    record = backbone if backbone is not None else asdict(spec)
    torch.save({"state_dict": {f"method.backbone.{k}": v for k, v in state.items()},
                "contrastkit": {"backbone": record, "method": method, "num_classes": 0,
                                "views": {"size": 8, "normalize": None, "eval_resize": "small",
                                          "online": "sce", "target": "sce"},
                                "data": {"dataset": "digits"}}}, path)
    _config(folder, f"contrastkit.methods.{method}", record)
    return path


def _config(folder: Path, class_path: str, backbone: dict) -> None:
    config = {"model": {"method": {"class_path": class_path,
                                   "init_args": {"backbone": backbone}}}}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))


def _knn(capsys, path: Path, tmp_path: Path, data: str = "digits") -> tuple[int, str]:
    code = main(["eval", "knn", "--checkpoint", str(path), "--data", data, "--quiet",
                 "--no-cache", "--k", "5", "--cache-dir", str(tmp_path / "cache")])
    return code, capsys.readouterr().err


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_checkpoint_that_fits_its_run_config_evaluates(tmp_path, capsys):
    code, err = _knn(capsys, _checkpoint(tmp_path / "run"), tmp_path)
    assert code == 0, err


def test_a_run_config_naming_another_method_is_refused_naming_both(tmp_path, capsys):
    path = _checkpoint(tmp_path / "run")
    _config(tmp_path / "run", "contrastkit.methods.MoCo", asdict(SPEC))  # another run's config
    code, err = _knn(capsys, path, tmp_path)
    line = _one_error_line(err)
    assert code == 2
    assert str(path) in line and "records the method SCE" in line
    assert str(tmp_path / "run" / "config.yaml") in line and "gives MoCo" in line


def test_a_run_config_naming_another_backbone_is_refused_naming_both(tmp_path, capsys):
    path = _checkpoint(tmp_path / "run")
    _config(tmp_path / "run", "contrastkit.methods.SCE", {**asdict(SPEC), "width": 16})
    code, err = _knn(capsys, path, tmp_path)
    line = _one_error_line(err)
    assert code == 2 and str(path) in line and "config.yaml" in line
    assert "'width': 8" in line and "'width': 16" in line and "width differ" in line


def test_weights_of_another_shape_name_the_tensor_and_the_recorded_backbone(tmp_path, capsys):
    path = _checkpoint(tmp_path / "run", weights=BackboneSpec(name="small_convnet", width=4,
                                                              out_dim=16))
    with pytest.raises(ValueError, match=r"has the shape \(4, .*recorded backbone "
                       r"small_convnet \(cifar_stem=False, width=8.* needs \(8, "):
        load_backbone(path)
    code, err = _knn(capsys, path, tmp_path)
    line = _one_error_line(err)
    assert code == 2 and str(path) in line and "width=8" in line


def test_a_sentence_encoder_on_an_image_protocol_says_which_command_reads_it(tmp_path, capsys):
    text = {"name": "bert-base-uncased", "pooling": "cls", "max_length": 32}
    path = _checkpoint(tmp_path / "run", method="SimCSE", backbone=text)
    code, err = _knn(capsys, path, tmp_path)
    line = _one_error_line(err)
    assert code == 2 and str(path) in line
    assert "sentence encoder (method SimCSE, model bert-base-uncased)" in line
    assert "--data digits holds images" in line and "eval sts --checkpoint" in line
    with pytest.raises(ValueError, match=r"is a sentence encoder .* eval sts"):
        load_backbone(path)  # export, voc07 and finetune read it through this
    code = main(["export", "--checkpoint", str(path), "--output", str(tmp_path / "out.pth")])
    assert code == 2 and "sentence encoder" in _one_error_line(capsys.readouterr().err)


def test_a_clip_backbone_on_images_is_refused_naming_both(tmp_path, capsys):
    path = _checkpoint(tmp_path / "run", BackboneSpec(name="resnet3d_18", width=4))
    code, err = _knn(capsys, path, tmp_path)
    line = _one_error_line(err)
    assert code == 2 and "clip backbone (resnet3d_18" in line and "--data digits" in line
