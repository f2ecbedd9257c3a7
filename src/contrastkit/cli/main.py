"""The ``contrastkit`` command: ``pretrain | eval | analyze | compare | embed | export | data``
(the dispatcher; each sub-command is a module of this package)."""

from __future__ import annotations

import importlib
import sys

from contrastkit.cli.environment import torchvision_mismatch
from contrastkit.cli.parsing import did_you_mean
from contrastkit.errors import plain_warnings, run_command
from contrastkit.threads import sleep_while_waiting

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

pretrain, eval, analyze and embed take --threads N|auto: CPU threads per operator (default
auto: OMP_NUM_THREADS, else the cores); waiting threads sleep instead of spinning
(docs/performance.md). COMMAND --help lists a command's options.
"""


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
    sleep_while_waiting()  # before a command's imports load torch's OpenMP runtime
    return _dispatch(argv[0], argv[1:])


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
        hint = did_you_mean(command, COMMANDS)
        print(f"contrastkit: error: unknown command {command!r}{hint} (contrastkit --help "
              "lists them)", file=sys.stderr)
        return 2
    if command == "pretrain":  # its short help without loading Lightning
        from contrastkit.cli.short_help import short_help, wants_short_help

        if wants_short_help(rest):
            def show() -> int:
                print(short_help(rest), end="")
                return 0

            return run_command("contrastkit pretrain", show)  # a bad --config: one line
    module, function = COMMANDS[command]  # imported on use: each command's imports are its own
    try:
        return getattr(importlib.import_module(f"contrastkit.cli.{module}"), function)(rest)
    except Exception as err:
        mismatch = torchvision_mismatch(err)
        if mismatch is None:
            raise
        print(f"contrastkit {command}: error: {mismatch}", file=sys.stderr)
        return 2
