"""The top of Part B in the report: the results table, its verdict rule, the blocks, the recipe.

One row per number of the papers that Part B measures (:data:`ROWS`), as peers publish them:
method | paper's number (table) | ours | difference | verdict | config | commit | GPU |
GPU-minutes. *Ours* is the last epoch's number; where the paper's code keeps its best test
epoch (the DySTreSS authors' code saves the model whenever the test 200-NN improves), the best
of the online monitor's epochs is given beside it. A row whose run is not recorded yet names
its block in :data:`studies.repro.blocks.ORDER`. Everything is read from the collected summary
(``docs/reproduction.json``): the run's metrics, its monitor curve, its provenance and its
block's summary (:mod:`studies.repro.device_block`).
"""

from __future__ import annotations

from dataclasses import dataclass

from studies.repro.blocks import (
    BLOCK_SECONDS,
    ORDER,
    PART,
    SEED,
    baseline_temperature,
    best_fixed_temperature,
)
from studies.repro.recipe import recipe_lines, table_variant
from studies.repro.verdicts import ABSOLUTE_TOLERANCE


@dataclass(frozen=True)
class Row:
    """One number of a paper: the run that measures it, the summary's ``metric`` (times
    ``scale``), the paper's value and table; ``best``: the paper's code keeps its best test
    epoch; ``judged``: an accuracy under the absolute rule (else shown only)."""

    run: str
    method: str
    metric: str
    paper: float
    source: str
    scale: float = 100.0
    best: bool = False
    judged: bool = True


ROWS = (
    Row("sce", "SCE", "linear_d1/top1", 90.3, "SCE Table 6; linear probe, D.1"),
    Row("simclr", "SimCLR, t = 0.2", "knn200/top1", 83.65, "DySTreSS Table 3; 200-NN", best=True),
    Row("simclr", "SimCLR, t = 0.2: uniformity", "analyze/uniformity", -2.2135,
        "DySTreSS Table 13", scale=1.0, judged=False),
    Row("dystress", "DySTreSS (0.07, 0.2)", "knn200/top1", 85.68, "DySTreSS Table 3; 200-NN",
        best=True),
    Row("dystress", "DySTreSS: uniformity", "analyze/uniformity", -2.8430, "DySTreSS Table 13",
        scale=1.0, judged=False),
    Row("moco", "MoCo v2", "linear_d1/top1", 87.6, "SCE Table 6; linear probe, D.1"),
    Row("ressl", "ReSSL", "linear_d1/top1", 90.2, "SCE Table 6; linear probe, D.1"),
    Row("simclr_best", "SimCLR, Part A's best fixed t", "knn200/top1", 83.65,
        "DySTreSS Table 3, t not stated; 200-NN", best=True),
)


def _block_number(run: str) -> int:
    return next(i for i, step in enumerate(ORDER, start=1) if step.run == run)


def _run(summary: dict, run: str) -> dict | None:
    """The finished Part B run ``run`` of the summary, or None."""
    stem = table_variant(run).stem
    entry = (summary.get("runs") or {}).get(f"{PART}/{stem}/seed{SEED}")
    return entry if entry and entry.get("pretrain_finished") else None


def best_monitored(entry: dict) -> tuple[int, float] | None:
    """``(epochs trained, top-1)`` of the online monitor's best epoch (the first of equals)."""
    curve = entry.get("monitor") or []
    if not curve:
        return None
    epoch, top1 = max(curve, key=lambda point: (point[1], -point[0]))
    return int(epoch), float(top1)


def verdict(row: Row, last: float, best: float | None) -> str:
    """The absolute rule on the last epoch (and, said apart, on the best monitored one)."""
    floor = row.paper - ABSOLUTE_TOLERANCE
    if last >= floor:
        return "reproduced"
    if best is not None and best >= floor:
        return ("reproduced at the best monitored epoch only (the paper's code's pick), "
                f"{row.paper - last:.2f} points below at the last")
    return f"not reproduced ({row.paper - last:.2f} points below the paper)"


def _pending(row: Row, summary: dict) -> str:
    number = _block_number(row.run)
    if row.run == "simclr_best":
        t = best_fixed_temperature(summary)
        if t is None:
            return (f"not yet run (block {number} of the order; waits for Part A's best fixed "
                    "t)")
        if float(t) == baseline_temperature():
            return f"Part A's best fixed t is {t}: the row SimCLR, t = {t}"
        return f"not yet run (block {number} of the order; t = {t}, Part A's best fixed t)"
    return f"not yet run (block {number} of the order)"


