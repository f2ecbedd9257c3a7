"""Part B, one paper run per block of GPU time: the order, the next run, the device call.

GPU time comes in blocks: :data:`BLOCK_SECONDS` of device time in all (the machine's start
included), at most :data:`COMMAND_SECONDS` per command, 64 MiB up and 8 files of 16 MiB back
per call. A full-scale checkpoint cannot come back (134 MiB for SCE), so a run starts and
finishes inside one block: the block's one command (or the same command twice, back to back,
while the machine is warm) trains the 200 epochs, evaluates on the device with the paper's
protocol and writes only records (:mod:`studies.repro.device_block`); the session records them
in ``docs/reproduction/runs/gpu`` (:mod:`studies.repro.block_records`) and regenerates the
report, whose Part B results table (:mod:`studies.repro.partb`) grows block by block.

:data:`ORDER` is the order of the runs across blocks; :func:`plan` marks each one recorded,
next, pending, waiting (SimCLR at the best fixed temperature, until Part A has chosen it) or
not needed; :func:`device_call` is the ``run`` tool's arguments for a block, and
:func:`estimate` its expected device time from the figures of :data:`EPOCH_SECONDS` and
:data:`EVAL_SECONDS`.
"""

from __future__ import annotations

import json
import math
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from studies.repro import layout
from studies.repro.block_records import BLOCK_LOG
from studies.repro.collection import seed_values
from studies.repro.layout import RECORDS, eval_dir
from studies.repro.records import FINISHED
from studies.repro.schema import Variant
from studies.repro.studies import CPU_SEEDS, STUDIES, TEMPERATURES

#: Device time of one block and the most one command may run (seconds).
BLOCK_SECONDS = 15 * 60
COMMAND_SECONDS = 10 * 60
#: The block's own deadline inside a command: it stops starting steps and writes its records
#: before the tool's limit.
LIMIT_SECONDS = 570
#: The machine's start, counted in the block's device time ("a few minutes": assumed).
MACHINE_START_SECONDS = 180
#: Upload limit of one call (working tree and carried folders) and what is carried.
UPLOAD_BYTES = 64 * 2**20
CARRY = (".whl", ".carry")
#: The CIFAR-10 archive as ``../shared/gpu/prepare.sh`` carries it (``../shared`` stays behind).
CARRIED_ARCHIVE = ".carry/cifar10-jpg.tar.gz"
SEED = 0
PART = "gpu"

#: Seconds per steady training epoch on one H100, by training step (``model.performance.step``):
#: ``eager`` measured for ``configs/repro/gpu/table6_sce.yaml`` by ``make bench-gpu``
#: (2026-11-27, ``benchmarks/README.md``: 7.0 s steady, 12.4 s the first); ``captured`` is the
#: goal of issue 34 (2.5 s), not measured yet. The other configs are assumed to cost SCE's
#: (the same 50,000 images and two views per epoch; not measured).
EPOCH_SECONDS = {"eager": 7.0, "captured": 2.5}
EPOCH_NOTE = {"eager": "measured for SCE with the eager step",
              "captured": "issue 34's goal for the captured step, not measured"}
#: Assumed, not measured on a GPU: a pretraining command's start (imports, decoding the
#: archive once, building and, captured, recording the step), one online 200-NN monitor
#: (the 60,000 images through the backbone), and each evaluation, start included.
START_SECONDS = 60
MONITOR_SECONDS = 5
EVAL_SECONDS = {"linear_d1": 150, "linear": 45, "knn200": 30, "analyze": 60}


@dataclass(frozen=True)
class Step:
    """One run of the order: its study, its run (variant name) and what it measures."""

    study: str
    run: str
    measures: str


#: The order of the runs across blocks (issue 40): SCE first, then the DySTreSS comparison, then
#: SCE's two baselines, then SimCLR at the best fixed temperature.
ORDER = (
    Step("gpu_table6", "sce", "SCE Table 6: SCE, linear probe (D.1), 90.3"),
    Step("gpu_table3", "simclr", "DySTreSS Table 3: SimCLR at t = 0.2 (the authors' "
         "constant-temperature mode), 200-NN 83.65; Table 13's uniformity"),
    Step("gpu_table3", "dystress", "DySTreSS Table 3: DySTreSS (0.07, 0.2), 200-NN 85.68; "
         "Table 13's uniformity"),
    Step("gpu_table6", "moco", "SCE Table 6: MoCo v2, linear probe (D.1), 87.6"),
    Step("gpu_table6", "ressl", "SCE Table 6: ReSSL, linear probe (D.1), 90.2"),
    Step("gpu_table3", "simclr_best", "DySTreSS Table 3: SimCLR at Part A's best fixed t, "
         "200-NN beside 83.65"),
)


