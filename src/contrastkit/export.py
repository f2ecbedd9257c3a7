"""Export a pretrained backbone: ResNets in torchvision's state_dict layout, other backbones
with their own keys and their description (see :mod:`contrastkit.checkpoints`)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import torch

from contrastkit.checkpoints import SPEC_METADATA, load_backbone, load_checkpoint_file
from contrastkit.export_metadata import RUN_METADATA, export_metadata, run_record
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
    A ``.safetensors`` file (and a ``.pth`` of a non-ResNet backbone) carries the SHA-256 of
    its tensors and the run's identity (:mod:`contrastkit.export_metadata`), the digest checked
    on every load; a ResNet's ``.pth`` is a bare torchvision state_dict and carries neither.

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
    if native:
        state = {k: v.detach().clone().contiguous() for k, v in backbone.state_dict().items()}
    else:
        state = {k: v.contiguous() for k, v in to_torchvision_state_dict(backbone).items()}
    metadata = export_metadata(state, _run_of(checkpoint))
    fd, tmp = temp_file_beside(output)
    os.close(fd)
    try:
        if output.suffix == ".safetensors":
            from safetensors.torch import save_file

            if native:
                metadata[SPEC_METADATA] = json.dumps(asdict(spec))
            save_file(state, tmp, metadata=metadata)
        elif native:
            torch.save({"contrastkit": {"backbone": asdict(spec), **metadata},
                        "backbone_state_dict": state}, tmp)
        else:  # torchvision's keys and nothing else: no room for the metadata
            torch.save(state, tmp)
        os.chmod(tmp, file_mode())  # safetensors writes a new file of mode 0600
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return output


def _run_of(checkpoint: str | os.PathLike) -> dict | None:
    """The identity of the run of a contrastkit checkpoint (:func:`run_record`), or of an
    earlier export (its own record); None for other files (a torchvision state_dict)."""
    path = Path(checkpoint)
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            recorded = (handle.metadata() or {}).get(RUN_METADATA)
        return json.loads(recorded) if recorded else None
    data = load_checkpoint_file(path, mmap=True)
    if isinstance(data, dict) and "contrastkit" in data and "state_dict" in data:
        return run_record(data, path)
    entry = data.get("contrastkit") if isinstance(data, dict) else None
    recorded = entry.get(RUN_METADATA) if isinstance(entry, dict) else None
    return json.loads(recorded) if recorded else None
