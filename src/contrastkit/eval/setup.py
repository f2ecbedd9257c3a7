"""What every evaluation of a checkpoint starts from: the request (:class:`EvalRequest`: which
checkpoint, which data, how), the checkpoint with the defaults its run gives it
(:mod:`.run_defaults`), the datasets of the splits and their cached features.

The data come from the dataset registry (:mod:`contrastkit.data.sources.registry`), the same one
pretraining reads; nothing here depends on the training engine.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from contrastkit.checkpoints import (
    ProjectorSpec,
    file_hash,
    is_text_record,
    load_backbone,
    load_projector,
    read_metadata,
    weights_file,
)
from contrastkit.data import augment
from contrastkit.data.augment.views import VideoEvalView
from contrastkit.data.sources import registry
from contrastkit.data.sources.registry import DATASET_NAMES, build_video_dataset
from contrastkit.data.sources.wrappers import fixed_subset
from contrastkit.data.specs import VideoDataSpec
from contrastkit.eval.features import extract_features, feature_cache_key
from contrastkit.eval.run_defaults import RunDefaults, resolve_normalize, run_defaults

DEFAULT_CACHE = Path.home() / ".cache" / "contrastkit" / "features"
#: The query split's name with ``held_out`` (images of ``train_split``, see there).
HELD_OUT_SPLIT = "held-out"


# --- the request -------------------------------------------------------------------------------
@dataclass(frozen=True)
class EvalRequest:
    """What to evaluate and how: the options every ``contrastkit eval`` protocol and
    ``contrastkit analyze`` share, under the same names (``--train-split`` is ``train_split``;
    ``contrastkit eval knn --help`` describes each). None: the pretraining run's setting
    (:mod:`.run_defaults`), else the built-in default.

    Attributes:
        checkpoint: contrastkit ``.ckpt``, an export of one (``.safetensors``, ``.pth``, a
            Hub-format folder), or a torchvision-layout ResNet ``.pth`` / ``.safetensors``.
        data: dataset name of the registry (``digits`` needs no ``root``).
        root: dataset folder or archive.
        space: ``backbone`` (its features) or ``projector`` (the pretraining projector's
            output on them).
        train_split, test_split: bank / training split and query / test split.
        classes: keep only these classes, relabelled ``0..k-1`` in this order.
        size, small, normalize: evaluation image size, small-dataset transform (resize to
            ``size``; False: resize to ``size * 256 / 224`` and centre-crop), normalisation
            name (``"none"``: none; one that contradicts the normalisation the checkpoint
            records is refused: :func:`~.run_defaults.resolve_normalize`).
        image_size, data_cache_dir: resize of file images decoded into the uint8 cache folder.
        load_size, test_fraction, split_seed: shorter-side resize and centre crop when loading;
            a held-out stratified test share of a folder without ``test/`` and its seed.
        subset, held_out, subset_seed: the bank is only the first ``subset`` images of a
            seeded shuffle (seed ``subset_seed``) of ``train_split`` (the images of a
            pretraining run's ``data.subset`` with ``data.seed``); ``held_out`` M: the queries
            are the M images of ``train_split`` that follow them in that shuffle (never trained
            on: a validation split), instead of ``test_split``.
        skip_corrupt: skip unreadable image or video files (listed in the results).
        annotations, fold, frames, duration, short_side, crop_size, eval_clips: video datasets'
            split files, official split, frames per clip, clip seconds, decoded short side,
            side of the 3 spatial crops, temporal clips per video.
        output, overwrite: folder of ``results.json`` / ``results.md`` / predictions and
            figures (None: nothing is written), and whether an earlier evaluation there is
            replaced.
        cache_dir, no_cache: feature cache folder; True: neither read nor write it.
        batch_size, device, seed, quiet: images per forward pass, device name, seed of probes,
            views and bootstrap, no progress bar.
    """

    checkpoint: str | Path
    data: str
    root: str | Path | None = None
    space: Literal["backbone", "projector"] = "backbone"
    train_split: str = "train"
    test_split: str = "test"
    classes: Sequence[str] | None = None
    size: int | None = None
    small: bool | None = None
    normalize: str | None = None
    image_size: int | None = None
    data_cache_dir: str | Path | None = None
    load_size: int | None = None
    test_fraction: float | None = None
    split_seed: int | None = None
    subset: int | None = None
    held_out: int | None = None
    subset_seed: int = 0
    skip_corrupt: bool = False
    annotations: str | None = None
    fold: int = 1
    frames: int | None = None
    duration: float | None = None
    short_side: int | None = None
    crop_size: int | None = None
    eval_clips: int = 10
    output: str | Path | None = None
    overwrite: bool = False
    cache_dir: str | Path = DEFAULT_CACHE
    no_cache: bool = False
    batch_size: int = 256
    device: str = "cpu"
    seed: int = 0
    quiet: bool = False


# --- checkpoint, data and features -------------------------------------------------------------
@dataclass
class Setup:
    """Everything resolved from the common options."""

    request: EvalRequest
    backbone: nn.Module
    spec: dict
    checkpoint: Path
    sha256: str
    size: int
    small: bool
    normalize: str | None
    device: torch.device
    run: RunDefaults = field(default_factory=RunDefaults)
    normalize_from: str = "--normalize"  # where ``normalize`` comes from, in words
    datasets: dict = field(default_factory=dict)
    load_size: int | None = None
    test_fraction: float | None = None
    split_seed: int = 0
    skipped: list[str] = field(default_factory=list)
    not_read: list[str] = field(default_factory=list)  # files of the folders, not images
    projector: ProjectorSpec | None = None  # the projector's spec with --space projector
    # features computed in this process, by (sha256, space, split): the baselines' setups share
    # the dict (their sha256 differ), so a protocol run twice extracts once, cache or not
    features: dict = field(default_factory=dict)

    @property
    def space(self) -> str:
        """``backbone`` or ``projector``: whose output the evaluation reads."""
        return "backbone" if self.projector is None else "projector"

    def record(self) -> dict:
        """``checkpoint`` and ``data`` sections of ``results.json``."""
        a = self.request
        return {
            "checkpoint": {"path": str(self.checkpoint), "sha256": self.sha256,
                           "backbone": self.spec, "space": self.space,
                           "projector": None if self.projector is None
                           else asdict(self.projector)},
            "data": {"name": a.data, "root": a.root, "train_split": a.train_split,
                     "test_split": a.test_split, "test_fraction": self.test_fraction,
                     "split_seed": self.split_seed if self.test_fraction else None,
                     **({"subset": a.subset, "held_out": a.held_out,
                         "subset_seed": a.subset_seed} if a.subset is not None else {}),
                     "size": self.size, "small": self.small, "normalize": self.normalize,
                     "normalize_from": self.normalize_from,
                     "image_size": a.image_size, "load_size": self.load_size,
                     "skip_corrupt": a.skip_corrupt, "num_skipped": len(self.skipped),
                     "skipped_files": list(self.skipped),
                     **({"video": asdict(video_spec(self)), "eval_clips": a.eval_clips}
                        if is_video(self) else {})},
            "defaults_from": str(self.run.source) if self.run.source else None,
        }


def _load_checkpoint(path: Path) -> tuple[nn.Module, dict]:
    """The backbone of ``path`` and its spec (as a dict); one-line errors naming the file."""
    try:
        backbone, spec = load_backbone(path)
    except FileNotFoundError:
        raise
    except ValueError as err:
        if str(path) in str(err):
            raise
        raise ValueError(f"checkpoint {path}: {err}") from err
    except Exception as err:
        raise ValueError(f"checkpoint {path} could not be loaded as a contrastkit checkpoint or "
                         f"a torchvision ResNet state_dict ({type(err).__name__}: {err})") from err
    return backbone, asdict(spec)


def _device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"--device {name} is not a device: use cpu, cuda, cuda:N or "
                         "mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"--device {name}: MPS is not available")
    return device


def check_options(request: EvalRequest) -> None:
    """Checks of the common options that need no file (run before anything is read).

    Raises:
        ValueError: naming the option.
    """
    if request.data not in DATASET_NAMES:
        raise ValueError(f"--data {request.data!r} is not a known dataset; one of "
                         f"{', '.join(DATASET_NAMES)} (folder for your own images)")
    for name in ("batch_size", "size", "image_size", "load_size"):
        value = getattr(request, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if request.test_fraction is not None and not 0.0 < request.test_fraction < 1.0:
        raise ValueError(f"--test-fraction must be between 0 and 1, got {request.test_fraction}")
    for name in ("subset", "held_out"):
        value = getattr(request, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if request.held_out is not None and request.subset is None:
        raise ValueError("--held-out M takes the M images after the first --subset N of "
                         "the train split's shuffle: give --subset N too")


def check_fits_data(path: Path, entry: dict, data: str) -> None:
    """Refuse a checkpoint whose recorded encoder cannot read ``--data``: a sentence encoder
    on any image or video dataset, a clip backbone (``resnet3d_*``) on images, an image
    backbone on videos.

    Raises:
        ValueError: naming the file, the recorded method or backbone, and ``--data``.
    """
    kind = "videos" if registry.is_video_dataset(data) else "images"
    if is_text_record(entry):
        model = (entry.get("backbone") or {}).get("name")
        raise ValueError(f"--checkpoint {path} is a sentence encoder (method "
                         f"{entry.get('method')}, model {model}) and --data {data} holds {kind}: "
                         f"evaluate it with contrastkit eval sts --checkpoint {path}")
    name = entry.get("backbone", {}).get("name") if isinstance(entry.get("backbone"), dict) \
        else None
    if isinstance(name, str) and name.startswith("resnet3d") != (kind == "videos"):
        held = "a clip backbone" if name.startswith("resnet3d") else "an image backbone"
        raise ValueError(f"--checkpoint {path} holds {held} ({name}, method "
                         f"{entry.get('method')}) and --data {data} holds {kind}: evaluate it on "
                         f"a dataset of {'videos' if kind == 'images' else 'images'}")


def setup(request: EvalRequest) -> Setup:
    """Load the checkpoint and resolve size / transform / device / data defaults: an option
    given on the command line, else the pretraining run's setting (:mod:`.run_defaults`),
    else the built-in default."""
    check_options(request)
    if request.held_out is not None:  # the queries: the held-out images of the train split
        request = replace(request, test_split=HELD_OUT_SPLIT)
    device = _device(request.device)
    path = weights_file(Path(request.checkpoint).expanduser().resolve())
    entry = read_metadata(path)
    check_fits_data(path, entry, request.data)
    backbone, spec = _load_checkpoint(path)
    projector = None
    if request.space == "projector":
        backbone, projector = _with_projector(path, backbone)
    run = run_defaults(path, entry)
    size = request.size or int(run.size or 32)
    small = request.small if request.small is not None else (run.eval_resize or "small") == "small"
    normalize, normalize_from = resolve_normalize(request.normalize, run)

    def data_option(name: str) -> Any:  # the command line's, else the run's on its dataset
        given = getattr(request, name)
        return given if given is not None else run.data_option(name, request.data)

    return Setup(request, backbone, spec, path, file_hash(path), size, small, normalize, device,
                 run, normalize_from, load_size=data_option("load_size"),
                 test_fraction=data_option("test_fraction"),
                 split_seed=int(data_option("split_seed") or 0), projector=projector)


def _with_projector(path: Path, backbone: nn.Module) -> tuple[nn.Module, ProjectorSpec]:
    """``projector(backbone(x))`` of the checkpoint (eval mode) and the projector's spec."""
    try:
        head, spec = load_projector(path)
    except ValueError as err:
        raise ValueError(f"--space projector: {err}") from None
    encoder = nn.Sequential(backbone, head).eval()
    encoder.out_dim = head.out_dim  # type: ignore[assignment]
    return encoder, spec


def open_split(s: Setup, split: str) -> object:
    """The dataset of ``split`` (opened once per setup).

    Raises:
        ValueError: for a split that does not exist or has no labels.
    """
    if split not in s.datasets and is_video(s):
        s.datasets[split] = build_video_dataset(
            s.request.data, s.request.root, split, video_spec(s), role="eval",
            skip_corrupt=s.request.skip_corrupt, eval_clips=s.request.eval_clips)
    if split not in s.datasets:
        a = s.request
        if a.root is None and a.data != "digits":
            raise ValueError(f"--root is required for --data {a.data} (only digits is "
                             "built in)")
        source = a.train_split if split == HELD_OUT_SPLIT else split
        try:
            dataset, skipped = registry.open_split(
                a.data, a.root, source, cache_dir=a.data_cache_dir, image_size=a.image_size,
                load_size=s.load_size, classes=a.classes, skip_corrupt=a.skip_corrupt,
                test_fraction=s.test_fraction, split_seed=s.split_seed)
        except registry.MissingSplitError as err:
            raise ValueError(
                f"--test-split {split}: {err}; pass --test-fraction 0.2 to hold out a stratified "
                "20% of it as the test split (the rest is the train split), or --test-split "
                "NAME for an existing sub-folder") from None
        if not registry.is_labelled(dataset):
            raise ValueError(
                f"--root {a.root}: split {split} has no class sub-folders (unlabelled images): "
                "evaluation needs labels; point --root at a folder with one sub-folder per "
                "class (ROOT/<class>/*.jpg)")
        s.skipped += [p for p in skipped if p not in s.skipped]
        new = [p for p in registry.files_not_read(dataset) if p not in s.not_read]
        s.not_read += new
        line = registry.not_read_line(a.root, new)
        if line is not None:
            print(line, file=sys.stderr)
        selection = _selection(s, split)
        if selection is not None:
            dataset = fixed_subset(dataset, selection["size"], selection["seed"],
                                   selection["start"])
        s.datasets[split] = dataset
        classes = getattr(dataset, "classes", [])
        if len(classes) == 1:
            print(f"warning: split {split} has one class ({classes[0]}): every prediction is "
                  "that class, so accuracies are 1.0 and say nothing about the features",
                  file=sys.stderr)
    return s.datasets[split]


def _selection(s: Setup, split: str) -> dict | None:
    """Which images of the split ``subset`` / ``held_out`` keep (positions ``start`` to
    ``start + size`` of the seeded shuffle), or None for the whole split."""
    a = s.request
    if split == HELD_OUT_SPLIT:
        return {"start": a.subset, "size": a.held_out, "seed": a.subset_seed}
    if a.subset is not None and split == a.train_split:
        return {"start": 0, "size": a.subset, "seed": a.subset_seed}
    return None


def is_video(s: Setup) -> bool:
    """Whether ``--data`` names a video dataset."""
    return registry.is_video_dataset(s.request.data)


def video_spec(s: Setup) -> VideoDataSpec:
    """Clip sampling of the evaluation: the options, else the pretraining run's, else those of
    Denize et al. 2023, appendix D.3.

    Frames are resized on the short side to ``--short-side`` (default ``--size`` with the small
    transform, ``round(size * 256 / 224)`` with the large one: 256 for 224, as in D.3) and the
    3 crops have side ``--crop-size`` (default: the short side, so they cover the frame).
    """
    a = s.request
    run = s.run.video or {}
    for name in ("frames", "short_side", "crop_size", "eval_clips", "fold"):
        value = getattr(a, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    short = a.short_side or (s.size if s.small else round(s.size * 256 / 224))
    return VideoDataSpec(annotations=a.annotations or run.get("annotations"), fold=a.fold,
                         frames=a.frames or int(run.get("frames") or 8),
                         duration_s=a.duration or float(run.get("duration_s") or 2.56),
                         short_side=short, crop_size=a.crop_size)


def video_encoder(s: Setup) -> nn.Module:
    """The frozen clip backbone on the 30 views of each video, their features averaged."""
    from contrastkit.eval.video import MultiViewEncoder

    return MultiViewEncoder(s.backbone, VideoEvalView(None, normalize=s.normalize))


def eval_transform(s: Setup, name: str = "eval") -> nn.Module:
    """The evaluation transform (``eval``) of Denize et al. 2023, appendix D, or its training
    variant."""
    return augment.preset(name, s.size, small=s.small, normalize=s.normalize)


def _fingerprint(dataset: object) -> str | None:
    """Identity of the data under ``dataset`` and the wrappers around it (load-size resize,
    class selection): the first ``fingerprint()`` or ``source_fingerprint`` found inside."""
    while dataset is not None:
        method = getattr(dataset, "fingerprint", None)
        if callable(method):
            return str(method())
        if getattr(dataset, "source_fingerprint", None):
            return str(dataset.source_fingerprint)  # type: ignore[attr-defined]
        dataset = getattr(dataset, "dataset", None)
    return None


def split_features(s: Setup, split: str) -> tuple[Tensor, Tensor]:
    """Cached eval-transform features and labels of ``split`` (extracted once per setup and
    split, read from the cache folder when it holds them)."""
    memo = (s.sha256, s.space, split)
    if memo not in s.features:
        s.features[memo] = _extract_split(s, split)
    return s.features[memo]


def _extract_split(s: Setup, split: str) -> tuple[Tensor, Tensor]:
    dataset = open_split(s, split)
    fingerprint: object = None if is_video(s) else _fingerprint(dataset)
    root = str(Path(s.request.root).expanduser().resolve()) if s.request.root else None
    transform: dict = {"preset": "eval", "size": s.size, "small": s.small,
                       "normalize": s.normalize}
    if is_video(s):
        transform = {"preset": "video_views", "normalize": s.normalize,
                     "eval_clips": s.request.eval_clips, **asdict(video_spec(s))}
        # the videos a split lists, in order (files are identified by path and size)
        samples = getattr(dataset, "samples", [])
        fingerprint = [[str(p), p.stat().st_size, y] for p, y in samples]
    key = feature_cache_key(
        checkpoint_sha256=s.sha256, dataset=s.request.data, root=root, split=split,
        fingerprint=fingerprint, transform=transform, image_size=s.request.image_size,
        space=s.space,
        classes=s.request.classes, load_size=s.load_size,
        test_fraction=s.test_fraction, split_seed=s.split_seed,
        **({"selection": selection} if (selection := _selection(s, split)) else {}),
    )
    cache = None if s.request.no_cache else s.request.cache_dir
    if is_video(s):
        backbone, tf = video_encoder(s), None
    else:
        backbone, tf = s.backbone, eval_transform(s)
    return extract_features(backbone, dataset, batch_size=s.request.batch_size,  # type: ignore[arg-type]
                            transform=tf, device=s.device, cache_dir=cache,
                            cache_key=key, progress=not s.request.quiet,
                            desc=f"{s.request.data}:{split}")