@dataclass(frozen=True)
class Block:
    """One step of :data:`ORDER` as :func:`plan` finds it.

    ``state``: ``recorded`` (its records are in git), ``next`` (the first run not recorded),
    ``pending`` (after it), ``waiting`` (its setting is not chosen yet) or ``not needed``
    (another block's run serves it); ``pretrain_args``: overrides the block passes to
    ``contrastkit pretrain`` (the chosen temperature); ``note``: why, for the last three.
    """

    number: int
    step: Step
    variant: Variant
    state: str
    pretrain_args: tuple[str, ...] = ()
    note: str = ""


def variant_of(step: Step) -> Variant:
    """The run ``step`` names in its study."""
    return STUDIES[step.study].variant(step.run)


def find_step(run: str) -> Step:
    """The step of :data:`ORDER` whose run is ``run``.

    Raises:
        ValueError: naming the runs of the order, for an unknown one.
    """
    for step in ORDER:
        if step.run == run:
            return step
    raise ValueError(f"unknown Part B run {run!r}; one of {', '.join(s.run for s in ORDER)}")


def record_dir(variant: Variant, seed: int = SEED, tag: str = PART) -> Path:
    """The run's record folder, ``docs/reproduction/runs/<tag>/<stem>/seed<seed>``."""
    return layout.REPO / RECORDS / tag / variant.stem / f"seed{seed}"


def is_recorded(variant: Variant, seed: int = SEED, tag: str = PART) -> bool:
    """Whether the run's record holds finished pretraining and every evaluation."""
    folder = record_dir(variant, seed, tag)
    return (folder / "pretrain" / FINISHED).is_file() and all(
        (eval_dir(folder, p) / "results.json").is_file() for p in variant.evals)


def best_fixed_temperature(summary: dict) -> str | None:
    """Part A's best fixed temperature of SimCLR: the ``t`` of :data:`TEMPERATURES` whose
    runs (``simclr_t<t>``, CPU scale) have the highest mean 200-NN top-1 over
    :data:`CPU_SEEDS` (ties: the first in that order); None until every one of those runs
    has it. Fixed before the run; ``summary`` is the report's (``docs/reproduction.json``)."""
    means = {}
    for t in TEMPERATURES:
        values = seed_values(summary, "cpu", f"simclr_t{t}", "knn200/top1")
        if len(values) < len(CPU_SEEDS):
            return None
        means[t] = sum(values) / len(values)
    return max(TEMPERATURES, key=lambda t: (means[t], -TEMPERATURES.index(t)))


def baseline_temperature() -> float:
    """The fixed temperature of block 2's SimCLR run (its config's)."""
    baseline = variant_of(next(s for s in ORDER if s.run == "simclr"))
    method = layout.read_config(baseline.config)["model"]["method"]
    return float(method["init_args"]["temperature"])


def plan(summary: dict) -> list[Block]:
    """Every step of :data:`ORDER` with its state; ``summary``: Part A's (for
    :func:`best_fixed_temperature`)."""
    out: list[Block] = []
    found_next = False
    baseline_t = baseline_temperature()
    for number, step in enumerate(ORDER, start=1):
        variant = variant_of(step)
        args: tuple[str, ...] = ()
        note = ""
        state = "recorded" if is_recorded(variant) else ""
        if step.run == "simclr_best" and not state:
            t = best_fixed_temperature(summary)
            if t is None:
                state, note = "waiting", ("Part A has not measured every fixed temperature "
                                          f"({', '.join(TEMPERATURES)}) on all its seeds")
            elif float(t) == baseline_t:
                state, note = "not needed", (f"Part A's best fixed t is {t}: the run of block "
                                             "2 serves")
            else:
                args = ("--model.method.init_args.temperature", t)
                note = f"t = {t}, Part A's best fixed temperature"
        if not state:
            state = "pending" if found_next else "next"
            found_next = True
        out.append(Block(number, step, variant, state, args, note))
    return out


