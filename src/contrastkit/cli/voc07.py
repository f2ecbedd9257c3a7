"""``contrastkit eval voc07``: VOC2007 classification with one-vs-rest linear SVMs on frozen
features, many-shot and low-shot (SCE, Denize et al. 2023, Tables 9 and 10;
:mod:`contrastkit.eval.voc_svm`).

Images of ``--root`` (``VOCdevkit/VOC2007``, :mod:`contrastkit.data.sources.voc07`): shorter side
resized to ``round(size * 256 / 224)`` (256 for 224), centre crop ``size``; pooled backbone
features (cached like the other protocols), L2-normalised. For each ``--shots`` value and each
of ``--seeds`` (one run for ``all``): the SVMs, per-class AP and mAP on ``--test-split``.

``predictions.npz`` holds, for the first seed of the last ``--shots`` value, one decision per
(test image, class) pair that is not difficult, ``pred = score > 0`` and ``labels`` (1
positive, 0 negative), image-major; ``contrastkit compare`` bootstraps the accuracy of these
decisions and lists the mAPs of the two runs side by side.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from contrastkit.checkpoints import file_hash, load_backbone, read_metadata, weights_file
from contrastkit.cli.common import DefaultsHelpFormatter, guard, memory_hints
from contrastkit.cli.parsing import CommandParser, add_threads_option
from contrastkit.data import augment
from contrastkit.data.sources.voc07 import DIFFICULT, PRESENT, VOC07Images, read_voc07
from contrastkit.data.sources.wrappers import ResizedSquare
from contrastkit.eval import report
from contrastkit.eval.features import extract_features, feature_cache_key
from contrastkit.eval.results import header
from contrastkit.eval.run_defaults import resolve_normalize, run_defaults
from contrastkit.eval.setup import DEFAULT_CACHE
from contrastkit.eval.voc_svm import VOC07_SVM, SVMProtocol, sample_low_shot, voc07_svm
from contrastkit.outputs import check_output_folder, staged_folder

#: What ``eval voc07`` writes into ``--output`` (``--overwrite`` removes these only).
OUTPUT_FILES = frozenset({report.RESULTS_JSON, report.RESULTS_MD, report.PREDICTIONS})
COST_SELECTION = ("per class, by stratified k-fold cross-validation on the training split "
                  "(mean held-out AP); the public PCL/ReSSL/FAIR low-shot code keeps the "
                  "cost with the best AP on the test split instead")


def voc07_parser() -> argparse.ArgumentParser:
    """Parser of ``contrastkit eval voc07``."""
    p = CommandParser(
        prog="contrastkit eval voc07", formatter_class=DefaultsHelpFormatter,
        description="VOC2007 classification with one-vs-rest linear SVMs on frozen features "
        "(SCE Tables 9-10): per-class AP and mAP (VOC07 11-point, all-point).")
    p.add_argument("--checkpoint", required=True, help="contrastkit .ckpt (a run folder: its "
                   "checkpoints/last.ckpt) or ResNet .pth")
    p.add_argument("--root", required=True, help="VOCdevkit, or its VOC2007 folder")
    p.add_argument("--train-split", default="trainval", help="SVM training split")
    p.add_argument("--test-split", default="test", help="AP split")
    p.add_argument("--classes", nargs="+", default=None, metavar="NAME",
                   help="only these classes (default: every <class>_<split>.txt list)")
    p.add_argument("--size", type=int, default=224, help="centre crop side")
    p.add_argument("--normalize", default=None,
                   help="normalisation name or 'none' (default: the one the checkpoint or export "
                   "records, else none; one that contradicts the record is refused)")
    p.add_argument("--shots", nargs="+", default=["16", "32", "64", "all"],
                   help="positives k per class, with (classes - 1) k negatives (integers or "
                   "'all'; SCE Table 10)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4],
                   help="seeded draws of each low-shot setting (one run for 'all')")
    p.add_argument("--costs", type=float, nargs="+", default=list(VOC07_SVM.costs),
                   help="SVM costs C tried by cross-validation")
    p.add_argument("--folds", type=int, default=VOC07_SVM.folds, help="cross-validation folds")
    p.add_argument("--jobs", type=int, default=1, help="classes trained in parallel")
    p.add_argument("--output", default=None,
                   help="output folder, empty or new (default: print only)")
    p.add_argument("--overwrite", action="store_true", help="replace the earlier evaluation")
    p.add_argument("--cache-dir", default=str(DEFAULT_CACHE), help="feature cache folder")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    p.add_argument("--batch-size", type=int, default=64, help="images per forward pass")
    p.add_argument("--device", default="cpu", help="cpu, cuda, ...")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_threads_option(p)
    return p


def _parse_shots(values: Sequence[str]) -> list[int | None]:
    shots: list[int | None] = []
    for v in values:
        if v != "all" and not (v.isdigit() and int(v) > 0):
            raise ValueError(f"--shots values must be positive integers or 'all', got {v!r}")
        shots.append(None if v == "all" else int(v))
    return shots


def _check(args: argparse.Namespace) -> list[int | None]:
    for name in ("size", "batch_size", "folds", "jobs"):
        if getattr(args, name) < (2 if name == "folds" else 1):
            raise ValueError(f"--{name.replace('_', '-')} is too small: {getattr(args, name)}")
    if not args.seeds:
        raise ValueError("--seeds needs at least one seed")
    if any(c <= 0 for c in args.costs):
        raise ValueError(f"--costs must be positive, got {args.costs}")
    return _parse_shots(args.shots)


def _features(args: argparse.Namespace, backbone: torch.nn.Module, sha256: str, split,
              normalize: str | None) -> np.ndarray:
    images = VOC07Images(split)
    load = round(args.size * 256 / 224)
    transform = augment.preset("eval", args.size, small=False, normalize=normalize)
    key = feature_cache_key(checkpoint_sha256=sha256, dataset="voc07",
                            root=str(Path(args.root).expanduser().resolve()), split=split.split,
                            fingerprint=images.fingerprint(), load_size=load,
                            transform={"preset": "eval", "size": args.size, "small": False,
                                       "normalize": normalize})
    features, index = extract_features(
        backbone, ResizedSquare(images, load), batch_size=args.batch_size, transform=transform,
        device=args.device, cache_dir=None if args.no_cache else args.cache_dir, cache_key=key,
        progress=not args.quiet, desc=f"voc07:{split.split}")
    if not torch.equal(index, torch.arange(len(images))):
        raise ValueError(f"feature cache entry of split {split.split} is out of order")
    return features.numpy()


def _table(xtr, ttr, xte, tte, shots, seeds, protocol, classes,
           jobs: int) -> tuple[dict, dict]:
    """``{shot: summary}`` and the last shot's first run (its scores and per-class APs)."""
    table, last = {}, {}
    for shot in shots:
        runs = []
        for seed in (seeds[:1] if shot is None else seeds):
            mask = None if shot is None else sample_low_shot(ttr, shot, seed, classes)
            runs.append(voc07_svm(xtr, ttr, xte, tte, protocol=protocol, seed=seed,
                                  subset=mask, jobs=jobs))
        summary: dict = {}
        for name in ("map_voc07", "map_all_point", "map_interpolated"):
            values = np.array([r[name] for r in runs])
            summary[name] = {"mean": float(values.mean()),
                             "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
                             "per_seed": values.tolist()}
        summary["seeds"] = list(seeds[:1] if shot is None else seeds)
        summary["num_positives"] = runs[0]["num_positives"]
        summary["num_negatives"] = runs[0]["num_negatives"]
        table["all" if shot is None else str(shot)] = summary
        last = runs[0]
    return table, last


