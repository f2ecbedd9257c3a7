"""What the evaluation commands share: the help formatter, the options of every ``eval``
protocol and of ``analyze`` / ``embed``, the request they make of :mod:`contrastkit.eval`, and
one-line errors with the option that fixes them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import fields

import torch

from contrastkit.cli.parsing import add_threads_option
from contrastkit.data.decode.images import MixedImageSizesError, UnreadableImageError
from contrastkit.data.decode.video import VideoDecodeError
from contrastkit.errors import run_command
from contrastkit.eval.setup import DEFAULT_CACHE, EvalRequest
from contrastkit.threads import using_threads


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default: ``(default: X)`` is appended unless the help
    already says its default (``default`` in the text), the option is required or its default
    is None (those options word their default in their help); flags read ``(default: off)``."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if ("default" in text.lower() or action.required or action.default is None
                or action.default is argparse.SUPPRESS or not action.option_strings):
            return action.help
        value = "off" if action.default is False and action.nargs == 0 else "%(default)s"
        return f"{text} (default: {value})".lstrip()


def common_parser() -> argparse.ArgumentParser:
    """The options of every ``eval`` protocol and of ``analyze``: checkpoint, data, run."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("checkpoint and data")
    g.add_argument("--checkpoint", required=True,
                   help="contrastkit .ckpt (a run folder: its checkpoints/last.ckpt), an export "
                   "of one (.safetensors, .pth, a --format hf folder), or a torchvision-layout "
                   "ResNet .pth/.safetensors")
    g.add_argument("--space", choices=("backbone", "projector"), default="backbone",
                   help="embeddings evaluated: the backbone's features, or the pretraining "
                   "projector's output on them (the space the loss sees, where SINCERE measures "
                   "its kNN accuracy and target-noise margin)")
    g.add_argument("--data", required=True, help="dataset name (digits needs no --root)")
    g.add_argument("--root", default=None,
                   help="dataset folder or archive (default: none, for datasets that need no "
                   "folder, such as digits)")
    g.add_argument("--train-split", default="train", help="bank / training split")
    g.add_argument("--test-split", default="test", help="query / test split")
    g.add_argument("--classes", nargs="+", default=None, metavar="NAME",
                   help="keep only these classes, relabelled 0..k-1 in this order "
                        "(e.g. --classes cat dog for CIFAR-2; default: all classes)")
    g.add_argument("--size", type=int, default=None,
                   help="evaluation image size (default: the pretraining run's, else 32)")
    size = g.add_mutually_exclusive_group()
    size.add_argument("--small", dest="small", action="store_const", const=True, default=None,
                      help="small-dataset transform: resize to --size (default)")
    size.add_argument("--large", dest="small", action="store_const", const=False,
                      help="large-dataset transform: resize to size*256/224, centre crop "
                      "(default: the pretraining run's, else --small)")
    g.add_argument("--normalize", default=None,
                   help="normalisation name (cifar10, imagenet, ...) or 'none' (default: the "
                   "one the checkpoint or its export records, else none; one that contradicts "
                   "the record is refused)")
    g.add_argument("--image-size", type=int, default=None,
                   help="resize file images when decoding them into --data-cache-dir "
                   "(default: no resize)")
    g.add_argument("--data-cache-dir", default=None, help="uint8 image cache of file datasets "
                   "(default: none, images are decoded each time)")
    g.add_argument("--load-size", type=int, default=None, metavar="N",
                   help="resize each image's shorter side to N and centre-crop it to NxN when "
                   "loading (folders of images of different sizes; default: the pretraining "
                   "run's data.load_size)")
    g.add_argument("--test-fraction", type=float, default=None, metavar="F",
                   help="--data folder without a test/ sub-folder: hold out this share of each "
                   "class (stratified, seeded) as the test split, the rest is the train split "
                   "(default: the pretraining run's data.test_fraction)")
    g.add_argument("--split-seed", type=int, default=None,
                   help="seed of --test-fraction's split (default: the run's, else 0)")
    g.add_argument("--subset", type=int, default=None, metavar="N",
                   help="bank: only the first N images of a fixed shuffle of --train-split "
                   "(the images of pretraining's data.subset N with data.seed --subset-seed; "
                   "default: the whole split)")
    g.add_argument("--held-out", type=int, default=None, metavar="M",
                   help="queries: the M images of --train-split that follow the first "
                   "--subset N in that shuffle, which such a run never trained on (a "
                   "validation split), instead of --test-split (default: off)")
    g.add_argument("--subset-seed", type=int, default=0,
                   help="seed of the shuffle of --subset, --held-out (pretraining's data.seed)")
    g.add_argument("--skip-corrupt", action="store_true",
                   help="skip unreadable image or video files (listed in results.json and "
                   "skipped_files.txt)")
    v = p.add_argument_group("video datasets (ucf101, hmdb51, kinetics, video_folder)")
    v.add_argument("--annotations", default=None,
                   help="split files: ucfTrainTestlist / testTrainMulti_7030_splits folder, "
                   "Kinetics CSV folder or CSV (default: none)")
    v.add_argument("--fold", type=int, default=1, help="UCF101 / HMDB51 official split")
    v.add_argument("--frames", type=int, default=None,
                   help="frames per clip (default: the pretraining run's, else 8)")
    v.add_argument("--duration", type=float, default=None,
                   help="clip duration in seconds (default: the pretraining run's, else 2.56)")
    v.add_argument("--short-side", type=int, default=None,
                   help="short side of the decoded frames (default: --size, or size*256/224 "
                   "with --large)")
    v.add_argument("--crop-size", type=int, default=None,
                   help="side of the 3 spatial crops (default: the short side)")
    v.add_argument("--eval-clips", type=int, default=10, help="temporal clips per video")
    r = p.add_argument_group("run")
    r.add_argument("--output", default=None,
                   help="output folder (results.json, results.md, ...); must be empty or new "
                   "(default: none, the table is only printed)")
    r.add_argument("--overwrite", action="store_true",
                   help="replace the earlier evaluation in --output (only its files)")
    r.add_argument("--cache-dir", default=str(DEFAULT_CACHE), help="feature cache folder")
    r.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    r.add_argument("--batch-size", type=int, default=256, help="images per forward pass")
    r.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, mps")
    r.add_argument("--seed", type=int, default=0, help="seed of probes, views and bootstrap")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    add_threads_option(r)
    return p


