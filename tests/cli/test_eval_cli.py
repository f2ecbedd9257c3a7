"""`contrastkit eval | analyze | compare` end to end on digits (offline, CPU)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from contrastkit.checkpoints import file_hash
from contrastkit.cli import main
from contrastkit.cli.common import eval_request
from contrastkit.cli.eval import eval_parser
from contrastkit.data.sources.images.datasets import Digits
from contrastkit.eval import setup as eval_setup
from contrastkit.models.resnet import resnet18, resnet50
from contrastkit.models.torchvision_layout import to_torchvision_state_dict

pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")
pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors on shared cores

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("eval_cli")


@pytest.fixture(scope="module")
def torchvision_files(work) -> dict[str, Path]:
    """A narrow CIFAR-stem ResNet-18 in torchvision layout, as .pth and .safetensors."""
    from safetensors.torch import save_file

    torch.manual_seed(0)
    state = to_torchvision_state_dict(resnet18(cifar_stem=True, width=8))
    pth, st = work / "r18.pth", work / "r18.safetensors"
    torch.save(state, pth)
    save_file(state, str(st))
    return {"pth": pth, "safetensors": st}


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _common(ckpt: Path, work: Path, *extra: str) -> list[str]:
    return ["--checkpoint", str(ckpt), "--data", "digits", "--cache-dir", str(work / "cache"),
            "--quiet", *extra]


def test_eval_knn_on_digits_writes_results(tiny_checkpoint, work, capsys):
    out = work / "knn"
    code, stdout, err = _run(capsys, "eval", "knn", *_common(tiny_checkpoint, work), "--k", "20",
                             "--output", str(out))
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    top1 = results["metrics"]["top1"]
    assert 0.0 <= top1 <= 1.0 and 0.0 <= results["metrics"]["top5"] <= 1.0
    assert top1 > 0.3  # 10 balanced classes: chance is 0.1
    assert results["checkpoint"]["sha256"] == file_hash(tiny_checkpoint)
    assert results["checkpoint"]["backbone"]["name"] == "small_convnet"
    assert results["config"]["k"] == 20 and results["protocol"] == "knn"
    assert results["data"]["size"] == 8  # the pretraining run's, stored in the checkpoint
    assert results["defaults_from"] == str(tiny_checkpoint)
    assert "--k" in results["argv"] and results["command"].startswith("contrastkit eval knn")
    preds = np.load(out / "predictions.npz")
    assert preds["labels"].tolist() == Digits("test").labels.tolist()
    assert np.mean(preds["pred"] == preds["labels"]) == pytest.approx(top1)
    md = (out / "results.md").read_text()
    assert "| top1" in md and f"{top1:.4f}" in md
    assert f"{top1:.4f}" in stdout  # the table is printed
    # a second run hits the feature cache: same numbers, no new cache entries
    entries = sorted(p.name for p in (work / "cache").iterdir())
    code, stdout2, _ = _run(capsys, "eval", "knn", *_common(tiny_checkpoint, work), "--k", "20")
    assert code == 0 and f"{top1:.4f}" in stdout2
    assert sorted(p.name for p in (work / "cache").iterdir()) == entries


def test_the_checkpoint_stores_what_evaluation_needs(tiny_checkpoint):
    entry = torch.load(tiny_checkpoint, map_location="cpu", weights_only=False)["contrastkit"]
    assert entry["backbone"]["name"] == "small_convnet" and entry["method"] == "SimCLR"
    views = entry["views"]
    assert (views["size"], views["normalize"], views["eval_resize"]) == (8, None, "small")
    assert (views["online"], views["target"]) == ("simclr", "simclr")  # SimCLR's defaults
    assert entry["data"] == {"dataset": "digits", "classes": Digits("train").classes,
                             "test_fraction": None, "split_seed": 0, "load_size": None,
                             "video": None}


def _knn_size(capsys, ckpt: Path, work: Path) -> tuple[int, str | None]:
    """``(data.size, defaults_from)`` of ``eval knn`` on ``ckpt`` (no --size given)."""
    out = work / f"knn_{ckpt.parent.name}_{ckpt.stem}"
    code, _, err = _run(capsys, "eval", "knn", *_common(ckpt, work), "--k", "5", "--output",
                        str(out))
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    return results["data"]["size"], results["defaults_from"]


def test_a_new_checkpoint_evaluates_alone(tiny_checkpoint, work, capsys):
    alone = work / "elsewhere" / "model.ckpt"  # no run folder, no config.yaml
    alone.parent.mkdir()
    shutil.copy(tiny_checkpoint, alone)
    assert _knn_size(capsys, alone, work) == (8, str(alone))


def test_an_older_checkpoint_falls_back_to_its_run_config(tiny_checkpoint, work, capsys):
    """A checkpoint written before the evaluation record (its entry holds the backbone, method
    and class count only) takes the defaults from its run's config.yaml, and without a run
    folder has none."""
    state = torch.load(tiny_checkpoint, map_location="cpu", weights_only=False)
    state["contrastkit"] = {k: state["contrastkit"][k] for k in ("backbone", "method",
                                                                 "num_classes")}
    run = work / "old_run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(tiny_checkpoint.parent.parent / "config.yaml", run / "config.yaml")
    old = run / "checkpoints" / "old.ckpt"
    torch.save(state, old)
    assert _knn_size(capsys, old, work) == (8, str(run / "config.yaml"))
    stray = work / "stray" / "old.ckpt"
    stray.parent.mkdir()
    shutil.copy(old, stray)
    assert _knn_size(capsys, stray, work) == (32, None)


def test_eval_retrieval_on_torchvision_state_dict(torchvision_files, work, capsys):
    out = work / "retrieval"
    code, _, err = _run(capsys, "eval", "retrieval",
                        *_common(torchvision_files["pth"], work, "--size", "8"),
                        "--ks", "1", "5", "--output", str(out))
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    assert results["checkpoint"]["backbone"] == {"name": "resnet18", "cifar_stem": True,
                                                 "width": 8, "out_dim": 128, "norm": "batch",
                                                 "timm_kwargs": None}
    r1, r5 = results["metrics"]["recall@1"], results["metrics"]["recall@5"]
    assert 0.1 < r1 <= r5 <= 1.0
    preds = np.load(out / "predictions.npz")  # 1-NN labels: their accuracy is recall@1
    assert np.mean(preds["pred"] == preds["labels"]) == pytest.approx(r1)


def test_safetensors_state_dict_loads_the_same_backbone(torchvision_files, work):
    args = eval_parser().parse_args(["knn", *_common(torchvision_files["safetensors"], work)])
    from_st = eval_setup.setup(eval_request(args))
    args.checkpoint = str(torchvision_files["pth"])
    from_pth = eval_setup.setup(eval_request(args))
    assert from_st.spec == from_pth.spec and from_st.size == 32 and from_st.small
    assert from_st.sha256 != from_pth.sha256  # the cache key sees two different files
    x = torch.rand(2, 3, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(from_st.backbone(x), from_pth.backbone(x), rtol=0, atol=0)


def test_eval_linear_fast_and_lowshot(tiny_checkpoint, work, capsys):
    out = work / "linear"
    code, _, err = _run(capsys, "eval", "linear", *_common(tiny_checkpoint, work), "--epochs", "3",
                        "--output", str(out))
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["protocol"] == "fast" and results["config"]["epochs"] == 3
    assert 0.1 < results["metrics"]["top1"] <= 1.0
    assert len(results["curves"]["loss_per_epoch"]) == 3
    assert (out / "probe_accuracy.png").read_bytes().startswith(PNG_SIGNATURE)
    preds = np.load(out / "predictions.npz")
    assert np.mean(preds["pred"] == preds["labels"]) == pytest.approx(results["metrics"]["top1"])

    low = work / "lowshot"
    code, stdout, err = _run(capsys, "eval", "lowshot", *_common(tiny_checkpoint, work), "--epochs",
                             "2", "--shots", "2", "all", "--seeds", "0", "1", "--output",
                             str(low))
    assert code == 0, err
    shots = json.loads((low / "results.json").read_text())["metrics"]["shots"]
    assert set(shots) == {"2", "all"}
    assert shots["2"]["num_train"] == 20 and len(shots["2"]["top1"]) == 2
    assert shots["2"]["mean"] == pytest.approx(np.mean(shots["2"]["top1"]))
    preds = np.load(low / "predictions.npz")  # last shot ("all"), first seed
    assert np.mean(preds["pred"] == preds["labels"]) == pytest.approx(shots["all"]["top1"][0])
    assert "| shots" in stdout


def test_eval_linear_sce_protocol_on_images(tiny_checkpoint, work, capsys):
    out = work / "sce_d2"
    code, _, err = _run(capsys, "eval", "linear", *_common(tiny_checkpoint, work), "--protocol",
                        "sce_d2", "--epochs", "1", "--linear-batch-size", "256",
                        "--output", str(out))
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    config = results["config"]
    assert config["protocol"] == "sce_d2" and config["epochs"] == 1
    assert config["schedule"] == "cosine" and config["lr_reference_batch"] == 256
    assert 0.0 <= results["metrics"]["top1"] <= 1.0
    preds = np.load(out / "predictions.npz")  # the trained classifier on the eval features
    assert np.mean(preds["pred"] == preds["labels"]) == pytest.approx(results["metrics"]["top1"])


def test_analyze_writes_figures_and_metrics(tiny_checkpoint, work, capsys, monkeypatch):
    from contrastkit.eval import plots

    embedded = {}

    def fake_embedding(maps, path, *, method, seed):  # t-SNE itself takes ~20 s here
        embedded.update({name: (z.shape[0], labels.tolist()) for name, (z, labels) in
                         maps.items()}, method=method)
        Path(path).write_bytes(PNG_SIGNATURE + bytes(6000))
        return Path(path)

    monkeypatch.setattr(plots, "plot_embedding_2d", fake_embedding)
    out = work / "analyze"
    code, stdout, err = _run(
        capsys, "analyze", *_common(tiny_checkpoint, work), "--output", str(out),
        "--paper-references", "--temperatures", "0.1", "0.5", "--dystress", "0.1", "0.2",
        "--embedding", "tsne", "--embedding-samples", "120", "--loss-value", "2.0",
        "--num-noise", "100")
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    metrics = results["metrics"]
    for key in ("alignment", "uniformity", "tolerance", "interclass_uniformity",
                "target_noise_margin", "positive_similarity_mean", "local_separation_gap"):
        assert np.isfinite(metrics[key]), key
        assert np.isfinite(results["baseline_metrics"]["random init"][key]), key
    assert 0.0 <= metrics["alignment"] <= 4.0 and metrics["uniformity"] <= 0.0
    assert -1.0 <= metrics["tolerance"] <= 1.0
    assert metrics["sincere_kl_bound"] == pytest.approx(np.log(100) - 2.0)
    assert results["config"]["views"] == ["simclr", "simclr"]  # SimCLR's pretraining views
    for name in ("uniformity_alignment.png", "local_separation.png",
                 "similarity_histograms.png", "hardness_weights.png",
                 "temperature_functions.png", "uniformity_alignment_papers.png",
                 "embedding_tsne.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 5000, name
        assert name in results["figures"]
    assert "target_noise_margin" in stdout
    # the papers' values beside ours (issue 19, item 4), in the table and in results.json
    md = (out / "results.md").read_text()
    assert "| paper reference" in md and "ImageNet-1K -3.08 to -2.91 [1]" in md
    assert "[1] DySTreSS (Manna et al. 2023) Table 13" in stdout
    assert results["paper_references"]["values"]["uniformity"].endswith("[1]")
    test_labels = Digits("test").labels.tolist()
    assert embedded == {"pretrained": (120, test_labels[:120]),
                        "random init": (120, test_labels[:120]), "method": "tsne"}


def test_compare_prints_verdict_and_rejects_other_test_sets(tiny_checkpoint, work, capsys):
    a, b = work / "cmp_knn", work / "cmp_linear"
    assert _run(capsys, "eval", "knn", *_common(tiny_checkpoint, work), "--k", "10", "--output",
                str(a))[0] == 0
    assert _run(capsys, "eval", "linear", *_common(tiny_checkpoint, work), "--epochs", "2",
                "--output", str(b))[0] == 0
    code, stdout, err = _run(capsys, "compare", str(a), str(b), "--output", str(work / "cmp"))
    assert code == 0, err
    summary = json.loads((work / "cmp" / "comparison.json").read_text())
    pa, pb = np.load(a / "predictions.npz"), np.load(b / "predictions.npz")
    acc_a, acc_b = np.mean(pa["pred"] == pa["labels"]), np.mean(pb["pred"] == pb["labels"])
    assert summary["difference"] == pytest.approx(acc_a - acc_b)
    assert summary["ci_low"] <= summary["difference"] <= summary["ci_high"]
    assert summary["verdict"] in stdout and "bootstrap CI" in stdout
    expected = "significant" if summary["ci_low"] > 0 or summary["ci_high"] < 0 else \
        "not significant"
    assert summary["verdict"] == expected
    # another test set: labels shuffled
    other = work / "cmp_other"
    shutil.copytree(b, other)
    labels = pb["labels"].copy()
    labels[:5] = (labels[:5] + 1) % 10
    np.savez(other / "predictions.npz", pred=pb["pred"], labels=labels)
    code, _, err = _run(capsys, "compare", str(a), str(other))
    assert code == 2
    assert err.startswith("contrastkit compare: error: test labels differ")
    code, _, err = _run(capsys, "compare", str(a), str(work / "missing"))
    assert code == 2 and "does not exist" in err


def _expect_error(capsys, argv: list[str], *fragments: str) -> None:
    code, stdout, err = _run(capsys, *argv)
    assert code == 2 and stdout == ""
    assert err.startswith("contrastkit eval: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_bad_checkpoints_are_clear_errors(work, capsys):
    junk = work / "notes.pth"
    junk.write_text("not a checkpoint")
    _expect_error(capsys, ["eval", "knn", *_common(junk, work)], str(junk), "could not be read")
    wrong = to_torchvision_state_dict(resnet50(width=8))
    wrong["layer1.0.conv1.weight"] = torch.zeros(3, 3, 3, 3)  # shape does not fit its key
    wrong_path = work / "r50_wrong.pth"
    torch.save(wrong, wrong_path)
    _expect_error(capsys, ["eval", "knn", *_common(wrong_path, work)],
                  "layer1.0.conv1.weight", "shape mismatch")
    not_resnet = work / "other.pth"
    torch.save({"encoder.weight": torch.zeros(2, 2)}, not_resnet)
    _expect_error(capsys, ["eval", "knn", *_common(not_resnet, work)], "torchvision ResNet")
    _expect_error(capsys, ["eval", "knn", *_common(work / "absent.ckpt", work)],
                  "does not exist")


def test_missing_root_and_bad_options_are_clear_errors(torchvision_files, work, capsys):
    ckpt = torchvision_files["pth"]
    _expect_error(capsys, ["eval", "knn", "--checkpoint", str(ckpt), "--data", "cifar10"],
                  "--root is required for --data cifar10")
    _expect_error(capsys, ["eval", "knn", *_common(ckpt, work), "--normalize", "mnist"],
                  "normalize='mnist' is unknown")
    _expect_error(capsys, ["eval", "lowshot", *_common(ckpt, work), "--shots", "ten"],
                  "--shots")


def test_k_larger_than_bank_and_nan_features(torchvision_files, work, capsys, monkeypatch):
    ckpt = torchvision_files["pth"]
    _expect_error(capsys, ["eval", "knn", *_common(ckpt, work, "--size", "8"), "--k", "5000"],
                  "k=5000", "larger than the bank")

    class NaNNet(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.full((x.shape[0], 4), float("nan"))

    monkeypatch.setattr(eval_setup, "_load_checkpoint", lambda path: (NaNNet(), {"name": "nan"}))
    _expect_error(capsys, ["eval", "knn", *_common(ckpt, work, "--no-cache")], "NaN")


def test_usage_lists_the_commands(capsys):
    code, stdout, _ = _run(capsys, "--help")
    assert code == 0
    for command in ("pretrain", "eval", "analyze", "compare", "export"):
        assert f"  {command}" in stdout


def test_eval_classes_keeps_and_relabels_a_subset(tiny_checkpoint, work, capsys):
    out = work / "two"
    code, _, err = _run(capsys, "eval", "knn", *_common(tiny_checkpoint, work), "--k", "5",
                        "--classes", "3", "8", "--output", str(out))
    assert code == 0, err
    preds = np.load(out / "predictions.npz")
    test = Digits("test")
    expected = [{3: 0, 8: 1}[y] for y in test.labels.tolist() if y in (3, 8)]
    assert preds["labels"].tolist() == expected
    assert set(preds["pred"].tolist()) <= {0, 1}
    _expect_error(capsys, ["eval", "knn", *_common(tiny_checkpoint, work), "--classes", "cat"],
                  "not among")
