"""Configuration records of the pretraining engine (validated by jsonargparse from YAML)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from contrastkit.checks import check_non_negative_float, check_positive_float


@dataclass(frozen=True)
class OptimizerSpec:
    """Optimiser and learning-rate schedule (Denize et al. 2023, appendix D.1/D.2).

    Attributes:
        name: ``sgd``, ``lars``, ``adamw`` or ``adam`` (L2 weight decay added to the gradient:
            lightly's CIFAR-10 SwAV benchmark).
        base_lr: learning rate for a global batch of 256; scaled linearly with the global
            batch (``lr = base_lr * global_batch / 256``) unless ``scale_lr`` is False.
        weight_decay: weight decay of the decayed parameters.
        exclude_bias_and_norm: True: biases, other 1-D parameters and normalisation
            parameters get no weight decay and no LARS adaptation (SCE appendices D.2/D.3,
            its LARS recipes); False: every parameter is decayed (and adapted by LARS), our
            reading of the SGD recipes, which name no exclusion (Denize et al. 2023, D.1;
            Manna et al. 2023, A.1; Feeney & Hughes 2023, appendix J; configs/README.md).
        momentum: SGD/LARS momentum.
        warmup_epochs: linear warm-up length, then cosine decay to ``final_lr_ratio * lr``;
            more than a quarter of ``trainer.max_epochs`` is clipped to a quarter, with a
            notice (:func:`contrastkit.optim.resolve_warmup_epochs`).
        warmup_fraction: warm-up as a share of the run in [0, 1); set, it replaces
            ``warmup_epochs`` (a warm-up that follows ``trainer.max_epochs``).
        final_lr_ratio: final learning rate as a fraction of the peak.
        warmup_start_ratio: learning rate at step 0 as a fraction of the peak (warm-up start).
        scale_lr: apply the linear scaling rule.
        online_lr: learning rate of the online linear classifier (SGD, no decay).
        clip_grad_per_parameter: clip each of the method's parameter gradients to this L2
            norm on its own before every optimiser step (DINO's ``--clip_grad 3.0``;
            :func:`contrastkit.gradients.clip_grad_norm_per_parameter_`); ``None``: no
            clipping. Not ``trainer.gradient_clip_val``, which clips the joint norm of all
            gradients by one factor.
        eta: LARS trust coefficient (0.001: SimCLR, SCE and the official BYOL, MoCo v3, SwAV,
            Barlow Twins and VICReg codes; 0.02: solo-learn's CIFAR and ImageNet-100 configs).
        clip_lr: LARS caps each adapted learning rate at the scheduled one (solo-learn's
            ``clip_lr``; :class:`contrastkit.optim.LARS`).
        trust_ratio: denominator of the LARS trust ratio: ``paper`` (``||g|| + wd ||w||``,
            You et al. 2017; solo-learn, SCE, Apex's LARC) or ``update`` (``||g + wd w||``: the
            official BYOL, MoCo v3, Barlow Twins and VICReg codes).
        excluded_lr_ratio: learning rate of the excluded parameters (biases and normalisation
            parameters, with ``exclude_bias_and_norm``) as a fraction of the others' (the
            official Barlow Twins code: 0.0048 / 0.2 = 0.024).
    """

    name: Literal["sgd", "lars", "adamw", "adam"] = "sgd"
    base_lr: float = 0.06
    weight_decay: float = 5e-4
    exclude_bias_and_norm: bool = True
    momentum: float = 0.9
    warmup_epochs: float = 5.0
    warmup_fraction: float | None = None
    final_lr_ratio: float = 0.0
    warmup_start_ratio: float = 0.0
    scale_lr: bool = True
    online_lr: float = 0.1
    clip_grad_per_parameter: float | None = None
    eta: float = 0.001
    clip_lr: bool = False
    trust_ratio: Literal["paper", "update"] = "paper"
    excluded_lr_ratio: float = 1.0

    def __post_init__(self) -> None:
        """Refuse a learning rate that is not a finite number >= 0 (0: the random-init
        baseline's one step that changes no weight; the online classifier's must be > 0), a
        negative weight decay (naming the key and the value given: torch named the scaled rate,
        not the key), a LARS option with another optimiser, and LARS settings out of range."""
        check_non_negative_float("model.optimizer.base_lr", self.base_lr)
        check_positive_float("model.optimizer.online_lr", self.online_lr)
        check_non_negative_float("model.optimizer.weight_decay", self.weight_decay)
        lars_only = [f"optimizer.{key}" for key, default in LARS_DEFAULTS.items()
                     if getattr(self, key) != default]
        if lars_only and self.name != "lars":
            raise ValueError(f"{', '.join(lars_only)} applies to LARS: set optimizer.name lars "
                             f"(it is {self.name})")
        if not self.eta > 0:
            raise ValueError(f"optimizer.eta must be > 0, got {self.eta}")
        if not self.excluded_lr_ratio >= 0:
            raise ValueError(f"optimizer.excluded_lr_ratio must be >= 0, got "
                             f"{self.excluded_lr_ratio}")
        if self.excluded_lr_ratio != 1.0 and not self.exclude_bias_and_norm:
            raise ValueError("optimizer.excluded_lr_ratio applies to the parameters "
                             "optimizer.exclude_bias_and_norm excludes: set it to true")


#: The optimiser settings that only LARS reads, and their defaults.
LARS_DEFAULTS = {"eta": 0.001, "clip_lr": False, "trust_ratio": "paper"}


@dataclass(frozen=True)
class PerformanceSpec:
    """How the training step runs on the device; what it computes does not change.

    Attributes:
        channels_last: keep 2-D backbones, heads and their input views in channels-last
            (NHWC) memory layout, which cuDNN's convolutions prefer (bf16 especially);
            ``None``: on CUDA devices only. Video (3-D) backbones are left as they are.
        compile: ``torch.compile`` the online and target encoders (backbone, projector,
            predictor) in place (``nn.Module.compile``: parameter names and checkpoints are
            unchanged); with ``step: captured``, the step's forward half instead (views,
            encoders, loss: ``fullgraph=True``), then captured with the rest. Off by
            default: compilation costs about a minute at start-up and needs the device's
            compiler tool chain; see ``docs/performance.md``.
        compile_mode: ``torch.compile`` mode of the eager step's encoders: ``default``,
            ``reduce-overhead`` (CUDA graphs) or ``max-autotune``.
        step: ``eager`` (default): Lightning's automatic optimisation, one operator at a time;
            ``captured``: the whole step (views to queue write) written on device tensors and,
            on CUDA, recorded once as a CUDA graph and replayed
            (:mod:`contrastkit.train.captured_step`; on the CPU it runs the same code step by
            step). Eager stays the default until the captured step is measured faster on a
            GPU (``docs/performance.md``).
    """

    channels_last: bool | None = None
    compile: bool = False
    compile_mode: Literal["default", "reduce-overhead", "max-autotune"] = "default"
    step: Literal["eager", "captured"] = "eager"


@dataclass(frozen=True)
class OnlineEvalSpec:
    """Monitors that never change the backbone.

    Both are scored in Lightning's validation pass, every ``trainer.check_val_every_n_epoch``
    epochs, on the data module's ``val_split``; a monitor that is off reads nothing, and with
    both off there is no validation pass at all (``docs/configs.md``, "Online monitors").

    Attributes:
        linear: train a linear classifier on detached backbone features during pretraining
            (scored on the queries of the validation split).
        knn: a weighted kNN monitor: the features of the bank split vote for those of the
            validation split (``val/knn_top1``, which chooses ``best.ckpt``).
        knn_k: neighbours of the kNN monitor (default: ``contrastkit eval knn``'s, 200).
        knn_temperature: temperature of the kNN vote weights exp(s / t) (default:
            ``contrastkit eval knn``'s, 0.1, so that with the same bank the monitor and the
            evaluation of a checkpoint report the same accuracy).
        collapse_spread: the collapse warning's bound on ``train/z_std``, the spread of the
            L2-normalised embedding: ``collapse_spread / sqrt(d)``, where evenly spread unit
            vectors give about ``1 / sqrt(d)`` (0: not watched;
            :mod:`contrastkit.train.collapse_check`).
        collapse_loss_tolerance: the collapse warning's relative distance to the loss a
            collapse gives, for methods that state one (0: not watched).
        collapse_steps: optimiser steps a sign of collapse must hold before the warning.
    """

    linear: bool = True
    knn: bool = True
    knn_k: int = 200
    knn_temperature: float = 0.1
    collapse_spread: float = 0.02
    collapse_loss_tolerance: float = 1e-3
    collapse_steps: int = 200
