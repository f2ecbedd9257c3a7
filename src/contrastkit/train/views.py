"""Turn a :class:`~contrastkit.train.specs.ViewsSpec` into view generators.

The generators come from ``contrastkit.data.views``; this module only maps the config record
and the method's default presets onto them.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from contrastkit.data import augment, views
from contrastkit.train.specs import ViewsSpec

ViewGenerator = Callable[[Tensor], list[Tensor]]


def _options(spec: ViewsSpec) -> dict:
    options: dict = {"normalize": spec.normalize}
    if spec.jitter_strength is not None:
        options["jitter_strength"] = spec.jitter_strength
    return options


def build_train_views(spec: ViewsSpec, default_presets: tuple[str, str]) -> ViewGenerator:
    """Views for pretraining: two (online, target) views, plus local crops if multi-crop.

    Args:
        spec: the views config.
        default_presets: the method's (online, target) presets, used where ``spec`` has None.
    """
    online = spec.online or default_presets[0]
    target = spec.target or default_presets[1]
    options = _options(spec)
    if spec.multicrop is None:
        if spec.crop_scale is not None:
            options["crop_scale"] = tuple(spec.crop_scale)
        return views.TwoViews(
            online=augment.preset(online, spec.size, **options),
            target=augment.preset(target, spec.size, **options),
        )
    mc = spec.multicrop
    if spec.crop_scale is not None:
        raise ValueError("views.crop_scale does not apply with multi-crop: set "
                         "views.multicrop.global_scale and local_scales instead")
    if len(mc.local_sizes) != len(mc.local_scales):
        raise ValueError(
            f"views.multicrop.local_sizes ({len(mc.local_sizes)} entries) and local_scales "
            f"({len(mc.local_scales)} entries) must have the same length"
        )
    return views.MultiCrop(
        global_size=spec.size,
        global_scale=mc.global_scale,
        local_sizes=mc.local_sizes,
        local_scales=mc.local_scales,
        preset=mc.local_preset,
        global_presets=(online, target),
        **options,
    )


def build_eval_view(spec: ViewsSpec) -> Callable[[Tensor], Tensor]:
    """Deterministic evaluation view (SCE appendix D.1/D.2 validation transform)."""
    return augment.preset("eval", spec.size, small=spec.eval_resize == "small",
                          normalize=spec.normalize)
