"""Video pretraining through the image engine (SCE, Denize et al. 2023, section 4.2 and
appendix D.3): the clip
views of a :class:`~contrastkit.train.specs.ViewsSpec` with ``video`` set.

The engine (:class:`~contrastkit.train.module.PretrainModule`,
:class:`~contrastkit.train.datamodule.PretrainDataModule`) and the methods are the image ones.
The video datasets are opened by :func:`contrastkit.data.registry.build_video_dataset` (a
training item is ``([clip_0, clip_1], label)``: two clips sampled independently from the same
video, SCE 4.2; the kNN monitor sees the centre clip, centre square crop) and the clip views
are :mod:`contrastkit.data.video.views`; this module maps the config record and the method's
default presets onto them (:func:`build_train_views`, :func:`build_eval_view`).
"""

from __future__ import annotations

from contrastkit.data.video.views import ClipView, VideoEvalView, VideoTwoViews
from contrastkit.train.specs import ViewsSpec

__all__ = ["VIDEO_JITTER_STRENGTH", "build_eval_view", "build_train_views"]

#: Denize et al. 2023, Table 15: colour strength 1.0 is the best for video (the image presets
#: default to 0.5).
VIDEO_JITTER_STRENGTH = 1.0


def _jitter_strength(spec: ViewsSpec) -> float:
    return VIDEO_JITTER_STRENGTH if spec.jitter_strength is None else spec.jitter_strength


def build_train_views(spec: ViewsSpec, default_presets: tuple[str, str]) -> VideoTwoViews:
    """Pretraining views of clip pairs from ``spec`` (``spec.video`` must be set).

    Args:
        spec: the views config; ``online`` / ``target`` default to the method's presets
            (SCE's video setting, appendix D.3, is ``strong_alpha`` / ``strong_beta``).
        default_presets: the method's (online, target) presets.
    """
    video = spec.video
    if video is None:
        raise ValueError("views.video is not set")
    if spec.multicrop is not None:
        raise ValueError("views.multicrop does not apply to video (views.video is set)")
    options: dict = {"normalize": spec.normalize, "jitter_strength": _jitter_strength(spec)}
    if spec.crop_scale is not None:
        options["crop_scale"] = tuple(spec.crop_scale)
    make = [ClipView(name, spec.size, rgb_difference_p=video.rgb_difference_p,
                     reverse_p=video.reverse_p, **options)
            for name in (spec.online or default_presets[0], spec.target or default_presets[1])]
    return VideoTwoViews(*make)


def build_eval_view(spec: ViewsSpec) -> VideoEvalView:
    """The monitor's deterministic view (image ``eval`` preset on every frame)."""
    return VideoEvalView(spec.size, small=spec.eval_resize == "small", normalize=spec.normalize)
