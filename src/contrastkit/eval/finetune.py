"""Fine-tuning of a pretrained clip backbone (Denize et al. 2023, SCE appendix D.3; UCF101, HMDB51).

SCE D.3 (after Feichtenhofer et al., 2021): the whole pretrained network is trained with a
classifier for 200 epochs, with dropout of probability 0.8 before the classifier; SGD momentum
0.9 without weight decay, initial learning rate 0.1 for a batch of 64 under the linear scaling
rule (``lr = 0.1 * batch / 64``), cosine annealing without warm-up. Training views: a random
clip, a random ``size`` crop after short-side scaling (the loader's ``crop_size``), colour
jittering with SCE's *strong* parameters and a horizontal flip with probability 0.5, with the
same parameters on every frame of a clip. Evaluation: the 30 views (10 clips x 3 crops) of each
test video; the logits of a linear classifier on the averaged features equal the average of the
views' logits (our reading of "the mean average of the predictions of the 30 clips").

The learning rate follows, per optimiser step ``s`` of ``S``,
``lr_s = lr * batch / 64 * (1 + cos(pi * s / S)) / 2`` (the loop of :mod:`.classifier`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from contrastkit.eval.classifier import LinearProtocol, MappedBatches, train_classifier

__all__ = ["SCE_D3_FINETUNE", "FinetuneProtocol", "VideoClassifier", "finetune_video"]


@dataclass(frozen=True)
class FinetuneProtocol(LinearProtocol):
    """Hyper-parameters of fine-tuning: a :class:`~contrastkit.eval.classifier.LinearProtocol`
    with SCE D.3's values (200 epochs, lr 0.1 for a batch of 64, cosine without warm-up, no
    weight decay) and what fine-tuning adds.

    Attributes:
        dropout: dropout probability before the classifier (0.8).
        jitter_strength: colour-jitter strength of the training views (0.5: SCE Table 1's
            *strong* values; 0: flip only).
    """

    epochs: int = 200
    lr: float = 0.1
    batch_size: int = 64
    schedule: str = "cosine"
    lr_reference_batch: int | None = 64
    dropout: float = 0.8
    jitter_strength: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if self.jitter_strength < 0:
            raise ValueError(f"jitter_strength must be >= 0, got {self.jitter_strength}")


#: SCE appendix D.3 fine-tuning on UCF101 / HMDB51.
SCE_D3_FINETUNE = FinetuneProtocol()


class VideoClassifier(nn.Module):
    """``backbone -> dropout -> linear`` on clips; evaluation batches of ``V`` views per video
    are averaged before the classifier (see :class:`~contrastkit.eval.video.MultiViewEncoder`).
    """

    def __init__(self, backbone: nn.Module, num_classes: int, dropout: float,
                 normalize: str | None = None) -> None:
        super().__init__()
        from contrastkit.data.augment.views import VideoEvalView
        from contrastkit.eval.video import MultiViewEncoder

        out_dim = getattr(backbone, "out_dim", None)
        if not isinstance(out_dim, int):
            raise ValueError("backbone must expose an int out_dim")
        self.encoder = MultiViewEncoder(backbone, VideoEvalView(None, normalize=normalize))
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(out_dim, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.dropout(self.encoder(x)))


def finetune_video(
    backbone: nn.Module,
    train_set: Dataset,
    test_set: Dataset,
    num_classes: int,
    *,
    size: int,
    protocol: FinetuneProtocol = SCE_D3_FINETUNE,
    normalize: str | None = None,
    device: torch.device | str = "cpu",
    seed: int = 0,
    max_steps: int | None = None,
    num_workers: int = 0,
) -> dict[str, object]:
    """Fine-tune a copy of ``backbone`` with a dropout + linear classifier (Denize et al. 2023,
    appendix D.3).

    Args:
        backbone: pretrained clip backbone ``(B, 3, T, H, W) -> (B, D)`` with ``out_dim``
            (copied: the caller's module is left unchanged).
        train_set: items ``(uint8 clip (T, C, size, size), label)``: a video dataset with
            ``mode="train"``, ``num_clips=1`` and ``crop_size=size`` (random clip and crop).
        test_set: items ``(uint8 views (V, T, C, S, S), label)``: ``mode="eval"`` (30 views).
        num_classes: classes of the classifier.
        size: side of the training crops (for the colour/flip transform).
        protocol: hyper-parameters (default :data:`SCE_D3_FINETUNE`).
        normalize: normalisation name of the backbone's input (as in pretraining).
        device: training device.
        seed: seed of the shuffling, dropout, augmentations and classifier initialisation.
        max_steps: stop after this many optimiser steps (the cosine schedule spans them).
        num_workers: loader processes.

    Returns:
        ``{"top1", "top5", "mean_per_class", "model", "loss_curve", "lr_curve", "steps",
        "scores", "labels"}``: ``loss_curve`` per epoch, ``lr_curve`` per step, accuracies in
        [0, 1], test ``scores`` ``(N, C)`` (logits of the averaged views) and ``labels``.

    Raises:
        ValueError: bad ``num_classes``, ``max_steps`` or an empty dataset.
    """
    from contrastkit.eval.linear import classification_report
    from contrastkit.eval.video import flip_only_transform

    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an int >= 2, got {num_classes!r}")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if len(train_set) == 0 or len(test_set) == 0:  # type: ignore[arg-type]
        raise ValueError("train_set and test_set must not be empty")
    device = torch.device(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = VideoClassifier(copy.deepcopy(backbone), num_classes, protocol.dropout,
                                normalize).to(device)
        transform = flip_only_transform(size, normalize, protocol.jitter_strength)
        generator = torch.Generator().manual_seed(seed)
        drop_last = len(train_set) >= protocol.batch_size  # type: ignore[arg-type]
        loader = DataLoader(train_set, batch_size=protocol.batch_size, shuffle=True,
                            generator=generator, drop_last=drop_last, num_workers=num_workers)
        batches = MappedBatches(loader, lambda batch: (
            transform(batch[0].to(device)), torch.as_tensor(batch[1]).to(device)))
        run = train_classifier(model, batches, protocol, max_steps=max_steps)
        model.eval()
        scores, targets = [], []
        test_loader = DataLoader(test_set, batch_size=max(1, protocol.batch_size // 8),
                                 num_workers=num_workers)
        with torch.no_grad():
            for views, labels in test_loader:
                scores.append(model(views.to(device)).float().cpu())
                targets.append(torch.as_tensor(labels).long())
    all_scores, all_labels = torch.cat(scores), torch.cat(targets)
    result: dict[str, object] = dict(classification_report(all_scores, all_labels))
    result.update(model=model, loss_curve=run.loss_curve, lr_curve=run.lr_curve,
                  steps=run.steps, scores=all_scores, labels=all_labels)
    return result
