"""Linear evaluation of cached frozen features (SCE, Denize et al. 2023, appendix D.1, D.2;
low-shot: Table 10).

* :class:`LinearProtocol` and the protocols of SCE (:data:`SCE_D1`, :data:`SCE_D2`);
* :func:`linear_probe`: the fast variant, on cached features (one forward pass of the backbone,
  no augmentation). Optionally standardises features; the returned ``nn.Linear`` acts on raw
  features (the standardisation is folded into its weights);
* :func:`lowshot_linear` on :func:`sample_per_class` draws, and the accuracies
  (:func:`classification_report`, :func:`mean_per_class_accuracy`).

The augmented-image protocol, where the frozen backbone runs on every augmented batch, is
:func:`contrastkit.eval.linear_images.train_linear_on_images`.

Accuracies are fractions in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.checks import check_features, check_labels, check_same_dim
from contrastkit.cosine import cosine_anneal
from contrastkit.eval.knn import topk_accuracy


@dataclass(frozen=True)
class LinearProtocol:
    """Hyper-parameters of a linear-evaluation protocol (SGD + cross-entropy).

    Attributes:
        epochs: training epochs.
        lr: base learning rate (before linear scaling).
        momentum: SGD momentum.
        weight_decay: SGD weight decay.
        batch_size: training batch size.
        schedule: ``"step"`` (multiply by ``gamma`` at each of ``milestones``) or ``"cosine"``
            (per-iteration cosine decay to 0 without restart, after the warm-up).
        milestones: epochs of the step decays.
        gamma: step decay factor.
        warmup_epochs: linear warm-up from 0 to the learning rate (0 = none).
        lr_reference_batch: when set, the learning rate follows the linear scaling rule
            ``lr * batch_size / lr_reference_batch`` (Goyal et al. 2017).
    """

    epochs: int = 100
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 0.0
    batch_size: int = 256
    schedule: str = "cosine"
    milestones: tuple[int, ...] = (60, 80)
    gamma: float = 0.1
    warmup_epochs: float = 0.0
    lr_reference_batch: int | None = None

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be finite and > 0, got {self.lr}")
        if self.schedule not in ("step", "cosine"):
            raise ValueError(f"schedule must be 'step' or 'cosine', got {self.schedule!r}")
        if self.momentum < 0 or self.weight_decay < 0 or self.warmup_epochs < 0:
            raise ValueError("momentum, weight_decay and warmup_epochs must be >= 0")
        if not 0 < self.gamma <= 1:
            raise ValueError(f"gamma must lie in (0, 1], got {self.gamma}")
        if self.lr_reference_batch is not None and self.lr_reference_batch < 1:
            raise ValueError(f"lr_reference_batch must be >= 1, got {self.lr_reference_batch}")

    @property
    def scaled_lr(self) -> float:
        """Peak learning rate after the linear scaling rule (``lr`` when no reference batch)."""
        if self.lr_reference_batch is None:
            return self.lr
        return self.lr * self.batch_size / self.lr_reference_batch

    def lr_at(self, epoch: float) -> float:
        """Learning rate at (fractional) ``epoch`` in ``[0, epochs)``.

        Step: ``scaled_lr * gamma ** #{m in milestones: m <= floor(epoch)}``. Cosine:
        ``scaled_lr * (1 + cos(pi * (epoch - warmup) / (epochs - warmup))) / 2``. During the
        warm-up (``epoch < warmup_epochs``): ``scaled_lr * epoch / warmup_epochs``.
        """
        peak = self.scaled_lr
        if epoch < self.warmup_epochs:
            return peak * epoch / self.warmup_epochs
        if self.schedule == "step":
            decays = sum(1 for m in self.milestones if m <= math.floor(epoch))
            return peak * self.gamma**decays
        span = max(self.epochs - self.warmup_epochs, 1e-12)
        progress = min(max((epoch - self.warmup_epochs) / span, 0.0), 1.0)
        return cosine_anneal(peak, 0.0, progress)



#: Denize et al. 2023, appendix D.1 (following MoCo v2 / ReSSL): 100 epochs, SGD lr 30,
#: momentum 0.9, no weight decay, lr x0.1 at epochs 60 and 80. The appendix gives no batch size;
#: 256 is MoCo v2's.
#: lr 30 suits raw (un-standardised) pooled ResNet features: use ``standardize=False``.
SCE_D1 = LinearProtocol(
    epochs=100, lr=30.0, momentum=0.9, weight_decay=0.0, batch_size=256, schedule="step",
    milestones=(60, 80), gamma=0.1,
)

#: Denize et al. 2023, appendix D.2 (following MoCo v3): 90 epochs, batch 1024, SGD momentum
#: 0.9, no weight decay, lr 0.1 scaled by batch/256 (= 0.4), cosine decay without restart.
SCE_D2 = LinearProtocol(
    epochs=90, lr=0.1, momentum=0.9, weight_decay=0.0, batch_size=1024, schedule="cosine",
    milestones=(), lr_reference_batch=256,
)


def mean_per_class_accuracy(pred: Tensor, labels: Tensor, num_classes: int | None = None) -> float:
    """Mean over classes of the per-class recall (Denize et al. 2023, Sec. 4.1.4: Aircraft,
    Caltech, Pets, Flowers).

    ``(1 / |C|) sum_{c in C} #{i: y_i = c, pred_i = c} / #{i: y_i = c}``, over the classes ``C``
    present in ``labels`` (a class with no test example has no recall and is skipped).
    """
    check_labels("pred", pred, pred.shape[0] if isinstance(pred, Tensor) else 0, "pred")
    check_labels("labels", labels, pred.shape[0], "pred")
    if labels.numel() == 0:
        raise ValueError("labels is empty")
    labels = labels.to(pred.device)
    size = max(int(labels.max()), int(pred.max())) + 1
    if num_classes is not None:
        size = max(size, num_classes)
    totals = torch.bincount(labels, minlength=size).double()
    correct = torch.bincount(labels[pred == labels], minlength=size).double()
    present = totals > 0
    return float((correct[present] / totals[present]).mean())


def classification_report(scores: Tensor, labels: Tensor) -> dict[str, float]:
    """``{"top1", "top5", "mean_per_class"}`` of class ``scores`` ``(N, C)`` against ``labels``."""
    report = topk_accuracy(scores, labels, (1, 5))
    report["mean_per_class"] = mean_per_class_accuracy(scores.argmax(dim=1), labels)
    return report


def _check_pair(features: Tensor, labels: Tensor, prefix: str) -> None:
    check_features(f"{prefix}_features", features)
    check_labels(f"{prefix}_labels", labels, features.shape[0], f"{prefix}_features")


def linear_probe(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    *,
    epochs: int = 100,
    lr: float = 0.1,
    batch_size: int = 256,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    schedule: str = "cosine",
    milestones: Sequence[int] = (60, 80),
    gamma: float = 0.1,
    warmup_epochs: float = 0.0,
    standardize: bool = True,
    num_classes: int | None = None,
    seed: int = 0,
) -> dict[str, object]:
    """Train a linear classifier on cached frozen features (fast variant of Denize et al. 2023,
    appendix D.1/D.2).

    Multinomial logistic regression ``softmax(W x + b)`` trained by mini-batch SGD with momentum
    on the cross-entropy, learning rate ``lr`` following ``schedule`` per iteration (see
    :class:`LinearProtocol`). Weights start at zero, so the result depends on ``seed`` only
    through the shuffling order. With ``standardize`` each feature is centred and scaled by the
    training mean and standard deviation; the returned classifier has this folded in:
    ``W' = W / sigma``, ``b' = b - W' mu``.

    Args:
        train_features: ``(N_train, D)`` cached features.
        train_labels: ``(N_train,)`` labels.
        test_features: ``(N_test, D)`` cached features.
        test_labels: ``(N_test,)`` labels.
        epochs, lr, batch_size, momentum, weight_decay, schedule, milestones, gamma,
            warmup_epochs: the :class:`LinearProtocol` fields (``lr`` already scaled).
        standardize: standardise features with training statistics.
        num_classes: number of classes (default: 1 + the largest train or test label).
        seed: seed of the shuffling generator.

    Returns:
        ``{"top1", "top5", "mean_per_class"}`` test fractions, ``"classifier"`` (``nn.Linear`` on
        raw features, in eval mode), ``"loss_curve"`` (mean training loss per epoch) and
        ``"train_top1_curve"`` / ``"test_top1_curve"`` (top-1 on all training / test features
        after each epoch: their gap shows overfitting).
    """
    _check_pair(train_features, train_labels, "train")
    _check_pair(test_features, test_labels, "test")
    check_same_dim("train_features", train_features, "test_features", test_features)
    protocol = LinearProtocol(
        epochs=epochs, lr=lr, momentum=momentum, weight_decay=weight_decay,
        batch_size=batch_size, schedule=schedule, milestones=tuple(milestones), gamma=gamma,
        warmup_epochs=warmup_epochs,
    )
    top = max(int(train_labels.max()), int(test_labels.max())) + 1
    classes = top if num_classes is None else num_classes
    if classes < top:
        raise ValueError(f"num_classes={num_classes} is smaller than the largest label + 1 ({top})")
    x = train_features.detach().to(torch.float32)
    device = x.device
    y = train_labels.to(device)
    mean = x.mean(dim=0) if standardize else torch.zeros(x.shape[1], device=device)
    std = x.std(dim=0).clamp_min(1e-6) if standardize and x.shape[0] > 1 else None
    std = std if std is not None else torch.ones(x.shape[1], device=device)
    x = (x - mean) / std
    linear = nn.Linear(x.shape[1], classes).to(device)
    nn.init.zeros_(linear.weight)
    nn.init.zeros_(linear.bias)
    optimizer = torch.optim.SGD(
        linear.parameters(), lr=protocol.scaled_lr, momentum=momentum, weight_decay=weight_decay
    )
    generator = torch.Generator().manual_seed(seed)
    n = x.shape[0]
    steps = math.ceil(n / batch_size)
    loss_curve: list[float] = []
    train_top1: list[float] = []
    test_top1: list[float] = []
    xt = (test_features.detach().to(device, torch.float32) - mean) / std
    yt = test_labels.to(device)
    for epoch in range(epochs):
        order = torch.randperm(n, generator=generator).to(device)
        total = 0.0
        for step in range(steps):
            idx = order[step * batch_size : (step + 1) * batch_size]
            for group in optimizer.param_groups:
                group["lr"] = protocol.lr_at(epoch + step / steps)
            loss = F.cross_entropy(linear(x[idx]), y[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * idx.shape[0]
        loss_curve.append(total / n)
        with torch.no_grad():
            train_top1.append(float((linear(x).argmax(1) == y).float().mean()))
            test_top1.append(float((linear(xt).argmax(1) == yt).float().mean()))
    with torch.no_grad():
        linear.weight.div_(std)
        linear.bias.sub_(linear.weight @ mean)
    linear.eval()
    with torch.no_grad():
        scores = linear(test_features.detach().to(device, torch.float32))
    report: dict[str, object] = dict(classification_report(scores, test_labels.to(device)))
    report["classifier"] = linear
    report["loss_curve"] = loss_curve
    report["train_top1_curve"] = train_top1
    report["test_top1_curve"] = test_top1
    return report


def sample_per_class(labels: Tensor, shots: int, seed: int = 0) -> Tensor:
    """Indices of ``shots`` examples of each class in ``labels``, drawn without replacement.

    Args:
        labels: ``(N,)`` integer labels.
        shots: examples per class.
        seed: seed of the sampling generator.

    Returns:
        Sorted ``(shots * num_present_classes,)`` long tensor of row indices.

    Raises:
        ValueError: when a class has fewer than ``shots`` examples.
    """
    check_labels("labels", labels, labels.shape[0] if isinstance(labels, Tensor) else 0, "labels")
    if isinstance(shots, bool) or not isinstance(shots, int) or shots < 1:
        raise ValueError(f"shots must be a positive int, got {shots!r}")
    generator = torch.Generator().manual_seed(seed)
    labels_cpu = labels.cpu()
    chosen = []
    for c in torch.unique(labels_cpu).tolist():
        members = torch.nonzero(labels_cpu == c).flatten()
        if members.numel() < shots:
            raise ValueError(f"class {c} has {members.numel()} examples, fewer than shots={shots}")
        chosen.append(members[torch.randperm(members.numel(), generator=generator)[:shots]])
    return torch.cat(chosen).sort().values.to(labels.device)


def lowshot_linear(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    shots: Sequence[int | None] = (16, 32, 64, None),
    seeds: Sequence[int] = (0, 1, 2),
    **probe_kwargs: object,
) -> dict[int | None, dict[str, object]]:
    """Low-shot linear evaluation (Denize et al. 2023, Table 10, protocol of Zheng et al. 2021:
    16/32/64/all images per class).

    For each ``shot`` and ``seed``, :func:`sample_per_class` draws ``shot`` training examples
    per class (``None`` = the whole training set) and :func:`linear_probe` is trained on them
    with ``seed``; the top-1 test accuracies are summarised over the seeds. SCE reports VOC07
    mAP of SVMs; this uses the linear probe's top-1 instead.

    Args:
        train_features, train_labels, test_features, test_labels: cached features and labels.
        shots: examples per class; ``None`` means all.
        seeds: one run per seed (sampling and probe shuffling).
        **probe_kwargs: keyword arguments of :func:`linear_probe`.

    Returns:
        ``{shot: {"mean": float, "std": float, "top1": [per seed], "num_train": int}}``; ``std``
        is the sample standard deviation (``ddof=1``; 0 for a single seed).
    """
    _check_pair(train_features, train_labels, "train")
    _check_pair(test_features, test_labels, "test")
    if not shots or not seeds:
        raise ValueError("shots and seeds must be non-empty")
    if "num_classes" not in probe_kwargs:
        probe_kwargs["num_classes"] = (
            max(int(train_labels.max()), int(test_labels.max())) + 1
        )
    results: dict[int | None, dict[str, object]] = {}
    for shot in shots:
        accuracies, num_train = [], train_features.shape[0]
        for seed in seeds:
            if shot is None:
                feats, labels = train_features, train_labels
            else:
                idx = sample_per_class(train_labels, shot, seed)
                feats, labels = train_features[idx], train_labels[idx.to(train_labels.device)]
            num_train = feats.shape[0]
            out = linear_probe(feats, labels, test_features, test_labels, seed=seed,
                               **probe_kwargs)  # type: ignore[arg-type]
            accuracies.append(float(out["top1"]))  # type: ignore[arg-type]
        acc = torch.tensor(accuracies, dtype=torch.float64)
        std = float(acc.std(unbiased=True)) if len(accuracies) > 1 else 0.0
        results[shot] = {"mean": float(acc.mean()), "std": std, "top1": accuracies,
                         "num_train": num_train}
    return results
