"""The study's outside anchor (issue 54, item 5): lightly's SimCLR beside contrastkit's.

lightly 1.6's SimCLR pieces, trained in a plain PyTorch loop at Part A's budget of the study's
SimCLR t = 0.2 run (``configs/repro/cpu/simclr_t0.2.yaml``, read here: its temperature,
projector sizes, learning rate, weight decay, batch, subset and epochs), then evaluated by the
study's own ``contrastkit eval knn --k 200 --temperature 0.1``. What is the same as the
contrastkit run:

* the images: the first 10,000 of the same fixed shuffle of the archive's train split, read
  from the same uint8 cache (:func:`contrastkit.data.sources.registry.open_split` and
  :func:`~contrastkit.data.sources.wrappers.fixed_subset`, as ``data.subset`` takes them), in
  the same batch order (:class:`~contrastkit.train.datamodule.EpochShuffleSampler` with
  ``data.seed`` 0, the last incomplete batch dropped);
* the backbone class (contrastkit's ResNet-18, width 16, CIFAR stem), initialised from the
  seed (``torch.manual_seed``, as ``--seed_everything`` does; the weights differ, the
  generator's consumers do too);
* the optimiser and schedule: SGD, momentum 0.9, lr 0.06 unscaled, weight decay 5e-4 on all
  but biases and normalisation parameters, cosine per step without warm-up
  (:mod:`contrastkit.optim`'s ``param_groups`` and ``warmup_cosine_scheduler``, what the
  engine builds from the config);
* the evaluation: the exported backbone (torchvision layout, ``.pth``) through the same
  ``eval knn`` command, with the training normalisation (``--normalize cifar10``) passed,
  since a ``.pth`` carries none.

lightly's own: ``SimCLRTransform(input_size=32, cj_strength=0.5, gaussian_blur=0.0)`` with the
CIFAR-10 normalisation: crop scale (0.08, 1), flip 0.5, colour jitter 0.8 at (0.4, 0.4, 0.4,
0.1), grayscale 0.2, no blur, which is ``simclr_cifar``'s table, drawn per image by torchvision
on PIL images in the loader (contrastkit draws per image on the batch, on the device); the
loss ``NTXentLoss(temperature=0.2)``. The head: lightly's ``SimCLRProjectionHead`` puts an
affine batch norm after its output layer (a learned scale and shift per dimension before the
loss normalises), the study's projector a batch norm without them; so the head here is lightly's
``ProjectionHead`` with the study's layers (linear 128 -> 256 without bias, batch norm, ReLU,
linear 256 -> 128 without bias, batch norm without affine parameters), and the anchor compares
the training pipelines, not two heads.

The folder is laid out as a recorded run (``runs/repro/cpu/lightly_simclr_t0.2/seed<N>/``,
recorded under ``docs/reproduction/runs/`` once evaluated): ``pretrain/epochs.jsonl`` (loss and
seconds per epoch), ``pretrain/finished.json``, ``eval/knn200/``, ``cost.jsonl`` and
``provenance.jsonl`` (with lightly's and torchvision's versions); the per-epoch checkpoint
``pretrain/checkpoints/last.pt`` (a rerun continues from it, the random state included) and the
exported ``pretrain/checkpoints/backbone.pth`` are not recorded. Run in the timm lane's venv,
which has lightly and torchvision::

    OMP_NUM_THREADS=1 PYTHONPATH=src:. .venv-timm/bin/python -m studies.repro.lightly_anchor \\
        --seed 0

:func:`collect_anchor` reads the folders into the summary, :func:`anchor_lines` is the
report's section.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import statistics
import time
from importlib import metadata
from pathlib import Path

from studies.repro import layout
from studies.repro.commands import EVALS, data_args
from studies.repro.layout import ARCHIVE, ARRAY_CACHE, FEATURE_CACHE, eval_dir, run_dir
from studies.repro.provenance import PROVENANCE_LOG, append_provenance, environment
from studies.repro.records import COST_LOG, append_cost, finished, mark_finished, record
from studies.repro.stats import t_interval

STEM = "lightly_simclr_t0.2"
#: contrastkit's run the anchor stands beside, and its config (the budget read from it).
BESIDE = "simclr_t0.2"
CONFIG = "configs/repro/cpu/simclr_t0.2.yaml"
SEEDS = (0, 1)
EPOCHS_LOG = "epochs.jsonl"
#: The run tag of shortened runs (smoke runs): never recorded, never in the report.
SMOKE = "smoke"
COMMAND = ("OMP_NUM_THREADS=1 PYTHONPATH=src:. .venv-timm/bin/python -m "
           "studies.repro.lightly_anchor --seed {seed}")


def budget(epochs: int | None = None, images: int | None = None,
           batch_size: int | None = None) -> dict:
    """The study's settings of :data:`CONFIG` (``epochs``, ``images`` and ``batch_size``
    override its ``trainer.max_epochs``, ``data.subset`` and ``data.batch_size``: a smoke
    run)."""
    config = layout.read_config(CONFIG)
    method = config["model"]["method"]["init_args"]
    optimizer = config["model"]["optimizer"]
    return {"temperature": float(method["temperature"]), "backbone": method["backbone"],
            "projector": method["projector"], "lr": float(optimizer["base_lr"]),
            "weight_decay": float(optimizer.get("weight_decay", 5e-4)),
            "batch_size": int(batch_size or config["data"]["batch_size"]),
            "images": int(images or config["data"]["subset"]),
            "data_seed": int(config["data"].get("seed", 0)),
            "epochs": int(epochs or config["trainer"]["max_epochs"])}


class _Images:
    """The subset's uint8 images as PIL images through lightly's transform (two views)."""

    def __init__(self, subset, transform) -> None:
        self.subset, self.transform = subset, transform

    def __len__(self) -> int:
        return len(self.subset)

    def __getitem__(self, index: int):
        from PIL import Image

        image, label = self.subset[index]
        return self.transform(Image.fromarray(image.permute(1, 2, 0).numpy())), label


def _model(settings: dict):
    """contrastkit's backbone and lightly's ``ProjectionHead`` with the study's layers."""
    import torch
    from lightly.models.modules import heads
    from torch import nn

    from contrastkit.models.factory import BackboneSpec, build_backbone

    projector = settings["projector"]
    if projector.get("num_layers", 2) != 2 or projector.get("batch_norm") != "all":
        raise ValueError(f"{CONFIG}: the anchor builds a 2-layer projector with batch norm after "
                         f"both layers, the config now says {projector}")
    backbone = build_backbone(BackboneSpec(**settings["backbone"]))
    hidden, out = projector["hidden_dim"], projector["out_dim"]
    head = heads.ProjectionHead([
        (backbone.out_dim, hidden, nn.BatchNorm1d(hidden), nn.ReLU()),
        (hidden, out, nn.BatchNorm1d(out, affine=False), None)])
    return torch.nn.ModuleDict({"backbone": backbone, "head": head})


