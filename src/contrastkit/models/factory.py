"""Config-level descriptions of a backbone and its heads, and the functions that build them.

Configs (YAML through LightningCLI/jsonargparse) name a network with these small dataclasses,
so every option is validated against a signature before training starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from torch import nn

from contrastkit.models.convnet import small_convnet
from contrastkit.models.heads import MLPHead
from contrastkit.models.resnet import resnet18, resnet34, resnet50
from contrastkit.models.resnet3d import resnet3d_18, resnet3d_50
from contrastkit.models.timm_backbone import TIMM_PREFIX, build_timm_backbone, timm_model_name

BackboneName = Literal[
    "resnet18", "resnet34", "resnet50", "small_convnet", "resnet3d_18", "resnet3d_50"
]
BACKBONES: tuple[str, ...] = BackboneName.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class BackboneSpec:
    """Which backbone to build.

    Attributes:
        name: ``resnet18|resnet34|resnet50`` (2-D, torchvision key layout),
            ``small_convnet`` (8x8-32x32 inputs, the offline default),
            ``resnet3d_18|resnet3d_50`` (video, SCE Table 23), or ``timm:<model>``: any model
            of timm (optional, ``contrastkit[timm]``; :mod:`contrastkit.models.timm_backbone`).
        cifar_stem: 3x3 stride-1 stem without max-pool (SCE appendix D.1); 2-D ResNets only.
        width: base width (64 = standard ResNet; 32 = the small convnet's default).
        out_dim: feature size of ``small_convnet`` (ignored by the ResNets, whose size follows
            from the width).
        norm: ``batch`` (batch normalisation, every backbone) or ``none`` (``small_convnet``
            only: no normalisation layer, so no batch statistics; a run on several processes
            then computes exactly what one process computes on the combined batch, which the
            multi-GPU tests rely on).
        timm_kwargs: other arguments of ``timm.create_model`` for ``timm:<model>`` backbones
            (``img_size``, ``patch_size``, ``drop_path_rate``, ...); their feature size is
            read from the model, and ``cifar_stem``, ``width``, ``out_dim`` and ``norm`` do not
            apply.
    """

    name: BackboneName | str = "resnet18"
    cifar_stem: bool = False
    width: int = 64
    out_dim: int = 128
    norm: Literal["batch", "none"] = "batch"
    timm_kwargs: dict[str, Any] | None = None


@dataclass(frozen=True)
class HeadSpec:
    """An MLP projector or predictor (SCE Tables 21 and 24).

    Attributes:
        hidden_dim: size of the hidden layers.
        out_dim: output size.
        num_layers: number of linear layers.
        batch_norm: ``none`` | ``hidden`` (after hidden layers) | ``all`` (also after the output).
        last_bias: bias of the output linear layer; ``None``: a bias unless an output BN
            follows. Barlow Twins' and VICReg's official projectors end in a linear layer
            without bias (``false``); solo-learn's keep it. (A hidden linear layer followed by
            BN never has a bias here: the BN's shift makes it redundant.)
    """

    hidden_dim: int = 512
    out_dim: int = 128
    num_layers: int = 2
    batch_norm: Literal["none", "hidden", "all"] = "hidden"
    last_bias: bool | None = None


@dataclass(frozen=True)
class DINOHeadSpec:
    """DINO's head (Caron et al. 2021; :class:`~contrastkit.models.prototypes.DINOHead`): an MLP
    with GELU to a bottleneck, L2 normalisation, a weight-normalised layer to K outputs.

    Attributes:
        hidden_dim: size of the hidden layers (2048 in DINO).
        bottleneck_dim: size before the last layer (256).
        num_prototypes: K, the number of outputs (65,536 in DINO).
        num_layers: linear layers of the MLP (3).
        batch_norm: BN after each hidden layer (DINO's ``--use_bn_in_head``, off by default).
        norm_last_layer: fix the last layer's row norms to 1 (DINO's default).
    """

    hidden_dim: int = 2048
    bottleneck_dim: int = 256
    num_prototypes: int = 65536
    num_layers: int = 3
    batch_norm: bool = False
    norm_last_layer: bool = True


def build_backbone(spec: BackboneSpec) -> nn.Module:
    """Build the backbone a :class:`BackboneSpec` names; the result has an ``out_dim``.

    Raises:
        ValueError: for an unknown name or an option the backbone does not take.
    """
    timm_model = timm_model_name(spec.name)
    if timm_model is not None:
        changed = [f"{k}={getattr(spec, k)!r}" for k in ("cifar_stem", "width", "out_dim", "norm")
                   if getattr(spec, k) != getattr(BackboneSpec, k)]
        if changed:
            raise ValueError(f"backbone {', '.join(changed)}: not for timm backbones (give timm's "
                             "own arguments in backbone.timm_kwargs)")
        return build_timm_backbone(timm_model, spec.timm_kwargs)
    if spec.timm_kwargs:
        raise ValueError(f"backbone.timm_kwargs applies to timm:<model> backbones, not "
                         f"{spec.name!r}")
    if spec.name not in BACKBONES:
        raise ValueError(f"backbone.name must be one of {BACKBONES} or '{TIMM_PREFIX}<model>', "
                         f"got {spec.name!r}")
    if spec.cifar_stem and spec.name not in ("resnet18", "resnet34", "resnet50"):
        raise ValueError(f"backbone.cifar_stem applies to 2-D ResNets only, not {spec.name!r}")
    if spec.norm != "batch" and spec.name != "small_convnet":
        raise ValueError(f"backbone.norm={spec.norm!r} applies to small_convnet only; "
                         f"{spec.name} always uses batch normalisation")
    if spec.name == "small_convnet":
        return small_convnet(in_channels=3, width=spec.width, out_dim=spec.out_dim,
                             batch_norm=spec.norm == "batch")
    if spec.name == "resnet3d_18":
        return resnet3d_18(width=spec.width)
    if spec.name == "resnet3d_50":
        return resnet3d_50(width=spec.width)
    builder = {"resnet18": resnet18, "resnet34": resnet34, "resnet50": resnet50}[spec.name]
    return builder(cifar_stem=spec.cifar_stem, width=spec.width)


def build_head(spec: HeadSpec, in_dim: int) -> MLPHead:
    """Build an :class:`~contrastkit.models.heads.MLPHead` from a :class:`HeadSpec`."""
    return MLPHead(in_dim, spec.hidden_dim, spec.out_dim, spec.num_layers, spec.batch_norm,
                   spec.last_bias)
