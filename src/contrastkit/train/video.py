"""Video pretraining through the image engine (SCE section 4.2 and appendix D.3).

The engine (:class:`~contrastkit.train.module.PretrainModule`,
:class:`~contrastkit.train.datamodule.PretrainDataModule`) and the methods are the image ones;
this module only supplies what differs for clips:

* datasets (:func:`build_video_dataset`): ``ucf101``, ``hmdb51``, ``kinetics`` and
  ``video_folder``. A training item is ``([clip_0, clip_1], label)``: two clips sampled
  independently from the same video (SCE 4.2: two clips of 2.56 s keeping 8 frames), uint8
  ``(T, C, H, W)`` each, so a batch is ``[(B, T, C, H, W), (B, T, C, H, W)]``. The kNN monitor
  sees one clip per video: the centre clip, centre square crop (:class:`CentreClip`).
* views (:class:`VideoTwoViews`): view ``i`` is clip ``i`` under the online (``i = 0``) or target
  (``i = 1``) image preset, applied with the same random parameters on every frame of a clip
  (:class:`~contrastkit.data.video.VideoAugment`), then reversed in time with probability
  ``reverse_p`` and replaced by its RGB difference with probability ``rgb_difference_p``
  (SCE 4.2.1, pretraining only), and finally laid out as ``(B, C, T, H, W)`` for the R3D
  backbones. The method receives ``[view_0, view_1]`` exactly as for images.
* the monitor's view (:class:`VideoEvalView`): the image ``eval`` preset on every frame, no
  randomness, ``(B, C, T, H, W)`` out.

Choice where SCE is silent: the RGB difference is taken after the per-dataset normalisation,
so the channel means cancel and the difference is zero-centred on the scale of the normalised
RGB input (``d_t = sum_c w_c (x_{c,t+1} - x_{c,t}) / std_c``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from contrastkit.train.specs import VideoDataSpec, ViewsSpec

__all__ = [
    "VIDEO_DATASETS",
    "CentreClip",
    "ClipView",
    "VideoEvalView",
    "VideoTwoViews",
    "build_eval_view",
    "build_train_views",
    "build_video_dataset",
    "is_video_dataset",
    "to_backbone_layout",
]

#: Dataset names of :func:`build_video_dataset`.
VIDEO_DATASETS = ("ucf101", "hmdb51", "kinetics", "video_folder")

#: SCE Table 15: colour strength 1.0 is the best for video (the image presets default to 0.5).
VIDEO_JITTER_STRENGTH = 1.0


def is_video_dataset(name: str) -> bool:
    """Whether ``name`` is one of :data:`VIDEO_DATASETS`."""
    return name in VIDEO_DATASETS


def to_backbone_layout(clips: Tensor) -> Tensor:
    """``(B, T, C, H, W)`` -> contiguous ``(B, C, T, H, W)`` (the R3D input layout)."""
    if clips.dim() != 5:
        raise ValueError(f"clips must have shape (B, T, C, H, W), got {tuple(clips.shape)}")
    return clips.permute(0, 2, 1, 3, 4).contiguous()


class ClipView(nn.Module):
    """One pretraining view of a clip batch: preset (shared over frames), reverse, RGB diff.

    Args:
        preset: image preset name (``strong_alpha``, ``strong_beta``, ``eval``...).
        size: output side.
        rgb_difference_p: probability per clip of :func:`~contrastkit.data.video.rgb_difference`.
        reverse_p: probability per clip of reversing the frame order.
        **options: options of :func:`contrastkit.data.augment.preset` (``jitter_strength``,
            ``crop_scale``, ``normalize``, ``small``).

    Input uint8 (or float in [0, 1]) ``(B, T, C, H, W)``; output float ``(B, 3, T, size, size)``.
    """

    def __init__(self, preset: str, size: int, *, rgb_difference_p: float = 0.0,
                 reverse_p: float = 0.0, **options: object) -> None:
        super().__init__()
        from contrastkit.data import video

        if not 0.0 <= reverse_p <= 1.0:
            raise ValueError(f"views.video.reverse_p must be in [0, 1], got {reverse_p}")
        if not 0.0 <= rgb_difference_p <= 1.0:
            raise ValueError(
                f"views.video.rgb_difference_p must be in [0, 1], got {rgb_difference_p}")
        self.augment = video.video_preset(preset, size, **options)
        self.reverse_p = reverse_p
        self.difference = video.RandomRGBDifference(rgb_difference_p) if rgb_difference_p else None
        #: generator of the reversal draws (on the clips' device; None: the device's default)
        self.generator: torch.Generator | None = None

    def forward(self, clips: Tensor) -> Tensor:
        out = self.augment(clips)
        if self.reverse_p > 0:
            draws = torch.rand(out.shape[0], device=out.device, generator=self.generator)
            out = torch.where((draws < self.reverse_p).view(-1, 1, 1, 1, 1), out.flip(1), out)
        if self.difference is not None:
            out = self.difference(out)
        return to_backbone_layout(out)


class VideoTwoViews(nn.Module):
    """``[online(clip_0), target(clip_1)]`` of a batch of clip pairs.

    A batch ``[clips_0, clips_1]`` (two ``(B, T, C, H, W)`` tensors, as the training datasets
    give with ``num_clips=2``) makes view ``i`` from ``clips_i``; a single ``(B, T, C, H, W)``
    tensor makes both views from the same clips (spatial and colour augmentation only).
    """

    def __init__(self, online: ClipView, target: ClipView) -> None:
        super().__init__()
        self.online, self.target = online, target

    def forward(self, clips: Tensor | list[Tensor] | tuple[Tensor, ...]) -> list[Tensor]:
        if isinstance(clips, Tensor):
            clips = [clips, clips]
        if len(clips) != 2:
            raise ValueError(f"a video batch must hold 2 clips per video (data.video.num_clips "
                             f"= 2), got {len(clips)}")
        for c in clips:
            if not isinstance(c, Tensor) or c.dim() != 5:
                shape = tuple(c.shape) if isinstance(c, Tensor) else type(c).__name__
                raise ValueError(f"clips must be (B, T, C, H, W) tensors, got {shape}: set "
                                 "views.video only with a video dataset")
        return [self.online(clips[0]), self.target(clips[1])]


class VideoEvalView(nn.Module):
    """Deterministic view of clips for the monitor and evaluation: ``(B, C, T, S, S)`` floats.

    Args:
        size: output side through the image ``eval`` preset (``small``: resize to ``size``;
            otherwise resize to ``size * 256 / 224`` and centre-crop); None: frames keep
            their size (only scaled to [0, 1] and normalised), as for the 30-view evaluation
            whose crops are already cut by the dataset.
        small: image ``eval`` preset variant.
        normalize: normalisation name (or None).
    """

    def __init__(self, size: int | None, small: bool = True, normalize: str | None = None) -> None:
        super().__init__()
        from contrastkit.data import augment, video

        self.size = size
        if size is not None:
            self.frames: nn.Module = video.video_preset("eval", size, small=small,
                                                        normalize=normalize)
        else:  # no resize: [0, 1] scaling and normalisation only
            self.frames = augment.Pipeline([], 0, normalize)

    def forward(self, clips: Tensor) -> Tensor:
        if clips.dim() != 5 or clips.shape[2] not in (1, 3):
            raise ValueError(f"clips must have shape (B, T, 1|3, H, W), got {tuple(clips.shape)}")
        if self.size is not None:
            return to_backbone_layout(self.frames(clips))
        b, t = clips.shape[:2]
        flat = clips.flatten(0, 1)
        out = self.frames(flat if flat.dtype == torch.uint8 else flat.clone())
        return to_backbone_layout(out.view(b, t, *out.shape[1:]))


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


# --- datasets ----------------------------------------------------------------------------------
class CentreClip(Dataset):
    """The middle one of the 3 spatial crops of a 1-clip ``mode="eval"`` dataset.

    With ``eval_clips=1`` the clip is the centre clip of the video, so an item is the centre
    clip, centre square crop, uint8 ``(T, C, S, S)``: the kNN monitor's single view.
    """

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self.classes = list(getattr(dataset, "classes", []))
        self.targets = list(getattr(dataset, "targets", []))

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[Tensor, int]:
        views, label = self.dataset[i]
        return views[views.shape[0] // 2], label


def _kinetics_csv(annotations: str, split: str) -> tuple[Path, str | None]:
    """(CSV path, value of its ``split`` column to keep or None) for Kinetics ``split``."""
    if "{split}" in annotations:
        return Path(annotations.format(split=split)), None
    path = Path(annotations).expanduser()
    if path.is_dir():
        return path / f"{split}.csv", None
    return path, split


Role = Literal["train", "monitor", "eval"]


def build_video_dataset(
    name: str, root: str | None, split: str, spec: VideoDataSpec | None = None, *,
    role: Role = "train", skip_corrupt: bool = False, eval_clips: int = 10,
) -> Dataset:
    """Open split ``split`` of the video dataset ``name`` (:data:`VIDEO_DATASETS`).

    Args:
        name: ``ucf101`` / ``hmdb51`` (``split`` ``train`` or ``test`` of ``spec.fold``),
            ``kinetics`` (see :class:`~contrastkit.train.specs.VideoDataSpec.annotations`) or
            ``video_folder`` (``root/<split>/<class>/*`` or, when that folder does not exist,
            ``root/<class>/*``).
        root: video folder.
        split: split name.
        spec: clip sampling options (default :class:`VideoDataSpec`).
        role: ``train``: items ``([clip] * spec.num_clips, label)`` of random clips, random
            ``crop_size`` squares; ``monitor``: the centre clip, centre crop (:class:`CentreClip`);
            ``eval``: ``eval_clips`` clips x 3 crops per item (SCE D.3, 30 views).
        skip_corrupt: skip unreadable videos (counted and warned about once each).
        eval_clips: temporal clips of the ``eval`` role.

    Raises:
        ValueError: unknown name, missing ``root`` or ``annotations``, bad options.
        FileNotFoundError: missing annotation files or videos (without ``skip_corrupt``).
    """
    from contrastkit.data import video

    spec = spec or VideoDataSpec()
    if name not in VIDEO_DATASETS:
        raise ValueError(f"video dataset must be one of {VIDEO_DATASETS}, got {name!r}")
    if root is None:
        raise ValueError(f"data.root is required for dataset {name!r}")
    options: dict = {"frames": spec.frames, "duration_s": spec.duration_s,
                     "short_side": spec.short_side, "crop_size": spec.crop_size,
                     "skip_corrupt": skip_corrupt, "threads": spec.threads}
    if role == "train":
        options.update(mode="train", num_clips=spec.num_clips,
                       jitter=tuple(spec.duration_jitter) if spec.duration_jitter else None)
    elif role in ("monitor", "eval"):
        options.update(mode="eval", eval_clips=1 if role == "monitor" else eval_clips)
    else:
        raise ValueError(f"role must be 'train', 'monitor' or 'eval', got {role!r}")
    dataset: video.ClipDataset
    if name in ("ucf101", "hmdb51"):
        if spec.annotations is None:
            raise ValueError(f"dataset {name!r} needs data.video.annotations (the official "
                             "split files folder)")
        cls = video.UCF101 if name == "ucf101" else video.HMDB51
        dataset = cls(root, spec.annotations, split=split, fold=spec.fold, **options)
    elif name == "kinetics":
        if spec.annotations is None:
            raise ValueError("dataset 'kinetics' needs data.video.annotations (a folder of "
                             "<split>.csv files, a path with {split}, or one CSV)")
        csv, column = _kinetics_csv(spec.annotations, split)
        dataset = video.Kinetics(root, csv, split=column, **options)
    else:
        base = Path(root).expanduser()
        dataset = video.VideoFolder(base / split if (base / split).is_dir() else base, **options)
    dataset.targets = [label for _, label in dataset.samples]  # type: ignore[attr-defined]
    return CentreClip(dataset) if role == "monitor" else dataset