def _save(path: Path, state: dict) -> None:
    import torch

    from contrastkit.outputs import temp_file_beside

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file_beside(path)
    with os.fdopen(fd, "wb") as handle:
        torch.save(state, handle)
    os.replace(tmp, path)


def train(seed: int, out: Path, settings: dict, workers: int = 0) -> Path:
    """Train the anchor into ``out/pretrain`` (relative to the checkout), going on from its
    last epoch's checkpoint; returns the exported backbone (``checkpoints/backbone.pth``)."""
    import torch
    from lightly.loss import NTXentLoss
    from lightly.transforms import SimCLRTransform
    from torch.utils.data import DataLoader

    from contrastkit.data.augment import NORMALIZATION
    from contrastkit.data.sources.registry import open_split
    from contrastkit.data.sources.wrappers import fixed_subset
    from contrastkit.optim import build_optimizer, param_groups, warmup_cosine_scheduler
    from contrastkit.outputs import write_bytes_atomic
    from contrastkit.train.datamodule import EpochShuffleSampler

    pre = layout.REPO / out / "pretrain"
    state_path, export = pre / "checkpoints" / "last.pt", pre / "checkpoints" / "backbone.pth"
    if finished(pre, settings["epochs"]) and export.is_file():
        return export
    torch.manual_seed(seed)
    random.seed(seed)
    model = _model(settings)
    mean, std = NORMALIZATION["cifar10"]
    transform = SimCLRTransform(input_size=32, cj_strength=0.5, gaussian_blur=0.0,
                                normalize={"mean": list(mean), "std": list(std)})
    train_split, _ = open_split("image_archive", str(layout.REPO / ARCHIVE), "train",
                                cache_dir=str(layout.REPO / ARRAY_CACHE))
    images = _Images(fixed_subset(train_split, settings["images"], settings["data_seed"]),
                     transform)
    batch = settings["batch_size"]
    steps = len(images) // batch
    if steps < 1:
        raise ValueError(f"{len(images)} images give no full batch of {batch}")
    optimizer = build_optimizer("sgd", param_groups(model, settings["weight_decay"]),
                                settings["lr"], settings["weight_decay"], 0.9)
    scheduler = warmup_cosine_scheduler(optimizer, steps * settings["epochs"], 0)
    criterion = NTXentLoss(temperature=settings["temperature"])
    sampler = EpochShuffleSampler(len(images), settings["data_seed"])
    start, log = 0, []
    if state_path.is_file():
        state = torch.load(state_path, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(_python_state(state["python_rng"]))
        start, log = int(state["epoch"]), list(state["log"])
    for epoch in range(start, settings["epochs"]):
        begin = time.monotonic()
        sampler.set_epoch(epoch)
        loader = DataLoader(images, batch_size=batch, sampler=sampler, drop_last=True,
                            num_workers=workers)
        model.train()
        losses = []
        for (view0, view1), _ in loader:
            z0 = model["head"](model["backbone"](view0))
            z1 = model["head"](model["backbone"](view1))
            loss = criterion(z0, z1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(float(loss.detach()))
        log.append({"epoch": epoch + 1, "loss": statistics.fmean(losses),
                    "seconds": round(time.monotonic() - begin, 2)})
        _save(state_path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                           "scheduler": scheduler.state_dict(), "epoch": epoch + 1,
                           "torch_rng": torch.get_rng_state(), "log": log,
                           "python_rng": _flat_state(random.getstate())})
        # the epochs' log, rewritten whole from the checkpoint's (a stop between the two
        # writes loses nothing: the next epoch writes it again)
        write_bytes_atomic(pre / EPOCHS_LOG, "".join(json.dumps(e) + "\n" for e in log).encode())
    _save(export, model["backbone"].state_dict())
    mark_finished(pre, settings["epochs"])
    return export


def _flat_state(state: tuple) -> list:
    """Python's random state as plain lists (a checkpoint read with ``weights_only``)."""
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _python_state(flat: list) -> tuple:
    version, internal, gauss = flat
    return (int(version), tuple(int(v) for v in internal), gauss)


def eval_command(seed: int, out: Path, export: Path) -> list[str]:
    """The study's ``eval knn`` (:data:`~studies.repro.commands.EVALS` ``knn200``) of the
    exported backbone, with its training normalisation."""
    return ["contrastkit", *EVALS["knn200"], "--checkpoint", str(export.relative_to(
        layout.REPO)), *data_args(), "--output", str(eval_dir(out, "knn200")),
        "--cache-dir", FEATURE_CACHE, "--device", "cpu", "--seed", str(seed), "--quiet",
        "--overwrite", "--normalize", "cifar10"]


def _cpu_seconds() -> float:
    own, workers = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


def run_anchor(seed: int, *, epochs: int | None = None, images: int | None = None,
               batch_size: int | None = None, workers: int = 0) -> Path:
    """Train (or go on with), export and evaluate the anchor of ``seed``; returns its folder
    (relative to the checkout). The study's budget is recorded once evaluated; a run shortened
    by ``epochs``, ``images`` or ``batch_size`` (a smoke run) lies under
    ``runs/repro/smoke/`` and is not."""
    from studies.repro.runner import Runner, run_lock

    settings = budget(epochs, images, batch_size)
    full = epochs is None and images is None and batch_size is None
    out = run_dir("cpu" if full else SMOKE, STEM, seed)
    runner = Runner()
    with run_lock(layout.REPO / out, runner):
        pre = layout.REPO / out / "pretrain"
        if not finished(pre, settings["epochs"]):
            started, wall, cpu = dt.datetime.now(dt.timezone.utc), time.monotonic(), \
                _cpu_seconds()
            versions = {name: _version(name) for name in ("lightly", "torchvision")}
            append_provenance(layout.REPO / out / PROVENANCE_LOG, "pretrain",
                              {**environment(layout.REPO), **versions}, started)
            export = train(seed, out, settings, workers)
            append_cost(layout.REPO / out / COST_LOG, "pretrain", _cpu_seconds() - cpu,
                        time.monotonic() - wall, 0, started)
        else:
            export = pre / "checkpoints" / "backbone.pth"
        if not (layout.REPO / eval_dir(out, "knn200") / "results.json").is_file():
            code = runner(eval_command(seed, out, export), out / COST_LOG, "knn200")
            if code != 0:
                raise SystemExit(f"{out}: eval knn failed with exit status {code}")
        if full:
            record(out)
    return out


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


# --- the report's section -------------------------------------------------------------------
def collect_anchor(root: Path | None = None) -> dict[str, dict]:
    """The anchor's finished seeds under ``runs/repro/cpu`` of ``root`` (default: the
    checkout): per seed, its 200-NN top-1, its mean seconds per epoch and its pretraining
    provenance's lightly version."""
    root = layout.REPO if root is None else root
    out = {}
    for seed_dir in sorted((root / layout.RUNS / "cpu" / STEM).glob("seed*")):
        try:
            top1 = json.loads((eval_dir(seed_dir, "knn200") / "results.json").read_text())[
                "metrics"]["top1"]
            epochs = [json.loads(line) for line in
                      (seed_dir / "pretrain" / EPOCHS_LOG).read_text().splitlines() if line]
            lightly = [json.loads(line).get("lightly") for line in
                       (seed_dir / PROVENANCE_LOG).read_text().splitlines() if line]
        except (OSError, ValueError, KeyError):
            continue
        out[seed_dir.name.removeprefix("seed")] = {
            "knn200/top1": float(top1), "epochs": len(epochs),
            "seconds_per_epoch": statistics.fmean(e["seconds"] for e in epochs) if epochs
            else None, "lightly": next((v for v in lightly if v), None)}
    return out


def _seeds(summary: dict) -> tuple[list[tuple[int, float | None, float | None]], list[str]]:
    """``(seed, contrastkit's 200-NN top-1, lightly's)`` for every anchor seed (None where not
    run yet), and the runs still missing, named."""
    anchor = summary.get("anchor") or {}
    runs = summary.get("runs") or {}
    rows, missing = [], []
    for seed in SEEDS:
        ours = (runs.get(f"cpu/{BESIDE}/seed{seed}") or {}).get("metrics", {}).get(
            "knn200/top1")
        theirs = (anchor.get(str(seed)) or {}).get("knn200/top1")
        rows.append((seed, ours, theirs))
        missing += [f"{name} seed {seed}" for name, v in (("contrastkit", ours),
                                                           ("lightly", theirs)) if v is None]
    return rows, missing


def anchor_lines(summary: dict) -> list[str]:
    """The page's section: the anchor's seeds beside contrastkit's SimCLR t = 0.2 seeds 0 and
    1 (200-NN top-1), the difference of the means with its 95% t-interval over the pairs,
    and whether it lies within the spread of contrastkit's seeds; then the commands."""
    lines = ["## Outside anchor: lightly's SimCLR", "",
             "lightly 1.6's SimCLR (its `SimCLRTransform` at `simclr_cifar`'s settings, its "
             "`NTXentLoss` at t = 0.2, its `ProjectionHead` with the study's layers) trained in "
             "a plain PyTorch loop on the same 10,000 images in the same batch order, with the "
             "same backbone class, optimiser, schedule and seeds as contrastkit's SimCLR "
             "t = 0.2, and evaluated by the same `eval knn --k 200` "
             "(`studies/repro/lightly_anchor.py` says what differs).", "",
             "| seed | contrastkit SimCLR t = 0.2 | lightly SimCLR t = 0.2 | lightly - "
             "contrastkit |", "|---|---|---|---|"]
    rows, missing = _seeds(summary)
    for seed, ours, theirs in rows:
        cells = [f"{100 * v:.2f}" if v is not None else "not yet run" for v in (ours, theirs)]
        diff = f"{100 * (theirs - ours):+.2f}" if None not in (ours, theirs) else "–"
        lines.append(f"| {seed} | {cells[0]} | {cells[1]} | {diff} |")
    lines += ["", _verdict(rows, missing), ""]
    lines += ["```bash", "# in the timm lane's venv (make test-timm creates it): lightly and "
              "torchvision", *(COMMAND.format(seed=seed) for seed in SEEDS),
              "python -m studies.repro report", "```", ""]
    return lines


def _verdict(rows: list[tuple[int, float | None, float | None]], missing: list[str]) -> str:
    """The difference of the means over the seed ``rows`` (:func:`_seeds`), its 95%
    t-interval over the pairs (two seeds: wide), and whether it lies within the seeds' spread:
    the larger of the two libraries' seed-to-seed ranges; while a run is ``missing``, what the
    verdict waits for."""
    if missing:
        return (f"No verdict yet: it needs both libraries at seeds "
                f"{', '.join(map(str, SEEDS))}; not yet run: {', '.join(missing)}.")
    ours = [100 * a for _, a, _ in rows]
    theirs = [100 * b for _, _, b in rows]
    mean, low, high = t_interval([b - a for a, b in zip(ours, theirs, strict=True)])
    spread = max(max(ours) - min(ours), max(theirs) - min(theirs))
    word = "within" if abs(mean) <= spread else "outside"
    return (f"Mean difference {mean:+.2f} points (95% t-interval over the {len(rows)} seed "
            f"pairs [{low:+.2f}, {high:+.2f}]): {word} the seeds' spread ({spread:.2f} points, "
            "the larger of the two libraries' seed-to-seed ranges).")


def anchor_headline(summary: dict) -> str:
    """The headline's bullet: both libraries' mean 200-NN top-1 and the verdict."""
    rows, missing = _seeds(summary)
    if missing:
        return f"* **Outside anchor** (lightly's SimCLR): {_verdict(rows, missing)}"
    ours, theirs = (statistics.fmean(100 * r[i] for r in rows) for i in (1, 2))
    return (f"* **Outside anchor**: lightly's SimCLR, trained on the same images in the same "
            f"batch order with the same seeds and schedule, {theirs:.2f} % (200-NN, mean of "
            f"{len(rows)} seeds) against contrastkit's SimCLR {ours:.2f} %. "
            f"{_verdict(rows, missing)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m studies.repro.lightly_anchor",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=None,
                        help="a shorter smoke run (runs/repro/smoke/, not recorded); default: "
                        "the config's trainer.max_epochs")
    parser.add_argument("--images", type=int, default=None,
                        help="fewer images, a smoke run likewise; default: the config's "
                        "data.subset")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="another batch, a smoke run likewise; default: the config's")
    parser.add_argument("--workers", type=int, default=0, help="loader workers")
    args = parser.parse_args(argv)
    layout.require_checkout()
    out = run_anchor(args.seed, epochs=args.epochs, images=args.images,
                     batch_size=args.batch_size, workers=args.workers)
    print(f"{out}: done")


if __name__ == "__main__":
    main()
