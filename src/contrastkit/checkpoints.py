"""Read backbones out of checkpoints: contrastkit's own, or a torchvision-layout state_dict.

A contrastkit checkpoint (Lightning ``.ckpt``) stores the backbone description under
``checkpoint["contrastkit"]["backbone"]`` and the weights under ``method.backbone.*``. A
torchvision ResNet state_dict (``conv1.weight``, ``layer1.0...``, optional ``fc.*``) is
recognised by its keys; its architecture is inferred from them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch
from torch import nn

from contrastkit.models.factory import BackboneSpec, build_backbone
from contrastkit.models.torchvision_layout import load_torchvision_state_dict

_PREFIX = "method.backbone."


def file_hash(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file (the checkpoint's identity in feature-cache keys)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _read(path: str | os.PathLike) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:
        raise ValueError(f"checkpoint {path} could not be read ({err})") from err


def infer_torchvision_spec(state_dict: dict) -> BackboneSpec:
    """Guess the ResNet depth, stem and width of a torchvision-layout state_dict.

    Raises:
        ValueError: when the keys are not those of a torchvision ResNet.
    """
    if "conv1.weight" not in state_dict or "layer4.0.conv1.weight" not in state_dict:
        raise ValueError("state_dict is neither a contrastkit checkpoint nor a torchvision "
                         "ResNet state_dict (no conv1.weight / layer4.* keys)")
    conv1 = state_dict["conv1.weight"]
    width = int(conv1.shape[0])
    bottleneck = "layer1.0.conv3.weight" in state_dict
    blocks3 = sum(1 for k in state_dict if k.startswith("layer3.") and k.endswith(".conv1.weight"))
    if bottleneck:
        name = "resnet50"
    else:
        name = "resnet34" if blocks3 == 6 else "resnet18"
    return BackboneSpec(name=name, cifar_stem=int(conv1.shape[-1]) == 3, width=width)


def load_backbone(path: str | os.PathLike) -> tuple[nn.Module, BackboneSpec]:
    """Build the backbone stored in ``path`` and load its weights (eval mode).

    Returns:
        ``(backbone, spec)``.

    Raises:
        FileNotFoundError: when ``path`` does not exist.
        ValueError: when the file is not a checkpoint or its weights do not fit the
            architecture it declares (the message names the keys).
    """
    data = _read(path)
    if isinstance(data, dict) and "contrastkit" in data:
        spec = BackboneSpec(**data["contrastkit"]["backbone"])
        backbone = build_backbone(spec)
        weights = {k[len(_PREFIX):]: v for k, v in data["state_dict"].items()
                   if k.startswith(_PREFIX)}
        missing, unexpected = backbone.load_state_dict(weights, strict=False)
        if missing or unexpected:
            raise ValueError(f"checkpoint {path}: backbone weights do not match {spec.name} "
                             f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
    else:
        state = data.get("state_dict", data) if isinstance(data, dict) else data
        spec = infer_torchvision_spec(state)
        backbone = build_backbone(spec)
        load_torchvision_state_dict(backbone, state)  # type: ignore[arg-type]
    return backbone.eval(), spec
