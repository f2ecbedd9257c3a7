"""The sections of the reproduction report on the study's scale: the planned cost of each round
(an estimate made before its runs, :mod:`studies.repro.plan`), its measured cost (the runs'
``cost.jsonl``, :mod:`studies.repro.records`; a round's runs are those its checkout trained,
:mod:`studies.repro.provenance`) and what Part A's scale can and cannot show.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from studies.repro.grids import LATER_EXTENSIONS, Extension, extension_stems, extension_text
from studies.repro.plan import (
    BASELINE_PILOT_STEP_SECONDS,
    BASELINES_ROUND,
    EVAL_SECONDS,
    LANES,
    REUSED_BY_BASELINES_ROUND,
    REUSED_BY_ROUND_THREE,
    ROUND_THREE,
    STEP_SECONDS,
    StudyCost,
    planned_cost,
    planned_step_seconds,
)
from studies.repro.provenance import (
    PLAN_CHECKOUT,
    ROUND_CHECKOUTS,
    SECOND_ROUND_CHECKOUT,
)
from studies.repro.stats import SEED_SD, mde_at_power
from studies.repro.studies import CPU_SEEDS, STUDIES

#: The first round's plan and cost (issue 25; its page at commit b27d5e1), kept as text: its
#: studies have since changed.
FIRST_ROUND = (
    "**First round** (issue 25, 30 runs, finished at commit b27d5e1): planned 15.4 "
    "CPU-hours from per-step costs measured on two idle cores, measured 17.96 CPU-hours "
    "(commands' wall time 20.6 hours). Its SimCLR, DySTreSS, SINCERE and SupCon records were "
    "replaced by this round's (they are in git history); its SCE, MoCo v2, ReSSL and "
    "random-init records are the ones below.")


@dataclass(frozen=True)
class Round:
    """A round of Part A as its plan counts it: its name on the page, the checkouts that train
    it, its planned runs and their training and evaluation CPU-seconds; ``stems``, when set,
    are the round's runs whatever checkout trains them (issue 53's, whose checkout is not
    fixed here); ``excluded``: stems another round trained at the same checkouts."""

    name: str
    checkouts: tuple[str, ...]
    runs: int
    train_seconds: float
    eval_seconds: float
    stems: frozenset[str] = frozenset()
    excluded: frozenset[str] = frozenset()


#: The second round's plan (issue 38), fixed at 1955f53 before its runs; its studies have
#: changed since (issue 54 extended the grid), so its figures are kept as planned then (the
#: page at 0f3dae1).
SECOND_ROUND_PLAN = (
    "**Second round (issue 38), planned before its runs** (its runs, evaluations, the tuning "
    "rule, the layers and the margins were fixed at 7ae8bf4 and 1955f53, before the first of "
    "them started): `temperature` 9 runs, 5.94 training and 0.63 evaluation CPU-hours; "
    "`dystress` 3, 1.90 and 0.21; `sincere_grid` 8, 5.37 and 0.07; `sincere` 4, 2.68 and "
    "0.45; `cifar2` 9, 1.55 and 0.34: 33 runs, 17.44 and 1.69, about 19.1 CPU-hours, from "
    "the first round's measured costs.")
#: Issue 54's budget for its items 3 to 5 (the first round's records trained again, the grids
#: extended, lightly's SimCLR beside contrastkit's), CPU-hours.
ROUND_THREE_BUDGET = 15.0


def round_three_cost() -> list[StudyCost]:
    """Issue 54's round's planned cost per study (:func:`studies.repro.plan.planned_cost`) as
    planned at :data:`PLAN_CHECKOUT`: the grids' later extensions, each planned before its
    own runs (:func:`extension_cost`), left out."""
    later = frozenset().union(*(extension_stems(e) for e in LATER_EXTENSIONS))
    return planned_cost([STUDIES[n] for n in ROUND_THREE],
                        reused=REUSED_BY_ROUND_THREE | later)


def extension_cost(extension: Extension) -> StudyCost:
    """The planned cost of one of the grids' later extensions (issue 54), its cells alone."""
    grid = STUDIES["sincere_grid"]
    cells = tuple(v for v in grid.variants if v.stem in extension_stems(extension))
    (cost,) = planned_cost([replace(grid, variants=cells)])
    return cost


def baselines_round_cost() -> list[StudyCost]:
    """Issue 53's study 6's planned cost (:func:`studies.repro.plan.planned_cost`)."""
    return planned_cost([STUDIES[n] for n in BASELINES_ROUND], reused=REUSED_BY_BASELINES_ROUND)


