"""Issue 52, item 2: an export carries the settings its model was trained with (normalisation,
input size, data, kNN monitor), and ``eval`` / ``analyze`` start from them as from the
checkpoint. At 0f3dae1 a ``.safetensors`` or Hub-format export was evaluated without its
normalisation (kNN 16.5 % instead of 27.5 %, no warning; the folder's own ``config.json`` said
``"normalize": "imagenet"``), and the settings table had no normalisation row."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch

from contrastkit.checkpoints import SETTINGS_METADATA
from contrastkit.cli import main
from contrastkit.models.factory import BackboneSpec, build_backbone


def _one_line(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def _with_normalisation(entry: dict) -> dict:
    """``entry`` (a checkpoint's ``contrastkit`` record) saying the run normalised its views
    with the digits statistics."""
    return {**entry, "views": {**entry["views"], "normalize": "digits"}}


@pytest.fixture(scope="module")
def checkpoints(tiny_checkpoint: Path, tmp_path_factory) -> dict[str, Path]:
    """Two checkpoints whose records say they were trained with the digits normalisation, at
    8 pixels, outside any run folder: the tiny run's convnet (record changed, weights kept:
    evaluation reads the record) and a seeded ResNet-18 of width 4 (exported with torchvision's
    keys, as the issue's model was)."""
    work = tmp_path_factory.mktemp("normalised")
    data = torch.load(tiny_checkpoint, map_location="cpu", weights_only=True)
    data["contrastkit"] = _with_normalisation(data["contrastkit"])
    torch.save(data, work / "convnet.ckpt")
    spec = BackboneSpec(name="resnet18", cifar_stem=True, width=4)
    torch.manual_seed(0)
    resnet = build_backbone(spec)
    entry = {**_with_normalisation(data["contrastkit"]), "backbone": asdict(spec)}
    entry.pop("weights_sha256", None)
    torch.save({"contrastkit": entry, "state_dict": {f"method.backbone.{k}": v for k, v in
                                                     resnet.state_dict().items()}},
               work / "resnet.ckpt")
    return {"convnet": work / "convnet.ckpt", "resnet": work / "resnet.ckpt"}


def _exports(ckpt: Path, folder: Path, suffixes: tuple[str, ...]) -> dict[str, Path]:
    paths = {}
    for suffix in suffixes:
        path = folder / (f"{ckpt.stem}_hub" if suffix == "hf" else f"{ckpt.stem}{suffix}")
        argv = ["export", "--checkpoint", str(ckpt), "--output", str(path)]
        assert main(argv + (["--format", "hf"] if suffix == "hf" else [])) == 0
        paths[suffix] = path
    return paths


def _knn(capsys, checkpoint: Path, out: Path, *options: str) -> tuple[dict, np.ndarray, str]:
    """``eval knn`` on digits with no option but ``options``: (results, predictions, table)."""
    capsys.readouterr()
    assert main(["eval", "knn", "--checkpoint", str(checkpoint), "--data", "digits",
                 "--no-cache", "--quiet", "--output", str(out), *options]) == 0
    table = capsys.readouterr().out
    return (json.loads((out / "results.json").read_text()),
            np.load(out / "predictions.npz")["pred"], table)


@pytest.mark.parametrize(("name", "suffixes"), [("convnet", (".safetensors", "hf", ".pth")),
                                                ("resnet", (".safetensors", "hf"))])
def test_a_model_gives_the_same_knn_from_its_checkpoint_and_its_exports(checkpoints, tmp_path,
                                                                       capsys, name, suffixes):
    ckpt = checkpoints[name]
    want, want_pred, table = _knn(capsys, ckpt, tmp_path / "knn_ckpt")
    assert want["data"]["normalize"] == "digits" and want["data"]["size"] == 8
    tables = {ckpt.name: table}
    for suffix, path in _exports(ckpt, tmp_path, suffixes).items():
        got, pred, table = _knn(capsys, path, tmp_path / f"knn_{suffix.strip('.')}")
        assert np.array_equal(pred, want_pred), suffix  # at 0f3dae1: 32 pixels, no normalisation
        assert got["metrics"] == want["metrics"] and got["config"] == want["config"], suffix
        assert (got["data"]["normalize"], got["data"]["size"]) == ("digits", 8), suffix
        weights = path / "model.safetensors" if suffix == "hf" else path
        assert got["defaults_from"] == str(weights.resolve())
        tables[weights.name] = table
        if suffix == "hf":
            config = json.loads((path / "config.json").read_text())
            assert (config["normalize"], config["input_size"]) == ("digits", 8)
            assert config["image_mean"] == [0.3053] * 3 and config["image_std"] == [0.3759] * 3
    for weights, table in tables.items():  # the settings table says where it comes from
        assert re.search(rf"\| normalisation +\| digits \(recorded in {weights}\) +\|",
                         table), table


def test_a_normalisation_that_contradicts_the_record_is_refused_naming_both(checkpoints,
                                                                          tmp_path, capsys):
    ckpt = checkpoints["convnet"]
    exported = _exports(ckpt, tmp_path, (".safetensors", "hf"))
    for path in (ckpt, *exported.values()):
        for given in ("imagenet", "none"):
            err = _one_line(capsys, ["eval", "knn", "--checkpoint", str(path), "--data",
                                     "digits", "--no-cache", "--quiet", "--normalize", given])
            assert err.startswith(f"contrastkit eval: error: --normalize {given} contradicts "
                                  "the normalisation the model was trained with, digits, "
                                  "recorded in "), err
    err = _one_line(capsys, ["analyze", "--checkpoint", str(exported[".safetensors"]), "--data",
                             "digits", "--no-cache", "--quiet", "--normalize", "imagenet"])
    assert "--normalize imagenet contradicts" in err and "digits" in err
    # the recorded one, given again, is no contradiction
    got, _, _ = _knn(capsys, exported["hf"], tmp_path / "same", "--normalize", "digits")
    assert got["data"]["normalize"] == "digits"


def test_an_export_without_the_record_keeps_the_defaults_and_says_so(checkpoints, tmp_path,
                                                                     capsys):
    """An export written before the record (its metadata without ``contrastkit_settings``)
    is read as before: 32 pixels, no normalisation, and the table says none was recorded; with
    the run's options given it gives the checkpoint's number."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    ckpt = checkpoints["convnet"]
    exported = _exports(ckpt, tmp_path, (".safetensors",))[".safetensors"]
    with safe_open(str(exported), framework="pt") as handle:
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}
        metadata = handle.metadata()
    older = tmp_path / "older.safetensors"
    save_file(tensors, older, metadata={k: v for k, v in metadata.items()
                                        if k != SETTINGS_METADATA})
    got, _, table = _knn(capsys, older, tmp_path / "older")
    assert (got["data"]["normalize"], got["data"]["size"]) == (None, 32)
    assert got["data"]["normalize_from"].startswith("not recorded by the checkpoint")
    assert re.search(r"\| normalisation +\| none \(not recorded by the checkpoint: pass "
                     r"--normalize NAME", table), table
    want, want_pred, _ = _knn(capsys, ckpt, tmp_path / "ckpt")
    got, pred, table = _knn(capsys, older, tmp_path / "given", "--normalize", "digits",
                            "--size", "8", "--k", str(want["config"]["k"]), "--temperature",
                            str(want["config"]["temperature"]))
    assert np.array_equal(pred, want_pred) and got["metrics"] == want["metrics"]
    assert re.search(r"\| normalisation +\| digits \(--normalize\) +\|", table), table
