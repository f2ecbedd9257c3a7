"""Configuration records of the pretraining engine (validated by jsonargparse from YAML)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class OptimizerSpec:
    """Optimiser and learning-rate schedule (Denize et al. 2023, appendix D.1/D.2).

    Attributes:
        name: ``sgd``, ``lars`` or ``adamw``.
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
    """

    name: Literal["sgd", "lars", "adamw"] = "sgd"
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
    """

    linear: bool = True
    knn: bool = True
    knn_k: int = 200
    knn_temperature: float = 0.1
