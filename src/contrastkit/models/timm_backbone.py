"""Backbones from timm by name: ``backbone: {name: "timm:<model>", timm_kwargs: {...}}``.

Any model of timm's registry (``timm.list_models()``) is built untrained, without classifier
(``num_classes=0``: its forward returns the pooled features), and used as it is: its
``state_dict`` keys are timm's own, so a checkpoint's backbone weights and an exported backbone
load into ``timm.create_model(<model>, num_classes=0, **timm_kwargs)`` unchanged. The feature
size is read from the model (``head_hidden_size`` where timm sets one, else
``num_features``). Models whose constructor takes ``dynamic_img_size`` (the vision
transformers: ViT, DeiT, EVA, ...) get ``dynamic_img_size=True`` unless the config sets it: the
position embedding is resampled to each input's patch grid, so one backbone takes the 224-px
global views and the 96-px local views of multi-crop (a ViT built for one size refuses
others); those that take ``dynamic_img_pad`` also get ``dynamic_img_pad=True``: a side that is
not a multiple of the patch size (the 27-px local view of multi-crop scaled to 32 px) is
zero-padded to one, where timm would refuse it; a side that is one is left as it is.

timm needs a torchvision built for the installed torch (``docs/integrations.md``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

__all__ = ["TIMM_PREFIX", "build_timm_backbone", "timm_model_name"]

#: Prefix of ``backbone.name`` that selects a timm model.
TIMM_PREFIX = "timm:"

#: ``timm.create_model`` arguments contrastkit sets itself.
_RESERVED = {
    "num_classes": "contrastkit builds the backbone without classifier (num_classes=0)",
    "pretrained": "contrastkit builds timm models untrained: the weights come from the run or "
                  "the checkpoint (docs/integrations.md shows how to start from timm's)",
}


def timm_model_name(name: str) -> str | None:
    """The timm model of a ``backbone.name`` (``timm:vit_tiny_patch16_224`` ->
    ``vit_tiny_patch16_224``); None for contrastkit's own backbones."""
    return name[len(TIMM_PREFIX):] if name.startswith(TIMM_PREFIX) else None


def _import_timm() -> Any:
    try:
        import timm
    except ImportError as err:
        raise ImportError(
            f"backbone.name 'timm:...' needs timm ({err}): install torch and torchvision from "
            "the same index first, then pip install 'contrastkit[timm]' "
            "(docs/integrations.md)") from None
    return timm


#: Arguments set to True for the models whose class takes them (module doc).
_ANY_SIZE = ("dynamic_img_size", "dynamic_img_pad")


def _any_size_arguments(timm: Any, model: str, kwargs: Mapping[str, Any]) -> dict[str, bool]:
    """``{argument: True}`` for the :data:`_ANY_SIZE` arguments that the class building
    ``model`` takes and ``kwargs`` does not set, read from a copy built on the meta device (no
    memory, no initialisation arithmetic)."""
    missing = [name for name in _ANY_SIZE if name not in kwargs]
    if not missing:
        return {}
    with torch.device("meta"):
        probe = timm.create_model(model, num_classes=0, **kwargs)
    taken = inspect.signature(type(probe)).parameters
    return {name: True for name in missing if name in taken}


def build_timm_backbone(model: str, timm_kwargs: Mapping[str, Any] | None = None) -> nn.Module:
    """``timm.create_model(model, num_classes=0, **timm_kwargs)`` with ``out_dim`` set to its
    feature size; ``dynamic_img_size`` and ``dynamic_img_pad`` True for models that take them
    (module doc). The arguments it was built with are kept as its ``timm_kwargs`` attribute.

    Args:
        model: a timm model name (``resnet18``, ``vit_tiny_patch16_224``, ...).
        timm_kwargs: other ``timm.create_model`` arguments (``img_size``, ``patch_size``,
            ``drop_path_rate``, ...), as in the config's ``backbone.timm_kwargs``.

    Raises:
        ImportError: without timm, saying how to install it.
        ValueError: for a model timm does not have (with close names) or a reserved argument.
    """
    timm = _import_timm()
    options = dict(timm_kwargs or {})
    for key, why in _RESERVED.items():
        if key in options:
            raise ValueError(f"backbone.timm_kwargs.{key}: not allowed, {why}")
    if not timm.is_model(model):
        close = timm.list_models(f"*{model.split('_')[0]}*")[:8]
        hint = f"; close names: {', '.join(close)}" if close else ""
        raise ValueError(f"backbone.name timm:{model}: timm {timm.__version__} has no model "
                         f"{model!r} (timm.list_models() lists them){hint}")
    try:
        options.update(_any_size_arguments(timm, model, options))
        network = timm.create_model(model, num_classes=0, **options)
    except TypeError as err:  # an argument the model's class does not take
        raise ValueError(f"backbone.timm_kwargs for timm:{model}: {err}") from None
    network.out_dim = int(getattr(network, "head_hidden_size", None) or network.num_features)
    network.timm_kwargs = options  # what timm.create_model needs to rebuild it (export)
    return network
