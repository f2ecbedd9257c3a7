"""The ``contrastkit`` command lines of the reproduction study: pretrain, evaluate, compare.

Every run is made by the public commands only: ``contrastkit pretrain`` on the run's config
(``--resume last`` when a checkpoint exists, ``--overwrite`` otherwise), the evaluations of
:data:`EVALS` on its last checkpoint, and ``contrastkit compare`` (paired bootstrap of two
evaluations' accuracy difference). Part B trains in chunks (:func:`chunk_arguments`) so that
each call fits a short window and resumes exactly.
"""

from __future__ import annotations

from pathlib import Path

from studies.repro.layout import ARCHIVE, ARRAY_CACHE, FEATURE_CACHE, eval_dir
from studies.repro.schema import Variant

#: ``contrastkit`` arguments of each evaluation (``analyze`` gets per-run extra arguments).
EVALS: dict[str, list[str]] = {
    "knn200": ["eval", "knn", "--k", "200", "--temperature", "0.1"],
    "knn1": ["eval", "knn", "--k", "1"],
    "knn5": ["eval", "knn", "--k", "5"],
    "linear": ["eval", "linear"],
    "linear_d1": ["eval", "linear", "--protocol", "sce_d1"],
    "analyze": ["analyze"],
    # on the pretraining projector's output (``--space projector``), where SINCERE measures
    "knn1_projector": ["eval", "knn", "--k", "1", "--space", "projector"],
    "knn5_projector": ["eval", "knn", "--k", "5", "--space", "projector"],
    "analyze_projector": ["analyze", "--space", "projector"],
    # the tuning grid's validation (issue 38): 1-NN in the projector's output of the 5,000
    # training-split images after the 10,000 a Part A run trains on, against those 10,000
    "knn1_heldout_projector": ["eval", "knn", "--k", "1", "--space", "projector",
                               "--subset", "10000", "--held-out", "5000"],
    # ReSSL's grid (issue 54): 200-NN on the backbone, the same validation split
    "knn200_heldout": ["eval", "knn", "--k", "200", "--temperature", "0.1",
                       "--subset", "10000", "--held-out", "5000"],
}


def data_args() -> list[str]:
    """``--data/--root`` of the evaluations: the CIFAR-10 archive's train (bank) and test
    splits."""
    return ["--data", "image_archive", "--root", ARCHIVE, "--data-cache-dir", ARRAY_CACHE]


def pretrain_command(variant: Variant, seed: int, out: Path, *, resume: bool,
                     epochs: int | None = None, chunk: list[str] | None = None) -> list[str]:
    """``contrastkit pretrain`` of one run into ``out/pretrain``: the variant's overrides
    after its config, resumed from its last checkpoint when ``resume``, ``epochs`` overriding
    the config's, ``chunk`` appended."""
    cmd = ["contrastkit", "pretrain", "--config", variant.config, "--output", str(out / "pretrain"),
           "--seed_everything", str(seed), "--trainer.enable_progress_bar", "false",
           *variant.overrides]
    if epochs is not None:
        cmd += ["--trainer.max_epochs", str(epochs)]
    cmd += chunk or []
    # a fresh start replaces what an interrupted first chunk left before its first checkpoint
    cmd += ["--resume", "last"] if resume else ["--overwrite"]
    return cmd


def parse_duration(text: str) -> int:
    """``DD:HH:MM:SS`` (Lightning's ``max_time`` format) -> seconds."""
    parts = text.split(":")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        raise SystemExit(f"--chunk-time must be DD:HH:MM:SS, got {text!r}")
    days, hours, minutes, seconds = (int(p) for p in parts)
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def format_duration(seconds: float) -> str:
    """Seconds -> ``DD:HH:MM:SS`` (whole seconds)."""
    total = int(seconds)
    return (f"{total // 86400:02d}:{total // 3600 % 24:02d}:{total // 60 % 60:02d}:"
            f"{total % 60:02d}")


def trained_seconds(ckpt: Path) -> float:
    """Training time recorded by Lightning's ``Timer`` in ``ckpt`` (0 without one)."""
    if not ckpt.is_file():
        return 0.0
    import torch

    try:
        state = torch.load(ckpt, map_location="cpu", weights_only=True)
    except Exception:  # an unreadable checkpoint: pretrain --resume will say why
        return 0.0
    timer = (state.get("callbacks") or {}).get("Timer") or {}
    return float((timer.get("time_elapsed") or {}).get("train", 0.0))


def chunk_arguments(chunk_seconds: int, trained: float) -> list[str]:
    """Trainer arguments that stop a pretraining chunk on an epoch boundary.

    Two properties of ``--trainer.max_time`` make it unfit for chunks with exact resume:
    Lightning's ``Timer`` stores its elapsed training time in the checkpoint and restores it on
    ``--resume`` (a second chunk with the same ``max_time`` stops at once), and it stops after
    any step, mid-epoch, where a resumed run restarts the epoch's data order (Lightning warns
    "resuming from a checkpoint that ended before the epoch ended"). So each chunk adds a
    ``Timer`` that checks only at epoch ends, with a duration of the time already trained
    plus ``chunk_seconds``: a chunk lasts ``chunk_seconds`` plus at most one epoch and the
    start-up.
    """
    return ["--trainer.callbacks+=lightning.pytorch.callbacks.Timer",
            "--trainer.callbacks.duration", format_duration(trained + chunk_seconds),
            "--trainer.callbacks.interval", "epoch"]


def eval_command(variant: Variant, protocol: str, seed: int, out: Path,
                 device: str = "cpu") -> list[str]:
    """``contrastkit eval`` / ``analyze`` (:data:`EVALS`) of the last checkpoint in ``out``,
    with the variant's ``eval_args`` and its ``protocol_args`` for ``protocol`` last."""
    cmd = ["contrastkit", *EVALS[protocol], "--checkpoint",
           str(out / "pretrain" / "checkpoints" / "last.ckpt"), *data_args(),
           "--output", str(eval_dir(out, protocol)), "--cache-dir", FEATURE_CACHE,
           "--device", device, "--seed", str(seed), "--quiet",
           "--overwrite"]  # run only when results.json is missing: replace what is there
    if protocol.startswith("analyze"):
        cmd += list(variant.analyze_args)
    return cmd + list(variant.eval_args) + list(dict(variant.protocol_args).get(protocol, ()))


def compare_command(a: Path, b: Path, out: Path, seed: int) -> list[str]:
    """``contrastkit compare`` of two evaluation folders (paired bootstrap of A - B)."""
    return ["contrastkit", "compare", str(a), str(b), "--output", str(out), "--seed", str(seed)]
