"""``contrastkit eval sts``: semantic textual similarity of a sentence encoder, frozen.

The encoder is a SimCSE checkpoint of ``contrastkit pretrain`` (``--checkpoint``: its model,
pooling and maximum length are read from it, the weights are the checkpoint's) or a pretrained
``transformers`` model as it is (``--model`` name or folder). The sets are SentEval's
(``--senteval-root``, its ``data/downstream`` folder: STS12-16, STS-B, SICK-R,
:mod:`contrastkit.data.sources.sts`) and/or plain pair files (``--pairs``). Results
(:mod:`contrastkit.eval.sts`): Spearman x 100 per sub-set, the "all" aggregation per task,
alignment and uniformity; ``results.json`` and ``results.md`` in ``--output``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch

from contrastkit.checkpoints import read_metadata, weights_file
from contrastkit.cli.common import DefaultsHelpFormatter, guard
from contrastkit.cli.parsing import CommandParser, add_threads_option
from contrastkit.data.sources.sts import TASKS, read_pairs_file, read_task
from contrastkit.eval import report
from contrastkit.eval.results import check_output, header
from contrastkit.eval.sts import evaluate_tasks
from contrastkit.models.text import (
    TextEncoder,
    TextEncoderSpec,
    build_text_encoder,
    embed_sentences,
)
from contrastkit.outputs import staged_folder

__all__ = ["load_text_checkpoint", "sts_command", "sts_parser"]

_PREFIX = "method.backbone."


def sts_parser() -> argparse.ArgumentParser:
    """Parser of ``contrastkit eval sts``."""
    p = CommandParser(
        prog="contrastkit eval sts", formatter_class=DefaultsHelpFormatter,
        description="Spearman correlation of cosine similarities with gold scores (STS12-16, "
        "STS-B, SICK-R; SimCSE's 'all' aggregation), alignment and uniformity.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="contrastkit SimCSE checkpoint (.ckpt)")
    source.add_argument("--model", help="transformers model name or folder, evaluated as is")
    p.add_argument("--senteval-root",
                   help="SentEval's data/downstream folder (default: none; --pairs only)")
    p.add_argument("--tasks", nargs="+", choices=TASKS, default=None,
                   help="tasks under --senteval-root (default: all seven)")
    p.add_argument("--pairs", nargs="+", default=[],
                   help="extra files of 'sentence 1 <TAB> sentence 2 <TAB> score' lines")
    p.add_argument("--pooling", choices=("cls", "mean"), default=None,
                   help="default: the checkpoint's; cls for --model")
    p.add_argument("--max-length", type=int, default=None,
                   help="tokens per sentence (default: the checkpoint's; 32 for --model)")
    p.add_argument("--positive-score", type=float, default=4.0,
                   help="gold score from which a pair counts as positive for alignment")
    p.add_argument("--batch-size", type=int, default=128, help="sentences per forward")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1")
    p.add_argument("--output", help="folder for results.json and results.md (default: print only)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier evaluation")
    add_threads_option(p)
    return p


def load_text_checkpoint(path: str, pooling: str | None = None,
                         max_length: int | None = None) -> TextEncoder:
    """The sentence encoder of a contrastkit SimCSE checkpoint, with its trained weights.

    Raises:
        ValueError: when the checkpoint holds no sentence encoder.
    """
    path = str(weights_file(path))
    entry = read_metadata(path)
    spec = entry.get("backbone") or {}
    if entry.get("method") != "SimCSE" or "pooling" not in spec:
        raise ValueError(f"--checkpoint {path}: not a sentence-encoder checkpoint (method "
                         f"{entry.get('method')!r}); contrastkit eval knn|linear evaluate images")
    spec = TextEncoderSpec(**spec)
    spec = replace(spec, pooling=pooling or spec.pooling,
                   max_length=max_length or spec.max_length)
    encoder = build_text_encoder(spec)
    state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)["state_dict"]
    weights = {k[len(_PREFIX):]: v for k, v in state.items() if k.startswith(_PREFIX)}
    encoder.load_state_dict(weights)
    return encoder


def _encoder(args: argparse.Namespace) -> TextEncoder:
    if args.checkpoint:
        return load_text_checkpoint(args.checkpoint, args.pooling, args.max_length)
    return build_text_encoder(TextEncoderSpec(name=args.model, pooling=args.pooling or "cls",
                                              max_length=args.max_length or 32))


def _markdown(args: argparse.Namespace, results: dict) -> str:
    source = f"--checkpoint {args.checkpoint}" if args.checkpoint else f"--model {args.model}"
    rows = [[task, r["all"], r["mean"], r["wmean"], r["num_pairs"], r.get("alignment", "-"),
             r.get("uniformity", "-")] for task, r in results.items() if task != "avg"]
    table = report.markdown_table(
        ["task", "Spearman all", "mean", "wmean", "pairs", "alignment", "uniformity"], rows)
    return (f"# contrastkit eval sts\n\n{source}\n\n{table}\n"
            f"Average of the tasks' 'all' Spearman (x 100): {results['avg']:.2f}\n")


def _run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.senteval_root is None and args.tasks:
        raise ValueError("--tasks needs --senteval-root (SentEval's data/downstream folder)")
    if args.senteval_root is None and not args.pairs:
        raise ValueError("nothing to evaluate: give --senteval-root and/or --pairs")
    tasks = [read_pairs_file(p) for p in args.pairs]
    if args.senteval_root is not None:
        if not Path(args.senteval_root).expanduser().is_dir():
            raise FileNotFoundError(f"--senteval-root: no folder at {args.senteval_root}")
        tasks = [read_task(args.senteval_root, t) for t in (args.tasks or TASKS)] + tasks
    out, earlier = check_output(args.output, args.overwrite)
    device = torch.device(args.device)
    encoder = _encoder(args).to(device)
    embed = partial(embed_sentences, encoder, batch_size=args.batch_size, device=device)
    results = evaluate_tasks(embed, tasks, positive_score=args.positive_score)
    text = _markdown(args, results)
    with staged_folder(out, earlier) as stage:
        if stage is not None:
            report.write_json(stage / report.RESULTS_JSON,
                              {**header("eval sts", argv), "metrics": results})
            report.write_text(stage / report.RESULTS_MD, text)
    print(text)
    return 0


def sts_command(argv: Sequence[str]) -> int:
    """``contrastkit eval sts ...``; returns the exit status."""
    args = sts_parser().parse_args(list(argv))
    return guard("contrastkit eval sts", lambda: _run(args, argv), args.threads)