def rounds() -> tuple[Round, Round, Round]:
    """The second round, issue 54's and issue 53's study 6, as their plans count them."""
    third = [*round_three_cost(), *(extension_cost(e) for e in LATER_EXTENSIONS)]
    baselines = baselines_round_cost()
    trained = frozenset(v.stem for n in BASELINES_ROUND for v in STUDIES[n].variants
                        if v.stem not in REUSED_BY_BASELINES_ROUND)
    return (Round("second round", (SECOND_ROUND_CHECKOUT,), 33, 17.44 * 3600, 1.69 * 3600),
            Round("issue 54's round", ROUND_CHECKOUTS, sum(c.runs for c in third),
                  sum(c.train_seconds for c in third), sum(c.eval_seconds for c in third),
                  excluded=trained),
            Round("issue 53's study 6", (), sum(c.runs for c in baselines),
                  sum(c.train_seconds for c in baselines),
                  sum(c.eval_seconds for c in baselines), trained))


def _cost_table(costs: list[StudyCost]) -> list[str]:
    return [
        "| study | runs it trains | training CPU-h | evaluation CPU-h |",
        "|---|---|---|---|",
        *(f"| `{c.study}` | {c.runs} | {c.train_seconds / 3600:.2f} | "
          f"{c.eval_seconds / 3600:.2f} |" for c in costs),
        f"| total | {sum(c.runs for c in costs)} | "
        f"{sum(c.train_seconds for c in costs) / 3600:.2f} | "
        f"{sum(c.eval_seconds for c in costs) / 3600:.2f} |",
    ]


def plan_lines() -> list[str]:
    """The planned cost of issue 54's round (an estimate from the first round's measured
    costs), per study, fixed before its runs, and the plans of the rounds before."""
    costs = round_three_cost()
    total = sum(c.seconds for c in costs)
    return [
        f"**Issue 54's round, planned before its runs** (fixed at {PLAN_CHECKOUT}): the "
        "studies " + ", ".join(f"`{n}`" for n in ROUND_THREE) + ": the grids' extension "
        "and ReSSL's grid, the runs tuned on them, and study 5's first-round records "
        "(SCE, MoCo v2, ReSSL, the CIFAR-10 random init, 3 seeds) trained again at one "
        "recorded commit; the first grid's cells and CIFAR-2's random init are the second "
        "round's records. Runs x their steps x CPU-seconds per step, plus each evaluation's "
        "CPU-seconds, both from the first round's measured costs (`studies.repro.plan`: "
        f"SimCLR {STEP_SECONDS['simclr']:.2f}, SINCERE {STEP_SECONDS['sincere']:.2f}, SupCon "
        f"{STEP_SECONDS['supcon']:.2f}, SCE {STEP_SECONDS['sce']:.2f}, MoCo v2 "
        f"{STEP_SECONDS['moco']:.2f}, ReSSL {STEP_SECONDS['ressl']:.2f} CPU-seconds per step; "
        f"features of one space {EVAL_SECONDS['features']:.0f}, each kNN "
        f"{EVAL_SECONDS['knn']:.0f}, each `analyze` {EVAL_SECONDS['analyze']:.0f} "
        "CPU-seconds).",
        "",
        *_cost_table(costs),
        "",
        f"Total about {total / 3600:.1f} CPU-hours, against the issue's budget of about "
        f"{ROUND_THREE_BUDGET:.0f} for it and lightly's SimCLR beside contrastkit's (that "
        f"anchor is planned and run apart); {LANES} lanes of one thread sharing the study "
        f"list take about {total / LANES / 3600:.1f} hours of wall time on two cores they "
        "have to themselves (more on the shared machine). Every run is resumable.",
        "",
        *_extension_plans(costs),
        *_baselines_plan_lines(),
        SECOND_ROUND_PLAN,
        "",
        FIRST_ROUND,
    ]


def _extension_plans(first: list[StudyCost]) -> list[str]:
    """The grids' later extensions, each planned before its runs by the same per-step costs,
    and the round's plan with them."""
    costs = [extension_cost(e) for e in LATER_EXTENSIONS]
    runs = sum(c.runs for c in (*first, *costs))
    hours = sum(c.seconds for c in (*first, *costs)) / 3600
    lines = []
    ordinals = ("second", "third", "fourth", "fifth")[:len(costs)]
    for n, e, c in zip(ordinals, LATER_EXTENSIONS, costs, strict=True):
        lines += [f"**The grids' {n} extension, planned before its runs** (in the commit that "
                  f"defined it, after {e.why}): {extension_text(e)}, with App. J's warm-up: "
                  f"`sincere_grid` {c.runs} runs, {c.train_seconds / 3600:.2f} training and "
                  f"{c.eval_seconds / 3600:.2f} evaluation CPU-hours by the per-step costs "
                  "above.", ""]
    return [*lines, f"The round's plan with them: {runs} runs, about {hours:.1f} CPU-hours.",
            ""]


