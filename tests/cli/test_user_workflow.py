"""The new user's path, end to end through the ``contrastkit`` command: a folder of their own
images (class sub-folders, several sizes, two files that are not images, no train/test
split) -> pretrain -> eval knn and linear -> analyze -> export -> eval the export -> compare.
docs/evaluation.md's tour ("End to end") shows the same commands at a real scale
(configs/cpu/folder_simclr.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from own_images import make_own_folder

from contrastkit.cli import main

pytest.importorskip("matplotlib")


def _ok(*argv: str) -> None:
    assert main(list(argv)) == 0, argv


@pytest.mark.slow
def test_own_images_from_pretraining_to_comparison(tmp_path, capsys):
    photos = make_own_folder(tmp_path / "photos", per_class=10, corrupt=2)
    run, ev = tmp_path / "runs" / "photos", tmp_path / "ev"
    _ok("pretrain", "--data.dataset", "folder", "--data.root", str(photos),
        "--data.test_fraction", "0.2", "--data.skip_corrupt", "true", "--data.load_size", "16",
        "--data.batch_size", "8", "--model.views.size", "16",
        "--model.method", "contrastkit.methods.SimCLR",
        "--model.method.backbone", '{"name": "small_convnet", "width": 8, "out_dim": 16}',
        "--model.method.projector", '{"hidden_dim": 16, "out_dim": 8}',
        "--trainer.max_epochs", "1", "--trainer.accelerator", "cpu",
        "--trainer.enable_progress_bar", "false", "--output", str(run))
    ckpt = run / "checkpoints" / "last.ckpt"
    assert ckpt.is_file() and (run / "skipped_files.txt").read_text().count("\n") == 2
    assert "epoch 1/1" in capsys.readouterr().out

    data = ["--data", "folder", "--root", str(photos), "--skip-corrupt", "--quiet",
            "--cache-dir", str(tmp_path / "cache")]
    _ok("eval", "knn", "--checkpoint", str(ckpt), *data, "--k", "5", "--output", str(ev / "knn"))
    _ok("eval", "linear", "--checkpoint", str(ckpt), *data, "--epochs", "5", "--output",
        str(ev / "linear"))
    _ok("analyze", "--checkpoint", str(ckpt), *data, "--output", str(ev / "analysis"))
    exported = tmp_path / "photos_backbone.safetensors"
    _ok("export", "--checkpoint", str(ckpt), "--output", str(exported))
    # an exported file carries no run config: the split, load size and view size are given
    _ok("eval", "knn", "--checkpoint", str(exported), *data, "--k", "5", "--test-fraction",
        "0.2", "--load-size", "16", "--size", "16", "--output", str(ev / "knn_exported"))
    _ok("compare", str(ev / "knn"), str(ev / "knn_exported"), "--output", str(ev / "same"))
    _ok("compare", str(ev / "knn"), str(ev / "linear"), "--output", str(ev / "knn_vs_linear"))

    knn = json.loads((ev / "knn" / "results.json").read_text())
    assert knn["data"]["test_fraction"] == 0.2 and knn["data"]["load_size"] == 16
    assert knn["num_test"] == 4 * 2 and knn["data"]["num_skipped"] == 2
    same = json.loads((ev / "same" / "comparison.json").read_text())
    assert same["difference"] == 0.0 and same["accuracy_a"] == knn["metrics"]["top1"]
    preds = [np.load(ev / name / "predictions.npz") for name in ("knn", "knn_exported")]
    assert np.array_equal(preds[0]["pred"], preds[1]["pred"])  # the export is the same model
    assert (ev / "analysis" / "similarity_histograms.png").is_file()
    assert (ev / "knn_vs_linear" / "comparison.md").read_text().startswith("# contrastkit compare")
    for folder in (run, ev / "knn", ev / "linear", ev / "analysis"):
        assert not [p for p in Path(folder).rglob(".*")]  # no temporary file left behind
