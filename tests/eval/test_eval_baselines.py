"""`contrastkit eval knn|linear|lowshot --baselines`: raw pixels and a random initialisation of
the same backbone beside the pretrained one, with paired bootstrap intervals (issue 19, item 2);
one verdict that `eval knn`, `eval linear` and `analyze` share (issue 37, item 3); low-shot
compared at every shot count, its differences those of its rows (issue 37, item 6)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_run import TINY_PRETRAIN

from contrastkit.cli import main
from contrastkit.data import augment
from contrastkit.data.sources.images.datasets import Digits
from contrastkit.eval import EvalRequest, bootstrap_accuracy_difference, knn_predict
from contrastkit.eval.baselines import RANDOM_INIT, baseline_setups
from contrastkit.eval.plots import TIE
from contrastkit.eval.report import format_signed
from contrastkit.eval.setup import setup
from contrastkit.figures import figure_caption

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


def _section(text: str, title: str) -> str:
    """The Markdown section ``## title`` of ``text`` (up to the next ``## `` heading)."""
    after = text.split(f"\n## {title}\n", 1)[1]
    return after.split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def three_readings(tiny_checkpoint, work) -> dict[str, str]:
    """`eval knn --baselines`, `eval linear --baselines` and `analyze` of one checkpoint with
    their defaults: what each printed."""
    printed = {}
    for name, argv in (("knn", ["eval", "knn", "--baselines"]),
                       ("linear", ["eval", "linear", "--baselines"]),
                       ("analyze", ["analyze"])):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*argv, "--checkpoint", str(tiny_checkpoint), "--data", "digits",
                         "--cache-dir", str(work / "cache"), "--quiet", "--output",
                         str(work / name)])
        assert code == 0, err.getvalue()
        printed[name] = out.getvalue()
    return printed


def test_knn_baselines_are_the_same_protocol_on_raw_pixels_and_random_weights(
        tiny_checkpoint, three_readings, work):
    out = work / "knn"
    results = json.loads((out / "results.json").read_text())
    raw, rand = results["baselines"]["raw pixels"], results["baselines"]["random init"]
    k = results["config"]["k"]

    # raw pixels: the 8x8 evaluation view flattened, weighted kNN by hand
    view = augment.preset("eval", 8, small=True, normalize=None)
    train, test = Digits("train"), Digits("test")
    xtr = view(torch.as_tensor(train.images)).flatten(1)
    xte = view(torch.as_tensor(test.images)).flatten(1)
    ytr, yte = torch.as_tensor(train.labels), torch.as_tensor(test.labels)
    pred, _ = knn_predict(xtr, ytr, xte, k=k, temperature=0.1)
    assert raw["metrics"]["top1"] == pytest.approx((pred == yte).float().mean().item(), abs=1e-6)

    pretrained = np.load(out / "predictions.npz")["pred"]
    diff, low, high = bootstrap_accuracy_difference(pretrained, pred.numpy(), yte.numpy(),
                                                    n_resamples=1000, seed=0)
    assert (raw["difference"], raw["ci_low"], raw["ci_high"]) == pytest.approx((diff, low, high))
    assert rand["metrics"]["top1"] != results["metrics"]["top1"]
    md = (out / "results.md").read_text()
    assert "| raw pixels" in md and "| random init" in md
    assert "## Baselines" in three_readings["knn"]

    # seeded: the random initialisation is the same on a second setup, another with --seed
    def random_weights(seed: int) -> dict:
        s = setup(EvalRequest(checkpoint=tiny_checkpoint, data="digits", seed=seed))
        return baseline_setups(s)[RANDOM_INIT].backbone.state_dict()

    first, again, other = random_weights(0), random_weights(0), random_weights(1)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)


def test_eval_knn_eval_linear_and_analyze_give_one_verdict(three_readings, work):
    verdicts = {name: _section(text, "Verdict: did pretraining help?").strip()
                for name, text in three_readings.items()}
    assert verdicts["knn"] == verdicts["linear"] == verdicts["analyze"]
    verdict = verdicts["knn"]
    assert "* kNN (k 200, t 0.1) - are images of one class near each other" in verdict
    assert "* Linear probe (100 epochs, epoch " in verdict
    assert "kept by a 10% validation split) - can a linear classifier" in verdict
    assert "Are the features useful? " in verdict
    # the verdict weighs the numbers each command's own table shows
    knn = json.loads((work / "knn" / "results.json").read_text())
    linear = json.loads((work / "linear" / "results.json").read_text())
    record = knn["verdict"]
    assert record == linear["verdict"]
    for evidence, results in zip(record["evidence"], (knn, linear), strict=True):
        assert [c["difference"] for c in evidence["comparisons"]] == \
            [b["difference"] for b in results["baselines"].values()]
    # the linear probe held out a validation split and says so
    stop = linear["config"]["early_stopping"]
    assert stop["num_validation"] + stop["num_fit"] == len(Digits("train"))
    assert "held out (" in three_readings["linear"] and "best validation top-1" in \
        three_readings["linear"]
    assert not (work / "linear" / "loss_curve.png").exists()  # summary.png has the loss
    # analyze's margin reading names the verdict's kNN comparison with random init
    reading = _section(three_readings["analyze"], "Reading")
    assert "kNN" in reading.splitlines()[1] and "random init" in reading.splitlines()[1]


def _relation(value: float, other: float) -> str:
    return "about equal to" if abs(value - other) < TIE else (
        "higher than" if value > other else "lower than")


