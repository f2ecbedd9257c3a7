"""The main job: pretrain SCE (Denize et al. 2023), then show what its features are worth with few
labels.

``python -m examples.demos.pretrain`` (``make demo``) runs ``contrastkit pretrain`` with
``configs/demo/digits_sce.yaml`` (scikit-learn's 8x8 digits, offline) into a fresh
``runs/demo-<data>-<time>`` folder, then evaluates the pretrained backbone, the same backbone
randomly initialised and raw pixels with the protocol of
:mod:`examples.demos.protocol` (stated first in the output, then the numbers):
linear probes trained on 1, 5 and 10 labelled images per class (10 seeded, stratified draws)
and on all labels, tested on the test split as given and shifted by 1/8 of the image side.
The printed protocol and table are also written to ``demo.md`` and ``demo.json`` in the run
folder (``demo.json`` also keeps the logged loss and kNN monitor of the pretraining).

``--data cifar10`` (``make demo DATA=cifar10``) runs the same comparison on CIFAR-10 with
``configs/demo/cifar10_sce.yaml`` (ResNet-18, CIFAR stem; Lightning's ``accelerator: auto``
picks a GPU when there is one). ``--root`` names an existing copy:

* the official ``cifar-10-python.tar.gz``, the folder holding it or ``cifar-10-batches-py/``,
  or that folder itself (dataset ``cifar10``);
* any other ``.tar``/``.tar.gz``/``.tgz`` archive of ``train/<class>/*`` and
  ``test/<class>/*`` images, such as ``cifar10-jpg.tar.gz`` (dataset ``image_archive``);
* a folder with ``train/<class>/*`` and ``test/<class>/*`` images (dataset ``folder``).

Archives and folders are decoded once into the array cache ``.cache/demo-cifar10``. Without
``--root`` the official archive is downloaded into ``--download-dir`` (default
``data/cifar10``) and kept only if its MD5 matches.

``--threads N|auto`` sets the CPU threads of the whole demo, pretraining and evaluation
(default: auto, as ``contrastkit``). Other arguments go to ``contrastkit pretrain`` (e.g.
``--trainer.max_epochs 5``). An
interrupted demo continues with ``--output RUN --resume`` (same other arguments): pretraining
resumes from ``RUN/checkpoints/last.ckpt``, then the evaluation runs.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from contrastkit.checkpoints import load_backbone
from contrastkit.cli.parsing import THREADS_HELP
from contrastkit.data.sources.images import datasets
from contrastkit.errors import RunInterrupted, run_command
from contrastkit.eval.report import write_json, write_text
from contrastkit.models.factory import build_backbone
from contrastkit.threads import using_threads
from contrastkit.train.callbacks import read_metrics_csv
from examples.demos import protocol

if TYPE_CHECKING:
    from contrastkit.cli.pretrain import PretrainCLI

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "demo"
CONFIG = {"digits": CONFIGS / "digits_sce.yaml", "cifar10": CONFIGS / "cifar10_sce.yaml"}
CACHE_DIR = ".cache/demo-cifar10"
_ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m examples.demos.pretrain", allow_abbrev=False,
        description="Pretrain SCE, then compare pretrained features, random init and raw "
        "pixels with few labels and on shifted test images. Other arguments go to "
        "`contrastkit pretrain`.")
    parser.add_argument("--data", choices=tuple(CONFIG), default="digits",
                        help="digits (offline, minutes on CPU) or cifar10")
    parser.add_argument("--root", default=None,
                        help="cifar10 only: existing copy (official archive or folder, or an "
                        "image archive/folder with train/ and test/); default: download")
    parser.add_argument("--download-dir", default="data/cifar10",
                        help="cifar10 without --root: where the official archive is downloaded")
    parser.add_argument("--output", default=None,
                        help="run folder (default runs/demo-<data>-<time>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the interrupted demo in --output from its last "
                        "checkpoint, then evaluate")
    parser.add_argument("--shots", type=int, nargs="+", default=list(protocol.SHOTS),
                        help="labelled images per class (default 1 5 10)")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(protocol.SEEDS),
                        help="seeds of the draws of labelled images (default 0..9)")
    parser.add_argument("--threads", default="auto", metavar="N|auto", help=THREADS_HELP)
    return parser


def cifar10_data_args(root: str | None, download_dir: str) -> list[str]:
    """``--data.*`` arguments of ``contrastkit pretrain`` for the CIFAR-10 copy at ``root``.

    Without ``root`` the official archive is downloaded (MD5-checked) into ``download_dir``.

    Raises:
        SystemExit: one line naming ``--root`` when it is missing or not a CIFAR-10 copy, or
            the download's error.
    """
    if root is None:
        try:
            datasets.CIFAR10(download_dir, split="test", download=True)
        except (ConnectionError, ValueError) as err:
            raise SystemExit(f"CIFAR-10 download: {err}; or pass --root (ROOT=) to a copy") \
                from err
        return ["--data.dataset", "cifar10", "--data.root", download_dir]
    path = Path(root).expanduser()
    official = "cifar-10-python.tar.gz"
    if path.is_file() and path.name == official:
        return ["--data.dataset", "cifar10", "--data.root", str(path.parent)]
    if path.is_file() and path.name.endswith(_ARCHIVE_SUFFIXES):
        return ["--data.dataset", "image_archive", "--data.root", str(path),
                "--data.cache_dir", CACHE_DIR]
    if path.is_dir():
        if (path / "cifar-10-batches-py").is_dir() or (path / official).is_file() or \
                path.name == "cifar-10-batches-py":
            return ["--data.dataset", "cifar10", "--data.root", str(path)]
        if (path / "train").is_dir() and (path / "test").is_dir():
            return ["--data.dataset", "folder", "--data.root", str(path),
                    "--data.cache_dir", CACHE_DIR]
    what = "no such file or folder" if not path.exists() else "not a CIFAR-10 copy"
    raise SystemExit(
        f"--root {root}: {what} (expected {official}, a folder holding it or "
        "cifar-10-batches-py/, or an archive or folder with train/<class>/ and test/<class>/)")


#: The logged values of a pretraining run that ``demo.json`` keeps (``pretraining``).
TRAJECTORY_KEYS = ("train/loss", "val/knn_top1")


def trajectory(metrics: Path) -> dict[str, list[list[float]]]:
    """The pretraining run's logged loss and kNN monitor, ``{key: [[step, value], ...]}``, from
    its ``metrics.csv``: training is deterministic, so a rerun of the first steps must log the
    same values (``tests/demos/test_demo.py`` checks ``docs/demo.json``'s against the code)."""
    return {key: [[step, value] for step, value in zip(*read_metrics_csv(metrics, key),
                                                       strict=True)]
            for key in TRAJECTORY_KEYS}


def evaluate(cli: PretrainCLI, output: Path, name: str, shots: list[int], seeds: list[int]) -> dict:
    """Run the protocol on the finished pretraining run of ``cli`` in ``output`` (data ``name``);
    print the protocol, then the table; write both to ``demo.md`` and the numbers to
    ``demo.json`` there."""
    data = cli.datamodule
    if data.val_set is None:
        raise SystemExit("the demo needs the test split: do not set data.val_split to null")
    pretrained, spec = load_backbone(output / "checkpoints" / "last.ckpt")
    torch.manual_seed(0)
    backbones = {"pretrained": pretrained, "random init": build_backbone(spec).eval(),
                 "raw pixels": None}
    train, test = protocol.as_tensors(data.train_set), protocol.as_tensors(data.val_set)
    device = cli.trainer.strategy.root_device
    text = protocol.protocol_text(shots, seeds)
    print(f"\n{text}\n\nevaluating ({len(train[1])} train / {len(test[1])} test "
          f"images, {len(seeds)} draws) ...", flush=True)
    results = protocol.compare(backbones, train, test, cli.model.eval_view, device, shots,
                               seeds)
    title = (f"Linear-probe top-1 (%) on the {name} test split "
             f"({len(test[1])} images), {len(seeds)} draws")
    table = protocol.results_table(results)
    print(f"\n{title}\n{table}")
    write_text(output / "demo.md", f"# {title}\n\n```\n{text}\n```\n\n{table}")
    write_json(output / "demo.json", {"data": name, "dataset": data.dataset_name,
                                      "root": data.root, "shots": shots, "seeds": seeds,
                                      "probe": asdict(protocol.PROBE), "results": results,
                                      "threads": torch.get_num_threads(),
                                      "pretraining": trajectory(output / "metrics.csv")})
    print(f"checkpoint: {output / 'checkpoints' / 'last.ckpt'}\n"
          f"loss curve: {output / 'loss_curve.png'}\ntable:      {output / 'demo.md'}")
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the demo (see the module docstring); returns the exit status. A bad option or file,
    and a stop by SIGINT or SIGTERM, print one line (the stop's line says how to resume)."""
    from contrastkit.cli.pretrain import PRETRAIN_HINTS, pretrain

    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = _parser().parse_known_args(argv)
    config = CONFIG[args.data]
    if not config.is_file():
        raise SystemExit(f"demo config not found at {config} (run from a source checkout)")
    if args.root is not None and args.data != "cifar10":
        raise SystemExit("--root applies to --data cifar10 only (digits are built in)")
    if min(args.shots) < 1:
        raise SystemExit(f"--shots must be positive, got {args.shots}")
    data_args = cifar10_data_args(args.root, args.download_dir) if args.data == "cifar10" else []
    if args.resume and args.output is None:
        raise SystemExit("--resume needs --output RUN, the folder of the interrupted demo")
    output = Path(args.output or time.strftime(f"runs/demo-{args.data}-%Y%m%d-%H%M%S"))
    resume = ["--resume", "last"] if args.resume else []

    def body() -> int:
        with using_threads(args.threads):
            try:
                cli = pretrain(["--config", str(config), "--output", str(output), *data_args,
                                *extra, *resume])
            except RunInterrupted as err:
                raise RunInterrupted(resume_line(str(err), argv, output), err.status) from None
            evaluate(cli, output, args.data, args.shots, args.seeds)
        return 0

    return run_command("demo", body, PRETRAIN_HINTS)


def resume_line(stopped: str, argv: list[str], output: Path) -> str:
    """The line of a demo stopped by a signal: pretraining's line (where it stopped, what is
    saved), with the command that resumes the demo instead of the pretraining alone."""
    where, _, _ = stopped.partition(": resume with ")
    if where == stopped:  # nothing saved: the same command starts it again
        return stopped
    again = [a for a in _without_option(argv, "--output") if a != "--resume"]
    command = shlex.join([sys.executable, "-m", "examples.demos.pretrain", *again, "--output",
                          str(output), "--resume"])
    return f"{where}: resume the demo with {command}"


def _without_option(argv: list[str], name: str) -> list[str]:
    """``argv`` without ``name VALUE`` / ``name=VALUE``."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            kept.append(arg)
    return kept


if __name__ == "__main__":
    raise SystemExit(main())
