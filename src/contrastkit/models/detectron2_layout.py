"""A contrastkit ResNet's weights under detectron2's ResNet key names.

detectron2 (Wu et al. 2019) builds its ResNet as ``stem`` (``conv1`` with its ``norm``) and the
stages ``res2`` ... ``res5`` of blocks with ``conv1`` ... ``conv3``, each carrying its ``norm``,
and a ``shortcut`` convolution with its ``norm``. The renaming from the torchvision layout is the
one of the MoCo lineage's ``convert-pretrain-to-detectron2`` script (He et al. 2020):

* keys outside the stages get the prefix ``stem.`` (``conv1.weight`` -> ``stem.conv1.weight``);
* ``layer1`` ... ``layer4`` -> ``res2`` ... ``res5``;
* ``bn1``, ``bn2``, ``bn3`` -> ``conv1.norm``, ``conv2.norm``, ``conv3.norm``;
* ``downsample.0`` -> ``shortcut``, ``downsample.1`` -> ``shortcut.norm``.

Our choice where the script keeps everything: ``num_batches_tracked`` counters are left out
(detectron2's frozen and synchronised BN layers do not need them; the script's copies are
reported by detectron2 as unused keys), and there is no ``fc``. In an R50-C4 model the backbone
holds ``stem`` and ``res2`` ... ``res4`` and ``res5`` lives in ``roi_heads.res5``; detectron2 finds
it there by suffix matching when the file sets ``matching_heuristics`` (see
:mod:`contrastkit.export_detectron2`).
"""

from __future__ import annotations

import numpy as np
from torch import nn

from contrastkit.models.resnet import ResNet

__all__ = ["detectron2_key", "to_detectron2_state_dict"]


def detectron2_key(name: str) -> str:
    """detectron2's name of a torchvision-layout ResNet key (module docstring)."""
    if not name.startswith("layer"):
        name = "stem." + name
    for stage in (1, 2, 3, 4):
        name = name.replace(f"layer{stage}.", f"res{stage + 1}.")
    for index in (1, 2, 3):
        name = name.replace(f"bn{index}.", f"conv{index}.norm.")
    return name.replace("downsample.0.", "shortcut.").replace("downsample.1.",
                                                               "shortcut.norm.")


def to_detectron2_state_dict(backbone: nn.Module) -> dict[str, np.ndarray]:
    """``{detectron2 key: float32 numpy array}`` of a contrastkit ResNet with the ImageNet stem.

    Raises:
        ValueError: for another backbone, or a ResNet with the CIFAR stem (detectron2's stem is
            a 7x7 stride-2 convolution followed by a max-pool).
    """
    if not isinstance(backbone, ResNet):
        raise ValueError(f"detectron2 export needs a contrastkit ResNet, got "
                         f"{type(backbone).__name__}")
    if backbone.cifar_stem:
        raise ValueError("detectron2 export needs the ImageNet stem (7x7 stride-2 convolution "
                         "and max-pool); this ResNet has the CIFAR stem (3x3, no max-pool)")
    return {detectron2_key(k): v.detach().cpu().numpy().copy()
            for k, v in backbone.state_dict().items() if not k.endswith("num_batches_tracked")}
