"""Export a pretrained backbone: ResNets in torchvision's state_dict layout, other backbones
with their own keys (timm's for ``timm:<model>`` backbones) and their description (see
:mod:`contrastkit.checkpoints`); a Hub-format folder: :mod:`contrastkit.export_hf`."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import torch

from contrastkit.checkpoints import SPEC_METADATA, load_backbone
from contrastkit.models.resnet import ResNet
from contrastkit.models.torchvision_layout import to_torchvision_state_dict
from contrastkit.outputs import check_output_path, file_mode, temp_file_beside


def check_export_path(output: Path, overwrite: bool) -> None:
    """Refuse an ``output`` under a file, or an existing one without ``overwrite``.

    Raises:
        NotADirectoryError: when a parent of ``output`` is a file.
        FileExistsError: when ``output`` exists and ``overwrite`` is false.
    """
    check_output_path(output, folder=False)
    if output.exists() and not overwrite:
        raise FileExistsError(f"--output {output} exists: pass --overwrite to replace it, or "
                              "choose another --output")


def backbone_state(backbone: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The weights an export writes (detached copies): torchvision's keys for contrastkit's
    ResNets, the backbone's own otherwise (timm's own keys for ``timm:<model>`` backbones)."""
    if isinstance(backbone, ResNet):
        return to_torchvision_state_dict(backbone)
    return {k: v.detach().clone() for k, v in backbone.state_dict().items()}


def export_backbone(checkpoint: str | os.PathLike, output: str | os.PathLike,
                    overwrite: bool = False) -> Path:
    """Write the backbone of ``checkpoint`` to ``output`` (``.pth`` or ``.safetensors``).

    The file is written atomically, with the mode the user's umask gives a new file; an
    existing ``output`` is replaced only with ``overwrite``. 2-D ResNets get torchvision's
    keys and nothing else (load
    with ``torchvision.models.resnet50().load_state_dict(sd, strict=False)`` or after removing
    ``fc``); other backbones keep their own keys and their
    :class:`~contrastkit.models.factory.BackboneSpec`. Every exported file loads back with
    :func:`contrastkit.checkpoints.load_backbone` and in ``contrastkit eval`` / ``analyze``.

    Raises:
        ValueError: for an unsupported output extension or an unreadable checkpoint.
        FileNotFoundError: when ``checkpoint`` does not exist.
        NotADirectoryError: when a parent of ``output`` is a file.
        FileExistsError: when ``output`` exists and ``overwrite`` is false.
    """
    output = Path(output)
    if output.suffix not in (".pth", ".pt", ".safetensors"):
        raise ValueError(f"--output must end in .pth, .pt or .safetensors, got {output.name}")
    check_export_path(output, overwrite)
    backbone, spec = load_backbone(checkpoint)
    native = not isinstance(backbone, ResNet)
    state = backbone_state(backbone)
    fd, tmp = temp_file_beside(output)
    os.close(fd)
    try:
        if output.suffix == ".safetensors":
            from safetensors.torch import save_file

            metadata = {SPEC_METADATA: json.dumps(asdict(spec))} if native else None
            save_file({k: v.contiguous() for k, v in state.items()}, tmp, metadata=metadata)
        elif native:
            torch.save({"contrastkit": {"backbone": asdict(spec)}, "backbone_state_dict": state},
                       tmp)
        else:
            torch.save(state, tmp)
        os.chmod(tmp, file_mode())  # safetensors writes a new file of mode 0600
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return output
