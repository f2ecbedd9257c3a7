"""The sections of the reproduction report on the study's scale: its planned cost (an estimate
made before the runs, :mod:`studies.repro.plan`), its measured cost (the runs'
``cost.jsonl``, :mod:`studies.repro.records`) and what Part A's scale can and cannot show.
"""

from __future__ import annotations

from studies.repro.plan import (
    EVAL_SECONDS,
    LANES,
    REUSED,
    ROUND_TWO,
    STEP_SECONDS,
    planned_cost,
    planned_step_seconds,
)
from studies.repro.stats import SEED_SD, mde
from studies.repro.studies import CPU_SEEDS, STUDIES
from studies.repro.tuning import is_resolved, resolve_study

#: The first round's plan and cost (issue 25; its page at commit b27d5e1), kept as text: its
#: studies have since changed.
FIRST_ROUND = (
    "**First round** (issue 25, 30 runs, finished at commit b27d5e1): planned 15.4 "
    "CPU-hours from per-step costs measured on two idle cores, measured 17.96 CPU-hours "
    "(commands' wall time 20.6 hours). Its SimCLR, DySTreSS, SINCERE and SupCon records were "
    "replaced by this round's (they are in git history); its SCE, MoCo v2, ReSSL and "
    "random-init records are the ones below.")


def plan_lines() -> list[str]:
    """The planned cost of the second round of Part A (an estimate from the first round's
    measured costs), per study, fixed before its runs."""
    studies = [STUDIES[name] for name in ROUND_TWO]
    costs = planned_cost(studies)
    total = sum(c.seconds for c in costs)
    return [
        "**Second round (issue 38), planned before its runs**: the studies "
        + ", ".join(f"`{n}`" for n in ROUND_TWO) + " (their runs, evaluations, the tuning "
        "rule, the layers and the margins were fixed in `studies.repro.studies`, then "
        "`contrastkit.repro.studies`, at 7ae8bf4 and 1955f53, before the first of these runs "
        "started). Runs x their steps x CPU-seconds per step, plus "
        "each evaluation's CPU-seconds, both from the first round's measured costs "
        f"(`studies.repro.plan`: SimCLR {STEP_SECONDS['simclr']:.2f}, DySTreSS "
        f"{STEP_SECONDS['dystress']:.2f}, SINCERE {STEP_SECONDS['sincere']:.2f}, SupCon "
        f"{STEP_SECONDS['supcon']:.2f} CPU-seconds per step; features of one space "
        f"{EVAL_SECONDS['features']:.0f}, each kNN {EVAL_SECONDS['knn']:.0f}, each `analyze` "
        f"{EVAL_SECONDS['analyze']:.0f} CPU-seconds). The random-init baseline of CIFAR-10 is "
        "the first round's record.",
        "",
        "| study | runs it trains | training CPU-h | evaluation CPU-h |",
        "|---|---|---|---|",
        *(f"| `{c.study}` | {c.runs} | {c.train_seconds / 3600:.2f} | "
          f"{c.eval_seconds / 3600:.2f} |" for c in costs),
        f"| total | {sum(c.runs for c in costs)} | "
        f"{sum(c.train_seconds for c in costs) / 3600:.2f} | "
        f"{sum(c.eval_seconds for c in costs) / 3600:.2f} |",
        "",
        f"Total about {total / 3600:.1f} CPU-hours; {LANES} lanes of one thread sharing the "
        f"study list take about {total / LANES / 3600:.1f} hours of wall time on two cores "
        "they have to themselves (more on the shared machine). Every run is resumable.",
        "",
        FIRST_ROUND,
    ]


def second_round_runs(summary: dict) -> list[dict]:
    """The Part A runs of the second round: those whose commands recorded their provenance
    (the first round's predate it)."""
    return [r for r in summary.get("runs", {}).values()
            if r.get("tag") == "cpu" and (r.get("provenance") or {}).get("commits")]


def second_round_cost(summary: dict) -> tuple[float, float]:
    """``(CPU-seconds, wall-seconds)`` of every command of the second round so far: its runs'
    ``cost.jsonl`` and the comparisons between its runs."""
    runs = second_round_runs(summary)
    stems = {r["stem"] for r in runs}
    compare_cpu = sum(c.get("cpu_seconds") or 0.0 for key, c in
                      summary.get("comparisons", {}).items()
                      if key.startswith("cpu/") and key.split("/")[1].split("__vs__")[0] in stems)
    cpu = sum(r["metrics"].get("cost/cpu_seconds", 0.0) for r in runs) + compare_cpu
    wall = sum(r["metrics"].get("cost/wall_seconds", 0.0) for r in runs)
    return cpu, wall


def pretrain_cpu(metrics: dict) -> float:
    """A run's pretraining CPU-seconds: its logged invocations' and the estimate of those that
    ended with their machine without a cost line (:mod:`studies.repro.invocations`), where its
    event files allow one; else what ``cost.jsonl`` logged."""
    return metrics.get("cost/pretrain_cpu_seconds_estimated",
                       metrics.get("cost/pretrain_cpu_seconds", 0.0))


