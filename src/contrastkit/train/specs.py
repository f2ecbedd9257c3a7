"""Configuration records of the pretraining engine (validated by jsonargparse from YAML)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class MultiCropSpec:
    """Multi-crop views (SCE appendix D.2): 2 global crops plus local crops (queries only).

    Attributes:
        global_scale: random-resized-crop scale range of the global crops.
        local_sizes: output size of each local crop (one crop per entry).
        local_scales: scale range of each local crop.
        local_preset: augmentation preset of the local crops (SCE: ``strong_gamma``).
    """

    global_scale: tuple[float, float] = (0.2, 1.0)
    local_sizes: tuple[int, ...] = (192, 160, 128, 96)
    local_scales: tuple[tuple[float, float], ...] = (
        (0.172, 0.86), (0.143, 0.715), (0.114, 0.571), (0.086, 0.429),
    )
    local_preset: str = "strong_gamma"


@dataclass(frozen=True)
class ViewsSpec:
    """How the two (or more) views of a batch are made, on the batch's device.

    Attributes:
        online: augmentation preset of view 0 (online branch); ``None``: the method's default.
        target: preset of view 1 (target branch, or the second online view); ``None``: default.
        size: output size of the global views.
        jitter_strength: colour-jitter strength multiplier (``None``: the preset's default).
        crop_scale: random-resized-crop scale range of the pretraining views (``None``: the
            preset's default, (0.2, 1.0) for SCE's presets, (0.08, 1.0) for SimCLR's).
        normalize: per-dataset normalisation name (``cifar10``, ``imagenet``...) or ``None``.
        eval_resize: evaluation views (kNN monitor): resize to ``size`` (small datasets) or
            resize to ``size * 256 / 224`` and centre-crop (large datasets).
        multicrop: extra local crops (SCE, MoCo and ReSSL only).
    """

    online: str | None = None
    target: str | None = None
    size: int = 32
    jitter_strength: float | None = None
    crop_scale: tuple[float, float] | None = None
    normalize: str | None = None
    eval_resize: Literal["small", "large"] = "small"
    multicrop: MultiCropSpec | None = None


@dataclass(frozen=True)
class OptimizerSpec:
    """Optimiser and learning-rate schedule (SCE appendix D.1/D.2).

    Attributes:
        name: ``sgd``, ``lars`` or ``adamw``.
        base_lr: learning rate for a global batch of 256; scaled linearly with the global
            batch (``lr = base_lr * global_batch / 256``) unless ``scale_lr`` is False.
        weight_decay: decay of weights (biases and norm parameters are excluded).
        momentum: SGD/LARS momentum.
        warmup_epochs: linear warm-up length, then cosine decay to ``final_lr_ratio * lr``.
        final_lr_ratio: final learning rate as a fraction of the peak.
        warmup_start_ratio: learning rate at step 0 as a fraction of the peak (warm-up start).
        scale_lr: apply the linear scaling rule.
        online_lr: learning rate of the online linear classifier (SGD, no decay).
    """

    name: Literal["sgd", "lars", "adamw"] = "sgd"
    base_lr: float = 0.06
    weight_decay: float = 5e-4
    momentum: float = 0.9
    warmup_epochs: float = 5.0
    final_lr_ratio: float = 0.0
    warmup_start_ratio: float = 0.0
    scale_lr: bool = True
    online_lr: float = 0.1


@dataclass(frozen=True)
class OnlineEvalSpec:
    """Monitors that never change the backbone.

    Attributes:
        linear: train a linear classifier on detached backbone features during pretraining.
        knn: run a weighted kNN monitor on the validation split every ``every_n_epochs``.
        knn_k: neighbours of the kNN monitor.
        knn_temperature: temperature of the kNN vote weights exp(s / t).
    """

    linear: bool = True
    knn: bool = True
    knn_k: int = 20
    knn_temperature: float = 0.07


@dataclass
class RunInfo:
    """Facts about the run stored in each checkpoint for evaluation and export."""

    backbone: dict = field(default_factory=dict)
    method: str = ""
    num_classes: int = 0