def _provenance_cells(row: Row, entry: dict) -> list[str]:
    block = entry.get("block") or {}
    provenance = entry.get("provenance") or {}
    config = table_variant(row.run).config.rpartition("/")[2]
    args = block.get("pretrain_args") or []
    if args:
        config += " " + " ".join(f"`{a}`" for a in args)
    commits = provenance.get("commits") or ([block["commit"]] if block.get("commit") else [])
    commit = ", ".join(str(c)[:10] for c in commits) or "–"
    if provenance.get("dirty") or block.get("dirty"):
        commit += " (with uncommitted changes)"
    gpu = block.get("gpu") or provenance.get("gpu") or "–"
    minutes = block.get("gpu_minutes")
    return [config, commit, str(gpu), "–" if minutes is None else f"{float(minutes):.1f}"]


def result_row(row: Row, summary: dict) -> str:
    """One line of the results table."""
    digits = 2 if row.judged else 4
    head = f"| {row.method} | {row.paper:.{digits}f} ({row.source}) |"
    entry = _run(summary, row.run)
    value = None if entry is None else (entry.get("metrics") or {}).get(row.metric)
    if value is None:
        return head + f" {_pending(row, summary)} | – | – | – | – | – | – |"
    last = row.scale * float(value)
    ours, diff = f"{last:.{digits}f} (last epoch)", f"{last - row.paper:+.{digits}f}"
    best = best_monitored(entry) if row.best else None
    best_value = None if best is None else row.scale * best[1]
    if best is not None and best_value is not None:
        ours += f"; {best_value:.{digits}f} (best, epoch {best[0]})"
        diff += f"; {best_value - row.paper:+.{digits}f}"
    judged = verdict(row, last, best_value) if row.judged else (
        "– (a direction: the claims below)")
    return head + f" {ours} | {diff} | {judged} | " + " | ".join(
        _provenance_cells(row, entry)) + " |"


def results_lines(summary: dict) -> list[str]:
    """The results table with its verdict rule."""
    return [
        "### Results: the papers' numbers at full scale",
        "",
        "One seed (0) per run, each trained and evaluated on one GPU inside one block of GPU "
        f"time ({BLOCK_SECONDS // 60} minutes of device time, the machine's start included). "
        "**Verdict rule**: an absolute number is *reproduced* when ours is at most "
        f"{ABSOLUTE_TOLERANCE:g} point below the paper's; ours is the last epoch's. Where the "
        "paper's code keeps its best test epoch (the DySTreSS authors' code saves the model "
        "whenever the test 200-NN improves), the best of the online monitor's epochs (every "
        "10 epochs) is given beside it, and a number reached there only is said so. "
        "*GPU-minutes*: wall-clock minutes of the block's commands on the one GPU (its "
        "machine's start aside). Uniformity (DySTreSS Table 13) is shown without a verdict: "
        "the paper claims its direction, judged in the claims below.",
        "",
        "| method | paper's number (table) | ours | difference | verdict | config | commit "
        "| GPU | GPU-minutes |",
        "|---|---|---|---|---|---|---|---|---|",
        *(result_row(row, summary) for row in ROWS),
        "",
    ]


def blocks_lines() -> list[str]:
    """How a GPU session runs the next block, and the order of the blocks."""
    order = "; ".join(f"{i}. {step.run} ({step.measures})"
                      for i, step in enumerate(ORDER, start=1))
    return [
        "### Running a block",
        "",
        "A run's checkpoint cannot leave the GPU machine (134 MiB for SCE; 8 files of 16 MiB "
        "come back), so each run starts and finishes inside one block. On the session's "
        "machine, from the checkout the session was started in:",
        "",
        "```bash",
        "bash ../shared/gpu/prepare.sh        # once: wheels into .whl/, the archive into .carry/",
        "python -m studies.repro gpu          # the next block: its estimate and device call",
        "# make that call (the run tool's command, carry and timeout, as printed); if the",
        "# files' block.json says \"continue\", the same call again at once (warm machine)",
        "python -m studies.repro gpu --record <files_at>  # once it says \"done\"",
        "python -m studies.repro report       # this page; then commit docs/reproduction*",
        "```",
        "",
        "On the device, `python -m studies.repro block RUN` trains the 200 epochs with the "
        "public commands, in a chunk that stops on an epoch boundary before its deadline, "
        "evaluates on the device (Table 6: the D.1 linear probe, and 200-NN as in Part A; "
        "Table 3: 200-NN and `analyze`), and after every command writes the run's "
        "records, checkpoints aside, to `$OUT` (one archive, the block's summary and its "
        "log: 3 files). `tests/repro/test_repro_block_dry_run.py` runs that very command on "
        f"the CPU at a tiny size. The order of the blocks: {order}.",
        "",
    ]


def partb_lines(summary: dict) -> list[str]:
    """Part B's first screen: results, how a block runs, the recipe."""
    return [*results_lines(summary), *blocks_lines(), *recipe_lines()]
