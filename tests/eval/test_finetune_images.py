"""Image fine-tuning (DySTreSS appendix A.2): learning-rate milestones, weighted losses, resume,
and `contrastkit eval finetune` on the transfer sets' layouts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from contrastkit.cli import main
from contrastkit.data import augment
from contrastkit.eval.finetune_images import (
    DYSTRESS_A2,
    ImageFinetuneProtocol,
    _loss,
    finetune_images,
)
from contrastkit.models.resnet import resnet18
from contrastkit.models.torchvision_layout import to_torchvision_state_dict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
pytest.importorskip("PIL")
pytest.importorskip("sklearn")
import transfer_fixtures as fx


def test_paper_recipe_lr_per_epoch():
    assert (DYSTRESS_A2.epochs, DYSTRESS_A2.batch_size, DYSTRESS_A2.milestones) == (50, 128,
                                                                                    (30, 40))
    multi = [DYSTRESS_A2.schedule_for(binary=False).lr_at(e) for e in range(50)]
    binary = [DYSTRESS_A2.schedule_for(binary=True).lr_at(e) for e in range(50)]
    assert multi == pytest.approx([0.1] * 30 + [0.01] * 10 + [0.001] * 10, rel=1e-12)
    assert binary == pytest.approx([1.0] * 30 + [0.1] * 10 + [0.01] * 10, rel=1e-12)


def test_weighted_losses_match_their_formulas():
    logits = torch.tensor([[0.3], [-1.2], [2.0]])
    labels = torch.tensor([1, 0, 1])
    w = torch.tensor([4.24])
    p = torch.sigmoid(logits[:, 0])
    expected = -(w * labels * p.log() + (1 - labels) * (1 - p).log()).mean()
    assert _loss(logits, labels, w, binary=True) == pytest.approx(float(expected), rel=1e-6)
    logits4 = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    labels4 = torch.tensor([0, 3, 1, 2, 3])
    weights = torch.tensor([1.264, 1.667, 1.0, 2.114])
    nll = -F.log_softmax(logits4, dim=1)[torch.arange(5), labels4]
    expected4 = (weights[labels4] * nll).sum() / weights[labels4].sum()
    assert _loss(logits4, labels4, weights, binary=False) == pytest.approx(float(expected4),
                                                                          rel=1e-6)


def _toy(n: int, classes: int, seed: int) -> list[tuple[torch.Tensor, int]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, 256, (3, 18, 18), dtype=torch.uint8, generator=g), i % classes)
            for i in range(n)]


def _run(protocol, classes, tmp_path, **kwargs):
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    backbone = resnet18(cifar_stem=True, width=4)
    return finetune_images(
        backbone, _toy(12, classes, 0), _toy(6, classes, 1), classes,
        train_transform=augment.preset("eval_train", 16, generator=generator),
        test_transform=augment.preset("eval", 16, small=False), generator=generator,
        protocol=protocol, state_path=tmp_path / "state.pt", **kwargs)


def test_lr_curve_follows_the_milestones(tmp_path):
    protocol = ImageFinetuneProtocol(epochs=5, batch_size=4, lr=0.05, lr_binary=0.2,
                                     milestones=(2, 4), size=16)
    out = _run(protocol, 3, tmp_path)
    assert out["lr_curve"] == pytest.approx([0.05, 0.05, 0.005, 0.005, 0.0005], rel=1e-12)
    out = _run(protocol, 2, tmp_path, class_weights=(2.45,))
    assert out["lr_curve"] == pytest.approx([0.2, 0.2, 0.02, 0.02, 0.002], rel=1e-12)
    assert set(out) >= {"auroc", "top1", "mean_per_class"}


def test_resumed_run_equals_an_uninterrupted_one(tmp_path):
    protocol = ImageFinetuneProtocol(epochs=3, batch_size=4, lr=0.05, milestones=(2,), size=16)
    whole = _run(protocol, 3, tmp_path / "a")
    (tmp_path / "b").mkdir()
    first = _run(protocol, 3, tmp_path / "b", stop_after=1)
    assert first["epochs_done"] == 1
    resumed = _run(protocol, 3, tmp_path / "b", resume=True)
    assert resumed["loss_curve"] == whole["loss_curve"]
    for (k, a), b in zip(whole["model"].state_dict().items(),
                         resumed["model"].state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    other = ImageFinetuneProtocol(epochs=3, batch_size=4, lr=0.5, milestones=(2,), size=16)
    with pytest.raises(ValueError, match="another fine-tuning"):
        _run(other, 3, tmp_path / "b", resume=True)
    (tmp_path / "b" / "state.pt").write_bytes(b"truncated")
    with pytest.raises(ValueError, match=r"state\.pt: not a readable fine-tuning state"):
        _run(protocol, 3, tmp_path / "b", resume=True)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ft") / "r18.pth"
    torch.save(to_torchvision_state_dict(resnet18(cifar_stem=True, width=4)), path)
    return path


def _cli(ckpt: Path, data: str, root: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", "finetune", "--checkpoint", str(ckpt), "--data", data, "--root", str(root),
            "--size", "16", "--epochs", "2", "--finetune-batch-size", "4", "--output",
            str(out), *extra]


def test_finetune_command_on_flowers102_and_mhist(checkpoint, tmp_path, capsys):
    flowers = fx.flowers102(tmp_path / "flowers")
    out = tmp_path / "flowers-run"
    assert main(_cli(checkpoint, "flowers102", flowers, out)) == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["class_weights"] is None and results["num_test"] == 6
    assert results["config"]["loss"] == "cross_entropy"  # natural images: no class weights
    assert results["curves"]["lr_per_epoch"] == [0.1, 0.1]
    assert (out / "finetune_state.pt").is_file() and (out / "predictions.npz").is_file()
    assert main(_cli(checkpoint, "flowers102", flowers, out)) == 2  # one run per --output
    assert "is not empty" in capsys.readouterr().err
    mh = fx.mhist(tmp_path / "mhist")
    out_b = tmp_path / "mhist-run"
    assert main(_cli(checkpoint, "mhist", mh, out_b, "--milestones", "1")) == 0
    results = json.loads((out_b / "results.json").read_text())
    assert results["config"]["class_weights"] == [2.45]
    assert results["config"]["loss"] == "BCEWithLogits(pos_weight)"
    assert results["curves"]["lr_per_epoch"] == pytest.approx([1.0, 0.1])
    assert "auroc" in results["metrics"]
    capsys.readouterr()
    assert main(["compare", str(out_b), str(out_b)]) == 0


def test_finetune_command_resume_and_bad_input(checkpoint, tmp_path, capsys):
    root = fx.chaoyang(tmp_path / "chaoyang")
    out = tmp_path / "run"
    assert main(_cli(checkpoint, "chaoyang", root, out, "--resume")) == 2
    assert "finetune_state.pt does not exist" in capsys.readouterr().err
    assert main(_cli(checkpoint, "chaoyang", root, out, "--epochs", "1")) == 0
    state = torch.load(out / "finetune_state.pt", weights_only=True)
    assert state["epoch"] == 1
    assert main(_cli(checkpoint, "chaoyang", root, out, "--epochs", "1", "--resume")) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["class_weights"] == [1.264, 1.667, 1.0, 2.114]
    assert results["config"]["resumed"] is True
    capsys.readouterr()
    bad = root / "test" / "1_0.jpg"
    bad.write_bytes(b"not an image")
    assert main(_cli(checkpoint, "chaoyang", root, tmp_path / "bad")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err


def test_finetune_command_on_class_folders(checkpoint, tmp_path, capsys):
    for split in ("train", "test"):
        for label, name in enumerate(("cat", "dog")):
            for i in range(3):
                fx.jpeg(tmp_path / "own" / split / name / f"{i}.jpg", label, i)
    out = tmp_path / "run"
    assert main(_cli(checkpoint, "folder", tmp_path / "own", out, "--class-weights", "3")) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["data"]["classes"] == ["cat", "dog"] and results["num_test"] == 6
    assert results["config"]["class_weights"] == [3.0]
    assert results["curves"]["lr_per_epoch"] == [1.0, 1.0]  # binary: lr 1.0 before epoch 30
    assert "epoch 2/2" in capsys.readouterr().err