def _baselines_plan_lines() -> list[str]:
    """Issue 53's study 6, planned before its runs from its configs' pilots."""
    costs = baselines_round_cost()
    total = sum(c.seconds for c in costs)
    rates = ", ".join(f"{v.label} {BASELINE_PILOT_STEP_SECONDS[v.stem]:.2f}"
                      for n in BASELINES_ROUND for v in STUDIES[n].variants
                      if v.stem in BASELINE_PILOT_STEP_SECONDS)
    return [
        "**Issue 53's study 6, planned before its runs**: `" + "`, `".join(BASELINES_ROUND)
        + "`, one seed (0) of each baseline; its random init and SimCLR t = 0.2 of seed 0 are "
        "not trained for it: SimCLR's is the second round's record, the random init's the one "
        "issue 54's round trains again (study 5's first-round records). CPU-seconds per step "
        "from each config's pilot (2 epochs on 2,048 images; its CPU-seconds per step over "
        "SimCLR t = 0.2's in the same pilot, "
        f"times SimCLR's {STEP_SECONDS['simclr']:.2f}): {rates}; evaluations as above.",
        "",
        *_cost_table(costs),
        "",
        f"Total about {total / 3600:.1f} CPU-hours (the issue's budget: about 1 CPU-hour per "
        f"run); {LANES} lanes of one thread take about {total / LANES / 3600:.1f} hours of "
        "wall time on two cores they have to themselves.",
        "",
    ]


def round_runs(summary: dict, round_: Round) -> list[dict]:
    """The Part A runs of ``round_``: those one of its checkouts trained (the first commit their
    pretraining recorded; the first round's predate provenance) but the ``excluded`` stems, or,
    with ``stems``, the runs of those stems whatever trained them."""
    def trained_by(run: dict) -> str:
        return str(((run.get("provenance") or {}).get("commits") or [""])[0])

    return [r for r in summary.get("runs", {}).values()
            if r.get("tag") == "cpu" and (r.get("stem") in round_.stems if round_.stems else (
                r.get("stem") not in round_.excluded
                and any(trained_by(r).startswith(c) for c in round_.checkouts)))]


def round_cost(summary: dict, round_: Round) -> tuple[float, float]:
    """``(CPU-seconds, wall-seconds)`` of every command of a round so far: its runs'
    ``cost.jsonl`` and the comparisons between its runs."""
    runs = round_runs(summary, round_)
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
    """Each round's measured cost so far (:func:`rounds`)."""
    return [line for r in rounds() for line in _measured_round(summary, r)]


def _measured_round(summary: dict, round_: Round) -> list[str]:
    """A round's measured cost so far, from its runs' ``cost.jsonl`` (CPU time of each
    command's process tree, wall time of each command): per config, and in total."""
    runs = round_runs(summary, round_)
    if not runs:
        return [f"**Measured ({round_.name}):** no run of it has logged its cost yet.", ""]
    done = [r for r in runs if r.get("status") == "done"]
    cpu, wall = round_cost(summary, round_)
    unlogged = sum(pretrain_cpu(r["metrics"]) - r["metrics"].get("cost/pretrain_cpu_seconds", 0.0)
                   for r in runs)
    invocations = sum(int(r["metrics"].get("cost/pretrain_invocations", 0)) for r in runs)
    logged = sum(int(r["metrics"].get("cost/pretrain_invocations_logged", 0)) for r in runs)
    finished = len(done) >= round_.runs
    lines = [
        f"**Measured ({round_.name})** (each command's `cost.jsonl` line: CPU time of its "
        f"process tree, its wall time; one torch thread per lane): {len(done)} runs finished "
        f"and evaluated (the plan: {round_.runs}); {cpu / 3600:.2f} CPU-hours "
        f"{'in all' if finished else 'so far'}, every command included (runs under way and "
        f"comparisons too); the commands' wall time sums to {wall / 3600:.2f} hours (two "
        "lanes side by side, at nice 19 on cores shared with other work). "
        f"{_unlogged_sentence(invocations, logged, unlogged, cpu)}"
        f"{_rate_sentence(done, round_.train_seconds)}Per finished run:",
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
    round's planned training (``plan_train`` CPU-seconds) at each ratio."""
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
    detected = mde_at_power(SEED_SD["accuracy"][0], len(CPU_SEEDS))
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
        f"* the direction of an effect at least as large as the one detected with 80% power "
        f"(about {detected:.1f} points of accuracy over {len(CPU_SEEDS)} seeds), and the sign "
        "of a geometric quantity (uniformity, tolerance, local separation, target-noise "
        "margin) between two losses trained alike;",
        "* whether a loss collapses (the views' similarity near 1, and the loss stuck at its "
        "starting value or the kNN accuracy near chance).",
        "",
        "It cannot show:",
        "",
        "* the papers' absolute numbers (linear probes near 90% on CIFAR-10): they need "
        "Part B's full scale;",
        f"* effects smaller than that: SCE vs MoCo v2 (+2.7 in the paper) and vs ReSSL (+0.1), "
        f"SCE's lambda, Ceil and tau_m ablations (0.88 to 1.8 points), DySTreSS's +2.0 points "
        f"over SimCLR are all below {detected:.1f} points; such a claim is *not testable at "
        "this scale*, which is not evidence against it unless its interval excludes the "
        "paper's effect (*the paper's effect excluded*);",
        "* what depends on long training or scale: a ranking that changes after 30 epochs, "
        "the effect of larger batches or queues, ImageNet, and the linear-probe protocols "
        "(Part A evaluates with kNN, which needs no training).",
        "",
    ]
