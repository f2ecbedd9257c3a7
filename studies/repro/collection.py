"""Collection of the study's results: scan the run folders into one summary, and read it back.

:func:`collect` reads, for every run of every study under ``runs/repro``, whether pretraining
reached its last epoch (its finished mark, or the checkpoint's loop state), the first and last
epochs' training loss and the online monitor's learning curve from ``metrics.csv``, the CPU and
wall time of its commands (``cost.jsonl``, :mod:`studies.repro.records`), the checkout and
hardware that ran them (``provenance.jsonl``, :mod:`studies.repro.provenance`), every
evaluation's ``results.json`` (with a bootstrap interval of its top-1 when it saved
predictions), every ``comparison.json``, the settings the tuning grids chose
(``choices``, :mod:`studies.repro.tuning`) and the outside anchor's seeds (``anchor``,
:mod:`studies.repro.lightly_anchor`).
:func:`write_summary` writes the result atomically as ``runs/repro/summary.json``;
:func:`run_tags` and :func:`seed_values` are the queries the verdicts, tables and figures make
of a summary.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from contrastkit.outputs import write_bytes_atomic
from studies.repro import layout, records
from studies.repro.block_records import BLOCK_SUMMARY
from studies.repro.layout import RUNS, eval_dir
from studies.repro.lightly_anchor import collect_anchor
from studies.repro.provenance import read_provenance
from studies.repro.schema import Variant
from studies.repro.studies import STUDIES
from studies.repro.tuning import folder_choices, is_resolved, resolve_study


def config_epochs(config: str) -> int:
    """``trainer.max_epochs`` of a config (path relative to the checkout; 0 when unset)."""
    raw = layout.read_config(config)
    return int((raw.get("trainer") or {}).get("max_epochs") or 0)


def pretrain_finished(ckpt: Path, max_epochs: int) -> bool:
    """Whether ``ckpt`` was written after the last batch of epoch ``max_epochs`` (Lightning
    loop state). Lightning writes it at the training epoch's end (the epoch is then counted
    ``processed``) or, in an epoch that runs the validation monitor, at the validation's end,
    before the epoch is counted processed: then the epoch has ``started`` and all its batches
    are ``completed``."""
    if not ckpt.is_file():
        return False
    import torch

    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    loop = (state.get("loops") or {}).get("fit_loop") or {}
    epochs = (loop.get("epoch_progress") or {}).get("current") or {}
    batches = loop.get("epoch_loop.batch_progress") or {}
    in_epoch = batches.get("current") or {}
    if not batches.get("is_last_batch", False):
        return False
    if int(epochs.get("processed", 0)) >= max_epochs:
        return True
    return (int(epochs.get("started", 0)) >= max_epochs
            and int(in_epoch.get("completed", 0)) >= int(in_epoch.get("ready", 1)))


def read_losses(metrics_csv: Path) -> dict[str, float]:
    """Mean ``train/loss`` of the first and of the last logged epoch's logged steps (Feeney &
    Hughes 2023, Table 4, compares the first and last epochs; the loss is logged every
    ``trainer.log_every_n_steps`` steps, so this is the mean of those steps, not of the whole
    epoch), the last epoch's mean ``train/positive_similarity`` and ``train/z_std`` (the
    embedding's spread) when logged (see :func:`studies.repro.trained.collapsed`), and the step
    of the engine's collapse warning (``train/collapse_step``) when it warned."""
    import csv

    by_epoch: dict[int, list[float]] = {}
    extra: dict[str, dict[int, list[float]]] = {"positive_similarity": {}, "z_std": {}}
    warned: float | None = None
    with open(metrics_csv, newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get("train/collapse_step") and warned is None:
                warned = float(row["train/collapse_step"])
            if row.get("train/loss") and row.get("epoch"):
                epoch = int(float(row["epoch"]))
                by_epoch.setdefault(epoch, []).append(float(row["train/loss"]))
                for name, values in extra.items():
                    if row.get(f"train/{name}"):
                        values.setdefault(epoch, []).append(float(row[f"train/{name}"]))
    if not by_epoch:
        return {}
    first, last = min(by_epoch), max(by_epoch)
    out = {"initial_loss": sum(by_epoch[first]) / len(by_epoch[first]),
           "final_loss": sum(by_epoch[last]) / len(by_epoch[last]),
           "logged_epochs": last + 1}
    for name, values in extra.items():
        if values.get(last):
            out[f"final_{name}"] = sum(values[last]) / len(values[last])
    if warned is not None:
        out["collapse_step"] = warned
    return out


#: The online monitor's column in ``metrics.csv`` (``model.online_eval``: 200-NN top-1 of the
#: test split against the training images, every few epochs): the learning curves.
MONITOR = "val/knn_top1"


def read_monitor(metrics_csv: Path) -> list[tuple[int, float]]:
    """``(epochs trained, monitor top-1)`` at each validation of ``metrics.csv``: a row logged
    in (0-based) epoch ``e`` follows ``e + 1`` epochs of training; empty without a monitor."""
    import csv

    with open(metrics_csv, newline="") as handle:
        return [(int(float(row["epoch"])) + 1, float(row[MONITOR]))
                for row in csv.DictReader(handle) if row.get(MONITOR) and row.get("epoch")]


def _flat(prefix: str, metrics: dict) -> dict[str, float]:
    """The numeric entries of ``metrics`` flattened to ``prefix + "a/b"`` keys, as floats."""
    from contrastkit.eval.report import flatten_metrics

    return {key: float(value) for key, value in flatten_metrics(metrics, prefix).items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)}


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def shared_variants(part: str, choices: dict[str, dict] | None = None) -> list[Variant]:
    """One variant per run folder (stem) of the studies of ``part``: a run that several
    studies share (the random-init baseline, the SimCLR temperature grid, a tuning grid's
    chosen run) is evaluated with the protocols of all of them, so its variant carries the
    union of their evaluations, in study order (the first study's variant otherwise). Tuned
    variants are read as ``choices`` resolve them (:mod:`studies.repro.tuning`); those not
    chosen yet have no folder and are left out."""
    merged: dict[str, Variant] = {}
    for study in STUDIES.values():
        if study.part != part:
            continue
        study = resolve_study(study, choices or {})
        for variant in (v for v in study.variants if is_resolved(v)):
            first = merged.setdefault(variant.stem, variant)
            extra = tuple(e for e in variant.evals if e not in first.evals)
            if extra:
                merged[variant.stem] = replace(first, evals=first.evals + extra)
    return list(merged.values())


