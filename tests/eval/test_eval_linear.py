"""Linear probes (SCE appendix D), low-shot sampling (SCE Table 10) and per-class accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import train_test_split

from contrastkit.eval import (
    SCE_D1,
    SCE_D2,
    LinearProtocol,
    linear_probe,
    lowshot_linear,
    mean_per_class_accuracy,
    sample_per_class,
    stratified_holdout,
    train_linear_on_images,
)
from contrastkit.eval.linear import MIN_VALIDATION_PER_CLASS, too_small_text


@pytest.fixture(scope="module")
def digits():
    data = load_digits()
    xtr, xte, ytr, yte = train_test_split(
        data.data, data.target, test_size=0.3, random_state=0, stratify=data.target
    )
    as_t = lambda a, dt: torch.as_tensor(a, dtype=dt)  # noqa: E731
    return (as_t(xtr, torch.float32), as_t(ytr, torch.long), as_t(xte, torch.float32),
            as_t(yte, torch.long))


def separable(n=300, dim=8, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = 10.0 * torch.eye(classes, dim)
    y = torch.randint(0, classes, (n,), generator=g)
    return centers[y] + 0.5 * torch.randn(n, dim, generator=g), y


def test_probe_separable_reaches_100_percent():
    x, y = separable()
    out = linear_probe(x[:200], y[:200], x[200:], y[200:], LinearProtocol(epochs=20, lr=0.1))
    assert out["top1"] == 1.0
    assert out["mean_per_class"] == 1.0
    assert "top5" not in out  # 3 classes: every label is among the top 5, nothing to report
    assert len(out["loss_curve"]) == 20
    assert out["loss_curve"][-1] < out["loss_curve"][0]


def test_probe_on_digits_pixels_above_90_percent(digits):
    xtr, ytr, xte, yte = digits
    out = linear_probe(xtr, ytr, xte, yte, LinearProtocol(epochs=60, lr=0.1, batch_size=128))
    assert out["top1"] > 0.9
    # the classifier works on RAW features: the standardisation is folded into it
    pred = out["classifier"](xte).argmax(dim=1)
    assert float((pred == yte).double().mean()) == pytest.approx(out["top1"])
    assert out["mean_per_class"] == pytest.approx(
        balanced_accuracy_score(yte.numpy(), pred.numpy())
    )


def test_probe_step_schedule(digits):
    xtr, ytr, xte, yte = digits
    protocol = LinearProtocol(epochs=10, lr=0.05, batch_size=64, schedule="step",
                              milestones=(6, 8))
    out = linear_probe(xtr, ytr, xte, yte, protocol)
    assert out["top1"] > 0.85
    again = linear_probe(xtr, ytr, xte, yte, protocol)
    assert again["top1"] == out["top1"]  # deterministic given the seed


def test_stratified_holdout_keeps_every_class_on_both_sides():
    labels = torch.tensor([0] * 10 + [1] * 3 + [2] * 1 + [3] * 2)
    fit, held = stratified_holdout(labels, 0.2, seed=0)
    assert set(fit.tolist()).isdisjoint(held.tolist())
    assert sorted(fit.tolist() + held.tolist()) == list(range(len(labels)))
    counts = torch.bincount(labels[held], minlength=4).tolist()
    assert counts == [2, 1, 0, 1]  # round(0.2 n), at least 1, never a whole class
    assert torch.equal(held, stratified_holdout(labels, 0.2, seed=0)[1])
    assert not torch.equal(held, stratified_holdout(labels, 0.2, seed=1)[1])
    with pytest.raises(ValueError, match="validation fraction"):
        stratified_holdout(labels, 1.0)


def test_validation_keeps_the_epoch_with_the_best_held_out_top1():
    """A probe on a small labelled set (issue 37, item 3): 120 training images of 512 noisy
    dimensions, a weak class signal. Without validation it ends where it fits its training
    images; with it (10 images of each class held out, the fewest that choose an epoch), the
    epoch kept is the best on images it did not train on."""
    g = torch.Generator().manual_seed(0)
    classes, dim = 3, 512
    signal = 0.1 * torch.randn(classes, dim, generator=g)
    y, yt = torch.arange(120) % classes, torch.arange(600) % classes
    x = signal[y] + torch.randn(120, dim, generator=g)
    xt = signal[yt] + torch.randn(600, dim, generator=g)
    protocol = LinearProtocol(epochs=30, lr=0.5, batch_size=16)
    plain = linear_probe(x, y, xt, yt, protocol)
    assert plain["train_top1_curve"][-1] == 1.0  # memorised
    assert MIN_VALIDATION_PER_CLASS == 10
    out = linear_probe(x, y, xt, yt, protocol, validation=0.25)
    val = out["val_top1_curve"]
    assert (out["num_fit"], out["num_validation"]) == (90, 30)
    best = out["best_epoch"]
    assert val[best - 1] == max(val) and len(val) == 30 and best < 30
    # the returned classifier is that epoch's: its test top-1 is the curve's at that epoch
    assert out["top1"] == pytest.approx(out["test_top1_curve"][best - 1])
    held = stratified_holdout(y, 0.25, seed=0)[1]
    pred = out["classifier"](x[held]).argmax(1)
    assert float((pred == y[held]).float().mean()) == pytest.approx(val[best - 1])


def test_a_validation_split_too_small_to_choose_an_epoch_falls_back_to_the_last_epoch():
    """Issue 52, item 10: early stopping chosen on 4 validation images per class kept epoch 4
    of 100. Below 10 held-out images in some class the probe does not early-stop: it trains on
    every training image and keeps the last epoch, exactly as ``validation=0``, and says
    why."""
    g = torch.Generator().manual_seed(0)
    signal = 0.3 * torch.randn(3, 64, generator=g)
    y, yt = torch.arange(120) % 3, torch.arange(300) % 3
    x, xt = signal[y] + torch.randn(120, 64, generator=g), signal[yt] + torch.randn(300, 64,
                                                                                     generator=g)
    protocol = LinearProtocol(epochs=8, lr=0.5, batch_size=16)
    plain = linear_probe(x, y, xt, yt, protocol)
    small = linear_probe(x, y, xt, yt, protocol, validation=0.1)  # 4 of 40 per class
    assert small["validation_too_small"] == {"fewest": 4, "most": 4, "minimum": 10}
    assert "best_epoch" not in small and "val_top1_curve" not in small
    assert torch.equal(small["classifier"].weight, plain["classifier"].weight)
    assert small["top1"] == plain["top1"]
    assert too_small_text(small["validation_too_small"]) == (
        "4 images per class, fewer than the 10 needed to choose an epoch")
    # 10 per class is enough: early stopping on them
    assert "best_epoch" in linear_probe(x, y, xt, yt, protocol, validation=0.25)
    # classes of different sizes (one of a single image, which holds out none): the range
    uneven = torch.tensor([0] * 40 + [1] * 100 + [2])
    out = linear_probe(torch.randn(len(uneven), 64, generator=g), uneven, xt, yt, protocol,
                       validation=0.1)
    assert out["validation_too_small"] == {"fewest": 0, "most": 10, "minimum": 10}
    assert too_small_text(out["validation_too_small"]).startswith("0 to 10 images per class")
    with pytest.raises(ValueError, match="validation fraction"):
        linear_probe(x, y, xt, yt, protocol, validation=-0.1)


def test_protocol_schedules():
    assert SCE_D1.lr_at(0) == 30.0
    assert SCE_D1.lr_at(59.9) == 30.0
    assert SCE_D1.lr_at(60) == pytest.approx(3.0)
    assert SCE_D1.lr_at(85) == pytest.approx(0.3)
    assert (SCE_D1.epochs, SCE_D1.momentum, SCE_D1.weight_decay) == (100, 0.9, 0.0)
    assert SCE_D2.scaled_lr == pytest.approx(0.1 * 1024 / 256)
    assert SCE_D2.lr_at(0) == pytest.approx(0.4)
    assert SCE_D2.lr_at(45) == pytest.approx(0.2)
    assert SCE_D2.lr_at(89.99) < 1e-3
    warm = LinearProtocol(epochs=10, lr=1.0, warmup_epochs=2)
    assert warm.lr_at(1) == pytest.approx(0.5)
    assert warm.lr_at(6) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5)))
    with pytest.raises(ValueError, match="schedule"):
        LinearProtocol(schedule="linear")


def test_mean_per_class_accuracy_hand_case():
    labels = torch.tensor([0, 0, 0, 0, 1, 2, 2])
    pred = torch.tensor([0, 0, 0, 1, 1, 0, 2])
    # recalls: 3/4, 1/1, 1/2
    assert mean_per_class_accuracy(pred, labels) == pytest.approx((0.75 + 1 + 0.5) / 3)
    assert mean_per_class_accuracy(pred, labels) == pytest.approx(
        balanced_accuracy_score(labels.numpy(), pred.numpy())
    )
    with pytest.raises(ValueError, match="labels has 6 labels"):
        mean_per_class_accuracy(pred, labels[:6])


def test_sample_per_class_draws_k_per_class():
    labels = torch.arange(100) % 4
    idx = sample_per_class(labels, 7, seed=0)
    assert idx.unique().numel() == 28
    assert torch.bincount(labels[idx], minlength=4).tolist() == [7, 7, 7, 7]
    assert not torch.equal(idx, sample_per_class(labels, 7, seed=1))
    assert torch.equal(idx, sample_per_class(labels, 7, seed=0))
    with pytest.raises(ValueError, match="fewer than shots=26"):
        sample_per_class(labels, 26)


def test_lowshot_linear(digits, monkeypatch):
    import contrastkit.eval.linear as linear

    seen = []
    original = linear.linear_probe

    def spy(feats, labels, *args, **kwargs):
        seen.append(torch.bincount(labels, minlength=10).tolist())
        return original(feats, labels, *args, **kwargs)

    monkeypatch.setattr(linear, "linear_probe", spy)
    xtr, ytr, xte, yte = digits
    out = lowshot_linear(xtr, ytr, xte, yte, shots=(2, 16, None), seeds=(0, 1),
                         protocol=LinearProtocol(epochs=15))
    assert list(out) == [2, 16, None]
    assert seen[:2] == [[2] * 10, [2] * 10]
    assert seen[2:4] == [[16] * 10, [16] * 10]
    assert sum(seen[4]) == len(ytr)
    assert out[2]["num_train"] == 20 and out[16]["num_train"] == 160
    assert out[None]["num_train"] == len(ytr)
    for res in out.values():
        assert res["mean"] == pytest.approx(np.mean(res["top1"]))
        assert res["std"] == pytest.approx(np.std(res["top1"], ddof=1))
    assert out[2]["mean"] < out[None]["mean"]
    assert out[None]["mean"] > 0.9


def test_train_linear_on_images_frozen_backbone(digits):
    xtr, ytr, xte, yte = digits
    images_tr, images_te = xtr.view(-1, 1, 8, 8) / 16, xte.view(-1, 1, 8, 8) / 16
    backbone = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 64))
    torch.nn.init.eye_(backbone[1].weight)
    torch.nn.init.zeros_(backbone[1].bias)
    calls = {"train": 0, "test": 0}

    def augment(images):
        calls["train"] += 1
        return images + 0.05 * torch.randn_like(images)

    def center(images):
        calls["test"] += 1
        return images

    batches = lambda x, y, b: [(x[i : i + b], y[i : i + b]) for i in range(0, len(y), b)]  # noqa: E731
    train_loader, test_loader = batches(images_tr, ytr, 64), batches(images_te, yte, 100)
    protocol = LinearProtocol(epochs=15, lr=0.5, batch_size=64, schedule="cosine")
    out = train_linear_on_images(backbone, train_loader, test_loader, protocol, augment, center,
                                 num_classes=10)
    assert out["top1"] > 0.9
    assert calls == {"train": 15 * len(train_loader), "test": len(test_loader)}
    assert backbone[1].weight.grad is None  # frozen: no gradient reached the backbone
    assert torch.equal(backbone[1].weight, torch.eye(64))
    assert len(out["loss_curve"]) == 15


def test_probe_bad_inputs(digits):
    xtr, ytr, xte, yte = digits
    with pytest.raises(ValueError, match="train_labels has 10 labels"):
        linear_probe(xtr, ytr[:10], xte, yte)
    bad = xte.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="test_features contains NaN"):
        linear_probe(xtr, ytr, bad, yte)
    with pytest.raises(ValueError, match="num_classes"):
        linear_probe(xtr, ytr, xte, yte, num_classes=5)
    with pytest.raises(ValueError, match="batch_size"):
        linear_probe(xtr, ytr, xte, yte, LinearProtocol(batch_size=0))
