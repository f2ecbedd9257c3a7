"""Linear evaluation of a frozen backbone (SCE, Denize et al. 2023, appendix D.1, D.2, D.3;
low-shot: Table 10), every classifier trained by the one loop of :mod:`.classifier`.

* the protocols of SCE (:data:`SCE_D1`, :data:`SCE_D2`) as
  :class:`~contrastkit.eval.classifier.LinearProtocol` s;
* :func:`linear_probe`: the fast variant, on cached features (one forward pass of the backbone,
  no augmentation). Optionally standardises features; the returned ``nn.Linear`` acts on raw
  features (the standardisation is folded into its weights). With ``validation`` it holds out a
  stratified share of the training features (:func:`stratified_holdout`) and keeps the
  classifier of the epoch with the best validation top-1 (early stopping): on a small labelled
  set a probe otherwise ends where it fits its training images best. A split with fewer than
  :data:`MIN_VALIDATION_PER_CLASS` images in some class is too small to choose an epoch: the
  probe then trains on every training image and keeps the last epoch, and says so;
* :func:`train_linear_on_images`: the frozen backbone runs on every augmented training batch;
* :func:`lowshot_linear` on :func:`sample_per_class` draws, and the accuracies
  (:func:`classification_report`, :func:`mean_per_class_accuracy`).

Accuracies are fractions in [0, 1].
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.checks import check_features, check_labels, check_same_dim
from contrastkit.eval.classifier import LinearProtocol, MappedBatches, train_classifier
from contrastkit.eval.knn import topk_accuracy

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


#: The fewest held-out images of a class with which the validation split chooses the probe's
#: epoch. With ``n`` images a class's validation top-1 moves in steps of ``1 / n``: below 10
#: (steps of more than 10 points) the best epoch is picked on the noise of a few images (issue
#: 52: 4 images per class kept epoch 4 of 100).
MIN_VALIDATION_PER_CLASS = 10


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


class _Shuffled:
    """Batches of ``(features, labels)`` rows in a new random order each epoch (``generator``)."""

    def __init__(self, x: Tensor, y: Tensor, batch_size: int, generator: torch.Generator) -> None:
        self.x, self.y, self.batch_size, self.generator = x, y, batch_size, generator

    def __len__(self) -> int:
        return math.ceil(self.x.shape[0] / self.batch_size)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        order = torch.randperm(self.x.shape[0], generator=self.generator).to(self.x.device)
        for step in range(len(self)):
            idx = order[step * self.batch_size : (step + 1) * self.batch_size]
            yield self.x[idx], self.y[idx]


def linear_probe(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    protocol: LinearProtocol | None = None,
    *,
    standardize: bool = True,
    num_classes: int | None = None,
    seed: int = 0,
    validation: float = 0.0,
) -> dict[str, object]:
    """Train a linear classifier on cached frozen features (fast variant of Denize et al. 2023,
    appendix D.1/D.2).

    Multinomial logistic regression ``softmax(W x + b)`` trained by mini-batch SGD with momentum
    on the cross-entropy (:func:`~contrastkit.eval.classifier.train_classifier`), learning rate
    following ``protocol`` per iteration. Weights start at zero, so the result depends on
    ``seed`` only through the shuffling order. With ``standardize`` each feature is centred and
    scaled by the training mean and standard deviation; the returned classifier has this folded
    in: ``W' = W / sigma``, ``b' = b - W' mu``.

    With ``validation = f > 0`` the share ``f`` of each class's training rows
    (:func:`stratified_holdout`, seeded by ``seed``) is held out: the probe trains on the rest
    (statistics included) and, after every epoch, its top-1 on the held-out rows is measured;
    the weights of the epoch with the highest validation top-1 (ties: the lower validation
    cross-entropy, then the earlier epoch) are the ones returned (early stopping). When some
    class would hold out fewer than :data:`MIN_VALIDATION_PER_CLASS` rows, nothing is held out:
    the probe trains on every row and returns the last epoch's weights, as with
    ``validation = 0``, and the result says why (``"validation_too_small"``).

    Args:
        train_features: ``(N_train, D)`` cached features.
        train_labels: ``(N_train,)`` labels.
        test_features: ``(N_test, D)`` cached features.
        test_labels: ``(N_test,)`` labels.
        protocol: the recipe (default: ``LinearProtocol()``, 100 epochs of cosine decay from
            0.1, batch 256).
        standardize: standardise features with training statistics.
        num_classes: number of classes (default: 1 + the largest train or test label).
        seed: seed of the shuffling generator and of the validation draw.
        validation: share of each class's training rows held out to choose the epoch
            (0, or a split too small: none, the last epoch's weights).

    Returns:
        ``{"top1", "top5", "mean_per_class"}`` test fractions, ``"classifier"`` (``nn.Linear`` on
        raw features, in eval mode), ``"loss_curve"`` (mean training loss per epoch) and
        ``"train_top1_curve"`` / ``"test_top1_curve"`` (top-1 on the features it trains on /
        the test features after each epoch: their gap shows overfitting). With ``validation``
        also ``"val_top1_curve"``, ``"best_epoch"`` (1-based), ``"num_validation"`` and
        ``"num_fit"``; when the split was too small instead ``"validation_too_small"``:
        ``{"fewest", "most"}`` (the held-out rows of the smallest and largest class) and
        ``"minimum"`` (:data:`MIN_VALIDATION_PER_CLASS`).
    """
    protocol = LinearProtocol() if protocol is None else protocol
    _check_pair(train_features, train_labels, "train")
    _check_pair(test_features, test_labels, "test")
    check_same_dim("train_features", train_features, "test_features", test_features)
    top = max(int(train_labels.max()), int(test_labels.max())) + 1
    classes = top if num_classes is None else num_classes
    if classes < top:
        raise ValueError(f"num_classes={num_classes} is smaller than the largest label + 1 ({top})")
    x = train_features.detach().to(torch.float32)
    device = x.device
    y = train_labels.to(device)
    held: tuple[Tensor, Tensor] | None = None
    too_small: dict[str, int] | None = None
    if validation:
        too_small = _too_small(train_labels, validation)
        if too_small is None:
            fit, val = stratified_holdout(train_labels, validation, seed)
            fit, val = fit.to(device), val.to(device)
            held = x[val], y[val]
            x, y = x[fit], y[fit]
    mean = x.mean(dim=0) if standardize else torch.zeros(x.shape[1], device=device)
    std = x.std(dim=0).clamp_min(1e-6) if standardize and x.shape[0] > 1 else None
    std = std if std is not None else torch.ones(x.shape[1], device=device)
    x = (x - mean) / std
    linear = nn.Linear(x.shape[1], classes).to(device)
    nn.init.zeros_(linear.weight)
    nn.init.zeros_(linear.bias)
    train_top1: list[float] = []
    test_top1: list[float] = []
    val_top1: list[float] = []
    xt = (test_features.detach().to(device, torch.float32) - mean) / std
    yt = test_labels.to(device)
    xv = None if held is None else (held[0] - mean) / std
    best: tuple[float, float] | None = None
    best_state: dict[str, Tensor] = {}

    def accuracies(epoch: int, loss: float) -> None:
        nonlocal best
        with torch.no_grad():
            train_top1.append(float((linear(x).argmax(1) == y).float().mean()))
            test_top1.append(float((linear(xt).argmax(1) == yt).float().mean()))
            if xv is None or held is None:
                return
            scores = linear(xv)
            val_top1.append(float((scores.argmax(1) == held[1]).float().mean()))
            key = (val_top1[-1], -float(F.cross_entropy(scores, held[1])))
            if best is None or key > best:
                best = key
                best_state.update(epoch=torch.tensor(epoch + 1), **{
                    k: v.detach().clone() for k, v in linear.state_dict().items()})

    batches = _Shuffled(x, y, protocol.batch_size, torch.Generator().manual_seed(seed))
    run = train_classifier(linear, batches, protocol, epoch_end=accuracies)
    best_epoch = int(best_state.pop("epoch")) if best_state else None
    if best_state:
        linear.load_state_dict(best_state)
    with torch.no_grad():
        linear.weight.div_(std)
        linear.bias.sub_(linear.weight @ mean)
    linear.eval()
    with torch.no_grad():
        scores = linear(test_features.detach().to(device, torch.float32))
    report: dict[str, object] = dict(classification_report(scores, test_labels.to(device)))
    report["classifier"] = linear
    report["loss_curve"] = run.loss_curve
    report["train_top1_curve"] = train_top1
    report["test_top1_curve"] = test_top1
    if held is not None:
        report.update(val_top1_curve=val_top1, best_epoch=best_epoch,
                      num_validation=int(held[1].shape[0]), num_fit=int(y.shape[0]))
    if too_small is not None:
        report["validation_too_small"] = too_small
    return report


def _too_small(labels: Tensor, fraction: float) -> dict[str, int] | None:
    """``{"fewest", "most", "minimum"}`` (held-out rows of the smallest and largest class, and
    :data:`MIN_VALIDATION_PER_CLASS`) when :func:`stratified_holdout` would hold out fewer than
    that minimum of some class of ``labels``, else None."""
    _check_holdout(labels, fraction)
    sizes = torch.bincount(labels.cpu())
    counts = [_held_count(int(n), fraction) for n in sizes[sizes > 0].tolist()]
    if min(counts) >= MIN_VALIDATION_PER_CLASS:
        return None
    return {"fewest": min(counts), "most": max(counts), "minimum": MIN_VALIDATION_PER_CLASS}


def too_small_text(too_small: dict[str, int]) -> str:
    """``4 images per class, fewer than the 10 needed to choose an epoch``: a
    ``"validation_too_small"`` record of :func:`linear_probe` in words (``3 to 5 images per
    class`` when classes differ)."""
    fewest, most = too_small["fewest"], too_small["most"]
    count = str(fewest) if fewest == most else f"{fewest} to {most}"
    return (f"{count} images per class, fewer than the {too_small['minimum']} needed to choose "
            "an epoch")


def _held_count(size: int, fraction: float) -> int:
    """Rows of a class of ``size`` rows that :func:`stratified_holdout` holds out."""
    return min(max(1, round(fraction * size)), size - 1)


def _check_holdout(labels: Tensor, fraction: float) -> None:
    check_labels("labels", labels, labels.shape[0] if isinstance(labels, Tensor) else 0, "labels")
    if not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"the validation fraction must lie in (0, 1), got {fraction}")


def stratified_holdout(labels: Tensor, fraction: float, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Indices ``(fit, held_out)`` splitting each class of ``labels``: ``round(fraction * n_c)``
    of its ``n_c`` rows held out, at least one and at most ``n_c - 1`` (a class of one row stays
    whole in ``fit``), drawn with ``torch.Generator().manual_seed(seed)``.

    Raises:
        ValueError: for a ``fraction`` outside (0, 1) or when no row can be held out.
    """
    _check_holdout(labels, fraction)
    generator = torch.Generator().manual_seed(seed)
    labels_cpu = labels.cpu()
    fit, held = [], []
    for c in torch.unique(labels_cpu).tolist():
        members = torch.nonzero(labels_cpu == c).flatten()
        members = members[torch.randperm(members.numel(), generator=generator)]
        count = _held_count(members.numel(), fraction)
        held.append(members[:count])
        fit.append(members[count:])
    held_out = torch.cat(held).sort().values
    if held_out.numel() == 0:
        raise ValueError("no training row can be held out for validation: every class has "
                         "one example")
    return torch.cat(fit).sort().values, held_out


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
    protocol: LinearProtocol | None = None,
    *,
    standardize: bool = True,
    num_classes: int | None = None,
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
        protocol, standardize: as :func:`linear_probe`.
        num_classes: classes of every probe (default: 1 + the largest train or test label).

    Returns:
        ``{shot: {"mean": float, "std": float, "top1": [per seed], "num_train": int, "pred":
        (seeds, N_test) test predictions}}``; ``std`` is the sample standard deviation
        (``ddof=1``; 0 for a single seed).
    """
    _check_pair(train_features, train_labels, "train")
    _check_pair(test_features, test_labels, "test")
    if not shots or not seeds:
        raise ValueError("shots and seeds must be non-empty")
    if num_classes is None:
        num_classes = max(int(train_labels.max()), int(test_labels.max())) + 1
    results: dict[int | None, dict[str, object]] = {}
    for shot in shots:
        accuracies, num_train, predictions = [], train_features.shape[0], []
        for seed in seeds:
            if shot is None:
                feats, labels = train_features, train_labels
            else:
                idx = sample_per_class(train_labels, shot, seed)
                feats, labels = train_features[idx], train_labels[idx.to(train_labels.device)]
            num_train = feats.shape[0]
            out = linear_probe(feats, labels, test_features, test_labels, protocol,
                               standardize=standardize, num_classes=num_classes, seed=seed)
            accuracies.append(float(out["top1"]))  # type: ignore[arg-type]
            with torch.no_grad():
                predictions.append(out["classifier"](  # type: ignore[operator]
                    test_features.detach().float()).argmax(dim=1).cpu())
        acc = torch.tensor(accuracies, dtype=torch.float64)
        std = float(acc.std(unbiased=True)) if len(accuracies) > 1 else 0.0
        results[shot] = {"mean": float(acc.mean()), "std": std, "top1": accuracies,
                         "num_train": num_train, "pred": torch.stack(predictions)}
    return results


def _pairs(batch: object) -> tuple[Tensor, Tensor]:
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise ValueError("loaders must yield (images, labels) batches")
    return batch[0], batch[1]


def train_linear_on_images(
    features_fn: Callable[[Tensor], Tensor],
    train_loader: Iterable,
    test_loader: Iterable,
    protocol: LinearProtocol,
    train_transform: Callable[[Tensor], Tensor] | None,
    test_transform: Callable[[Tensor], Tensor] | None,
    num_classes: int,
    *,
    device: torch.device | str | None = None,
    seed: int = 0,
) -> dict[str, object]:
    """Linear evaluation on augmented images with a frozen backbone (Denize et al. 2023,
    appendix D.1/D.2; clips: D.3).

    Every training batch ``(images, labels)`` is augmented by ``train_transform`` (e.g. random
    resized crop 0.08-1 + horizontal flip), embedded by ``features_fn`` under ``torch.no_grad``
    (the backbone is frozen: no gradient reaches it) and used for one SGD step of a linear layer
    on the cross-entropy (:func:`~contrastkit.eval.classifier.train_classifier`). The learning
    rate follows ``protocol`` per iteration when ``len(train_loader)`` is known, else per epoch.
    Test batches go through ``test_transform`` (e.g. resize 256 + centre crop 224). The loader's
    ``batch_size`` should match ``protocol.batch_size``, which sets the learning-rate scaling.

    Args:
        features_fn: frozen backbone, ``images -> (B, D)`` features.
        train_loader: iterable of ``(images, labels)`` re-iterable once per epoch.
        test_loader: iterable of ``(images, labels)``.
        protocol: e.g. :data:`SCE_D1` or :data:`SCE_D2`.
        train_transform: batched augmentation ``images -> images`` (None = identity).
        test_transform: batched evaluation transform (None = identity).
        num_classes: number of classes.
        device: device of the linear layer (default: the features' device).
        seed: seed of torch's global generator while training (for the augmentations).

    Returns:
        ``{"top1", "top5", "mean_per_class", "classifier", "loss_curve"}`` as in
        :func:`linear_probe`.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an int >= 2, got {num_classes!r}")
    if not isinstance(protocol, LinearProtocol):
        raise ValueError(f"protocol must be a LinearProtocol, got {type(protocol).__name__}")
    identity: Callable[[Tensor], Tensor] = lambda images: images  # noqa: E731
    train_tf, test_tf = train_transform or identity, test_transform or identity

    def embed(images: Tensor, transform: Callable[[Tensor], Tensor]) -> Tensor:
        with torch.no_grad():
            feats = features_fn(transform(images))
        check_features("features_fn output", feats)
        return feats.detach().float()

    def features(batch: object) -> tuple[Tensor, Tensor]:
        images, labels = _pairs(batch)
        feats = embed(images, train_tf)
        check_labels("labels", labels, feats.shape[0], "features_fn output")
        target = device or feats.device
        return feats.to(target), labels.to(target)

    batches = MappedBatches(train_loader, features)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        epoch0 = iter(batches)
        first = next(epoch0, None)  # the features' width sizes the classifier
        if first is None:
            raise ValueError("train_loader yielded no batch")
        linear = nn.Linear(first[0].shape[1], num_classes).to(first[0].device)
        nn.init.zeros_(linear.weight)
        nn.init.zeros_(linear.bias)
        run = train_classifier(linear, _Started(first, epoch0, batches), protocol)
    linear.eval()
    all_scores, all_labels = [], []
    with torch.no_grad():
        for batch in test_loader:
            images, labels = _pairs(batch)
            all_scores.append(linear(embed(images, test_tf).to(linear.weight.device)))
            all_labels.append(labels.to(linear.weight.device))
    if not all_scores:
        raise ValueError("test_loader yielded no batch")
    report: dict[str, object] = dict(
        classification_report(torch.cat(all_scores), torch.cat(all_labels))
    )
    report["classifier"] = linear
    report["loss_curve"] = run.loss_curve
    return report


class _Started:
    """``batches`` whose first epoch is already under way: ``first`` was drawn from the
    iteration ``rest`` (which the first epoch finishes, so every random draw keeps its order);
    the next epochs iterate ``batches`` afresh."""

    def __init__(self, first: tuple[Tensor, Tensor], rest: Iterator[tuple[Tensor, Tensor]],
                 batches: MappedBatches) -> None:
        self.first, self.rest, self.batches, self.started = first, rest, batches, True

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        if self.started:
            self.started = False
            return itertools.chain([self.first], self.rest)
        return iter(self.batches)