def collect(root: Path | None = None) -> dict:
    """Scan ``runs/repro`` under ``root`` (default: the checkout) for every known run,
    evaluation and comparison."""
    root = layout.REPO if root is None else root
    runs: dict[str, dict] = {}
    comparisons: dict[str, dict] = {}
    choices: dict[str, dict] = {}
    for tag_dir in sorted((root / RUNS).glob("*")):
        if not tag_dir.is_dir():
            continue
        tag = tag_dir.name
        part, _, ep = tag.partition("-e")
        chosen = folder_choices(STUDIES.values(), root, tag)
        if tag == part:
            choices.update(chosen)
        for variant in shared_variants(part, chosen):
            for seed_dir in sorted((tag_dir / variant.stem).glob("seed*")):
                if {e.name for e in seed_dir.iterdir()} <= {".lock"}:
                    continue  # a lane's lock only: nothing ran there yet
                key = f"{tag}/{variant.stem}/{seed_dir.name}"
                runs[key] = _collect_run(seed_dir, variant, part, tag, ep, root)
        for study in STUDIES.values():
            if study.part != part:
                continue
            study = resolve_study(study, chosen)
            for a, b, protocol in study.all_pairs():
                sa, sb = study.variant(a).stem, study.variant(b).stem
                base = tag_dir / "compare" / f"{sa}__vs__{sb}" / protocol
                for seed_dir in sorted(base.glob("seed*")):
                    data = _read_json(seed_dir / "comparison.json")
                    if data:
                        comparisons[f"{tag}/{sa}__vs__{sb}/{protocol}/{seed_dir.name}"] = {
                            **{k: data.get(k) for k in ("difference", "ci_low", "ci_high",
                                                        "confidence", "verdict", "num_test",
                                                        "accuracy_a", "accuracy_b",
                                                        "n_resamples")},
                            "cpu_seconds": records.read_costs(seed_dir).get("cost/cpu_seconds")}
    return {"runs": runs, "comparisons": comparisons, "choices": choices,
            "anchor": collect_anchor(root)}