def _markdown(results: dict, classes: list[str], last: dict) -> str:
    context = [["checkpoint", Path(results["checkpoint"]["path"]).name],
               ["sha256", results["checkpoint"]["sha256"][:16]],
               ["splits", f"{results['data']['train_split']} -> {results['data']['test_split']}"],
               ["size", results["data"]["size"]], ["cost selection", COST_SELECTION]]
    rows = [[shot, s["map_voc07"]["mean"], s["map_voc07"]["std"], s["map_all_point"]["mean"],
             s["map_all_point"]["std"], len(s["seeds"])]
            for shot, s in results["metrics"]["shots"].items()]
    per_class = [[name, last["ap_voc07"][c], last["ap_all_point"][c], last["costs"][c]]
                 for c, name in enumerate(classes)]
    return ("# contrastkit eval voc07\n\n" + report.markdown_table(["setting", "value"], context)
            + "\n" + report.markdown_table(["shots", "mAP 11-point", "std", "mAP all-point",
                                            "std", "draws"], rows)
            + f"\nPer class (shots {results['config']['predictions_from']['shots']}, first "
            "draw):\n\n" + report.markdown_table(["class", "AP 11-point", "AP all-point",
                                                   "cost"], per_class))


def voc07_command(argv: Sequence[str]) -> int:
    """``contrastkit eval voc07 ...``; returns the exit status."""
    args = voc07_parser().parse_args(list(argv))
    return guard("contrastkit eval voc07", lambda: _voc07(args, argv), args.threads,
                 hints=memory_hints())


