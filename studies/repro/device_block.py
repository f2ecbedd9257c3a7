"""What a Part B block runs on the GPU machine: one run trained, evaluated and packed.

``python -m studies.repro block RUN --out DIR --archive A --commit SHA`` (the command that
:func:`studies.repro.blocks.device_command` builds) makes the public commands of one run of
:data:`studies.repro.blocks.ORDER` with :func:`studies.repro.runner.run_studies`:
``contrastkit pretrain`` in one chunk that stops on an epoch boundary before the block's
deadline (``--limit-s`` after its start, less :data:`MARGIN_SECONDS`), then the run's
evaluations on the device, each started only with :data:`MIN_STEP_SECONDS` left. After every
command it packs the run's records into ``DIR`` (:func:`studies.repro.block_records.pack`), so
that what finished comes back even when the device tool stops the command. Its status:
``done`` (pretrained to the last epoch and evaluated), ``continue`` (time ran out: the same
command again on the warm machine resumes from the last checkpoint and skips the evaluations
done) or ``failed`` (a command exited with an error; the log says which).

The run folder is the study's own, ``runs/repro/gpu/<stem>/seed0`` (``gpu-e<N>`` with
``--epochs N``, a shortened pipeline check), so the records are those of any other run. The
copy of the checkout on the GPU machine has no git history: ``--commit`` (and ``--dirty``) is
what the session's checkout was at, written into every provenance line
(:data:`studies.repro.provenance.COMMIT_VARIABLE`) and the block's summary. ``--device cpu``
runs the same block on the CPU (full precision), e.g. at a tiny size as the tests do.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from studies.repro import layout
from studies.repro.block_records import BLOCK_SUMMARY, pack
from studies.repro.blocks import LIMIT_SECONDS, PART, SEED, find_step
from studies.repro.collection import read_monitor
from studies.repro.layout import eval_dir, run_dir, run_tag
from studies.repro.provenance import COMMIT_VARIABLE, DIRTY_VARIABLE, gpu_model
from studies.repro.records import COST_LOG, read_costs
from studies.repro.runner import Runner, run_studies
from studies.repro.schema import Variant
from studies.repro.studies import STUDIES

#: Kept free at the end of a pretraining chunk: the command's start (imports, decoding the
#: archive, building, capturing the step), the epoch that ends past the chunk, writing the
#: checkpoint and the records.
MARGIN_SECONDS = 120
#: No pretraining chunk or evaluation is started with less time left before the deadline.
MIN_STEP_SECONDS = 60
#: ``contrastkit pretrain`` overrides of ``--device cpu`` (the configs name one GPU, bf16).
CPU_PRETRAIN = ("--trainer.accelerator", "cpu", "--trainer.precision", "32-true")


class BlockRunner(Runner):
    """A :class:`Runner` that starts no step with less than :data:`MIN_STEP_SECONDS` left
    before ``deadline`` (``time.monotonic()``) and calls ``after`` after every command."""

    def __init__(self, deadline: float, after: Callable[[], None],
                 log: Callable[[str], None] = print) -> None:
        super().__init__(log=log)
        self.deadline, self.after = deadline, after

    def spend(self) -> bool:
        return self.deadline - time.monotonic() >= MIN_STEP_SECONDS

    def __call__(self, cmd: list[str], cost_log: Path | None = None, step: str = "") -> int:
        code = super().__call__(cmd, cost_log, step)
        self.after()
        return code


#: The evaluations that train a probe (``--probe-epochs`` shortens them).
PROBES = ("linear", "linear_d1")


def block_variant(variant: Variant, archive: str, device: str, pretrain_args: Sequence[str],
                  probe_epochs: int | None = None) -> Variant:
    """``variant`` reading ``archive`` (pretraining and evaluations), on ``device``, with
    more pretraining overrides and, with ``probe_epochs``, shorter linear probes."""
    device_args = CPU_PRETRAIN if device == "cpu" else ()
    probes = () if probe_epochs is None else tuple(
        (p, ("--epochs", str(probe_epochs))) for p in PROBES if p in variant.evals)
    return replace(variant,
                   overrides=(*variant.overrides, "--data.root", archive, *device_args,
                              *pretrain_args),
                   eval_args=(*variant.eval_args, "--root", archive),
                   protocol_args=(*variant.protocol_args, *probes))


def _versions() -> dict[str, object]:
    import lightning
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
            "lightning": lightning.__version__, "gpu": gpu_model()}


def headline(folder: Path, variant: Variant) -> dict[str, float]:
    """The run's top-1 of each evaluation done, and the online monitor's last and best
    epoch when it ran (``best_epoch``, ``best_top1``, ``last_monitored_top1``)."""
    out: dict[str, float] = {}
    for protocol in variant.evals:
        try:
            results = json.loads((eval_dir(folder, protocol) / "results.json").read_text())
        except (OSError, ValueError):
            continue
        top1 = (results.get("metrics") or {}).get("top1")
        if isinstance(top1, (int, float)):
            out[f"{protocol}/top1"] = float(top1)
    metrics_csv = folder / "pretrain" / "metrics.csv"
    curve = read_monitor(metrics_csv) if metrics_csv.is_file() else []
    if curve:
        epoch, best = max(curve, key=lambda point: (point[1], -point[0]))
        out.update(best_epoch=epoch, best_top1=best, last_monitored_top1=curve[-1][1])
    return out


def _status(folder: Path, done: bool) -> str:
    if done:
        return "done"
    try:
        lines = (folder / COST_LOG).read_text().splitlines()
        failed = json.loads(lines[-1]).get("exit_status", 0) != 0
    except (OSError, ValueError, IndexError):
        failed = False
    return "failed" if failed else "continue"


def run_block(run: str, out: Path, *, archive: str, commit: str, dirty: bool = False,
              limit_s: float = LIMIT_SECONDS, device: str = "cuda", epochs: int | None = None,
              probe_epochs: int | None = None, pretrain_args: Sequence[str] = (),
              log: Callable[[str], None] = print) -> str:
    """Train, evaluate and pack the run ``run`` into ``out``; return the block's status (see
    the module docstring). ``epochs`` shortens pretraining (a pipeline check, tag
    ``gpu-e<N>``) and ``probe_epochs`` the linear probes (a dry run's size)."""
    start = time.monotonic()
    deadline = start + limit_s
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    step = find_step(run)
    study = STUDIES[step.study]
    variant = block_variant(study.variant(run), archive, device, pretrain_args, probe_epochs)
    os.environ[COMMIT_VARIABLE] = commit
    os.environ[DIRTY_VARIABLE] = "1" if dirty else "0"
    folder = layout.REPO / run_dir(PART, variant.stem, SEED, epochs)
    try:
        earlier = json.loads((folder / BLOCK_SUMMARY).read_text()).get("invocations") or []
    except (OSError, ValueError):
        earlier = []  # the block's first command on this machine
    versions = _versions()

    def write(status: str) -> None:
        invocations = [*earlier, {"started": started, "status": status,
                                  "seconds": round(time.monotonic() - start, 1)}]
        seconds = sum(float(i["seconds"]) for i in invocations)
        summary = {"run": run, "study": study.name, "config": variant.config,
                   "tag": run_tag(PART, epochs), "stem": variant.stem, "seed": SEED,
                   "status": status, "commit": commit, "dirty": dirty,
                   "pretrain_args": list(pretrain_args), "device": device,
                   "probe_epochs": probe_epochs, **versions,
                   "invocations": invocations, "gpu_minutes": round(seconds / 60.0, 2),
                   "command_minutes": round(read_costs(folder).get("cost/wall_seconds", 0.0)
                                            / 60.0, 2),
                   "metrics": headline(folder, variant)}
        pack(folder, out, summary)

    write("running")
    runner = BlockRunner(deadline, lambda: write("running"), log=log)
    chunk = max(MIN_STEP_SECONDS, int(deadline - time.monotonic() - MARGIN_SECONDS))
    single = replace(study, variants=(variant,), claims=(), pairs=())
    done = run_studies(PART, [single], [SEED], runner, epochs=epochs, chunk_seconds=chunk,
                       device=device)
    status = _status(folder, done)
    write(status)
    log(f"# block {run}: {status} after {time.monotonic() - start:.0f} s; records in {out}")
    return status
