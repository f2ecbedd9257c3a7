"""What evaluations share around their results: the record a call returns, the output folder,
the header and data lines of the reports, the files written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor

from contrastkit import __version__
from contrastkit.eval import report
from contrastkit.eval.setup import Setup
from contrastkit.models.factory import DINOHeadSpec
from contrastkit.outputs import SKIPPED_FILES, check_output_folder, write_skipped_files


@dataclass
class Evaluation:
    """What an evaluation returns (:func:`~contrastkit.eval.protocols.evaluate`,
    :func:`~contrastkit.eval.analyze.analyze`).

    Attributes:
        results: what ``results.json`` holds (checkpoint, data, config, metrics, ...).
        markdown: the report the command prints (``results.md``).
        pred, labels: a protocol's test predictions and labels (``predictions.npz``); None for
            the diagnostics.
    """

    results: dict
    markdown: str
    pred: Tensor | None = None
    labels: Tensor | None = None

    @property
    def metrics(self) -> dict:
        """The numbers (``top1``, ``mean_per_class``, ...; the diagnostics of analyze)."""
        return self.results["metrics"]


def data_context(s: Setup) -> dict:
    """Report lines on the normalisation (and where it comes from), the embedding space, how
    the splits were made and what was skipped (when they apply)."""
    context: dict = {"normalisation": f"{s.normalize or 'none'} ({s.normalize_from})"}
    p = s.projector
    if isinstance(p, DINOHeadSpec):
        context["space"] = (f"DINO head's bottleneck ({p.bottleneck_dim}-d, before its "
                            f"{p.num_prototypes:,} prototypes; {p.num_layers} layers, hidden "
                            f"{p.hidden_dim}, batch norm {p.batch_norm})")
    elif p is not None:
        context["space"] = (f"projector output ({p.out_dim}-d; {p.num_layers} layers, "
                            f"hidden {p.hidden_dim}, batch norm {p.batch_norm})")
    if s.request.train_split == s.request.test_split:
        context["not held out"] = (f"--train-split and --test-split are both "
                                   f"{s.request.test_split}: the test images are in the bank")
    if s.test_fraction is not None:
        context["held-out test split"] = (f"--test-fraction {s.test_fraction} of each class of "
                                          f"--root, stratified, --split-seed {s.split_seed}")
    if s.checkpoint.name == "best.ckpt" and s.run.monitor_split == s.request.test_split and \
            s.run.dataset == s.request.data:
        context["checkpoint selection"] = (
            f"best.ckpt was chosen by the kNN monitor on this test split ({s.request.test_split}): "
            "its accuracy here is optimistic; last.ckpt's is not")
    if s.load_size is not None:
        context["load size"] = s.load_size
    if s.request.skip_corrupt:
        context["skipped unreadable files"] = len(s.skipped)
    return context


def header(command: str, argv: Sequence[str] | None) -> dict:
    """The first keys of every ``results.json`` / ``comparison.json``: command and version
    (``argv`` None: a call from Python, no command line)."""
    line = f"contrastkit {command} " + " ".join(argv) if argv is not None else \
        f"contrastkit {command} (called from Python)"
    return {"command": line, "argv": None if argv is None else list(argv),
            "contrastkit_version": __version__,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


#: What ``eval`` and ``analyze`` write into ``--output`` (``--overwrite`` removes these only).
OUTPUT_FILES = frozenset({report.RESULTS_JSON, report.RESULTS_MD, report.PREDICTIONS,
                          SKIPPED_FILES, "loss_curve.png", "local_separation.png",
                          "similarity_histograms.png", "hardness_weights.png",
                          "temperature_functions.png", "uniformity_alignment.png",
                          "uniformity_alignment_papers.png", "embedding_tsne.png",
                          "embedding_umap.png", "probe_accuracy.png", "knn_per_class.png",
                          "lowshot.png", "recall_at_k.png"})


def check_output(output: str | Path | None, overwrite: bool) -> tuple[Path | None, list[Path]]:
    """``output`` and the earlier evaluation's files there that ``overwrite`` replaces."""
    if not output:
        return None, []
    out = Path(output)
    return out, check_output_folder(out, overwrite=overwrite,
                                    owned=OUTPUT_FILES.__contains__, what="evaluation")


def write_outputs(out: Path, s: Setup, results: dict, text: str) -> None:
    """``results.json``, ``results.md`` and ``skipped_files.txt`` of an evaluation."""
    report.write_json(out / report.RESULTS_JSON, results)
    report.write_text(out / report.RESULTS_MD, text)
    write_skipped_files(out, s.skipped)