def next_block(summary: dict) -> Block | None:
    """The block to run now (state ``next``), or None when none is left to run."""
    return next((b for b in plan(summary) if b.state == "next"), None)


def device_command(block: Block, commit: str, *, dirty: bool = False,
                   options: tuple[str, ...] = (), pretrain: tuple[str, ...] = ()) -> str:
    """The block's command on the GPU machine, as the ``run`` tool takes it.

    It installs the carried wheels (``.carry/env.sh``), runs ``python -m studies.repro block``
    on the carried archive with the session's ``commit``, and keeps its whole output in
    ``$OUT/block.log`` beside the records. ``options`` are more ``block`` options and
    ``pretrain`` more ``contrastkit pretrain`` overrides (a CPU dry run's tiny size)."""
    args = ["python3", "-m", "studies.repro", "block", block.step.run, "--out", "$OUT",
            "--archive", CARRIED_ARCHIVE, "--commit", commit, "--limit-s", str(LIMIT_SECONDS)]
    if dirty:
        args.append("--dirty")
    args += options
    rest = [*block.pretrain_args, *pretrain]
    if rest:
        args += ["--", *rest]
    quoted = " ".join('"$OUT"' if a == "$OUT" else shlex.quote(a) for a in args)
    return f'set -o pipefail; source .carry/env.sh && {quoted} 2>&1 | tee "$OUT/{BLOCK_LOG}"'


def device_call(block: Block, commit: str, *, dirty: bool = False) -> dict:
    """The ``run`` tool's arguments for ``block``: its command, the carried folders and the
    command's time limit."""
    return {"command": device_command(block, commit, dirty=dirty), "carry": list(CARRY),
            "timeout_s": COMMAND_SECONDS}


@dataclass(frozen=True)
class Estimate:
    """Expected seconds of a block: its pretraining command(s) (start, epochs, monitors), its
    evaluations, the commands and device time in all, and the slowest steady epoch with which
    the block would still fit in two commands (``fitting_epoch_seconds``)."""

    step: str
    train_seconds: float
    eval_seconds: float
    commands: int
    device_seconds: float
    fitting_epoch_seconds: float

    @property
    def fits(self) -> bool:
        """One block: the device time within :data:`BLOCK_SECONDS`, in at most two commands."""
        return self.commands <= 2 and self.device_seconds <= BLOCK_SECONDS


def training_step(variant: Variant) -> str:
    """The config's ``model.performance.step`` (``eager`` when it names none)."""
    model = layout.read_config(variant.config).get("model") or {}
    performance = model.get("performance") or {}
    return str(performance.get("step", "eager"))


def estimate(variant: Variant) -> Estimate:
    """:class:`Estimate` of ``variant``'s block at its config's epochs and training step."""
    raw = layout.read_config(variant.config)
    trainer = raw.get("trainer") or {}
    epochs = int(trainer.get("max_epochs", 1))
    every = int(trainer.get("check_val_every_n_epoch") or 1)
    monitors = epochs // every if (raw.get("data") or {}).get("val_split") else 0
    step = training_step(variant)
    fixed = START_SECONDS + monitors * MONITOR_SECONDS
    train = fixed + epochs * EPOCH_SECONDS[step]
    evals = sum(EVAL_SECONDS[p] for p in variant.evals)
    work = train + evals
    usable = LIMIT_SECONDS - START_SECONDS  # each further command starts again
    commands = 1 if work <= LIMIT_SECONDS else 1 + math.ceil((work - LIMIT_SECONDS) / usable)
    device = MACHINE_START_SECONDS + work + (commands - 1) * START_SECONDS
    spare = min(BLOCK_SECONDS - MACHINE_START_SECONDS - START_SECONDS,  # two commands
                LIMIT_SECONDS + usable) - fixed - evals
    return Estimate(step, train, evals, commands, device, spare / epochs)


