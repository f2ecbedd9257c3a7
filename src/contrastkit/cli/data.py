"""``contrastkit data pack``: write an image folder once into a store or tar shards
(:func:`contrastkit.data.loading.pack.pack_folder`, docs/data.md)."""

from __future__ import annotations

import sys

from contrastkit.cli.parsing import CommandParser
from contrastkit.data.loading.pack import pack_folder
from contrastkit.errors import run_command

USAGE = ("usage: contrastkit data pack SRC DEST [--shards] [--max-side N] [--quality Q] "
         "[--shard-size N] [--seed S]")


def data_command(argv: list[str]) -> int:
    """``contrastkit data pack ...``; returns the exit status."""
    if not argv or argv[0] != "pack":
        print(USAGE, file=sys.stderr)
        return 2
    return run_command("contrastkit data pack", lambda: _pack(argv[1:]))


def _pack(argv: list[str]) -> int:
    """``contrastkit data pack SRC DEST [--shards] [--max-side N] ...``."""
    parser = CommandParser(
        prog="contrastkit data pack",
        description="Write an image folder once into a store (same layout, images bounded to "
        "--max-side and re-encoded) or into tar shards (--shards) for --data.dataset shards.")
    parser.add_argument("src", help="image folder (train/val/test sub-folders, or one split)")
    parser.add_argument("dest", help="new or empty output folder")
    parser.add_argument("--shards", action="store_true", help="write tar shards")
    parser.add_argument("--max-side", type=int, default=None,
                        help="resize images whose longer side exceeds N pixels (default: keep)")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality of re-encoded "
                        "images (default 90)")
    parser.add_argument("--shard-size", type=int, default=1000, help="images per shard")
    parser.add_argument("--seed", type=int, default=0, help="seed of the shard order")
    parser.add_argument("--workers", type=int, default=1, help="processes that decode and "
                        "re-encode (default 1)")
    args = parser.parse_args(argv)
    counts = pack_folder(args.src, args.dest, max_side=args.max_side, quality=args.quality,
                         shards=args.shards, shard_size=args.shard_size, seed=args.seed,
                         workers=args.workers)
    kind = "shards" if args.shards else "store"
    print(f"wrote {kind} {args.dest}: " + ", ".join(f"{k} {v} images" for k, v in
                                                    counts.items()))
    return 0
