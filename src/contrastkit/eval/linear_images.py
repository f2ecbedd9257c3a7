"""Linear evaluation on augmented images with a frozen backbone (SCE, Denize et al. 2023,
appendix D.1, D.2, D.3).

Unlike :func:`contrastkit.eval.linear.linear_probe` (cached features, no augmentation), the
frozen backbone runs on every augmented training batch; the protocol's hyper-parameters are a
:class:`~contrastkit.eval.linear.LinearProtocol`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.checks import check_features, check_labels
from contrastkit.eval.linear import LinearProtocol, classification_report

__all__ = ["train_linear_on_images"]


def _batches(loader: Iterable) -> Iterable[tuple[Tensor, Tensor]]:
    for batch in loader:
        if not isinstance(batch, (tuple, list)) or len(batch) < 2:
            raise ValueError("loaders must yield (images, labels) batches")
        yield batch[0], batch[1]


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
    appendix D.1/D.2).

    Every training batch ``(images, labels)`` is augmented by ``train_transform`` (e.g. random
    resized crop 0.08-1 + horizontal flip), embedded by ``features_fn`` under ``torch.no_grad``
    (the backbone is frozen: no gradient reaches it) and used for one SGD step of a linear layer
    on the cross-entropy. The learning rate follows ``protocol`` per iteration when
    ``len(train_loader)`` is known, else per epoch. Test batches go through ``test_transform``
    (e.g. resize 256 + centre crop 224). The loader's ``batch_size`` should match
    ``protocol.batch_size``, which sets the learning-rate scaling.

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
    try:
        steps: int | None = len(train_loader)  # type: ignore[arg-type]
    except TypeError:
        steps = None
    identity: Callable[[Tensor], Tensor] = lambda images: images  # noqa: E731
    train_tf, test_tf = train_transform or identity, test_transform or identity

    def embed(images: Tensor, transform: Callable[[Tensor], Tensor]) -> Tensor:
        with torch.no_grad():
            feats = features_fn(transform(images))
        check_features("features_fn output", feats)
        return feats.detach().float()

    linear: nn.Linear | None = None
    optimizer: torch.optim.Optimizer | None = None
    loss_curve: list[float] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for epoch in range(protocol.epochs):
            total, count = 0.0, 0
            for step, (images, labels) in enumerate(_batches(train_loader)):
                feats = embed(images, train_tf)
                if linear is None:
                    linear = nn.Linear(feats.shape[1], num_classes).to(device or feats.device)
                    nn.init.zeros_(linear.weight)
                    nn.init.zeros_(linear.bias)
                    optimizer = torch.optim.SGD(
                        linear.parameters(), lr=protocol.scaled_lr, momentum=protocol.momentum,
                        weight_decay=protocol.weight_decay,
                    )
                assert optimizer is not None
                check_labels("labels", labels, feats.shape[0], "features_fn output")
                feats, labels = feats.to(linear.weight.device), labels.to(linear.weight.device)
                for group in optimizer.param_groups:
                    group["lr"] = protocol.lr_at(epoch + (step / steps if steps else 0.0))
                loss = F.cross_entropy(linear(feats), labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += float(loss.detach()) * labels.shape[0]
                count += labels.shape[0]
            if count == 0:
                raise ValueError("train_loader yielded no batch")
            loss_curve.append(total / count)
    assert linear is not None
    linear.eval()
    all_scores, all_labels = [], []
    with torch.no_grad():
        for images, labels in _batches(test_loader):
            all_scores.append(linear(embed(images, test_tf).to(linear.weight.device)))
            all_labels.append(labels.to(linear.weight.device))
    if not all_scores:
        raise ValueError("test_loader yielded no batch")
    report: dict[str, object] = dict(
        classification_report(torch.cat(all_scores), torch.cat(all_labels))
    )
    report["classifier"] = linear
    report["loss_curve"] = loss_curve
    return report
