"""Export a pretrained backbone to the torchvision ResNet state_dict layout."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

from contrastkit.checkpoints import load_backbone
from contrastkit.models.resnet import ResNet
from contrastkit.models.torchvision_layout import to_torchvision_state_dict


def export_backbone(checkpoint: str | os.PathLike, output: str | os.PathLike) -> Path:
    """Write the backbone of ``checkpoint`` to ``output`` (``.pth`` or ``.safetensors``).

    The file is written atomically. ResNets get torchvision's keys (load with
    ``torchvision.models.resnet50().load_state_dict(sd, strict=False)`` or after removing
    ``fc``); other backbones are saved with their own keys.

    Raises:
        ValueError: for an unsupported output extension.
    """
    output = Path(output)
    if output.suffix not in (".pth", ".pt", ".safetensors"):
        raise ValueError(f"--output must end in .pth, .pt or .safetensors, got {output.name}")
    backbone, _ = load_backbone(checkpoint)
    if isinstance(backbone, ResNet):
        state = to_torchvision_state_dict(backbone)
    else:
        state = {k: v.detach().clone() for k, v in backbone.state_dict().items()}
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
    os.close(fd)
    try:
        if output.suffix == ".safetensors":
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in state.items()}, tmp)
        else:
            torch.save(state, tmp)
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return output
