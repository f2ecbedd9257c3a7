"""The ``contrastkit`` command: ``pretrain | eval | analyze | compare | embed | export | data``
(the dispatcher; each sub-command is a module of this package)."""

from __future__ import annotations

import importlib
import sys

from contrastkit.errors import plain_warnings

USAGE = """usage: contrastkit COMMAND [options]   (contrastkit --version: the version)

commands:
  pretrain   pretrain a method from a YAML config (contrastkit pretrain --config FILE)
  eval       evaluate a checkpoint: contrastkit eval {knn,linear,retrieval,lowshot} --checkpoint
             PATH --data NAME [--output DIR]; eval voc07 (VOC2007 SVMs), eval finetune
             (docs/transfer.md); sentence encoders: contrastkit eval sts
             (--checkpoint PATH | --model NAME) --senteval-root DIR
  analyze    embedding diagnostics and figures: contrastkit analyze --checkpoint PATH --data NAME
  compare    paired bootstrap of two eval folders: contrastkit compare RUN_A RUN_B
  embed      a folder's embeddings (.npy + file list) and their t-SNE map: contrastkit embed
             --checkpoint PATH --data folder --root DIR --output DIR
  export     write a checkpoint's backbone to a .pth or .safetensors file (ResNets in
             torchvision's layout, timm backbones in timm's): contrastkit export --checkpoint
             CKPT --output FILE; --format detectron2 --output FILE.pkl for detectron2
             (docs/transfer.md); --format hf --output DIR: a Hugging Face Hub folder
  data       write an image folder once into a store or tar shards (docs/data.md):
             contrastkit data pack SRC DEST [--shards] [--max-side N]

pretrain, eval and analyze take --threads N|auto: CPU threads per operator (default auto:
OMP_NUM_THREADS, else the cores); waiting threads sleep instead of spinning (docs/performance.md)
"""

#: The commands that take ``--threads``.
THREADED = ("pretrain", "eval", "analyze")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``contrastkit`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    plain_warnings()
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv[0] in ("-V", "--version"):
        from contrastkit import __version__

        print(f"contrastkit {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in THREADED:
        return _dispatch(command, rest)
    from contrastkit.threads import configure_threads, pop_threads

    try:
        previous = configure_threads(pop_threads(rest))
    except ValueError as err:
        print(f"contrastkit {command}: error: {err}", file=sys.stderr)
        return 2
    try:
        return _dispatch(command, rest)
    finally:
        import torch

        torch.set_num_threads(previous)


#: Each command's module in this package and the function that runs it.
COMMANDS = {
    "pretrain": ("pretrain", "pretrain_command"),
    "eval": ("eval", "eval_command"),
    "analyze": ("analyze", "analyze_command"),
    "compare": ("compare", "compare_command"),
    "embed": ("embed", "embed_command"),
    "export": ("export", "export_command"),
    "data": ("data", "data_command"),
}


def _dispatch(command: str, rest: list[str]) -> int:
    if command not in COMMANDS:
        print(f"contrastkit: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    module, function = COMMANDS[command]  # imported on use: each command's imports are its own
    return getattr(importlib.import_module(f"contrastkit.cli.{module}"), function)(rest)
