"""``contrastkit embed``: a folder's (or a split's) embeddings by a checkpoint's backbone, as
``embeddings.npy`` (float32, one row per image), ``files.txt`` (the image of each row, or its
index for array datasets), ``labels.npy`` and ``classes.txt`` when the images have classes, and
``embedding_tsne.png``: a 2-D t-SNE map (scikit-learn) coloured by class.

Unlabelled folders are fine here (nothing is scored); the images go through the checkpoint's
evaluation view, as in ``contrastkit eval``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from contrastkit.cli.common import DefaultsHelpFormatter, common_parser, eval_request, guard
from contrastkit.cli.parsing import CommandParser
from contrastkit.data.sources import registry
from contrastkit.eval.features import extract_features
from contrastkit.eval.results import write_outputs
from contrastkit.eval.setup import eval_transform, is_video, setup
from contrastkit.outputs import staged_folder

#: What ``embed`` writes into ``--output`` (``--overwrite`` removes these only).
EMBED_FILES = frozenset({"embeddings.npy", "files.txt", "labels.npy", "classes.txt",
                         "embedding_tsne.png", "results.json", "results.md",
                         "skipped_files.txt"})


def embed_parser() -> argparse.ArgumentParser:
    """Parser of ``contrastkit embed``."""
    parser = CommandParser(
        prog="contrastkit embed", parents=[common_parser()],
        formatter_class=DefaultsHelpFormatter,
        description="Write the embeddings of a folder's images (.npy + file list) and a "
        "t-SNE map of them coloured by class.")
    parser.add_argument("--split", default=None,
                        help="split to embed (default: the whole --root folder for --data "
                        "folder, else train)")
    parser.add_argument("--perplexity", type=float, default=30.0, help="t-SNE perplexity")
    for action in parser._actions:
        if action.dest == "output":  # required here: embed writes files, it prints no table
            action.help = ("output folder (embeddings.npy, files.txt, embedding_tsne.png, "
                           "...); must be empty or new (no default: required)")
    return parser


def _files(dataset: object) -> list[str] | None:
    """The file of each sample, looking through wrappers (None for array datasets)."""
    while dataset is not None:
        samples = getattr(dataset, "samples", None)
        if samples is not None:
            return [str(p) for p, _ in samples]
        dataset = getattr(dataset, "dataset", None)
    return None


def embed_command(argv: Sequence[str]) -> int:
    """``contrastkit embed ...``; returns the exit status."""
    args = embed_parser().parse_args(list(argv))
    return guard("contrastkit embed", lambda: _embed(args, argv), args.threads)


def _embed(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from contrastkit.eval.results import header

    if args.output is None:
        raise ValueError("--output DIR is required (embeddings.npy, files.txt, "
                         "embedding_tsne.png)")
    out = Path(args.output)
    earlier = _earlier(out, args.overwrite)
    s = setup(eval_request(args))
    if is_video(s):
        raise ValueError(f"embed applies to image datasets, not --data {args.data}")
    whole = args.split is None and args.data == "folder"
    split = args.split or "train"
    dataset, skipped = registry.open_split(
        args.data, args.root, split, cache_dir=args.data_cache_dir, image_size=args.image_size,
        load_size=s.load_size, classes=args.classes, skip_corrupt=args.skip_corrupt,
        test_fraction=None if whole else s.test_fraction, split_seed=s.split_seed)
    s.skipped += skipped
    z, labels = extract_features(s.backbone, dataset, batch_size=args.batch_size,
                                 transform=eval_transform(s), device=s.device,
                                 progress=not args.quiet, desc=f"{args.data}:{split}")
    classes = [str(c) for c in getattr(dataset, "classes", [])]
    files = _files(dataset) or [f"{args.data}:{split}[{i}]" for i in range(len(labels))]
    with staged_folder(out, earlier) as stage:
        assert stage is not None
        np.save(stage / "embeddings.npy", z.cpu().numpy().astype(np.float32))
        (stage / "files.txt").write_text("".join(f"{f}\n" for f in files))
        if classes:
            np.save(stage / "labels.npy", labels.cpu().numpy())
            (stage / "classes.txt").write_text("".join(f"{c}\n" for c in classes))
        _tsne_figure(z, labels if classes else None, classes, stage / "embedding_tsne.png",
                     args.perplexity, args.seed)
        text = (f"# contrastkit embed\n\n{len(files)} images of {args.root or args.data} "
                f"({'whole folder' if whole else 'split ' + split}), {z.shape[1]}-dimensional "
                f"embeddings by {s.checkpoint.name}: embeddings.npy, files.txt"
                + (", labels.npy, classes.txt" if classes else "") + ", embedding_tsne.png\n")
        results = {**header("embed", argv), **s.record(), "split": "all" if whole else split,
                   "num_images": len(files), "dim": int(z.shape[1]),
                   "labelled": bool(classes)}
        write_outputs(stage, s, results, text)
    print(text)
    return 0


def _earlier(out: Path, overwrite: bool) -> list[Path]:
    from contrastkit.outputs import check_output_folder

    return check_output_folder(out, overwrite=overwrite, owned=EMBED_FILES.__contains__,
                               what="embedding")


def _tsne_figure(z: torch.Tensor, labels: torch.Tensor | None, classes: list[str], path: Path,
                 perplexity: float, seed: int) -> None:
    from contrastkit.eval.report_figures import plot_embedding_map

    try:
        from sklearn.manifold import TSNE
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("t-SNE needs scikit-learn: pip install 'contrastkit[data]'") from exc
    if z.shape[0] < 5:
        raise ValueError(f"a 2-D map needs at least 5 images, got {z.shape[0]}")
    x = torch.nn.functional.normalize(z.double(), dim=1).cpu().numpy()
    perp = min(perplexity, max(1.0, (x.shape[0] - 1) / 3))
    xy = TSNE(n_components=2, perplexity=perp, init="pca", random_state=seed).fit_transform(x)
    plot_embedding_map(xy, None if labels is None else labels.cpu().numpy(), classes, path)
