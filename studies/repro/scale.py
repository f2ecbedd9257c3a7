"""The sections of the reproduction report on the study's scale: its planned cost (an estimate
made before the runs, :mod:`studies.repro.plan`), its measured cost (the runs'
``cost.jsonl``, :mod:`studies.repro.records`) and what Part A's scale can and cannot show.
"""

from __future__ import annotations

from studies.repro.plan import EVAL_SECONDS, SHARED_STEP_SECONDS, lane_seconds, planned_cost
from studies.repro.stats import SEED_SD, mde
from studies.repro.studies import CPU_SEEDS, STUDIES

#: How the per-step costs of the plan were measured (see studies.repro.plan).
STEP_COST_NOTE = (
    "CPU-seconds per step (one torch thread, batch 256, 32 px, ResNet-18 width 16 with the",
    "CIFAR stem, augmentation included): the table of issue 25, measured on this project's",
    "2-core machine (SimCLR 1.76, DySTreSS 1.74, SCE 1.17 with a 4,096 queue, MoCo v2 1.18,",
    "SupCon 1.82, SINCERE 1.97; ReSSL taken as SCE's; the random-init baseline trains 1 step).",
    "Measured again for this plan with the study's own configs on 2026-11-25, while seven other",
    "engineers shared the 2 cores (load average 7-10): process CPU time of a 16-step run minus",
    "that of a 1-step run, over 15 steps (`contrastkit pretrain --config",
    "configs/repro/cpu/sce.yaml --trainer.max_epochs 2 --trainer.limit_train_batches 8`, then",
    "`--trainer.max_epochs 1 --trainer.limit_train_batches 1`, `OMP_NUM_THREADS=1`): SCE with",
    "shuffled key batch norm 2.88, SimCLR 3.86; SupCon 3.43 (78 steps minus 1): about twice",
    "issue 25's figures. Contended cores inflate CPU time, so the plan uses issue 25's figures",
    "for two idle cores and these as a bound for a shared machine.",
    "Evaluation (same conditions, on a random-init checkpoint, with the runner's arguments):",
    "the first kNN evaluation of a run extracts and caches the features of the train and test",
    "splits, 60 CPU-seconds in issue 25 (134 measured here, 200-NN); each further kNN",
    "evaluation of the run reads them (8.8 measured, 1-NN); `analyze` after them 81 measured.",
)


def plan_lines() -> list[str]:
    """The planned cost of Part A (an estimate from measured per-step costs)."""
    cpu = [s for s in STUDIES.values() if s.part == "cpu"]
    costs = planned_cost(cpu)
    lanes = lane_seconds(costs)
    total = sum(c.seconds for c in costs)
    shared = sum(c.seconds for c in planned_cost(cpu, SHARED_STEP_SECONDS))
    lines = [
        "**Planned before the runs** (`studies.repro.plan`): runs x 1,170 steps x",
        "CPU-seconds per step, plus each evaluation's CPU-seconds; the measured cost follows",
        "the plan. One addition since: the random-init baseline's `analyze` on the backbone",
        "and on the projector's output (3 seeds, "
        f"{6 * EVAL_SECONDS['analyze'] / 3600:.2f} CPU-hours, in the table), added once its",
        "runs were recorded so that every table's baseline row has every column.",
        "",
        *STEP_COST_NOTE,
        "",
        "| study | runs it adds | training CPU-h | evaluation CPU-h |",
        "|---|---|---|---|",
        *(f"| `{c.study}` | {c.runs} | {c.train_seconds / 3600:.2f} | "
          f"{c.eval_seconds / 3600:.2f} |" for c in costs),
        f"| total | {sum(c.runs for c in costs)} | "
        f"{sum(c.train_seconds for c in costs) / 3600:.2f} | "
        f"{sum(c.eval_seconds for c in costs) / 3600:.2f} |",
        "",
        f"Total about {total / 3600:.1f} CPU-hours; in the two lanes of "
        "`python -m studies.repro cpu` "
        "shown above, "
        + " and ".join(f"{seconds / 3600:.1f} h" for seconds in lanes)
        + f", so about {max(lanes) / 3600:.1f} hours of wall time on two idle cores. With the "
        f"per-step costs measured on the shared machine: about {shared / 3600:.1f} CPU-hours "
        f"(about {shared / 7200:.0f} hours in two lanes). "
        "Every run is resumable, so the study can be run in pieces.",
    ]
    return lines


