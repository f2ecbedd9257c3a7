"""``contrastkit eval | analyze | compare``: evaluate frozen checkpoints from the command line.

* ``eval {knn,linear,retrieval,lowshot,finetune}``: features of the train and test splits
  (cached, see :mod:`contrastkit.eval.features`), one protocol, ``results.json`` /
  ``results.md`` / ``predictions.npz`` (+ figures) in ``--output``. Video datasets
  (``--data ucf101|hmdb51|kinetics|video_folder``) give one feature per video: the mean over its
  30 views, 10 temporal clips x 3 spatial crops (SCE appendix D.3); ``finetune`` trains the
  whole clip backbone (SCE D.3, :mod:`contrastkit.eval.finetune`).
* ``analyze``: embedding diagnostics and figures (alignment, uniformity, tolerance, margins,
  local separation, hardness weights, temperature functions, 2-D map, SINCERE bound).
* ``compare RUN_A RUN_B``: paired bootstrap of the accuracy difference of two ``eval`` folders.

Bad input (unreadable checkpoint, wrong architecture, ``k`` larger than the bank, NaN features,
...) prints ``contrastkit <command>: error: <message>`` on stderr and returns 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from contrastkit.data.datasets import MixedImageSizesError, UnreadableImageError, collate_images
from contrastkit.errors import run_command
from contrastkit.eval import report
from contrastkit.eval.features import extract_features, feature_cache_key
from contrastkit.outputs import (
    SKIPPED_FILES,
    check_output_folder,
    staged_folder,
    write_skipped_files,
)

PROTOCOLS = ("knn", "linear", "retrieval", "lowshot", "finetune")
DEFAULT_CACHE = Path.home() / ".cache" / "contrastkit" / "features"


# --- argument parsing ---------------------------------------------------------------------------
def _common_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("checkpoint and data")
    g.add_argument("--checkpoint", required=True,
                   help="contrastkit .ckpt, or torchvision-layout ResNet .pth/.safetensors")
    g.add_argument("--data", required=True, help="dataset name (digits needs no --root)")
    g.add_argument("--root", default=None, help="dataset folder or archive")
    g.add_argument("--train-split", default="train", help="bank / training split")
    g.add_argument("--test-split", default="test", help="query / test split")
    g.add_argument("--classes", nargs="+", default=None, metavar="NAME",
                   help="keep only these classes, relabelled 0..k-1 in this order "
                        "(e.g. --classes cat dog for CIFAR-2)")
    g.add_argument("--size", type=int, default=None,
                   help="evaluation image size (default: the pretraining run's, else 32)")
    size = g.add_mutually_exclusive_group()
    size.add_argument("--small", dest="small", action="store_const", const=True, default=None,
                      help="small-dataset transform: resize to --size (default)")
    size.add_argument("--large", dest="small", action="store_const", const=False,
                      help="large-dataset transform: resize to size*256/224, centre crop")
    g.add_argument("--normalize", default=None,
                   help="normalisation name (cifar10, imagenet, ...) or 'none'")
    g.add_argument("--image-size", type=int, default=None,
                   help="resize file images when decoding them into --data-cache-dir")
    g.add_argument("--data-cache-dir", default=None, help="uint8 image cache of file datasets")
    g.add_argument("--load-size", type=int, default=None, metavar="N",
                   help="resize each image's shorter side to N and centre-crop it to NxN when "
                   "loading (folders of images of different sizes; default: the pretraining "
                   "run's data.load_size)")
    g.add_argument("--test-fraction", type=float, default=None, metavar="F",
                   help="--data folder without a test/ sub-folder: hold out this share of each "
                   "class (stratified, seeded) as the test split, the rest is the train split "
                   "(default: the pretraining run's data.test_fraction)")
    g.add_argument("--split-seed", type=int, default=None,
                   help="seed of --test-fraction's split (default: the run's, else 0)")
    g.add_argument("--skip-corrupt", action="store_true",
                   help="skip unreadable image or video files (listed in results.json and "
                   "skipped_files.txt)")
    v = p.add_argument_group("video datasets (ucf101, hmdb51, kinetics, video_folder)")
    v.add_argument("--annotations", default=None,
                   help="split files: ucfTrainTestlist / testTrainMulti_7030_splits folder, "
                   "Kinetics CSV folder or CSV")
    v.add_argument("--fold", type=int, default=1, help="UCF101 / HMDB51 official split")
    v.add_argument("--frames", type=int, default=None,
                   help="frames per clip (default: the pretraining run's, else 8)")
    v.add_argument("--duration", type=float, default=None,
                   help="clip duration in seconds (default: the pretraining run's, else 2.56)")
    v.add_argument("--short-side", type=int, default=None,
                   help="short side of the decoded frames (default: --size, or size*256/224 "
                   "with --large)")
    v.add_argument("--crop-size", type=int, default=None,
                   help="side of the 3 spatial crops (default: the short side)")
    v.add_argument("--eval-clips", type=int, default=10, help="temporal clips per video")
    r = p.add_argument_group("run")
    r.add_argument("--output", default=None,
                   help="output folder (results.json, results.md, ...); must be empty or new")
    r.add_argument("--overwrite", action="store_true",
                   help="replace the earlier evaluation in --output (only its files)")
    r.add_argument("--cache-dir", default=str(DEFAULT_CACHE), help="feature cache folder")
    r.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    r.add_argument("--batch-size", type=int, default=256, help="images per forward pass")
    r.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, mps")
    r.add_argument("--seed", type=int, default=0, help="seed of probes, views and bootstrap")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _linear_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--epochs", type=int, default=None, help="training epochs")
    p.add_argument("--lr", type=float, default=None, help="base learning rate")
    p.add_argument("--linear-batch-size", type=int, default=None, help="probe batch size")


def eval_parser() -> argparse.ArgumentParser:
    """Parser of ``contrastkit eval PROTOCOL ...``."""
    parser = argparse.ArgumentParser(
        prog="contrastkit eval", description="Evaluate a frozen backbone with one protocol.")
    sub = parser.add_subparsers(dest="protocol", required=True, metavar="PROTOCOL")
    common = _common_parser()
    knn = sub.add_parser("knn", parents=[common], help="weighted kNN (Wu et al. 2018)")
    knn.add_argument("--k", type=int, default=200, help="neighbours (DySTreSS: 200)")
    knn.add_argument("--temperature", type=float, default=0.1, help="vote temperature")
    knn.add_argument("--metric", choices=("cosine", "l2"), default="cosine")
    knn.add_argument("--backend", choices=("auto", "faiss", "torch"), default="auto")
    lin = sub.add_parser("linear", parents=[common], help="linear probe (SCE appendix D)")
    lin.add_argument("--protocol", dest="linear_protocol", default="fast",
                     choices=("fast", "sce_d1", "sce_d2", "sce_d3"),
                     help="fast: cached features; sce_d1/sce_d2: augmented images; sce_d3: "
                     "augmented clips (video)")
    _linear_options(lin)
    ret = sub.add_parser("retrieval", parents=[common], help="recall@k (SCE Table 19)")
    ret.add_argument("--ks", type=int, nargs="+", default=[1, 5, 10])
    ret.add_argument("--backend", choices=("auto", "faiss", "torch"), default="auto")
    low = sub.add_parser("lowshot", parents=[common], help="low-shot linear (SCE Table 10)")
    low.add_argument("--shots", nargs="+", default=["16", "32", "64", "all"],
                     help="images per class (integers or 'all')")
    low.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    _linear_options(low)
    fin = sub.add_parser("finetune", parents=[common], help="fine-tune a clip backbone (SCE D.3)")
    fin.add_argument("--epochs", type=int, default=None, help="epochs (SCE D.3: 200)")
    fin.add_argument("--lr", type=float, default=None, help="lr for a batch of 64 (0.1)")
    fin.add_argument("--finetune-batch-size", type=int, default=None, help="batch (64)")
    fin.add_argument("--dropout", type=float, default=None, help="before the classifier (0.8)")
    fin.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    return parser


def analyze_parser() -> argparse.ArgumentParser:
    """Parser of ``contrastkit analyze ...``."""
    parser = argparse.ArgumentParser(
        prog="contrastkit analyze", parents=[_common_parser()],
        description="Embedding diagnostics and figures of a frozen backbone.")
    parser.add_argument("--views", nargs="+", default=None, metavar="PRESET",
                        help="augmentation preset(s) of the two views (default: the "
                        "pretraining run's, else simclr); e.g. 'simclr' or 'strong weak'")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.5])
    parser.add_argument("--dystress", type=float, nargs="+", default=None,
                        metavar="V", help="DySTreSS temperature: T_MIN T_MAX [SHIFT SCALE]")
    parser.add_argument("--embedding", choices=("none", "tsne", "umap"), default="none")
    parser.add_argument("--embedding-samples", type=int, default=2000)
    parser.add_argument("--max-samples", type=int, default=10000,
                        help="test samples used (a seeded random subset when larger)")
    parser.add_argument("--neighbors", type=int, default=10, help="negatives in local separation")
    parser.add_argument("--loss-value", type=float, default=None,
                        help="final SINCERE loss (nats) for the KL bound (needs --num-noise)")
    parser.add_argument("--num-noise", type=int, default=None, help="|N| of SINCERE Thm. 11")
    return parser


def compare_parser() -> argparse.ArgumentParser:
    """Parser of ``contrastkit compare RUN_A RUN_B``."""
    parser = argparse.ArgumentParser(
        prog="contrastkit compare",
        description="Compare two `contrastkit eval` folders with a paired bootstrap interval.")
    parser.add_argument("run_a", help="eval output folder of model A")
    parser.add_argument("run_b", help="eval output folder of model B")
    parser.add_argument("--output", default=None, help="folder for comparison.json/.md")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    return parser


# --- checkpoint, data and features -------------------------------------------------------------
@dataclass
class Setup:
    """Everything resolved from the common options."""

    args: argparse.Namespace
    backbone: nn.Module
    spec: dict
    checkpoint: Path
    sha256: str
    size: int
    small: bool
    normalize: str | None
    device: torch.device
    run_views: tuple[str, str] | None = None
    defaults_from: Path | None = None
    run_video: dict | None = None
    datasets: dict = field(default_factory=dict)
    load_size: int | None = None
    test_fraction: float | None = None
    split_seed: int = 0
    skipped: list[str] = field(default_factory=list)

    def record(self) -> dict:
        """``checkpoint`` and ``data`` sections of ``results.json``."""
        a = self.args
        return {
            "checkpoint": {"path": str(self.checkpoint), "sha256": self.sha256,
                           "backbone": self.spec},
            "data": {"name": a.data, "root": a.root, "train_split": a.train_split,
                     "test_split": a.test_split, "test_fraction": self.test_fraction,
                     "split_seed": self.split_seed if self.test_fraction else None,
                     "size": self.size, "small": self.small, "normalize": self.normalize,
                     "image_size": a.image_size, "load_size": self.load_size,
                     "skip_corrupt": a.skip_corrupt, "num_skipped": len(self.skipped),
                     "skipped_files": list(self.skipped),
                     **({"video": asdict(video_spec(self)), "eval_clips": a.eval_clips}
                        if is_video(self) else {})},
            "defaults_from": str(self.defaults_from) if self.defaults_from else None,
        }


def _run_config(checkpoint: Path) -> tuple[dict, dict, Path | None]:
    """``model`` and ``data`` sections of the run's ``config.yaml`` for
    ``RUN/checkpoints/*.ckpt``, and its path.

    Only contrastkit checkpoints (``.ckpt``) inside a pretraining run folder have one; the view
    size, normalisation, eval resize and view presets default to the pretraining ones, and on
    the run's dataset so do the load size and the held-out split.
    """
    path = checkpoint.parent.parent / "config.yaml"
    if checkpoint.suffix != ".ckpt" or checkpoint.parent.name != "checkpoints" or \
            not path.is_file():
        return {}, {}, None
    try:
        import yaml

        config = yaml.safe_load(path.read_text()) or {}
        model, data = config.get("model") or {}, config.get("data") or {}
    except Exception:  # a config we cannot read only loses the defaults
        return {}, {}, None
    if not isinstance(model, dict) or not isinstance(data, dict):
        return {}, {}, None
    return model, data, path


def _run_views(model: dict) -> tuple[str, str] | None:
    views = model.get("views") or {}
    online, target = views.get("online"), views.get("target")
    if online is None or target is None:
        try:
            module, _, name = str(model["method"]["class_path"]).rpartition(".")
            defaults = getattr(importlib.import_module(module), name).default_views
        except Exception:
            return None
        online, target = online or defaults[0], target or defaults[1]
    return str(online), str(target)


def _load_checkpoint(path: Path) -> tuple[nn.Module, dict]:
    from contrastkit.checkpoints import load_backbone

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


def check_options(args: argparse.Namespace) -> None:
    """Checks of the common options that need no file (run before anything is read).

    Raises:
        ValueError: naming the option.
    """
    from contrastkit.train.datamodule import DATASET_NAMES

    if args.data not in DATASET_NAMES:
        raise ValueError(f"--data {args.data!r} is not a known dataset; one of "
                         f"{', '.join(DATASET_NAMES)} (folder for your own images)")
    for name in ("batch_size", "size", "image_size", "load_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if args.test_fraction is not None and not 0.0 < args.test_fraction < 1.0:
        raise ValueError(f"--test-fraction must be between 0 and 1, got {args.test_fraction}")


def setup(args: argparse.Namespace) -> Setup:
    """Load the checkpoint and resolve size / transform / device / data defaults."""
    from contrastkit.checkpoints import file_hash

    check_options(args)
    device = _device(args.device)
    path = Path(args.checkpoint).expanduser().resolve()
    backbone, spec = _load_checkpoint(path)
    model, data, config_path = _run_config(path)
    views = model.get("views") or {}
    size = args.size or int(views.get("size") or 32)
    small = args.small if args.small is not None else views.get("eval_resize", "small") == "small"
    normalize = args.normalize if args.normalize is not None else views.get("normalize")
    normalize = None if normalize in (None, "none") else normalize
    run_data = data if data.get("dataset") == args.data else {}
    video = data.get("video")
    return Setup(args, backbone, spec, path, file_hash(path), size, small, normalize,
                 device, _run_views(model), config_path,
                 run_video=video if isinstance(video, dict) else None,
                 load_size=_pick(args.load_size, run_data.get("load_size")),
                 test_fraction=_pick(args.test_fraction, run_data.get("test_fraction")),
                 split_seed=int(_pick(args.split_seed, run_data.get("split_seed"), 0)))


def _pick(*values: object) -> object:
    """The first value that is not None (None when all are)."""
    return next((v for v in values if v is not None), None)


def open_split(s: Setup, split: str) -> object:
    """The dataset of ``split`` (opened once per setup).

    Raises:
        ValueError: for a split that does not exist or has no labels.
    """
    if split not in s.datasets and is_video(s):
        from contrastkit.train.video import build_video_dataset

        s.datasets[split] = build_video_dataset(
            s.args.data, s.args.root, split, video_spec(s), role="eval",
            skip_corrupt=s.args.skip_corrupt, eval_clips=s.args.eval_clips)
    if split not in s.datasets:
        from contrastkit.train import datamodule

        a = s.args
        if a.root is None and a.data != "digits":
            raise ValueError(f"--root is required for --data {a.data} (only digits is "
                             "built in)")
        try:
            dataset, skipped = datamodule.open_split(
                a.data, a.root, split, cache_dir=a.data_cache_dir, image_size=a.image_size,
                load_size=s.load_size, classes=a.classes, skip_corrupt=a.skip_corrupt,
                test_fraction=s.test_fraction, split_seed=s.split_seed)
        except datamodule.MissingSplitError as err:
            raise ValueError(
                f"--test-split {split}: {err}; pass --test-fraction 0.2 to hold out a stratified "
                "20% of it as the test split (the rest is the train split), or --test-split "
                "NAME for an existing sub-folder") from None
        if not datamodule.is_labelled(dataset):
            raise ValueError(
                f"--root {a.root}: split {split} has no class sub-folders (unlabelled images): "
                "evaluation needs labels; point --root at a folder with one sub-folder per "
                "class (ROOT/<class>/*.jpg)")
        s.skipped += [p for p in skipped if p not in s.skipped]
        s.datasets[split] = dataset
    return s.datasets[split]


def is_video(s: Setup) -> bool:
    """Whether ``--data`` names a video dataset."""
    from contrastkit.train.video import is_video_dataset

    return is_video_dataset(s.args.data)


def video_spec(s: Setup) -> object:
    """Clip sampling of the evaluation: the options, else the pretraining run's, else SCE D.3.

    Frames are resized on the short side to ``--short-side`` (default ``--size`` with the small
    transform, ``round(size * 256 / 224)`` with the large one: 256 for 224, as in D.3) and the
    3 crops have side ``--crop-size`` (default: the short side, so they cover the frame).
    """
    from contrastkit.train.specs import VideoDataSpec

    a = s.args
    run = s.run_video or {}
    for name in ("frames", "short_side", "crop_size", "eval_clips", "fold"):
        value = getattr(a, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    short = a.short_side or (s.size if s.small else round(s.size * 256 / 224))
    return VideoDataSpec(annotations=a.annotations or run.get("annotations"), fold=a.fold,
                         frames=a.frames or int(run.get("frames") or 8),
                         duration_s=a.duration or float(run.get("duration_s") or 2.56),
                         short_side=short, crop_size=a.crop_size)


def _video_encoder(s: Setup) -> nn.Module:
    from contrastkit.eval.video import MultiViewEncoder
    from contrastkit.train.video import VideoEvalView

    return MultiViewEncoder(s.backbone, VideoEvalView(None, normalize=s.normalize))


def eval_transform(s: Setup, name: str = "eval") -> nn.Module:
    """The SCE appendix D evaluation transform (``eval``) or its training variant."""
    from contrastkit.data import augment

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
    """Cached eval-transform features and labels of ``split``."""
    dataset = open_split(s, split)
    fingerprint: object = None if is_video(s) else _fingerprint(dataset)
    root = str(Path(s.args.root).expanduser().resolve()) if s.args.root else None
    transform: dict = {"preset": "eval", "size": s.size, "small": s.small,
                       "normalize": s.normalize}
    if is_video(s):
        transform = {"preset": "video_views", "normalize": s.normalize,
                     "eval_clips": s.args.eval_clips, **asdict(video_spec(s))}  # type: ignore[call-overload]
        # the videos a split lists, in order (files are identified by path and size)
        samples = getattr(dataset, "samples", [])
        fingerprint = [[str(p), p.stat().st_size, y] for p, y in samples]
    key = feature_cache_key(
        checkpoint_sha256=s.sha256, dataset=s.args.data, root=root, split=split,
        fingerprint=fingerprint, transform=transform, image_size=s.args.image_size,
        classes=getattr(s.args, "classes", None), load_size=s.load_size,
        test_fraction=s.test_fraction, split_seed=s.split_seed,
    )
    cache = None if s.args.no_cache else s.args.cache_dir
    if is_video(s):
        backbone, tf = _video_encoder(s), None
    else:
        backbone, tf = s.backbone, eval_transform(s)
    return extract_features(backbone, dataset, batch_size=s.args.batch_size,  # type: ignore[arg-type]
                            transform=tf, device=s.device, cache_dir=cache,
                            cache_key=key, progress=not s.args.quiet,
                            desc=f"{s.args.data}:{split}")


# --- eval protocols ----------------------------------------------------------------------------
@dataclass
class Outcome:
    """What a protocol produced: numbers, options, predictions and figures."""

    metrics: dict
    config: dict
    pred: Tensor
    labels: Tensor
    figures: list[str] = field(default_factory=list)
    curves: dict[str, list[float]] = field(default_factory=dict)


def _features(s: Setup) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return (*split_features(s, s.args.train_split), *split_features(s, s.args.test_split))


def run_knn(s: Setup, out: Path | None) -> Outcome:
    """Weighted kNN (Wu et al. 2018 eq. 8) with top-1/top-5/mean-per-class accuracy."""
    from contrastkit.eval import knn_predict, mean_per_class_accuracy, topk_accuracy

    a = s.args
    xtr, ytr, xte, yte = _features(s)
    if a.k > len(ytr):
        raise ValueError(f"k={a.k} is larger than the bank ({len(ytr)} images of --train-split "
                         f"{a.train_split}): pass --k {len(ytr)} or less")
    pred, scores = knn_predict(xtr, ytr, xte, k=a.k, temperature=a.temperature, metric=a.metric,
                               backend=a.backend)
    metrics = topk_accuracy(scores, yte, (1, 5))  # top-5 only with more than 5 classes
    metrics["mean_per_class"] = mean_per_class_accuracy(pred, yte)
    config = {"k": a.k, "temperature": a.temperature, "metric": a.metric, "backend": a.backend}
    return Outcome(metrics, config, pred, yte)


def _probe_kwargs(a: argparse.Namespace) -> dict:
    """linear_probe options from --epochs/--lr/--linear-batch-size (defaults 100, 0.1, 256)."""
    def pick(value: object, default: object) -> object:
        return default if value is None else value

    return {"epochs": pick(a.epochs, 100), "lr": pick(a.lr, 0.1),
            "batch_size": pick(a.linear_batch_size, 256)}


def run_linear(s: Setup, out: Path | None) -> Outcome:
    """Linear probe: fast (cached features) or SCE D.1/D.2 on augmented images."""
    from contrastkit.eval import linear_probe

    a = s.args
    if a.linear_protocol == "fast":
        xtr, ytr, xte, yte = _features(s)
        kwargs = _probe_kwargs(a)
        result = linear_probe(xtr, ytr, xte, yte, seed=a.seed, **kwargs)  # type: ignore[arg-type]
        config = {"protocol": "fast", **kwargs, "standardize": True, "seed": a.seed}
    else:
        if (a.linear_protocol == "sce_d3") != is_video(s):
            raise ValueError(f"--protocol {a.linear_protocol} does not apply to --data {a.data}: "
                             "sce_d3 is for video datasets, sce_d1/sce_d2 for images")
        xte, yte = split_features(s, a.test_split)
        runner = _linear_on_clips if is_video(s) else _linear_on_images
        result, config = runner(s, int(yte.max()) + 1)
    classifier = result["classifier"]
    with torch.no_grad():
        pred = classifier(xte.to(classifier.weight.device)).argmax(dim=1).cpu()  # type: ignore[operator, union-attr]
    curve = [float(v) for v in result["loss_curve"]]  # type: ignore[union-attr]
    if not all(np.isfinite(curve)):
        raise ValueError(f"the linear probe diverged (training loss {curve}); lower --lr")
    metrics = {k: result[k] for k in ("top1", "top5", "mean_per_class") if k in result}
    outcome = Outcome(metrics, config, pred, yte, curves={"loss_per_epoch": curve})
    if out is not None:
        from contrastkit.eval.plots import plot_curve

        plot_curve(curve, out / "loss_curve.png", xlabel="epoch",  # type: ignore[arg-type]
                   ylabel="training loss", title="Linear probe")
        outcome.figures.append("loss_curve.png")
    return outcome


def _linear_on_images(s: Setup, test_classes: int) -> tuple[dict, dict]:

    from contrastkit.eval import SCE_D1, SCE_D2, train_linear_on_images

    a = s.args
    base = SCE_D1 if a.linear_protocol == "sce_d1" else SCE_D2
    train, test = open_split(s, a.train_split), open_split(s, a.test_split)
    protocol, classes, train_loader, test_loader = _linear_setup(s, base, train, test,
                                                                 test_classes)
    backbone = s.backbone.to(s.device).eval()
    train_tf, test_tf = eval_transform(s, "eval_train").to(s.device), eval_transform(s)
    test_tf = test_tf.to(s.device)
    result = train_linear_on_images(
        backbone, train_loader, test_loader, protocol,
        lambda x: train_tf(x.to(s.device)), lambda x: test_tf(x.to(s.device)), classes,
        device=s.device, seed=a.seed,
    )
    return result, {"protocol": a.linear_protocol, **asdict(protocol), "seed": a.seed}


def _linear_setup(s: Setup, base, train, test, test_classes: int) -> tuple:
    """A linear protocol with the command line's overrides, the class count and the loaders."""
    from torch.utils.data import DataLoader

    a = s.args
    changes = {k: v for k, v in (("epochs", a.epochs), ("lr", a.lr),
                                 ("batch_size", a.linear_batch_size)) if v is not None}
    protocol = replace(base, **changes)
    classes = max(max(train.targets), test_classes - 1) + 1
    generator = torch.Generator().manual_seed(a.seed)
    collate = None if is_video(s) else collate_images
    train_loader = DataLoader(train, batch_size=protocol.batch_size, shuffle=True,
                              generator=generator, collate_fn=collate)
    test_loader = DataLoader(test, batch_size=a.batch_size, collate_fn=collate)
    return protocol, classes, train_loader, test_loader


def _clip_split(s: Setup, split: str) -> object:
    """Training split of the clip protocols: one random clip and ``size`` crop per video."""
    from contrastkit.train.video import build_video_dataset

    spec = replace(video_spec(s), num_clips=1, crop_size=s.size)  # type: ignore[type-var]
    return build_video_dataset(s.args.data, s.args.root, split, spec, role="train",
                               skip_corrupt=s.args.skip_corrupt)


def _linear_on_clips(s: Setup, test_classes: int) -> tuple[dict, dict]:
    """SCE D.3 linear protocol: random clip, random crop, flip; 30-view test features."""

    from contrastkit.eval import train_linear_on_images
    from contrastkit.eval.video import SCE_D3, flip_only_transform

    a = s.args
    train, test = _clip_split(s, a.train_split), open_split(s, a.test_split)
    protocol, classes, train_loader, test_loader = _linear_setup(s, SCE_D3, train, test,
                                                                 test_classes)
    encoder = _video_encoder(s).to(s.device).eval()
    train_tf = flip_only_transform(s.size, s.normalize).to(s.device)
    result = train_linear_on_images(
        encoder, train_loader, test_loader, protocol, lambda x: train_tf(x.to(s.device)),
        lambda x: x.to(s.device), classes, device=s.device, seed=a.seed,
    )
    return result, {"protocol": "sce_d3", **asdict(protocol), "seed": a.seed}


def run_finetune(s: Setup, out: Path | None) -> Outcome:
    """Fine-tuning of the whole clip backbone (SCE appendix D.3) on a video dataset."""
    from contrastkit.eval.finetune import SCE_D3_FINETUNE, finetune_video

    a = s.args
    if not is_video(s):
        raise ValueError(f"finetune applies to video datasets, not --data {a.data}")
    changes = {k: v for k, v in (("epochs", a.epochs), ("lr", a.lr),
                                 ("batch_size", a.finetune_batch_size),
                                 ("dropout", a.dropout)) if v is not None}
    protocol = replace(SCE_D3_FINETUNE, **changes)
    train, test = _clip_split(s, a.train_split), open_split(s, a.test_split)
    classes = max(max(train.targets), max(test.targets)) + 1  # type: ignore[attr-defined]
    result = finetune_video(s.backbone, train, test, classes, size=s.size,  # type: ignore[arg-type]
                            protocol=protocol, normalize=s.normalize, device=s.device,
                            seed=a.seed, max_steps=a.max_steps)
    pred, yte = result["scores"].argmax(dim=1), result["labels"]  # type: ignore[union-attr]
    metrics = {k: result[k] for k in ("top1", "top5", "mean_per_class") if k in result}
    config = {"protocol": "sce_d3_finetune", **asdict(protocol), "max_steps": a.max_steps,
              "steps": result["steps"], "seed": a.seed}
    curve = [float(v) for v in result["loss_curve"]]  # type: ignore[union-attr]
    return Outcome(metrics, config, pred, yte, curves={"loss_per_epoch": curve})


def run_retrieval(s: Setup, out: Path | None) -> Outcome:
    """Recall@k of cosine retrieval (SCE Table 19); predictions are the 1-NN labels."""
    from contrastkit.eval import nearest_neighbors, retrieval_recall

    a = s.args
    xtr, ytr, xte, yte = _features(s)
    metrics = retrieval_recall(xtr, ytr, xte, yte, a.ks, backend=a.backend)
    _, idx = nearest_neighbors(xtr, xte, 1, metric="cosine", backend=a.backend)
    pred = ytr[idx[:, 0].cpu()]
    return Outcome(metrics, {"ks": list(a.ks), "backend": a.backend}, pred, yte)


def _parse_shots(values: Sequence[str]) -> list[int | None]:
    shots: list[int | None] = []
    for v in values:
        if v == "all":
            shots.append(None)
        elif v.isdigit() and int(v) > 0:
            shots.append(int(v))
        else:
            raise ValueError(f"--shots values must be positive integers or 'all', got {v!r}")
    return shots


def run_lowshot(s: Setup, out: Path | None) -> Outcome:
    """Low-shot linear probes (SCE Table 10); predictions are those of the last shot, 1st seed."""
    from contrastkit.eval import linear_probe, lowshot_linear, sample_per_class

    a = s.args
    shots = _parse_shots(a.shots)
    xtr, ytr, xte, yte = _features(s)
    kwargs = _probe_kwargs(a)
    kwargs["num_classes"] = max(int(ytr.max()), int(yte.max())) + 1
    table = lowshot_linear(xtr, ytr, xte, yte, shots=shots, seeds=a.seeds, **kwargs)
    last, seed = shots[-1], a.seeds[0]
    idx = torch.arange(len(ytr)) if last is None else sample_per_class(ytr, last, seed)
    probe = linear_probe(xtr[idx], ytr[idx], xte, yte, seed=seed, **kwargs)  # type: ignore[arg-type]
    with torch.no_grad():
        pred = probe["classifier"](xte).argmax(dim=1)  # type: ignore[operator]
    metrics = {"shots": {("all" if k is None else str(k)): v for k, v in table.items()}}
    config = {**kwargs, "shots": list(a.shots), "seeds": list(a.seeds),
              "predictions_from": {"shots": "all" if last is None else last, "seed": seed}}
    return Outcome(metrics, config, pred, yte)


RUNNERS: dict[str, Callable[[Setup, Path | None], Outcome]] = {
    "knn": run_knn, "linear": run_linear, "retrieval": run_retrieval, "lowshot": run_lowshot,
    "finetune": run_finetune,
}


def _markdown(title: str, s: Setup, outcome: Outcome) -> str:
    context = {"checkpoint": s.checkpoint.name, "sha256": s.sha256[:16],
               "backbone": s.spec.get("name"), "data": s.args.data,
               "splits": f"{s.args.train_split} -> {s.args.test_split}", **_data_context(s),
               "size": s.size, **{k: v for k, v in outcome.config.items()
                                  if not isinstance(v, (dict, list))}}
    if "shots" not in outcome.metrics:
        return report.metrics_markdown(title, outcome.metrics, context)
    rows = [[shot, r["mean"], r["std"], r["top1"], r["num_train"]]
            for shot, r in outcome.metrics["shots"].items()]
    return (f"# {title}\n\n" + report.markdown_table(["setting", "value"], list(context.items()))
            + "\n" + report.markdown_table(["shots", "top1 mean", "top1 std", "per seed",
                                            "train images"], rows))


def _data_context(s: Setup) -> dict:
    """Report lines on how the splits were made and what was skipped (when it applies)."""
    context: dict = {}
    if s.args.train_split == s.args.test_split:
        context["not held out"] = (f"--train-split and --test-split are both "
                                   f"{s.args.test_split}: the test images are in the bank")
    if s.test_fraction is not None:
        context["held-out test split"] = (f"--test-fraction {s.test_fraction} of each class of "
                                          f"--root, stratified, --split-seed {s.split_seed}")
    if s.load_size is not None:
        context["load size"] = s.load_size
    if s.args.skip_corrupt:
        context["skipped unreadable files"] = len(s.skipped)
    return context


def _header(command: str, argv: Sequence[str]) -> dict:
    from contrastkit import __version__

    return {"command": f"contrastkit {command} " + " ".join(argv), "argv": list(argv),
            "contrastkit_version": __version__,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def eval_command(argv: Sequence[str]) -> int:
    """``contrastkit eval PROTOCOL ...``; returns the exit status."""
    args = eval_parser().parse_args(list(argv))
    return _guard("contrastkit eval", lambda: _eval(args, argv))


def _eval(args: argparse.Namespace, argv: Sequence[str]) -> int:
    if getattr(args, "k", 1) < 1:
        raise ValueError(f"--k must be >= 1, got {args.k}")
    out, earlier = _check_output(args)
    s = setup(args)
    with staged_folder(out, earlier) as stage:
        outcome = RUNNERS[args.protocol](s, stage)
        results = {**_header("eval", argv), **s.record(), "protocol": args.protocol,
                   "config": outcome.config, "metrics": outcome.metrics,
                   "num_test": int(outcome.labels.shape[0]), "figures": outcome.figures,
                   "curves": outcome.curves,
                   "predictions": report.PREDICTIONS if out else None}
        text = _markdown(f"contrastkit eval {args.protocol}", s, outcome)
        if stage is not None:
            report.write_predictions(stage / report.PREDICTIONS, outcome.pred, outcome.labels)
            _write_outputs(stage, s, results, text)
    print(text)
    return 0


#: The option that fixes an error, for the errors that have one.
HINTS: dict[type[BaseException], str] = {
    UnreadableImageError: "pass --skip-corrupt to skip unreadable images (they are listed in "
    "results.json and skipped_files.txt)",
    MixedImageSizesError: "pass --load-size N (e.g. 64) to resize each image's shorter side to "
    "N and centre-crop it when loading (with --data-cache-dir: --image-size N)",
}


def _guard(prog: str, body: Callable[[], int]) -> int:
    """Run ``body``; expected failures become ``prog: error: message`` and exit status 2."""
    return run_command(prog, body, HINTS)


#: What ``eval`` and ``analyze`` write into ``--output`` (``--overwrite`` removes these only).
OUTPUT_FILES = frozenset({report.RESULTS_JSON, report.RESULTS_MD, report.PREDICTIONS,
                          SKIPPED_FILES, "loss_curve.png", "local_separation.png",
                          "similarity_histograms.png", "hardness_weights.png",
                          "temperature_functions.png", "embedding_tsne.png",
                          "embedding_umap.png"})


def _check_output(args: argparse.Namespace) -> tuple[Path | None, list[Path]]:
    """``--output`` and the earlier evaluation's files there that ``--overwrite`` replaces."""
    if not args.output:
        return None, []
    out = Path(args.output)
    return out, check_output_folder(out, overwrite=args.overwrite,
                                    owned=OUTPUT_FILES.__contains__, what="evaluation")


def _write_outputs(out: Path, s: Setup, results: dict, text: str) -> None:
    """``results.json``, ``results.md`` and ``skipped_files.txt`` of an evaluation."""
    report.write_json(out / report.RESULTS_JSON, results)
    report.write_text(out / report.RESULTS_MD, text)
    write_skipped_files(out, s.skipped)


# --- analyze -----------------------------------------------------------------------------------
def _analysis_subset(n: int, limit: int, seed: int) -> Tensor:
    if limit < 2:
        raise ValueError(f"--max-samples must be >= 2, got {limit}")
    if n <= limit:
        return torch.arange(n)
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:limit].sort().values


def _view_features(s: Setup, dataset: object, idx: Tensor, presets: Sequence[str]) -> tuple[
        Tensor, Tensor]:
    """Backbone features of two augmented views of the samples ``idx`` (seeded by --seed)."""
    from contrastkit.data import augment

    online, target = (presets[0], presets[-1])
    make = [augment.preset(p, s.size, normalize=s.normalize).to(s.device) for p in (online, target)]
    backbone = s.backbone.to(s.device).eval()
    z1, z2 = [], []
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(s.args.seed)
        for start in range(0, len(idx), s.args.batch_size):
            chunk = idx[start : start + s.args.batch_size].tolist()
            images = collate_images([dataset[i] for i in chunk])[0].to(s.device)  # type: ignore[index]
            z1.append(backbone(make[0](images)).float().cpu())
            z2.append(backbone(make[1](images)).float().cpu())
    return torch.cat(z1), torch.cat(z2)


def _temperature_functions(a: argparse.Namespace) -> dict[str, object]:
    """``{label: float or callable}`` of --temperatures and --dystress."""
    temps: dict[str, object] = {f"t={t:g}": t for t in a.temperatures}
    if a.dystress is not None:
        from contrastkit.losses.temperature import DySTreSSTemperature

        if len(a.dystress) not in (2, 4):
            raise ValueError("--dystress takes T_MIN T_MAX or T_MIN T_MAX SHIFT SCALE, got "
                             f"{len(a.dystress)} values")
        fn = DySTreSSTemperature(*a.dystress)
        temps["DySTreSS(" + ", ".join(f"{v:g}" for v in a.dystress) + ")"] = fn
    return temps


def _constant(t: float) -> Callable[[Tensor], Tensor]:
    return lambda s: torch.full_like(s, t)


def analyze(s: Setup, out: Path | None) -> tuple[dict, dict, list[str]]:
    """Compute the diagnostics of ``contrastkit analyze`` and write its figures to ``out``.

    Returns:
        ``(metrics, config, figure file names)``.
    """
    from contrastkit.eval import metrics as m

    a = s.args
    if is_video(s):
        raise ValueError(f"analyze supports image datasets only, not --data {a.data}")
    for t in a.temperatures:
        if not t > 0:
            raise ValueError(f"--temperatures must be > 0, got {t}")
    if (a.loss_value is None) != (a.num_noise is None):
        raise ValueError("--loss-value and --num-noise must be given together (SINCERE Thm. 11)")
    temps = _temperature_functions(a)
    presets = tuple(a.views or s.run_views or ("simclr",))
    if len(presets) > 2:
        raise ValueError(f"--views takes one or two presets, got {len(presets)}")
    xtr, ytr = split_features(s, a.train_split)
    xte_all, yte_all = split_features(s, a.test_split)
    idx = _analysis_subset(len(yte_all), a.max_samples, a.seed)
    xte, yte = xte_all[idx], yte_all[idx]
    z1, z2 = _view_features(s, open_split(s, a.test_split), idx, presets)
    k = min(a.neighbors, 2 * len(idx) - 2)
    separation = m.local_separation(z1, z2, k=k)
    margin, target_sims, noise_sims = m.target_noise_margin(xtr, ytr, xte, yte)
    metrics: dict = {
        "alignment": float(m.alignment(z1, z2)),
        "uniformity": float(m.uniformity(xte)),
        "tolerance": float(m.tolerance(xte, yte)),
        "interclass_uniformity": float(m.interclass_uniformity(xte, yte)),
        "target_noise_margin": float(margin),
        "target_similarity_median": float(target_sims.median()),
        "noise_similarity_median": float(noise_sims.median()),
        "positive_similarity_mean": float(separation["positive"].mean()),
        "nearest_negative_similarity_mean": float(separation["negatives"][:, 0].mean()),
    }
    if a.loss_value is not None:
        metrics["sincere_kl_bound"] = float(m.sincere_kl_bound(a.loss_value, a.num_noise))
    config = {"views": list(presets), "num_samples": len(idx), "neighbors": k,
              "temperatures": list(temps), "embedding": a.embedding, "seed": a.seed,
              "loss_value": a.loss_value, "num_noise": a.num_noise}
    figures = [] if out is None else _analysis_figures(out, a, separation, target_sims,
                                                        noise_sims, temps, xte, yte)
    return metrics, config, figures


def _analysis_figures(out: Path, a: argparse.Namespace, separation: dict, target_sims: Tensor,
                      noise_sims: Tensor, temps: dict, xte: Tensor, yte: Tensor) -> list[str]:
    from contrastkit.eval import plots

    plots.plot_local_separation(separation, out / "local_separation.png")
    plots.plot_similarity_histograms(target_sims, noise_sims, out / "similarity_histograms.png")
    plots.plot_hardness_weights(temps, out / "hardness_weights.png")  # type: ignore[arg-type]
    functions = {k: (v if callable(v) else _constant(float(v)))  # type: ignore[arg-type]
                 for k, v in temps.items()}
    plots.plot_temperature_functions(functions, out / "temperature_functions.png")
    names = ["local_separation.png", "similarity_histograms.png", "hardness_weights.png",
             "temperature_functions.png"]
    if a.embedding != "none":
        n = min(len(yte), a.embedding_samples)
        name = f"embedding_{a.embedding}.png"
        plots.plot_embedding_2d(xte[:n], yte[:n], out / name, method=a.embedding, seed=a.seed)
        names.append(name)
    return names


def analyze_command(argv: Sequence[str]) -> int:
    """``contrastkit analyze ...``; returns the exit status."""
    args = analyze_parser().parse_args(list(argv))
    return _guard("contrastkit analyze", lambda: _analyze(args, argv))


def _analyze(args: argparse.Namespace, argv: Sequence[str]) -> int:
    out, earlier = _check_output(args)
    s = setup(args)
    with staged_folder(out, earlier) as stage:
        metrics, config, figures = analyze(s, stage)
        results = {**_header("analyze", argv), **s.record(), "config": config,
                   "metrics": metrics, "figures": figures}
        context = {"checkpoint": s.checkpoint.name, "sha256": s.sha256[:16], "data": args.data,
                   "split": args.test_split, "views": " ".join(config["views"]),
                   **_data_context(s)}
        text = report.metrics_markdown("contrastkit analyze", metrics, context)
        if stage is not None:
            _write_outputs(stage, s, results, text)
    print(text)
    return 0


# --- compare -----------------------------------------------------------------------------------
def compare_command(argv: Sequence[str]) -> int:
    """``contrastkit compare RUN_A RUN_B``; returns the exit status."""
    args = compare_parser().parse_args(list(argv))
    return _guard("contrastkit compare", lambda: _compare(args, argv))


def _numeric(flat: dict) -> dict[str, float]:
    return {k: v for k, v in flat.items() if isinstance(v, (int, float))
            and not isinstance(v, bool)}


def _compare(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from contrastkit.eval import bootstrap_accuracy_difference, significance_verdict

    res_a, pred_a = report.load_run(args.run_a)
    res_b, pred_b = report.load_run(args.run_b)
    labels = pred_a["labels"]
    if pred_a["labels"].shape != pred_b["labels"].shape:
        raise ValueError(f"test labels differ: {args.run_a} has {pred_a['labels'].shape[0]} test "
                         f"samples, {args.run_b} has {pred_b['labels'].shape[0]}")
    mismatched = int((pred_a["labels"] != pred_b["labels"]).sum())
    if mismatched:
        raise ValueError(f"test labels differ between {args.run_a} and {args.run_b} at "
                         f"{mismatched} of {labels.shape[0]} samples: not the same test set")
    diff, low, high = bootstrap_accuracy_difference(
        pred_a["pred"], pred_b["pred"], labels, n_resamples=args.resamples,
        confidence=args.confidence, seed=args.seed)
    verdict = significance_verdict(low, high)
    flat_a = _numeric(report.flatten_metrics(res_a.get("metrics", {})))
    flat_b = _numeric(report.flatten_metrics(res_b.get("metrics", {})))
    keys = [k for k in flat_a if k in flat_b] + [k for k in flat_a if k not in flat_b] + \
        [k for k in flat_b if k not in flat_a]
    side = {k: [flat_a.get(k), flat_b.get(k)] for k in keys}
    summary = {
        **_header("compare", argv),
        "a": {"folder": str(args.run_a), "protocol": res_a.get("protocol"),
              "checkpoint": res_a.get("checkpoint", {}).get("sha256")},
        "b": {"folder": str(args.run_b), "protocol": res_b.get("protocol"),
              "checkpoint": res_b.get("checkpoint", {}).get("sha256")},
        "num_test": int(labels.shape[0]),
        "accuracy_a": float(np.mean(pred_a["pred"] == labels)),
        "accuracy_b": float(np.mean(pred_b["pred"] == labels)),
        "difference": diff, "ci_low": low, "ci_high": high, "confidence": args.confidence,
        "n_resamples": args.resamples, "verdict": verdict, "metrics": side,
    }
    text = _compare_markdown(summary)
    if args.output:
        out = Path(args.output)
        report.write_json(out / "comparison.json", summary)
        report.write_text(out / "comparison.md", text)
    print(text)
    return 0


def _compare_markdown(c: dict) -> str:
    a, b = c["a"], c["b"]
    rows = [["folder", a["folder"], b["folder"]], ["protocol", a["protocol"], b["protocol"]],
            ["checkpoint sha256", (a["checkpoint"] or "-")[:16], (b["checkpoint"] or "-")[:16]],
            ["accuracy of predictions", c["accuracy_a"], c["accuracy_b"]]]
    rows += [[k, *v] for k, v in c["metrics"].items()]
    pct = 100.0
    line = (f"A - B accuracy: {pct * c['difference']:+.2f} points, "
            f"{100 * c['confidence']:g}% bootstrap CI [{pct * c['ci_low']:+.2f}, "
            f"{pct * c['ci_high']:+.2f}] over {c['num_test']} test samples "
            f"({c['n_resamples']} resamples): {c['verdict']}")
    return ("# contrastkit compare\n\n" + report.markdown_table(["", "A", "B"], rows)
            + f"\n{line}\n")
