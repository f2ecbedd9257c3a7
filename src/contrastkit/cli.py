"""``contrastkit`` command line: ``pretrain | eval | analyze | compare | export | repro | data``."""

from __future__ import annotations

import argparse
import sys

from contrastkit.errors import plain_warnings, run_command

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
  repro      the reproduction study of docs/reproduction.md, from a source checkout:
             contrastkit repro {cpu,gpu,report,list} (--help for each)
  data       write an image folder once into a store or tar shards (docs/data.md):
             contrastkit data pack SRC DEST [--shards] [--max-side N]

pretrain, eval and analyze take --threads N|auto: CPU threads per operator (default auto:
OMP_NUM_THREADS, else the cores); waiting threads sleep instead of spinning (docs/performance.md)
"""

#: The commands that take ``--threads``.
THREADED = ("pretrain", "eval", "analyze")


def _export(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="contrastkit export",
        description="Write a checkpoint's backbone: ResNets as a torchvision-layout state_dict, "
        "other backbones with their own keys and architecture (.pth, or .safetensors by file "
        "extension); `contrastkit eval` and contrastkit.checkpoints.load_backbone read both.")
    parser.add_argument("--checkpoint", required=True, help="contrastkit .ckpt file")
    parser.add_argument("--output", required=True,
                        help="output .pth or .safetensors file (a folder with --format hf)")
    parser.add_argument("--format", choices=("torchvision", "detectron2", "hf"),
                        default="torchvision",
                        help="torchvision: state_dict (default; timm backbones in timm's "
                        "layout); detectron2: a .pkl for MODEL.WEIGHTS (ResNets with the "
                        "ImageNet stem; docs/transfer.md); hf: a Hugging Face Hub folder "
                        "(config.json, model.safetensors, README.md model card; "
                        "docs/integrations.md)")
    parser.add_argument("--results", nargs="+", default=[], metavar="DIR",
                        help="--format hf: evaluation folders of this checkpoint for the model "
                        "card, besides those found in its run folder")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    args = parser.parse_args(argv)

    def body() -> int:
        if args.results and args.format != "hf":
            raise ValueError("--results applies to --format hf")
        if args.format == "hf":
            from contrastkit.export_hf import export_hub_folder

            folder = export_hub_folder(args.checkpoint, args.output, args.overwrite,
                                       args.results)
            print(f"wrote {folder} (upload it with: hf upload USER/REPO {folder})")
            return 0
        if args.format == "detectron2":
            from contrastkit.export_detectron2 import export_detectron2 as write
        else:
            from contrastkit.export import export_backbone as write
        print(f"wrote {write(args.checkpoint, args.output, args.overwrite)}")
        return 0

    return run_command("contrastkit export", body)


def _pretrain(argv: list[str]) -> int:
    from contrastkit.data.images.datasets import MixedImageSizesError, UnreadableImageError
    from contrastkit.train.cli import pretrain

    hints = {
        UnreadableImageError: "pass --data.skip_corrupt true to skip unreadable images (they "
        "are listed in the run folder's skipped_files.txt)",
        MixedImageSizesError: "pass --data.load_size N (e.g. 64) to resize each image's "
        "shorter side to N and centre-crop it when loading",
    }

    def body() -> int:
        pretrain(argv)
        return 0

    return run_command("contrastkit pretrain", body, hints)


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


def _dispatch(command: str, rest: list[str]) -> int:
    if command == "pretrain":
        return _pretrain(rest)
    if command == "export":
        return _export(rest)
    if command == "data":
        if not rest or rest[0] != "pack":
            print("usage: contrastkit data pack SRC DEST [--shards] [--max-side N] "
                  "[--quality Q] [--shard-size N] [--seed S]", file=sys.stderr)
            return 2
        from contrastkit.data.pack import main as pack_main

        return run_command("contrastkit data pack", lambda: pack_main(rest[1:]))
    if command == "repro":
        from contrastkit.repro.cli import main as repro_main

        return repro_main(rest)
    if command == "embed":
        from contrastkit.eval.cli.embed import embed_command

        return embed_command(rest)
    if command in ("eval", "analyze", "compare"):
        from contrastkit.eval import cli as eval_cli

        run = {"eval": eval_cli.eval_command, "analyze": eval_cli.analyze_command,
               "compare": eval_cli.compare_command}[command]
        return run(rest)
    print(f"contrastkit: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
