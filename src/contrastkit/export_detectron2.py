"""``contrastkit export --format detectron2``: a checkpoint's ResNet as the pickle that
detectron2's ``DetectionCheckpointer`` reads for ``MODEL.WEIGHTS``.

The file holds ``{"model": {key: numpy array}, "__author__": "contrastkit",
"matching_heuristics": True}`` (the layout of the MoCo lineage's converted backbones; keys:
:mod:`contrastkit.models.detectron2_layout`). ``matching_heuristics`` makes detectron2 match the
keys by suffix, which is how ``res5.*`` reaches ``roi_heads.res5.*`` in an R50-C4 model. The
weights are the torchvision-style ResNet-50 (stride in the 3x3 convolution, RGB input normalised
with the ImageNet mean and std), so the detectron2 config needs
``MODEL.RESNETS.STRIDE_IN_1X1 False``, ``INPUT.FORMAT RGB`` and the matching ``PIXEL_MEAN`` /
``PIXEL_STD`` (``docs/transfer.md``).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from contrastkit.checkpoints import load_backbone
from contrastkit.export import check_export_path, recover_export, write_export
from contrastkit.models.detectron2_layout import to_detectron2_state_dict

__all__ = ["export_detectron2"]


def export_detectron2(checkpoint: str | os.PathLike, output: str | os.PathLike,
                      overwrite: bool = False) -> Path:
    """Write the backbone of ``checkpoint`` to ``output`` (``.pkl``), whole or not at all
    (:func:`contrastkit.export.write_export`); an existing ``output`` is replaced only with
    ``overwrite``.

    Raises:
        ValueError: for another extension, an unreadable checkpoint, a backbone that is not a
            ResNet with the ImageNet stem.
        FileNotFoundError: when ``checkpoint`` does not exist.
        NotADirectoryError: when a parent of ``output`` is a file.
        FileExistsError: when ``output`` exists and ``overwrite`` is false.
        OSError: when it cannot be written (a full disk), naming ``output``.
    """
    output = Path(output)
    if output.suffix != ".pkl":
        raise ValueError(f"--output must end in .pkl for --format detectron2, got {output.name}")
    recover_export(output)
    check_export_path(output, overwrite)
    backbone, _ = load_backbone(checkpoint)
    try:
        state = to_detectron2_state_dict(backbone)
    except ValueError as err:
        raise ValueError(f"checkpoint {checkpoint}: {err}") from None
    data = {"model": state, "__author__": "contrastkit", "matching_heuristics": True}
    return write_export(output, pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
