"""``contrastkit export``: write a checkpoint's backbone to a file (:mod:`contrastkit.export`,
:mod:`contrastkit.export_detectron2`) or to a Hugging Face Hub folder
(:mod:`contrastkit.export_hf`)."""

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
    parser.add_argument("--checkpoint", required=True,
                        help="contrastkit .ckpt file (a run folder: its checkpoints/last.ckpt)")
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
