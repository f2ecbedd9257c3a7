"""What ``contrastkit eval | analyze | compare`` share around their results: one-line errors
(with the option that fixes them), the ``--output`` folder, the header and data lines of the
reports.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path

from contrastkit import __version__
from contrastkit.data.images.datasets import MixedImageSizesError, UnreadableImageError
from contrastkit.data.video._decode import VideoDecodeError
from contrastkit.errors import run_command
from contrastkit.eval import report
from contrastkit.eval.cli.setup import Setup
from contrastkit.outputs import SKIPPED_FILES, check_output_folder, write_skipped_files


def data_context(s: Setup) -> dict:
    """Report lines on the embedding space, how the splits were made and what was skipped
    (when they apply)."""
    context: dict = {}
    if s.projector is not None:
        p = s.projector
        context["space"] = (f"projector output ({p['out_dim']}-d; {p['num_layers']} layers, "
                            f"hidden {p['hidden_dim']}, batch norm {p['batch_norm']})")
    if s.args.train_split == s.args.test_split:
        context["not held out"] = (f"--train-split and --test-split are both "
                                   f"{s.args.test_split}: the test images are in the bank")
    if s.test_fraction is not None:
        context["held-out test split"] = (f"--test-fraction {s.test_fraction} of each class of "
                                          f"--root, stratified, --split-seed {s.split_seed}")
    if s.checkpoint.name == "best.ckpt" and s.run.monitor_split == s.args.test_split and \
            s.run.dataset == s.args.data:
        context["checkpoint selection"] = (
            f"best.ckpt was chosen by the kNN monitor on this test split ({s.args.test_split}): "
            "its accuracy here is optimistic; last.ckpt's is not")
    if s.load_size is not None:
        context["load size"] = s.load_size
    if s.args.skip_corrupt:
        context["skipped unreadable files"] = len(s.skipped)
    return context


def header(command: str, argv: Sequence[str]) -> dict:
    """The first keys of every ``results.json`` / ``comparison.json``: command and version."""
    return {"command": f"contrastkit {command} " + " ".join(argv), "argv": list(argv),
            "contrastkit_version": __version__,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


#: The option that fixes an error, for the errors that have one.
HINTS: dict[type[BaseException], str] = {
    UnreadableImageError: "pass --skip-corrupt to skip unreadable images (they are listed in "
    "results.json and skipped_files.txt)",
    VideoDecodeError: "pass --skip-corrupt to skip unreadable videos",
    MixedImageSizesError: "pass --load-size N (e.g. 64) to resize each image's shorter side to "
    "N and centre-crop it when loading (with --data-cache-dir: --image-size N)",
}


def guard(prog: str, body: Callable[[], int]) -> int:
    """Run ``body``; expected failures become ``prog: error: message`` and exit status 2."""
    return run_command(prog, body, HINTS)


#: What ``eval`` and ``analyze`` write into ``--output`` (``--overwrite`` removes these only).
OUTPUT_FILES = frozenset({report.RESULTS_JSON, report.RESULTS_MD, report.PREDICTIONS,
                          SKIPPED_FILES, "loss_curve.png", "local_separation.png",
                          "similarity_histograms.png", "hardness_weights.png",
                          "temperature_functions.png", "embedding_tsne.png",
                          "embedding_umap.png", "probe_accuracy.png", "knn_per_class.png",
                          "lowshot.png", "recall_at_k.png"})


def check_output(args: argparse.Namespace) -> tuple[Path | None, list[Path]]:
    """``--output`` and the earlier evaluation's files there that ``--overwrite`` replaces."""
    if not args.output:
        return None, []
    out = Path(args.output)
    return out, check_output_folder(out, overwrite=args.overwrite,
                                    owned=OUTPUT_FILES.__contains__, what="evaluation")


def write_outputs(out: Path, s: Setup, results: dict, text: str) -> None:
    """``results.json``, ``results.md`` and ``skipped_files.txt`` of an evaluation."""
    report.write_json(out / report.RESULTS_JSON, results)
    report.write_text(out / report.RESULTS_MD, text)
    write_skipped_files(out, s.skipped)