def memory_hints(batch: str = "--batch-size",
                 size: str = "--size") -> dict[type[BaseException], str]:
    """The hints for running out of memory, on the device or the machine, naming the command's
    options that reduce what a step holds."""
    reduce = f"reduce {batch} or the image size ({size})"
    return {torch.OutOfMemoryError: f"the device's memory is too small: {reduce}",
            MemoryError: f"the machine's memory is too small: {reduce}"}


#: The option that fixes an error, for the errors that have one.
HINTS: dict[type[BaseException], str] = {
    UnreadableImageError: "pass --skip-corrupt to skip unreadable images (they are listed in "
    "results.json and skipped_files.txt)",
    VideoDecodeError: "pass --skip-corrupt to skip unreadable videos",
    MixedImageSizesError: "pass --load-size N (e.g. 64) to resize each image's shorter side to "
    "N and centre-crop it when loading (with --data-cache-dir: --image-size N)",
    **memory_hints(),
}


def guard(prog: str, body: Callable[[], int], threads: str | None = None,
          hints: dict[type[BaseException], str] | None = None) -> int:
    """Run ``body`` with the ``--threads`` value ``threads`` (when given, see
    :func:`contrastkit.threads.using_threads`); expected failures become
    ``prog: error: message`` and exit status 2, with the option of ``hints`` (default
    :data:`HINTS`) that fixes them."""

    def threaded() -> int:
        if threads is None:
            return body()
        with using_threads(threads):
            return body()

    return run_command(prog, threaded, HINTS if hints is None else hints)


def eval_request(args: argparse.Namespace) -> EvalRequest:
    """The :class:`~contrastkit.eval.setup.EvalRequest` of the common options in ``args``."""
    return EvalRequest(**{f.name: getattr(args, f.name) for f in fields(EvalRequest)})
