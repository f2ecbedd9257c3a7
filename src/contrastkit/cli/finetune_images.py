"""``contrastkit eval finetune --data <image set>``: fine-tune the whole pretrained network with a
new classifier (DySTreSS appendix A.2, :mod:`contrastkit.eval.finetune_images`).

Image sets: the DySTreSS transfer sets in their distributed layouts
(:mod:`contrastkit.data.sources.transfer_sets`: ``flowers102``, ``mura``, ``isic2016``, ``mhist``,
``chaoyang``) and every image dataset of the registry (``cifar10``, ``cifar100``, ``folder`` for
class folders, ...). Video datasets go to the clip fine-tuning of SCE D.3 (:mod:`.eval`).

``--output`` holds ``finetune_state.pt`` from the first epoch on (the resumable state:
``--resume`` continues it) and, at the end, ``results.json``, ``results.md`` and
``predictions.npz`` as the other ``eval`` commands; one run per folder.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import torch

from contrastkit.checkpoints import file_hash, load_backbone, read_metadata, weights_file
from contrastkit.cli.common import DefaultsHelpFormatter, guard, memory_hints
from contrastkit.cli.parsing import CommandParser, add_threads_option
from contrastkit.data import augment
from contrastkit.data.sources import registry
from contrastkit.data.sources.transfer_sets import (
    TRANSFER_SETS,
    FileListImages,
    check_images,
    read_transfer_set,
)
from contrastkit.data.sources.wrappers import ResizedSquare
from contrastkit.eval import report
from contrastkit.eval.finetune_images import (
    DYSTRESS_A2,
    DYSTRESS_CLASS_WEIGHTS,
    finetune_images,
)
from contrastkit.eval.results import header
from contrastkit.eval.run_defaults import resolve_normalize, run_defaults
from contrastkit.outputs import check_output_folder, staged_folder

STATE = "finetune_state.pt"
OUTPUT_FILES = frozenset({report.RESULTS_JSON, report.RESULTS_MD, report.PREDICTIONS, STATE})
#: Default (train, test) splits of the transfer sets.
SPLITS = {"flowers102": ("train", "test"), "mura": ("train", "valid"),
          "isic2016": ("train", "test"), "mhist": ("train", "test"),
          "chaoyang": ("train", "test")}


def finetune_images_parser() -> argparse.ArgumentParser:
    """Parser of ``contrastkit eval finetune`` on image data sets."""
    p = CommandParser(
        prog="contrastkit eval finetune", formatter_class=DefaultsHelpFormatter,
        description="Fine-tune the whole network with a new classifier on an image data set "
        "(DySTreSS appendix A.2). Video data sets (SCE D.3) have their own options: "
        "contrastkit eval finetune --data ucf101 --help.")
    p.add_argument("--checkpoint", required=True, help="contrastkit .ckpt (a run folder: its "
                   "checkpoints/last.ckpt) or ResNet .pth")
    p.add_argument("--data", required=True,
                   help=f"{', '.join(TRANSFER_SETS)}, or an image dataset of the registry "
                   "(cifar10, folder, ...)")
    p.add_argument("--root", default=None,
                   help="the data set's folder (default: none, for data sets that need none)")
    p.add_argument("--train-split", default=None, help="default: train")
    p.add_argument("--test-split", default=None, help="default: test (mura: valid)")
    p.add_argument("--protocol", default="dystress_a2", choices=("dystress_a2",),
                   help="named recipe (DySTreSS A.2: 50 epochs, SGD, batch 128, lr 0.1 / 1.0 "
                   "binary, x0.1 at epochs 30 and 40)")
    a2 = DYSTRESS_A2
    p.add_argument("--epochs", type=int, default=None,
                   help=f"default: the protocol's ({a2.epochs})")
    p.add_argument("--lr", type=float, default=None, help="multi-class and binary lr "
                   f"(default: the protocol's, {a2.lr} / {a2.lr_binary} binary)")
    p.add_argument("--finetune-batch-size", type=int, default=None,
                   help=f"default: the protocol's ({a2.batch_size})")
    p.add_argument("--milestones", type=int, nargs="+", default=None,
                   help=f"epochs where the lr is multiplied by {a2.gamma} "
                   f"(default: the protocol's, {' '.join(map(str, a2.milestones))})")
    p.add_argument("--size", type=int, default=None,
                   help=f"training / test crop (default: the protocol's, {a2.size})")
    p.add_argument("--normalize", default=None,
                   help="normalisation name or 'none' (default: the one the checkpoint or export "
                   "records, else none; one that contradicts the record is refused)")
    p.add_argument("--class-weights", default="paper",
                   help="'paper' (DySTreSS A.2 weights for mura, isic2016, mhist, chaoyang; "
                   "none elsewhere), 'none', or comma-separated numbers")
    p.add_argument("--output", required=True, help="output folder (one run per folder)")
    p.add_argument("--overwrite", action="store_true", help="replace the earlier run there")
    p.add_argument("--resume", action="store_true", help=f"continue from --output/{STATE}")
    p.add_argument("--device", default="cpu", help="cpu, cuda, ...")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the augmentations, the classifier and the data order")
    p.add_argument("--quiet", action="store_true", help="no line per epoch on stderr")
    add_threads_option(p)
    return p


def _protocol(args: argparse.Namespace):
    changes = {k: v for k, v in (("epochs", args.epochs), ("batch_size",
                                                          args.finetune_batch_size),
                                 ("size", args.size)) if v is not None}
    if args.lr is not None:
        changes.update(lr=args.lr, lr_binary=args.lr)
    if args.milestones is not None:
        changes["milestones"] = tuple(args.milestones)
    return replace(DYSTRESS_A2, **changes)


def _weights(args: argparse.Namespace) -> tuple[float, ...] | None:
    if args.class_weights == "paper":
        return DYSTRESS_CLASS_WEIGHTS.get(args.data)
    if args.class_weights == "none":
        return None
    try:
        return tuple(float(v) for v in args.class_weights.split(","))
    except ValueError:
        raise ValueError(f"--class-weights must be 'paper', 'none' or numbers, got "
                         f"{args.class_weights!r}") from None


def _split(args: argparse.Namespace, split: str, load: int):
    if args.root is None and args.data != "digits":
        raise ValueError(f"--root is required for --data {args.data}")
    if args.data in TRANSFER_SETS:
        files = read_transfer_set(args.data, args.root, split)
        check_images(files)
        return ResizedSquare(FileListImages(files), load), files.classes
    if args.data not in registry.DATASET_NAMES or registry.is_video_dataset(args.data):
        raise ValueError(f"--data {args.data!r} is not an image data set; one of "
                         f"{', '.join(TRANSFER_SETS)}, {', '.join(registry.DATASET_NAMES)}")
    dataset, _ = registry.open_split(args.data, args.root, split, load_size=load)
    return dataset, list(dataset.classes)  # type: ignore[attr-defined]


def finetune_images_command(argv: Sequence[str]) -> int:
    """``contrastkit eval finetune ...`` on an image data set; returns the exit status."""
    args = finetune_images_parser().parse_args(list(argv))
    return guard("contrastkit eval finetune", lambda: _finetune(args, argv), args.threads,
                 hints=memory_hints("--finetune-batch-size"))


def _finetune(args: argparse.Namespace, argv: Sequence[str]) -> int:
    protocol = _protocol(args)
    weights = _weights(args)
    out = Path(args.output)
    earlier: list[Path] = []
    if args.resume:
        if not (out / STATE).is_file():
            raise FileNotFoundError(f"--resume: {out / STATE} does not exist")
    else:
        earlier = check_output_folder(out, overwrite=args.overwrite,
                                      owned=OUTPUT_FILES.__contains__, what="fine-tuning")
    path = weights_file(Path(args.checkpoint).expanduser().resolve())
    backbone, spec = load_backbone(path)
    normalize, _ = resolve_normalize(args.normalize, run_defaults(path, read_metadata(path)))
    train_split, test_split = (args.train_split or SPLITS.get(args.data, ("train",))[0],
                               args.test_split or SPLITS.get(args.data, ("", "test"))[1])
    load = round(protocol.size * 256 / 224)
    train, classes = _split(args, train_split, load)
    test, test_classes = _split(args, test_split, load)
    if test_classes != classes:
        raise ValueError(f"--data {args.data}: splits {train_split} and {test_split} have "
                         "different classes")
    device = torch.device(args.device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    sha256 = file_hash(path)
    record = {"checkpoint_sha256": sha256, "data": args.data, "splits": [train_split,
                                                                         test_split]}
    out.mkdir(parents=True, exist_ok=True)
    result = finetune_images(
        backbone, train, test, len(classes),
        train_transform=augment.preset("eval_train", protocol.size, normalize=normalize,
                                       generator=generator).to(device),
        test_transform=augment.preset("eval", protocol.size, small=False,
                                      normalize=normalize).to(device),
        generator=generator, protocol=protocol, class_weights=weights, device=device,
        seed=args.seed, state_path=out / STATE, resume=args.resume, record=record,
        log=None if args.quiet else lambda line: print(line, file=sys.stderr, flush=True))
    metrics = {k: result[k] for k in ("top1", "mean_per_class", "auroc") if k in result}
    binary = len(classes) == 2
    config = {"protocol": args.protocol, **asdict(protocol), "class_weights": weights,
              "loss": ("BCEWithLogits" if binary else "cross_entropy")
              + (("(pos_weight)" if binary else "(weight)") if weights else ""),
              "seed": args.seed, "resumed": args.resume}
    results = {**header("eval finetune", argv),
               "checkpoint": {"path": str(path), "sha256": sha256, "backbone": asdict(spec)},
               "data": {"name": args.data, "root": args.root, "train_split": train_split,
                        "test_split": test_split, "classes": classes, "size": protocol.size,
                        "load_size": load, "normalize": normalize},
               "protocol": "finetune", "config": config, "metrics": metrics,
               "num_test": int(result["labels"].shape[0]),  # type: ignore[attr-defined]
               "curves": {"loss_per_epoch": result["loss_curve"],
                          "lr_per_epoch": result["lr_curve"]},
               "state": STATE, "predictions": report.PREDICTIONS}
    text = report.metrics_markdown(
        "contrastkit eval finetune", metrics,
        {"checkpoint": path.name, "data": args.data, "splits": f"{train_split} -> {test_split}",
         **{k: v for k, v in config.items() if not isinstance(v, (list, tuple, dict))}})
    with staged_folder(out, [e for e in earlier if e.name != STATE]) as stage:
        assert stage is not None
        report.write_predictions(stage / report.PREDICTIONS, result["pred"], result["labels"])
        report.write_json(stage / report.RESULTS_JSON, results)
        report.write_text(stage / report.RESULTS_MD, text)
    print(text)
    return 0