def test_analyze_shows_each_model_figure_beside_random_init(three_readings, work):
    """analyze for one's own data by default (issue 37, item 7): the figures that depend on the
    model, each beside random init, each caption true of the numbers it plots; the paper
    figures only on request."""
    out = work / "analyze"
    results = json.loads((out / "results.json").read_text())
    names = ["local_separation.png", "similarity_histograms.png", "uniformity_alignment.png"]
    assert results["figures"] == names
    assert sorted(p.name for p in out.glob("*.png")) == sorted(names)
    assert "paper reference" not in three_readings["analyze"]
    pre, rand = results["metrics"], results["baseline_metrics"]["random init"]
    captions = {name: figure_caption(out / name) for name in names}
    assert captions == results["captions"]
    figures = _section(three_readings["analyze"], "Figures")
    assert all(f"* `{name}`: {caption}" in figures for name, caption in captions.items())

    gap = pre["local_separation_gap"]
    side = "above" if gap > 0 else "below"
    assert captions["local_separation.png"].startswith(
        f"pretrained: the two views of an image (green) sit {side} its nearest other image")
    assert (f"median gap {format_signed(gap, 3)} "
            f"({_relation(gap, rand['local_separation_gap'])} random init's)"
            ) in captions["local_separation.png"]
    margin = pre["target_noise_margin"]
    side = "right of" if margin > 0 else "left of"
    assert f"lies {side} the other-class one" in captions["similarity_histograms.png"]
    assert (f"margin {format_signed(margin, 3)} "
            f"({_relation(margin, rand['target_noise_margin'])} random init's)"
            ) in captions["similarity_histograms.png"]
    spread = "more" if pre["uniformity"] < rand["uniformity"] else "less"
    assert captions["uniformity_alignment.png"].startswith(
        f"pretrained spreads its embeddings {spread} evenly than random init (uniformity "
        f"{pre['uniformity']:.3f} vs {rand['uniformity']:.3f})")


def test_lowshot_compares_every_shot_count_with_all_seeds(tiny_checkpoint, work, capsys):
    code, stdout, err = _eval(capsys, work, tiny_checkpoint, "lowshot", "--epochs", "2",
                              "--shots", "2", "8", "all", "--seeds", "0", "1", "--baselines",
                              "--output", str(work / "low"))
    assert code == 0, err
    results = json.loads((work / "low" / "results.json").read_text())
    shots = results["metrics"]["shots"]
    for name, b in results["baselines"].items():
        assert set(b["shots"]) == set(shots) == {"2", "8", "all"}, name
        for shot, c in b["shots"].items():
            # the interval pools every seed: its difference is that of the seeds' means
            mean = b["metrics"]["shots"][shot]["mean"]
            assert c["difference"] == pytest.approx(shots[shot]["mean"] - mean, abs=1e-12)
            assert c["ci_low"] <= c["difference"] <= c["ci_high"]
    # the printed difference column equals the difference of the printed accuracies
    table = _section(stdout, "Baselines")
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in table.splitlines() if line.startswith("| ") and "shots" not in line]
    assert [r[0] for r in rows] == ["2", "8", "all"]
    for row in rows:
        pretrained, raw, raw_diff, rand, rand_diff = row[1:]
        for base, diff in ((raw, raw_diff), (rand, rand_diff)):
            printed = float(diff.split(" [")[0])
            assert abs(printed - (float(pretrained) - float(base))) <= 0.1 + 1e-9, row
    assert "low-shot linear probes (2/8/all images per class, 2 seeds" in stdout.lower()


def test_lowshot_names_the_class_its_count_and_shots(tiny_checkpoint, work, capsys):
    counts = np.bincount(Digits("train").labels)
    smallest = int(np.argmin(counts))
    code, stdout, err = _eval(capsys, work, tiny_checkpoint, "lowshot", "--shots", "16", "500",
                              "--no-cache")
    assert code == 2 and stdout == ""
    assert err.strip() == (
        f"contrastkit eval: error: --shots 500: class '{smallest}' has {counts.min()} images in "
        f"--train-split train, fewer than 500; pass --shots values of at most {counts.min()} "
        f"(e.g. --shots {counts.min() // 2} {counts.min()} all)")


def test_eval_linear_says_when_its_validation_split_is_too_small(tiny_checkpoint, work, capsys):
    """Issue 52, item 10: 5% of each digit class is 7 images, too few to choose an epoch; the
    probe keeps the last epoch and the report, results.json and the verdict say so."""
    code, stdout, err = _eval(capsys, work, tiny_checkpoint, "linear", "--epochs", "3",
                              "--validation", "0.05", "--output", str(work / "small_val"))
    assert code == 0, err
    results = json.loads((work / "small_val" / "results.json").read_text())
    assert results["config"]["validation_too_small"] == {"fewest": 7, "most": 7, "minimum": 10}
    assert "early_stopping" not in results["config"]
    assert "val_top1_per_epoch" not in results["curves"]
    assert results["metrics"]["top1"] == pytest.approx(results["curves"]["test_top1_per_epoch"][-1])
    assert ("| validation split | 5% of each class: 7 images per class, fewer than the 10 needed "
            "to choose an epoch; the probe trains on every training image and the last epoch (3) "
            "is used |") in stdout
    from contrastkit.eval.answer import protocol_evidence

    evidence = protocol_evidence("linear", results["config"], results["metrics"], 10,
                                 {"raw pixels": {"difference": 0.1, "ci_low": 0.05,
                                                 "ci_high": 0.15}})
    assert evidence.settings == ("3 epochs, last epoch: the 5% validation split has 7 images "
                                 "per class, fewer than the 10 needed to choose an epoch")


def test_linear_baselines_need_the_fast_protocol(tiny_checkpoint, work, capsys):
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