def _accuracy_interval(folder: Path, results: dict, protocol: str) -> dict[str, float]:
    """95% percentile bootstrap interval of top-1 (1,000 test-set resamples, seed 0) from the
    evaluation's predictions (read with ``contrastkit.eval.report.load_run``); empty when it
    wrote none."""
    if not isinstance(results.get("predictions"), str):
        return {}
    from contrastkit.eval import bootstrap_accuracy
    from contrastkit.eval.report import load_run

    try:
        _, arrays = load_run(folder)
    except FileNotFoundError:
        return {}
    _, low, high = bootstrap_accuracy(arrays["pred"], arrays["labels"])
    return {f"{protocol}/top1_ci_low": low, f"{protocol}/top1_ci_high": high}


def _collect_run(seed_dir: Path, variant: Variant, part: str, tag: str, ep: str,
                 root: Path) -> dict:
    epochs = int(ep) if ep else config_epochs(variant.config)
    pre = seed_dir / "pretrain"
    finished = records.finished(pre, epochs) or pretrain_finished(
        pre / "checkpoints" / "last.ckpt", epochs)
    metrics: dict[str, float] = {}
    curve: list[tuple[int, float]] = []
    if (pre / "metrics.csv").is_file():
        metrics.update(_flat("pretrain/", read_losses(pre / "metrics.csv")))
        curve = read_monitor(pre / "metrics.csv")
    metrics.update(records.read_costs(seed_dir))
    figures: dict[str, str] = {}
    for protocol in variant.evals:
        data = _read_json(eval_dir(seed_dir, protocol) / "results.json")
        if data:
            metrics.update(_flat(f"{protocol}/", data.get("metrics") or {}))
            metrics.update(_accuracy_interval(eval_dir(seed_dir, protocol), data, protocol))
            for name in data.get("figures") or []:
                figures[f"{protocol}/{name}"] = str(
                    (eval_dir(seed_dir, protocol) / name).relative_to(root))
    evals_done = [p for p in variant.evals
                  if (eval_dir(seed_dir, p) / "results.json").is_file()]
    complete = finished and len(evals_done) == len(variant.evals)
    failed = None if complete else records.failure(seed_dir)
    return {"part": part, "tag": tag, "config": variant.config, "stem": variant.stem,
            "seed": int(seed_dir.name.removeprefix("seed")), "epochs": epochs,
            "pretrain_finished": finished, "evals_done": evals_done,
            "status": "done" if complete else "failed" if failed else "partial",
            "failure": failed,
            "metrics": metrics, "monitor": [list(point) for point in curve],
            "figures": figures, "provenance": read_provenance(seed_dir),
            "block": _read_json(seed_dir / BLOCK_SUMMARY)}  # Part B: its block's summary


def write_summary(summary: dict, path: Path) -> None:
    """Write ``summary`` as indented JSON to ``path``, atomically."""
    write_bytes_atomic(path, (json.dumps(summary, indent=2) + "\n").encode())


def run_tags(summary: dict, part: str) -> list[str]:
    """Run tags of ``part`` in the summary: the configs' own budget first, then overrides."""
    tags = {r["tag"] for r in summary.get("runs", {}).values() if r.get("part") == part}
    return sorted(tags, key=lambda t: (t != part, t))


def seed_runs(summary: dict, tag: str, stem: str) -> list[dict]:
    """Every run of config ``stem`` under ``tag`` whose pretraining finished, one per seed."""
    return [run for run in summary.get("runs", {}).values()
            if run.get("tag") == tag and run.get("stem") == stem and run.get("pretrain_finished")]


def seed_values(summary: dict, tag: str, stem: str, metric: str) -> list[float]:
    """``metric`` of every finished run of config ``stem`` under ``tag``, one value per seed."""
    return [run["metrics"][metric] for run in seed_runs(summary, tag, stem)
            if metric in run.get("metrics", {})]
