"""Export to and load from the torchvision ResNet ``state_dict`` key layout.

contrastkit's :class:`~contrastkit.models.resnet.ResNet` names its modules like torchvision's
ResNet (``conv1.weight``, ``bn1.running_mean``, ``layer1.0.conv1.weight``,
``layer2.0.downsample.0.weight``, ``layer2.0.downsample.1.num_batches_tracked``, ``fc.weight``,
...), so the key mapping is the identity. These functions add what a plain ``load_state_dict``
lacks: an optional classifier on export, ``fc.*`` skipping on load, a ``ValueError`` that lists
every missing/unexpected key and every shape mismatch by name, and acceptance of checkpoints
saved without ``num_batches_tracked`` (older torchvision weight files).

Only the default stem at ``width=64`` produces tensors of torchvision's shapes; a CIFAR-stem
or narrow backbone exports the same keys with its own shapes (``conv1.weight`` is 3x3).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from contrastkit.models.resnet import ResNet

__all__ = ["load_torchvision_state_dict", "to_torchvision_state_dict"]

_FC_PREFIX = "fc."


def _check_backbone(backbone: nn.Module) -> None:
    if not isinstance(backbone, ResNet):
        raise ValueError(
            f"backbone must be a contrastkit ResNet, got {type(backbone).__name__}"
        )


def to_torchvision_state_dict(
    backbone: ResNet, fc: nn.Linear | None = None
) -> dict[str, torch.Tensor]:
    """Return ``backbone``'s weights under torchvision ResNet keys (detached clones).

    Args:
        backbone: a contrastkit ResNet.
        fc: optional classifier (e.g. a trained linear probe) exported as ``fc.weight`` and
            ``fc.bias``. Without it the dict has no ``fc.*`` keys; load it into torchvision
            with ``strict=False`` or replace torchvision's ``fc`` first.

    Returns:
        An ordered dict, key -> tensor, in torchvision's key order.
    """
    _check_backbone(backbone)
    out = {k: v.detach().clone() for k, v in backbone.state_dict().items()}
    if fc is not None:
        if not isinstance(fc, nn.Linear) or fc.in_features != backbone.out_dim:
            raise ValueError(
                f"fc must be an nn.Linear with in_features={backbone.out_dim}, got {fc!r}"
            )
        out["fc.weight"] = fc.weight.detach().clone()
        if fc.bias is not None:
            out["fc.bias"] = fc.bias.detach().clone()
    return out


def load_torchvision_state_dict(
    backbone: ResNet,
    state_dict: Mapping[str, torch.Tensor],
    strict: bool = True,
    ignore_fc: bool = True,
) -> None:
    """Load a torchvision-layout ResNet ``state_dict`` into ``backbone`` in place.

    Args:
        backbone: a contrastkit ResNet of the matching architecture.
        state_dict: key -> tensor in torchvision's layout.
        strict: raise if a backbone key is missing or a key is unexpected.
        ignore_fc: drop ``fc.*`` keys (the backbone has no classifier). With
            ``ignore_fc=False`` they count as unexpected keys.

    Raises:
        ValueError: naming every shape mismatch (always) and, when ``strict``, every missing
            and unexpected key. Nothing is loaded when it raises. A missing
            ``num_batches_tracked`` is never an error (older checkpoints lack it; it is left
            as is).
    """
    _check_backbone(backbone)
    if not isinstance(state_dict, Mapping):
        raise ValueError(f"state_dict must be a mapping, got {type(state_dict).__name__}")
    own = backbone.state_dict()
    given = {
        k: v for k, v in state_dict.items() if not (ignore_fc and k.startswith(_FC_PREFIX))
    }
    missing = [
        k for k in own if k not in given and not k.endswith("num_batches_tracked")
    ]
    unexpected = [k for k in given if k not in own]
    mismatched = [
        f"{k}: checkpoint {tuple(v.shape)} vs backbone {tuple(own[k].shape)}"
        for k, v in given.items()
        if k in own and tuple(v.shape) != tuple(own[k].shape)
    ]
    problems = []
    if mismatched:
        problems.append("shape mismatch for " + "; ".join(mismatched))
    if strict and missing:
        problems.append("missing keys " + ", ".join(missing))
    if strict and unexpected:
        problems.append("unexpected keys " + ", ".join(unexpected))
    if problems:
        raise ValueError("cannot load state_dict into backbone: " + " | ".join(problems))
    loadable = {k: v for k, v in given.items() if k in own}
    backbone.load_state_dict(loadable, strict=False)
