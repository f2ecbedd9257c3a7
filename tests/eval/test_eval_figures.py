"""Figures worth opening (issue 19, item 4): eval knn's per-class figure, the linear probe's train
and test curves, the pretraining summary on an epoch axis, and `contrastkit embed`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from own_images import make_own_folder

from contrastkit.cli import main
from contrastkit.figures import figure_caption

pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

PNG = b"\x89PNG\r\n\x1a\n"


def test_pretraining_writes_a_per_epoch_summary_beside_the_knn_monitor(tiny_run):
    from contrastkit.train.summary_figure import per_epoch

    assert (tiny_run / "summary.png").read_bytes().startswith(PNG)
    with open(tiny_run / "metrics.csv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("train/loss")]
    by_epoch = per_epoch(tiny_run / "metrics.csv", "train/loss")
    assert sorted(by_epoch) == [0, 1]
    for epoch, mean in by_epoch.items():
        values = [float(r["train/loss"]) for r in rows if int(r["epoch"]) == epoch]
        assert mean == pytest.approx(sum(values) / len(values))


def test_eval_knn_and_linear_write_their_figures(tiny_run, tmp_path, capsys):
    ckpt = tiny_run / "checkpoints" / "last.ckpt"
    common = ["--checkpoint", str(ckpt), "--data", "digits", "--quiet", "--no-cache"]
    assert main(["eval", "knn", *common, "--output", str(tmp_path / "knn")]) == 0
    knn = json.loads((tmp_path / "knn" / "results.json").read_text())
    assert "knn_per_class.png" in knn["figures"]
    assert (tmp_path / "knn" / "knn_per_class.png").read_bytes().startswith(PNG)
    assert main(["eval", "linear", *common, "--epochs", "3", "--output",
                 str(tmp_path / "lin")]) == 0
    lin = json.loads((tmp_path / "lin" / "results.json").read_text())
    assert (tmp_path / "lin" / "probe_accuracy.png").read_bytes().startswith(PNG)
    train, test = lin["curves"]["train_top1_per_epoch"], lin["curves"]["test_top1_per_epoch"]
    assert len(train) == len(test) == len(lin["curves"]["val_top1_per_epoch"]) == 3
    kept = lin["config"]["early_stopping"]["best_epoch"]
    assert test[kept - 1] == pytest.approx(lin["metrics"]["top1"])  # the kept epoch's probe
    caption = figure_caption(tmp_path / "lin" / "probe_accuracy.png")
    assert caption.startswith(f"Epoch {kept} (best validation top-1, ")
    assert f"test {100 * test[kept - 1]:.1f}%" in caption


def test_linear_probe_curves_are_the_accuracies_after_each_epoch():
    from contrastkit.eval import LinearProtocol, linear_probe

    g = torch.Generator().manual_seed(0)
    xtr, ytr = torch.randn(60, 5, generator=g), torch.randint(0, 3, (60,), generator=g)
    xte, yte = torch.randn(30, 5, generator=g), torch.randint(0, 3, (30,), generator=g)
    one = linear_probe(xtr, ytr, xte, yte, LinearProtocol(epochs=1, lr=0.1, batch_size=16))
    two = linear_probe(xtr, ytr, xte, yte, LinearProtocol(epochs=2, lr=0.1, batch_size=16))
    assert len(two["train_top1_curve"]) == 2
    # after one epoch of the 2-epoch run the lr schedule differs, so compare each run's last
    assert two["test_top1_curve"][-1] == pytest.approx(two["top1"])
    assert one["train_top1_curve"][-1] == pytest.approx(
        float((one["classifier"](xtr).argmax(1) == ytr).float().mean()))


def test_embed_writes_embeddings_files_and_a_map(tiny_run, tmp_path, capsys):
    photos = make_own_folder(tmp_path / "photos", per_class=4, sizes=((8, 8),))
    flat = make_own_folder(tmp_path / "flat", per_class=4, sizes=((8, 8),), labelled=False)
    ckpt = str(tiny_run / "checkpoints" / "last.ckpt")
    out = tmp_path / "emb"
    assert main(["embed", "--checkpoint", ckpt, "--data", "folder", "--root", str(photos),
                 "--quiet", "--output", str(out)]) == 0
    z = np.load(out / "embeddings.npy")
    files = (out / "files.txt").read_text().splitlines()
    assert z.shape == (len(files), 16) and len(files) == len(list(photos.rglob("*.png")))
    from contrastkit.checkpoints import load_backbone
    from contrastkit.data import augment
    from contrastkit.data.decode.images import decode_image

    backbone, _ = load_backbone(ckpt)
    view = augment.preset("eval", 8, small=True, normalize=None)
    first = torch.from_numpy(decode_image(files[0]))[None]
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(z[:1]), backbone(view(first)),
                                   rtol=1e-4, atol=1e-5)
    labels, classes = np.load(out / "labels.npy"), (out / "classes.txt").read_text().split()
    assert classes[labels[0]] == Path(files[0]).parent.name
    assert (out / "embedding_tsne.png").read_bytes().startswith(PNG)
    assert main(["embed", "--checkpoint", ckpt, "--data", "folder", "--root", str(flat),
                 "--quiet", "--output", str(tmp_path / "flat_emb")]) == 0
    assert not (tmp_path / "flat_emb" / "labels.npy").exists()
    assert main(["embed", "--checkpoint", ckpt, "--data", "folder", "--root", str(flat),
                 "--quiet", "--output", str(tmp_path / "flat_emb")]) == 2  # one run per folder


def test_eval_lowshot_and_retrieval_write_their_figures(tiny_run, tmp_path):
    common = ["--checkpoint", str(tiny_run / "checkpoints" / "last.ckpt"), "--data", "digits",
              "--quiet", "--no-cache"]
    assert main(["eval", "lowshot", *common, "--shots", "2", "all", "--seeds", "0",
                 "--epochs", "2", "--output", str(tmp_path / "low")]) == 0
    assert main(["eval", "retrieval", *common, "--output", str(tmp_path / "ret")]) == 0
    for folder, name in (("low", "lowshot.png"), ("ret", "recall_at_k.png")):
        results = json.loads((tmp_path / folder / "results.json").read_text())
        assert name in results["figures"]
        assert (tmp_path / folder / name).read_bytes().startswith(PNG)
