"""``contrastkit export``: write a checkpoint's backbone to a file (:mod:`contrastkit.export`,
:mod:`contrastkit.export_detectron2`)."""

from __future__ import annotations

from contrastkit.cli.parsing import CommandParser
from contrastkit.errors import run_command


def export_command(argv: list[str]) -> int:
    """``contrastkit export ...``; returns the exit status."""
    parser = CommandParser(
        prog="contrastkit export",
        description="Write a checkpoint's backbone: ResNets as a torchvision-layout state_dict, "
        "other backbones with their own keys and architecture (.pth, or .safetensors by file "
        "extension); `contrastkit eval` and contrastkit.checkpoints.load_backbone read both.")
    parser.add_argument("--checkpoint", required=True, help="contrastkit .ckpt file")
    parser.add_argument("--output", required=True, help="output .pth or .safetensors file")
    parser.add_argument("--format", choices=("torchvision", "detectron2"), default="torchvision",
                        help="torchvision: state_dict (default); detectron2: a .pkl for "
                        "MODEL.WEIGHTS (ResNets with the ImageNet stem; docs/transfer.md)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    args = parser.parse_args(argv)

    def body() -> int:
        if args.format == "detectron2":
            from contrastkit.export_detectron2 import export_detectron2 as write
        else:
            from contrastkit.export import export_backbone as write
        print(f"wrote {write(args.checkpoint, args.output, args.overwrite)}")
        return 0

    return run_command("contrastkit export", body)