def _voc07(args: argparse.Namespace, argv: Sequence[str]) -> int:
    shots = _check(args)
    out = Path(args.output) if args.output else None
    earlier = [] if out is None else check_output_folder(
        out, overwrite=args.overwrite, owned=OUTPUT_FILES.__contains__, what="evaluation")
    path = weights_file(Path(args.checkpoint).expanduser().resolve())
    backbone, spec = load_backbone(path)
    run = run_defaults(path, read_metadata(path))
    normalize, _ = resolve_normalize(args.normalize, run)
    train = read_voc07(args.root, args.train_split, args.classes)
    test = read_voc07(args.root, args.test_split, train.classes)
    for shot in shots:  # a class too small for a --shots value stops before any feature
        if shot is not None:
            sample_low_shot(train.targets, shot, args.seeds[0], train.classes)
    sha256 = file_hash(path)
    xtr = _features(args, backbone, sha256, train, normalize)
    xte = _features(args, backbone, sha256, test, normalize)
    protocol = SVMProtocol(costs=tuple(args.costs), folds=args.folds)
    table, last = _table(xtr, train.targets, xte, test.targets, shots, args.seeds, protocol,
                         train.classes, args.jobs)
    keep = test.targets != DIFFICULT
    pred = (last["scores"] > 0)[keep]
    labels = (test.targets == PRESENT)[keep]
    results = {
        **header("eval voc07", argv),
        "checkpoint": {"path": str(path), "sha256": sha256, "backbone": asdict(spec)},
        "data": {"name": "voc07", "root": args.root, "train_split": args.train_split,
                 "test_split": args.test_split, "classes": train.classes, "size": args.size,
                 "load_size": round(args.size * 256 / 224), "normalize": normalize,
                 "num_train": len(train.ids), "num_test": len(test.ids)},
        "protocol": "voc07",
        "config": {"svm": asdict(protocol), "cost_selection": COST_SELECTION,
                   "shots": list(args.shots), "seeds": list(args.seeds),
                   "predictions_from": {"shots": args.shots[-1], "seed": args.seeds[0]}},
        "metrics": {"shots": table,
                    "per_class": {name: {"ap_voc07": last["ap_voc07"][c],
                                         "ap_all_point": last["ap_all_point"][c],
                                         "cost": last["costs"][c]}
                                  for c, name in enumerate(train.classes)}},
        "num_test": int(labels.size),
        "predictions": (report.PREDICTIONS + ": one decision per non-difficult (test image, "
                        "class) pair, score > 0") if out else None,
    }
    text = _markdown(results, train.classes, last)
    with staged_folder(out, earlier) as stage:
        if stage is not None:
            report.write_predictions(stage / report.PREDICTIONS, pred, labels)
            report.write_json(stage / report.RESULTS_JSON, results)
            report.write_text(stage / report.RESULTS_MD, text)
    print(text)
    return 0