def measured_cost_lines(summary: dict) -> list[str]:
    """Part A's measured cost so far, from the runs' ``cost.jsonl`` (CPU time of each
    command's process tree, wall time of each command): per config, and in total."""
    runs = [r for r in summary.get("runs", {}).values() if r.get("tag") == "cpu"]
    costed = [r for r in runs if "cost/cpu_seconds" in r.get("metrics", {})]
    planned = {(v.stem, seed) for s in STUDIES.values() if s.part == "cpu"
               for seed in s.seeds for v in s.variants}
    if not costed:
        return ["**Measured:** no Part A run has logged its cost yet.", ""]
    done = [r for r in costed if r.get("status") == "done"]
    compare_cpu = sum(c.get("cpu_seconds") or 0.0 for key, c in
                      summary.get("comparisons", {}).items() if key.startswith("cpu/"))
    cpu = sum(r["metrics"]["cost/cpu_seconds"] for r in costed) + compare_cpu
    wall = sum(r["metrics"]["cost/wall_seconds"] for r in costed)
    compared = f"{compare_cpu / 60:.1f} CPU-minutes of comparisons"
    included = (f"{cpu / 3600:.2f} CPU-hours in all, every command included ({compared} "
                "among them)" if len(done) == len(planned) else
                f"{cpu / 3600:.2f} CPU-hours so far, every command included (those of runs not "
                f"finished yet and {compared})")
    lines = [
        f"**Measured** (each command's `cost.jsonl` line: CPU time of its process tree, its "
        f"wall time; one torch thread per lane): {len(done)} of {len(planned)} runs finished "
        f"and evaluated; {included}; the "
        f"commands' wall time sums to {wall / 3600:.2f} hours (two lanes side by side: about "
        "half of that elapsed). Per finished run:",
        "",
        "| config | runs | pretraining CPU-min | evaluation CPU-min | pretraining wall-min |",
        "|---|---|---|---|---|",
    ]
    for stem in dict.fromkeys(r["stem"] for r in sorted(done, key=lambda r: r["stem"])):
        group = [r["metrics"] for r in done if r["stem"] == stem]
        pre = [m.get("cost/pretrain_cpu_seconds", 0.0) / 60 for m in group]
        ev = [(m["cost/cpu_seconds"] - m.get("cost/pretrain_cpu_seconds", 0.0)) / 60
              for m in group]
        wall_min = [m.get("pretrain/wall_minutes", 0.0) for m in group]
        lines.append(f"| `{stem}` | {len(group)} | {_mean_range(pre)} | {_mean_range(ev)} | "
                     f"{_mean_range(wall_min)} |")
    return [*lines, ""]


def _mean_range(values: list[float]) -> str:
    """``mean (min-max)`` with one decimal; the mean alone for one value."""
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.1f}"
    return f"{mean:.1f} ({min(values):.1f}-{max(values):.1f})"


def scale_lines() -> list[str]:
    """What Part A's scale can and cannot show, in plain words."""
    acc_mde = mde(SEED_SD["accuracy"][0], len(CPU_SEEDS))
    return [
        "## What the CPU scale can and cannot show",
        "",
        "Part A trains ResNet-18 at a quarter of its width on a fifth of CIFAR-10 for 30 "
        "epochs: about 1,170 steps, against the papers' 200 to 1,000 epochs of the full "
        "network on all 50,000 images (SCE Table 6 trains 200 epochs of 195 steps). It can "
        "show:",
        "",
        "* whether each method learns at all at this budget: every trained run is compared "
        "with the same backbone randomly initialised, seed by seed, and its learning curve is "
        "drawn next to that baseline;",
        f"* the direction of an effect at least as large as the minimum detectable one "
        f"(about {acc_mde:.1f} points of accuracy over {len(CPU_SEEDS)} seeds), and the sign "
        "of a geometric quantity (uniformity, tolerance, local separation, target-noise "
        "margin) between two losses trained alike;",
        "* whether a loss collapses (the views' similarity near 1 and the loss stuck at its "
        "starting value).",
        "",
        "It cannot show:",
        "",
        "* the papers' absolute numbers (linear probes near 90% on CIFAR-10): they need "
        "Part B's full scale;",
        f"* effects smaller than the minimum detectable one: SCE vs ReSSL (+0.1 in the "
        f"paper), SCE's lambda, Ceil and tau_m ablations (0.14 to 1.8 points), DySTreSS's "
        f"+2.0 points over SimCLR are all below {acc_mde:.1f} points; such a claim is *not "
        "testable at this scale*, which is not evidence against it;",
        "* what depends on long training or scale: a ranking that changes after 30 epochs, "
        "the effect of larger batches or queues, ImageNet, and the linear-probe protocols "
        "(Part A evaluates with kNN, which needs no training).",
        "",
    ]
