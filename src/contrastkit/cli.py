"""``contrastkit`` command line: ``pretrain | eval | analyze | compare | export``."""

from __future__ import annotations

import argparse
import sys

USAGE = """usage: contrastkit COMMAND [options]

commands:
  pretrain   pretrain a method from a YAML config (contrastkit pretrain --config FILE)
  eval       evaluate a checkpoint: contrastkit eval {knn,linear,retrieval,lowshot} --checkpoint
             PATH --data NAME [--output DIR]
  analyze    embedding diagnostics and figures: contrastkit analyze --checkpoint PATH --data NAME
  compare    paired bootstrap of two eval folders: contrastkit compare RUN_A RUN_B
  export     write a checkpoint's backbone as a torchvision-layout state_dict
"""


def _export(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="contrastkit export",
        description="Write a checkpoint's backbone as a torchvision-layout ResNet state_dict "
        "(.pth, or .safetensors by file extension).")
    parser.add_argument("--checkpoint", required=True, help="contrastkit .ckpt file")
    parser.add_argument("--output", required=True, help="output .pth or .safetensors file")
    args = parser.parse_args(argv)
    from contrastkit.export import export_backbone

    path = export_backbone(args.checkpoint, args.output)
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``contrastkit`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    if command == "pretrain":
        from contrastkit.train.cli import pretrain

        pretrain(rest)
        return 0
    if command == "export":
        return _export(rest)
    if command in ("eval", "analyze", "compare"):
        from contrastkit.eval import cli as eval_cli

        run = {"eval": eval_cli.eval_command, "analyze": eval_cli.analyze_command,
               "compare": eval_cli.compare_command}[command]
        return run(rest)
    print(f"contrastkit: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
