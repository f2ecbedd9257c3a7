"""``contrastkit export --format hf``: a Hub-format folder (config.json, model.safetensors, a
model card) that round-trips offline: ``load_backbone`` on the folder gives the checkpoint's
features, the files follow the Hub's conventions (huggingface_hub reads the card, safetensors
the weights), and the card says what the model is, with the run's evaluation results."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from contrastkit.checkpoints import load_backbone, read_metadata
from contrastkit.cli import main
from contrastkit.export_metadata import RUN_METADATA
from contrastkit.provenance import source_commit

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def run(tiny_run: Path, tmp_path_factory) -> Path:
    """A copy of the session's tiny SimCLR run (``tiny_run``, two epochs), its checkpoint
    evaluated by kNN inside the copied run folder and by a linear probe outside it."""
    work = tmp_path_factory.mktemp("export_hf")
    shutil.copytree(tiny_run, work / "run")
    ckpt = work / "run" / "checkpoints" / "last.ckpt"
    common = ["--checkpoint", str(ckpt), "--data", "digits", "--quiet", "--threads", "1",
              "--cache-dir", str(work / "cache")]
    assert main(["eval", "knn", *common, "--k", "5", "--output", str(work / "run" / "knn")]) == 0
    assert main(["eval", "linear", *common, "--epochs", "1", "--output",
                 str(work / "linear")]) == 0
    return work


def test_the_folder_round_trips_offline(run, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ckpt, folder = run / "run" / "checkpoints" / "last.ckpt", run / "hub"
    assert main(["export", "--checkpoint", str(ckpt), "--format", "hf", "--output", str(folder),
                 "--results", str(run / "linear")]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "config.json",
                                                        "model.safetensors"]
    original, spec = load_backbone(ckpt)
    loaded, loaded_spec = load_backbone(folder)
    assert loaded_spec == spec
    images = torch.randn(4, 3, 8, 8)
    with torch.no_grad():
        assert torch.equal(original(images), loaded(images))
    assert read_metadata(folder)["backbone"]["name"] == "small_convnet"

    from huggingface_hub import ModelCard
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
        assert handle.metadata()["format"] == "pt"  # what the Hub's PyTorch loaders expect
        assert set(handle.keys()) == set(original.state_dict())
        assert json.loads(handle.metadata()[RUN_METADATA])["method"] == "SimCLR"
    corrupted = run / "hub_corrupted"  # the weights' digest is checked when the folder loads
    shutil.copytree(folder, corrupted)
    raw = bytearray((corrupted / "model.safetensors").read_bytes())
    raw[-1] ^= 0x01
    (corrupted / "model.safetensors").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="corrupted"):
        load_backbone(corrupted)
    card = ModelCard.load(folder / "README.md")
    assert card.data.library_name == "contrastkit"
    assert {"contrastkit", "simclr", "self-supervised-learning"} <= set(card.data.tags)
    config = json.loads((folder / "config.json").read_text())
    assert config["backbone"] == json.loads(json.dumps(spec.__dict__))
    assert config["method"] == "SimCLR" and config["feature_dim"] == 16
    assert config["data"]["dataset"] == "digits" and config["input_size"] == 8


def test_the_card_says_what_the_model_is(run):
    ckpt, folder = run / "run" / "checkpoints" / "last.ckpt", run / "card"
    assert main(["export", "--checkpoint", str(ckpt), "--format", "hf", "--output", str(folder),
                 "--results", str(run / "linear")]) == 0
    card = (folder / "README.md").read_text()
    knn = json.loads((run / "run" / "knn" / "results.json").read_text())
    linear = json.loads((run / "linear" / "results.json").read_text())
    assert "# SimCLR, small_convnet, pretrained on digits" in card
    assert "| training | 2 of 2 epochs (step 8)" in card
    knn_top1 = next(v for k, v in _flat(knn["metrics"]) if k.endswith("top1"))
    linear_top1 = next(v for k, v in _flat(linear["metrics"]) if k.endswith("top1"))
    assert f"{knn_top1:.4f} | knn |" in card  # found in the run folder
    assert f"{linear_top1:.4f} | linear |" in card  # given with --results
    assert "model.method.backbone" not in card  # the config is the saved YAML, not the argv
    assert (run / "run" / "config.yaml").read_text().strip() in card
    assert "exported by | contrastkit" in card and "commit" in card
    assert f"| trained at commit | {source_commit() or 'not recorded'} |" in card


def test_bad_exports_are_refused_and_nothing_is_lost(run, capsys):
    ckpt = run / "run" / "checkpoints" / "last.ckpt"
    taken = run / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    assert main(["export", "--checkpoint", str(ckpt), "--format", "hf", "--output",
                 str(taken), "--overwrite"]) != 0
    assert "notes.txt" in capsys.readouterr().err and (taken / "notes.txt").read_text() == "mine"
    other = run / "other_eval"
    other.mkdir()
    (other / "results.json").write_text(json.dumps({"checkpoint": {"sha256": "0" * 64}}))
    assert main(["export", "--checkpoint", str(ckpt), "--format", "hf", "--output",
                 str(run / "x"), "--results", str(other)]) != 0
    assert "evaluated another checkpoint" in capsys.readouterr().err
    assert not (run / "x").exists()
    assert main(["export", "--checkpoint", str(ckpt), "--output", str(run / "y.safetensors"),
                 "--results", str(run / "linear")]) != 0
    assert "--results applies to --format hf" in capsys.readouterr().err


def _flat(metrics: dict, prefix: str = "") -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for key, value in metrics.items():
        if isinstance(value, dict):
            out += _flat(value, f"{prefix}{key}/")
        else:
            out.append((f"{prefix}{key}", value))
    return out
