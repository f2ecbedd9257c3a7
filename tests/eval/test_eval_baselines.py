"""`contrastkit eval knn|linear|lowshot --baselines`: raw pixels and a random initialisation of
the same backbone beside the pretrained one, with paired bootstrap intervals (issue 19, item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_run import TINY_PRETRAIN

from contrastkit.cli import main
from contrastkit.data import augment
from contrastkit.data.sources.images.datasets import Digits
from contrastkit.eval import bootstrap_accuracy_difference, knn_predict

pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")



@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("baselines")


def _eval(capsys, work: Path, ckpt: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["eval", *argv, "--checkpoint", str(ckpt), "--data", "digits",
                 "--cache-dir", str(work / "cache"), "--quiet"])
    out, err = capsys.readouterr()
    return code, out, err


def test_knn_baselines_are_the_same_protocol_on_raw_pixels_and_random_weights(
        tiny_checkpoint, work, capsys):
    out = work / "knn"
    code, stdout, err = _eval(capsys, work, tiny_checkpoint, "knn", "--k", "20", "--baselines",
                              "--output", str(out))
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    raw, rand = results["baselines"]["raw pixels"], results["baselines"]["random init"]

    # raw pixels: the 8x8 evaluation view flattened, weighted kNN by hand
    view = augment.preset("eval", 8, small=True, normalize=None)
    train, test = Digits("train"), Digits("test")
    xtr = view(torch.as_tensor(train.images)).flatten(1)
    xte = view(torch.as_tensor(test.images)).flatten(1)
    ytr, yte = torch.as_tensor(train.labels), torch.as_tensor(test.labels)
    pred, _ = knn_predict(xtr, ytr, xte, k=20, temperature=0.1)
    assert raw["metrics"]["top1"] == pytest.approx((pred == yte).float().mean().item(), abs=1e-6)

    pretrained = np.load(out / "predictions.npz")["pred"]
    diff, low, high = bootstrap_accuracy_difference(pretrained, pred.numpy(), yte.numpy(),
                                                    n_resamples=1000, seed=0)
    assert (raw["difference"], raw["ci_low"], raw["ci_high"]) == pytest.approx((diff, low, high))
    assert rand["metrics"]["top1"] != results["metrics"]["top1"]
    md = (out / "results.md").read_text()
    assert "| raw pixels" in md and "| random init" in md
    assert md.count("Pretraining ") == 2 and "95% paired bootstrap interval" in md
    assert "## Baselines" in stdout

    # seeded: the random initialisation is the same on a second run
    code, _, _ = _eval(capsys, work, tiny_checkpoint, "knn", "--k", "20", "--baselines",
                       "--output", str(work / "knn2"))
    again = json.loads((work / "knn2" / "results.json").read_text())["baselines"]
    assert again["random init"]["metrics"] == rand["metrics"]


def test_linear_and_lowshot_take_baselines(tiny_checkpoint, work, capsys):
    code, _, err = _eval(capsys, work, tiny_checkpoint, "linear", "--epochs", "3", "--baselines",
                              "--output", str(work / "lin"))
    assert code == 0, err
    results = json.loads((work / "lin" / "results.json").read_text())
    assert set(results["baselines"]) == {"raw pixels", "random init"}
    code, _, err = _eval(capsys, work, tiny_checkpoint, "lowshot", "--epochs", "2", "--shots", "4",
                         "--seeds", "0", "--baselines", "--output", str(work / "low"))
    assert code == 0, err
    low = json.loads((work / "low" / "results.json").read_text())["baselines"]
    assert "4" in low["raw pixels"]["metrics"]["shots"]
    code, _, err = _eval(capsys, work, tiny_checkpoint, "linear", "--protocol", "sce_d1",
                         "--baselines")
    assert code == 2 and "--baselines needs --protocol fast" in err


def test_eval_knn_takes_the_monitors_k_and_names_the_split_best_ckpt_was_chosen_on(
        work, capsys):
    """One set of evaluation defaults (issue 19, item 3): without --k, eval knn uses the run's
    kNN monitor's k and temperature; best.ckpt evaluated on the monitor's split says so."""
    from contrastkit.cli.pretrain import pretrain

    run = work / "k20"
    pretrain([*TINY_PRETRAIN, "--model.online_eval.knn_k", "20",
              "--model.online_eval.knn_temperature", "0.2", "--output", str(run)])
    code, stdout, err = _eval(capsys, work, run / "checkpoints" / "last.ckpt", "knn",
                              "--output", str(work / "k20_last"))
    assert code == 0, err
    config = json.loads((work / "k20_last" / "results.json").read_text())["config"]
    assert (config["k"], config["temperature"]) == (20, 0.2)
    assert "best.ckpt was chosen" not in stdout
    code, stdout, err = _eval(capsys, work, run / "checkpoints" / "best.ckpt", "knn")
    assert code == 0, err
    assert "best.ckpt was chosen by the kNN monitor on this test split (test)" in stdout