def upload_bytes(repo: Path) -> dict[str, int]:
    """Bytes a call sends: the working tree (tracked files and untracked ones git does not
    ignore) and each carried folder."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=True).stdout
    names = {n for n in listed.decode().split("\0") if n}
    sizes = {"working tree": sum((repo / n).stat().st_size for n in names
                                 if (repo / n).is_file())}
    for folder in CARRY:
        sizes[folder] = sum(p.stat().st_size for p in (repo / folder).rglob("*") if p.is_file())
    return sizes


def checkout_state(repo: Path) -> tuple[str, bool]:
    """``(commit, dirty)`` of the checkout: a block records the commit it ran."""
    from studies.repro.provenance import git_state

    state = git_state(repo)
    if not state["commit"]:
        raise RuntimeError(f"{repo} is not a git checkout: a block records the commit it runs")
    return str(state["commit"]), bool(state["dirty"])


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def plan_lines(summary: dict, commit: str, dirty: bool,
               force: bool = False) -> tuple[list[str], dict | None]:
    """What ``python -m studies.repro gpu`` prints: the order and each block's state, the next
    block's estimate, upload and device call (also returned). No call (None) when nothing is
    left to run, when the upload is over its limit, or, unless ``force``, when the estimate
    says the block does not fit."""
    blocks = plan(summary)
    lines = ["Part B, one run per block of GPU time (docs/reproduction.md, Part B):"]
    for b in blocks:
        note = f" ({b.note})" if b.note else ""
        lines.append(f"  {b.number}. [{b.state}] {b.step.run}: {b.step.measures}{note}")
    block = next((b for b in blocks if b.state == "next"), None)
    if block is None:
        return [*lines, "No block is left to run."], None
    e = estimate(block.variant)
    fit = "fits one block" if e.fits else "DOES NOT FIT one block"
    fit += (f" (it fits at {e.fitting_epoch_seconds:.2f} s per epoch or less; assumed "
            f"{EPOCH_SECONDS[e.step]:g} s, {EPOCH_NOTE[e.step]})")
    lines += [
        "",
        f"Block {block.number}: {block.step.run} ({block.variant.config}"
        + (f", {' '.join(block.pretrain_args)}" if block.pretrain_args else "") + ")",
        f"  estimate ({e.step} step): pretraining {_minutes(e.train_seconds)}, evaluations "
        f"{', '.join(block.variant.evals)} {_minutes(e.eval_seconds)}; {e.commands} "
        f"command(s), device time {_minutes(e.device_seconds)} of {_minutes(BLOCK_SECONDS)} "
        f"with the machine's start: {fit}",
    ]
    repo = layout.REPO
    sizes = upload_bytes(repo)
    total = sum(sizes.values())
    lines.append("  upload: " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sizes.items())
                 + f"; {total / 2**20:.1f} of {UPLOAD_BYTES / 2**20:.0f} MiB")
    missing = [f for f in CARRY if not (repo / f).is_dir()]
    if missing or not (repo / CARRIED_ARCHIVE).is_file():
        lines.append("  first: `bash ../shared/gpu/prepare.sh` (wheels into .whl/, the archive "
                     "and env.sh into .carry/)")
    if dirty:
        lines.append("  the checkout has uncommitted changes: commit them first, so that the "
                     "records name the code that ran")
    call = device_call(block, commit, dirty=dirty)
    if total > UPLOAD_BYTES:
        return [*lines, "", "No device call: the upload is over its limit."], None
    if not e.fits and not force:
        return [*lines, "", "No device call: by the estimate the block would not finish inside "
                "one block of GPU time, and its checkpoint cannot wait for the next. `--force` "
                "prints the call anyway: a block that runs out of time still brings back its "
                "records so far (the epochs trained and their time, a measurement of the "
                "speed that EPOCH_SECONDS in studies/repro/blocks.py can then take)."], None
    lines += [
        "",
        "The device call (the `run` tool's arguments; from this checkout, the session's):",
        json.dumps(call),
        "",
        "Then: if $OUT/block.json says \"continue\", make the same call again at once (the "
        "machine stays warm for 30 s and keeps the run's checkpoint); once it says \"done\":",
        "  python -m studies.repro gpu --record <files_at>   # into docs/reproduction/runs/gpu",
        "  python -m studies.repro report                     # the page, Part B's table",
        "and commit docs/reproduction*. The next `python -m studies.repro gpu` plans the next "
        "block.",
    ]
    return lines, call