def measured_cost_lines(summary: dict) -> list[str]:
    """The second round's measured cost so far, from its runs' ``cost.jsonl`` (CPU time of
    each command's process tree, wall time of each command): per config, and in total."""
    runs = second_round_runs(summary)
    if not runs:
        return ["**Measured (second round):** no run of it has logged its cost yet.", ""]
    plan = planned_cost([STUDIES[n] for n in ROUND_TWO])
    done = [r for r in runs if r.get("status") == "done"]
    cpu, wall = second_round_cost(summary)
    unlogged = sum(pretrain_cpu(r["metrics"]) - r["metrics"].get("cost/pretrain_cpu_seconds", 0.0)
                   for r in runs)
    invocations = sum(int(r["metrics"].get("cost/pretrain_invocations", 0)) for r in runs)
    logged = sum(int(r["metrics"].get("cost/pretrain_invocations_logged", 0)) for r in runs)
    studies = [resolve_study(STUDIES[n], summary.get("choices") or {}) for n in ROUND_TWO]
    wanted = {(v.stem, seed) for s in studies for seed in s.seeds for v in s.variants
              if v.stem not in REUSED}
    finished = (all(is_resolved(v) for s in studies for v in s.variants)
                and wanted <= {(r["stem"], r["seed"]) for r in done})
    lines = [
        f"**Measured (second round)** (each command's `cost.jsonl` line: CPU time of its "
        f"process tree, its wall time; one torch thread per lane): {len(done)} runs finished "
        f"and evaluated (the plan: {sum(c.runs for c in plan)}); {cpu / 3600:.2f} CPU-hours "
        f"{'in all' if finished else 'so far'}, every command included (runs under way and "
        f"comparisons too); the commands' wall time sums to {wall / 3600:.2f} hours (two "
        "lanes side by side, at nice 19 on cores shared with other work). "
        f"{_unlogged_sentence(invocations, logged, unlogged, cpu)}"
        f"{_rate_sentence(done, sum(c.train_seconds for c in plan))}Per finished run:",
        "",
        "| config | runs | pretraining CPU-min | of it logged | evaluation CPU-min "
        "| pretraining wall-min (logged invocations) |",
        "|---|---|---|---|---|---|",
    ]
    for stem in dict.fromkeys(r["stem"] for r in sorted(done, key=lambda r: r["stem"])):
        group = [r["metrics"] for r in done if r["stem"] == stem]
        pre = [pretrain_cpu(m) / 60 for m in group]
        ev = [(m.get("cost/cpu_seconds", 0.0) - m.get("cost/pretrain_cpu_seconds", 0.0)) / 60
              for m in group]
        wall_min = [m.get("pretrain/wall_minutes", 0.0) for m in group]
        lines.append(f"| `{stem}` | {len(group)} | {_mean_range(pre)} | {_logged_share(group)} "
                     f"| {_mean_range(ev)} | {_mean_range(wall_min)} |")
    return [*lines, ""]


def _unlogged_sentence(invocations: int, logged: int, unlogged: float, cpu: float) -> str:
    """What the page says of the pretraining invocations that left no cost line."""
    if invocations <= logged:
        return ""
    return (f"{invocations - logged} of the {invocations} pretraining invocations ended with "
            "their machine (a session's end) before the runner could log their cost; each left "
            "its event file, whose logged steps tell how far it trained, so their CPU time is "
            "estimated from the same run's logged CPU-seconds per step: "
            f"{unlogged / 3600:.2f} CPU-hours more, {(cpu + unlogged) / 3600:.2f} with them "
            "(`studies.repro.invocations`). ")


def _rate_sentence(done: list[dict], plan_train: float) -> str:
    """The finished runs' pretraining CPU-seconds per step against the plan's for the same
    runs, per CPU model that trained them (machines differ by more than the methods), and the
    second round's planned training (``plan_train`` CPU-seconds) at each ratio."""
    trained = [r for r in done if r["metrics"].get("cost/pretrain_steps")]
    if not trained:
        return ""
    by_cpu: dict[str, list[dict]] = {}
    for run in trained:
        by_cpu.setdefault((run.get("provenance") or {}).get("cpu") or "CPU not recorded",
                          []).append(run)
    rates = []
    for cpu, runs in by_cpu.items():
        steps = sum(r["metrics"]["cost/pretrain_steps"] for r in runs)
        measured = sum(pretrain_cpu(r["metrics"]) for r in runs) / steps
        planned = sum(r["metrics"]["cost/pretrain_steps"] * planned_step_seconds(r["stem"])
                      for r in runs) / steps
        rates.append((cpu, len(runs), measured, planned))
    parts = [f"{measured:.2f} against the plan's {planned:.2f} for the same runs "
             f"({measured / planned:.1f}x) on {cpu} ({n} run{'s' if n > 1 else ''})"
             for cpu, n, measured, planned in rates]
    takes = " and ".join(f"{plan_train * measured / planned / 3600:.0f}"
                         for _, _, measured, planned in rates)
    return (f"Pretraining of the finished runs, CPU-seconds per step: {'; '.join(parts)}; at "
            f"{'that ratio' if len(rates) == 1 else 'these ratios'} the round's planned "
            f"training, {plan_train / 3600:.2f} CPU-hours, would take about {takes}. ")


def _logged_share(group: list[dict]) -> str:
    """The logged invocations' share of a config's pretraining: invocations and steps."""
    inv = sum(int(m.get("cost/pretrain_invocations", 0)) for m in group)
    inv_logged = sum(int(m.get("cost/pretrain_invocations_logged", 0)) for m in group)
    steps = sum(int(m.get("cost/pretrain_steps", 0)) for m in group)
    steps_logged = sum(int(m.get("cost/pretrain_steps_logged", 0)) for m in group)
    if not inv:
        return "all (no event files)"
    if inv_logged == inv:
        return "all"
    return (f"{inv_logged} of {inv} invocations, {steps_logged:,} of {steps:,} steps trained "
            "(the rest estimated)")


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
