"""The Markdown report of the reproduction study (``docs/reproduction.md``).

:func:`render_report` turns a collected summary into the page. Its first screen: the tally of
verdicts with *reversed at this scale*, the runs not shown to train past their random
initialisation (with the counted claims that read them) and the results table
(:mod:`studies.repro.headline`), then the deviations from the papers
(:mod:`studies.repro.deviations`); the details follow: how to rerun, which checkout trained
the records (:mod:`studies.repro.provenance`), the planned and measured cost and what the
scale can show (:mod:`studies.repro.scale`), the verdict rules, the gains over random
initialisation, the outside anchor (lightly's SimCLR, :mod:`studies.repro.lightly_anchor`),
then per study its claims (paper's numbers, measured values per seed,
verdict), a table of its runs per tag (with those not trained past random initialisation
named under it) and its figures (:mod:`studies.repro.figures`). Tuned runs are shown as their
grid chose (:mod:`studies.repro.tuning`). :func:`write_report` writes it atomically.
"""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Sequence
from pathlib import Path

from contrastkit.outputs import temp_file_beside
from studies.repro.collection import run_tags, seed_values
from studies.repro.deviations import deviation_lines
from studies.repro.figures import make_figures
from studies.repro.headline import results_lines, tally_lines
from studies.repro.lightly_anchor import COMMAND as ANCHOR_COMMAND
from studies.repro.lightly_anchor import SEEDS as ANCHOR_SEEDS
from studies.repro.lightly_anchor import anchor_lines
from studies.repro.partb import partb_lines
from studies.repro.plan import ROUND_TWO
from studies.repro.provenance import CONTINUE_AT_STUDY_CHECKOUT, provenance_lines
from studies.repro.rules import verdict_rule_lines
from studies.repro.scale import measured_cost_lines, plan_lines, scale_lines
from studies.repro.stats import t_interval
from studies.repro.studies import (
    STUDIES,
    Study,
    Variant,
)
from studies.repro.tuning import resolve_study, settings_text
from studies.repro.verdicts import (
    COLLAPSE_MAX_DROP,
    COLLAPSE_SIMILARITY,
    EQUIVALENCE_CONFIDENCE,
    Verdict,
    collapsed,
    judge,
    planned_mde,
)

#: Why a part may have no runs yet, printed under its heading while it has none.
PART_PENDING = {
    "gpu": "It needs a GPU: one run per block of GPU time, in the order below "
           "(`python -m studies.repro gpu` plans the next one).",
}


def _mean_std(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
    if not values:
        return "not yet run"
    vals = [scale * v for v in values]
    mean = statistics.mean(vals)
    if len(vals) == 1:
        return f"{mean:.{digits}f} (1 seed)"
    return f"{mean:.{digits}f} ± {statistics.stdev(vals):.{digits}f} ({len(vals)} seeds)"


def _all_seeds_done(summary: dict, study: Study, tag: str, stem: str) -> bool:
    """Every planned seed of the run ``stem`` is finished and evaluated (``status`` done)."""
    done = {r.get("seed") for r in summary.get("runs", {}).values()
            if r.get("tag") == tag and r.get("stem") == stem and r.get("status") == "done"}
    return set(study.seeds) <= done


def _of_seeds(summary: dict, seeds: Sequence[int]) -> dict:
    """``summary`` with only the runs of ``seeds``."""
    return {**summary, "runs": {key: run for key, run in summary.get("runs", {}).items()
                                if run.get("seed") in seeds}}


def _signed(value: float) -> str:
    """``+1.234`` style, with 3 significant digits for values below 0.01 (never ``+0.000``)."""
    return f"{value:+.3f}" if value == 0 or abs(value) >= 0.01 else f"{value:+.3g}"


def _cell(summary: dict, tag: str, stem: str, metric: str, scale: float, digits: int) -> str:
    """Seed mean ± std; for one seed of an accuracy, its bootstrap interval instead."""
    values = seed_values(summary, tag, stem, metric)
    low = seed_values(summary, tag, stem, f"{metric}_ci_low")
    high = seed_values(summary, tag, stem, f"{metric}_ci_high")
    if len(values) == 1 and len(low) == 1 and len(high) == 1:
        return (f"{scale * values[0]:.{digits}f} [{scale * low[0]:.{digits}f}, "
                f"{scale * high[0]:.{digits}f}] (1 seed)")
    return _mean_std(values, scale, digits)


#: Per-study table columns: (header, metric, scale, digits).
_SUPERVISED = [("target-noise margin", "analyze_projector/target_noise_margin", 1, 3),
               ("initial loss", "pretrain/initial_loss", 1, 2),
               ("final loss", "pretrain/final_loss", 1, 2),
               ("1-NN top-1 %", "knn1_projector/top1", 100, 2),
               ("5-NN top-1 %", "knn5_projector/top1", 100, 2)]
COLUMNS: dict[str, list[tuple[str, str, float, int]]] = {
    "sincere": [*_SUPERVISED,
                ("backbone: margin", "analyze/target_noise_margin", 1, 3),
                ("backbone: 1-NN %", "knn1/top1", 100, 2),
                ("backbone: 5-NN %", "knn5/top1", 100, 2)],
    "sincere_grid": [("validation 1-NN % (projector, held-out)",
                      "knn1_heldout_projector/top1", 100, 2),
                     ("initial loss", "pretrain/initial_loss", 1, 2),
                     ("final loss", "pretrain/final_loss", 1, 2)],
    "cifar2": _SUPERVISED,
    "temperature": [("200-NN top-1 %", "knn200/top1", 100, 2),
                    ("uniformity", "analyze_projector/uniformity", 1, 3),
                    ("tolerance", "analyze_projector/tolerance", 1, 3),
                    ("positive sim.", "analyze_projector/positive_similarity_mean", 1, 3),
                    ("nearest negative sim.",
                     "analyze_projector/nearest_negative_similarity_mean", 1, 3),
                    ("backbone: uniformity", "analyze/uniformity", 1, 3),
                    ("backbone: tolerance", "analyze/tolerance", 1, 3),
                    ("backbone: positive sim.", "analyze/positive_similarity_mean", 1, 3),
                    ("backbone: nearest negative sim.",
                     "analyze/nearest_negative_similarity_mean", 1, 3)],
    "baselines": [("200-NN top-1 %", "knn200/top1", 100, 2)],
    "dystress": [("200-NN top-1 %", "knn200/top1", 100, 2),
                 ("uniformity", "analyze/uniformity", 1, 4),
                 ("alignment", "analyze/alignment", 1, 4),
                 ("inter-class uniformity", "analyze/interclass_uniformity", 1, 4),
                 ("projector: uniformity", "analyze_projector/uniformity", 1, 4),
                 ("projector: alignment", "analyze_projector/alignment", 1, 4)],
    "gpu_table6": [("linear (D.1) top-1 %", "linear_d1/top1", 100, 2),
                   ("200-NN top-1 %", "knn200/top1", 100, 2)],
}


#: Appended to every study's run table: the pretraining wall time (the run's ``cost.jsonl``).
TIME_COLUMN = ("pretrain min", "pretrain/wall_minutes", 1, 1)


def _columns(study: Study) -> list[tuple[str, str, float, int]]:
    cols = COLUMNS["dystress" if study.name == "gpu_table3" else study.name]
    return [*cols, TIME_COLUMN]


def cpu_study_order() -> list[str]:
    """Every Part A study, the second round's first (in its order: the temperature reruns
    before the tuned runs that wait for their grid), as ``make repro-cpu`` lists them."""
    return [*ROUND_TWO, *(n for n, s in STUDIES.items() if s.part == "cpu" and n not in ROUND_TWO)]


def render_report(summary: dict, figures_dir: Path | None = None,
                  doc_dir: Path | None = None) -> str:
    """Markdown of docs/reproduction.md; figures are written to ``figures_dir`` when given.

    Its first screen is the tally (with *reversed at this scale*) and the results table,
    then the deviations from the papers; the details follow."""
    choices = summary.get("choices") or {}
    cpu_studies = " ".join(cpu_study_order())
    lines = [
        "# Reproduction of the papers' claims",
        "",
        "Generated by `python -m studies.repro report` from `runs/repro/summary.json` (its copy "
        "beside this page, `reproduction.json`, holds every number; the finished runs' own "
        "files, checkpoints aside, are recorded in `reproduction/runs/`); do not edit by hand. "
        "Every number was measured by the public commands (`contrastkit pretrain`, `eval`, "
        "`analyze`, `compare`) on the configs of `configs/repro/`; a claim whose runs do not "
        f"exist yet says **not yet run**. Summary generated: {summary.get('generated', '–')}.",
        "",
        *tally_lines(summary),
        *_untrained_lines(summary),
        *results_lines(summary),
        *deviation_lines(),
        "## How to rerun",
        "",
        "```bash",
        "# Part A: two lanes of one thread sharing every CPU study's list (resumable: rerun",
        "# the same command after any stop; a lane takes the next run the other does not hold)",
        "make repro-cpu",
        "# by hand, the same two lanes (finished runs are restored from their records):",
        f"OMP_NUM_THREADS=1 python -m studies.repro cpu --study {cpu_studies} &",
        f"OMP_NUM_THREADS=1 python -m studies.repro cpu --study {cpu_studies} &",
        "python -m studies.repro cpu --dry-run         # the commands, without running them",
        "python -m studies.repro gpu                   # Part B: the next block's device call",
        "python -m studies.repro report                # this page and docs/figures/repro_*",
        "# the outside anchor, lightly's SimCLR (the timm lane's venv; \"Outside anchor\" below):",
        *(ANCHOR_COMMAND.format(seed=seed) for seed in ANCHOR_SEEDS),
        "```",
        "",
        "A run goes on from its last checkpoint after any stop on the same machine. Once a run",
        "is finished and evaluated, the runner records its files, checkpoints aside, in",
        "`docs/reproduction/runs/` (and each comparison once made): commit them, and the study",
        "goes on from there on any machine (a clean clone with `../shared/data` beside it), whose",
        "`make repro-cpu` (`python -m studies.repro cpu`) and `report` restore them instead of",
        "training those runs again. A run under way when its machine is lost starts again from",
        "its first epoch. A tuned run (`sincere`, `cifar2`) is trained once",
        "its grid (`sincere_grid`) has chosen its setting; a lane that reaches it earlier goes",
        "on with other runs.",
        "",
        *CONTINUE_AT_STUDY_CHECKOUT,
        "Part A (CPU): ResNet-18 width 16 with the CIFAR stem, the first 10,000 images of a",
        "fixed shuffle of the CIFAR-10 JPEG archive's train split (the same images for every",
        "run and seed; 958 to 1,053 images per class, close to but not exactly balanced),",
        "batch 256, 30 epochs (1,170 steps), seeds 0, 1, 2 paired across the",
        "runs of each claim; shuffled key batch norm (8 virtual devices) for MoCo v2, ReSSL and",
        "SCE; batch norm after both projector layers for SINCERE and SupCon; one random-",
        "initialisation baseline per seed (`configs/repro/cpu/random_init.yaml`; CIFAR-2's:",
        "`cifar2_random_init.yaml`) evaluated with every study's protocols and shown in every",
        "run table. An online 200-NN monitor every 5 epochs (the 10,000 training images as",
        "bank, the test split as queries; CIFAR-2: its 4,000 training images, the test split's",
        "cat and dog images) draws the learning curves; it changes nothing in training.",
        "Evaluation on the full train (bank) and test splits of the archive. Part B",
        "(one GPU): full width, the 50,000 training images, 200 epochs, bf16, GPU augmentation.",
        "",
        *provenance_lines(summary),
        "## Plan and cost (Part A)",
        "",
        *plan_lines(),
        "",
        *measured_cost_lines(summary),
        *scale_lines(),
        *verdict_rule_lines(),
        *_past_random_init(summary),
        *anchor_lines(summary),
    ]
    for part, title in (("cpu", "Part A: CPU-scale study"), ("gpu", "Part B: GPU, full scale")):
        lines += [f"## {title}", ""]
        if not run_tags(summary, part):
            lines += [f"No run of this part exists yet. {PART_PENDING.get(part, '')}".rstrip(),
                      ""]
        if part == "gpu":
            lines += partb_lines(summary)
        for study in (s for s in STUDIES.values() if s.part == part):
            lines += _study_section(resolve_study(study, choices), summary, figures_dir,
                                    doc_dir)
    return "\n".join(lines).rstrip() + "\n"


def _baseline(study: Study) -> Variant | None:
    """The study's random-initialisation baseline, if it has one."""
    return next((v for v in study.variants if v.name.endswith("random_init")), None)


def _past_random_init(summary: dict) -> list[str]:
    """Each trained Part A run's accuracy minus that of the random-init baseline of its seed
    and study (points; 200-NN where the run has it, else 1-NN, in the projector's output
    when it has no backbone kNN), and the smallest gain."""
    choices = summary.get("choices") or {}
    rows, gains = [], []
    planned = 0  # trained runs of the plan with a test evaluation
    seen: set[str] = set()
    for study in (resolve_study(s, choices) for s in STUDIES.values() if s.part == "cpu"):
        base_variant = _baseline(study)
        for v in study.variants:
            protocol = next((p for p in ("knn200", "knn1", "knn1_projector") if p in v.evals),
                            None)
            if (v is base_variant or v.stem in seen or v.tuning is not None
                    or protocol is None or base_variant is None):
                continue
            seen.add(v.stem)
            metric = f"{protocol}/top1"
            cells = []
            measured = _gains_over_random_init(study, summary, "cpu", metric, v.stem)
            for seed in study.seeds:
                planned += 1
                if seed in measured:
                    gains.append((measured[seed], f"study {study.number}, {v.label}", seed))
                    cells.append(f"s{seed}: {measured[seed]:+.1f}")
            rows.append(f"| {study.number} | {v.label} | {protocol} | "
                        f"{', '.join(cells) or 'not yet run'} |")
    lines = ["## Trained past random initialisation", "",
             "Each finished run's top-1 minus that of the same backbone randomly initialised "
             "with the same seed (points, test split; CIFAR-2 runs against CIFAR-2's):", "",
             "| study | run | protocol | gain over random init, per seed |", "|---|---|---|---|",
             *rows, ""]
    if gains:
        low = min(gains)
        so_far = " so far" if len(gains) < planned else ""
        lines += [f"Smallest gain{so_far}: {low[0]:+.1f} points ({low[1]}, seed {low[2]}), "
                  f"over {len(gains)} of the {planned} trained runs.", ""]
    return lines


def _measured(v: Verdict, study: Study) -> str:
    """The claim's measured cell: mean, t-interval and signs, then each seed's value."""
    if not v.values:
        return "–"
    cells = []
    for i, (seed, value) in enumerate(zip(v.seeds, v.values, strict=True)):
        cell = f"s{seed}: {_signed(value)}"
        if i < len(v.intervals):
            cell += f" [{v.intervals[i][0]:+.2f}, {v.intervals[i][1]:+.2f}]"
        cells.append(cell)
    text = ", ".join(cells)
    if v.t_interval is not None:
        low, high = v.t_interval
        text = (f"mean {_signed(v.mean)} [{_signed(low)}, {_signed(high)}], "
                f"{v.positive}/{len(v.values)} positive; {text}")
    if v.tost_interval is not None:
        text += (f"; {EQUIVALENCE_CONFIDENCE:.0%} t-interval [{_signed(v.tost_interval[0])}, "
                 f"{_signed(v.tost_interval[1])}]")
    if v.tag != study.part:
        text += (f" ({v.tag}: {v.tag.partition('-e')[2]} epochs instead of the "
                 "configs': a pipeline check, not evidence)")
    return text


def _gains_over_random_init(study: Study, summary: dict, tag: str, metric: str,
                            stem: str) -> dict[int, float]:
    """Per seed, the finished run's ``metric`` minus that of the random init of the same seed,
    in points."""
    base_variant = _baseline(study)
    assert base_variant is not None
    base = base_variant.stem
    runs = summary.get("runs", {})
    gains = {}
    for run in runs.values():
        if run.get("tag") != tag or run.get("stem") != stem or not run.get("pretrain_finished"):
            continue
        other = runs.get(f"{tag}/{base}/seed{run['seed']}") or {}
        if metric in run["metrics"] and metric in other.get("metrics", {}):
            gains[run["seed"]] = 100.0 * (run["metrics"][metric] - other["metrics"][metric])
    return gains


def _versus_random_init(study: Study, summary: dict, tag: str, metric: str,
                        stem: str) -> str:
    """Mean over seeds of (run - random init of the same seed) on ``metric``, in points, with
    its 95% t-interval from two seeds on."""
    diffs = list(_gains_over_random_init(study, summary, tag, metric, stem).values())
    if not diffs:
        return "–"
    if len(diffs) == 1:
        return f"{diffs[0]:+.2f} (1 seed)"
    mean, low, high = t_interval(diffs)
    return f"{mean:+.2f} [{low:+.2f}, {high:+.2f}] ({len(diffs)} seeds)"


def _accuracy_column(study: Study) -> tuple[str, str, float, int] | None:
    """The first accuracy column of the study's run table (the one compared with random
    init), if it has one."""
    return next((c for c in _columns(study) if c[1].endswith("/top1")), None)


def _not_past_random_init(study: Study, summary: dict, tag: str
                          ) -> list[tuple[Variant, str, float, float, float]]:
    """The study's trained runs whose gain over random init (the run table's accuracy, every
    planned seed measured) has a 95% t-interval that is not above 0: (variant, protocol name,
    mean, low, high), in points."""
    base_variant = _baseline(study)  # None for a study without runs
    if base_variant is None or len(study.seeds) < 2:
        return []
    accuracy = _accuracy_column(study)
    if accuracy is None:
        return []
    out = []
    for v in study.variants:
        if v is base_variant:
            continue
        gains = _gains_over_random_init(study, summary, tag, accuracy[1], v.stem)
        if sorted(gains) != sorted(study.seeds):
            continue
        mean, low, high = t_interval(list(gains.values()))
        if low <= 0:
            out.append((v, accuracy[0].split(" top-1")[0], mean, low, high))
    return out


def _untrained_text(untrained: list[tuple[Variant, str, float, float, float]]) -> str:
    return "; ".join(f"{v.label}: {name} {mean:+.2f} [{low:+.2f}, {high:+.2f}] points"
                     for v, name, mean, low, high in untrained)


def _untrained_lines(summary: dict) -> list[str]:
    """Under the tally: the Part A studies with a run not trained past its random init, and
    how many of their counted claims read such a run."""
    choices = summary.get("choices") or {}
    found = []
    for study in (resolve_study(s, choices) for s in STUDIES.values() if s.part == "cpu"):
        untrained = _not_past_random_init(study, summary, study.part)
        if not untrained:
            continue
        names = {v.name for v, *_ in untrained}
        claims = [c for c in study.claims if c.role == "primary"
                  and any(name in names for name, _ in c.needs)]
        found.append(f"study {study.number} ({_untrained_text(untrained)}; {len(claims)} of "
                     f"its counted claims read them)")
    if not found:
        return []
    return ["Not trained past random initialisation at this budget, the gain's 95% t-interval "
            "over the seeds not above 0: " + "; ".join(found) + ". Their verdicts follow the "
            "rules fixed before the runs, but they compare networks not shown to be better than "
            "the same ones untrained, not the losses as the papers train them.", ""]


def _study_section(study: Study, summary: dict, figures_dir: Path | None,
                   doc_dir: Path | None) -> list[str]:
    tags = [study.part, *(t for t in run_tags(summary, study.part) if t != study.part)]
    lines = [f"### {study.title}", ""]
    if study.note:
        lines += [study.note, ""]
    configs = ", ".join(f"`{c}`" for c in dict.fromkeys(v.config for v in study.variants))
    lines += [f"Study `{study.name}`; seeds {list(study.seeds)}; configs: {configs or 'none'}.",
              ""]
    if study.claims:  # a study that only chooses settings (the tuning grid) has none
        lines += _claims_table(study, summary)
    if study.name == "sincere_grid":
        lines += _choice_lines(summary)
        # a chosen cell's folder also holds the tuned comparison's later seeds: the grid is
        # its own seeds only
        summary = _of_seeds(summary, study.seeds)
    if not study.variants:
        return lines
    cols = _columns(study)
    accuracy = _accuracy_column(study)
    versus = accuracy is not None and _baseline(study) is not None
    for tag in tags:
        header = ["run", "epochs", *[c[0] for c in cols]]
        if versus:
            header.append(f"{accuracy[0].split(' top-1')[0]} vs random init (points)")
        rows = []
        for variant in study.variants:
            epochs = next((r["epochs"] for r in summary.get("runs", {}).values()
                           if r.get("tag") == tag and r.get("stem") == variant.stem), None)
            cells = [_cell(summary, tag, variant.stem, m, s, d) for _, m, s, d in cols]
            if _all_seeds_done(summary, study, tag, variant.stem):  # a metric it does not have
                cells = ["–" if c == "not yet run" else c for c in cells]
            if versus:
                cells.append("–" if variant is _baseline(study) else _versus_random_init(
                    study, summary, tag, accuracy[1], variant.stem))
            rows.append([variant.label, str(epochs) if epochs else "–", *cells])
        if all(all(c in ("not yet run", "–") for c in r[2:]) for r in rows) and tag != tags[0]:
            continue
        lines.append(f"Runs under `runs/repro/{tag}/` (mean ± sample std over seeds; for a "
                     "single seed, accuracies carry their 95% test-set bootstrap interval; "
                     "*vs random init*: mean paired difference with its 95% t-interval; "
                     "*pretrain min*: wall-clock minutes summed over a run's invocations, on "
                     "cores shared with other work, so they follow the machine's load as much "
                     "as the method):")
        lines.append("")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
        stuck = sorted({v.label for v in study.variants for r in summary.get("runs", {}).values()
                        if r.get("tag") == tag and r.get("stem") == v.stem
                        and r.get("pretrain_finished") and collapsed(r.get("metrics", {}))})
        if stuck:
            lines += [f"Collapsed or nearly ({', '.join(stuck)}): in the last epoch the two views' "
                      "mean "
                      f"cosine similarity was >= {COLLAPSE_SIMILARITY} and the loss had fallen by "
                      f"less than {COLLAPSE_MAX_DROP:.0%}: every embedding is nearly the same "
                      "vector, so claims that read these runs are *collapsed*.", ""]
        untrained = _not_past_random_init(study, summary, tag)
        if untrained:
            lines += [f"Not trained past random initialisation ({_untrained_text(untrained)}, "
                      "mean gain over the same network untrained with the same seed, 95% "
                      "t-interval): the interval is not above 0, so at this budget these runs "
                      "are not shown to be better than untrained, and the claims that read "
                      "them compare them as they are, not the losses as the paper trains "
                      "them.", ""]
    if figures_dir is not None:
        for name, caption in make_figures(study, summary, figures_dir):
            rel = os.path.relpath(figures_dir / name, doc_dir) if doc_dir else str(
                figures_dir / name)
            lines += [f"![{caption}]({rel})", "", f"*{caption}*", ""]
    return lines


def _claims_table(study: Study, summary: dict) -> list[str]:
    """The study's claims with the paper's numbers, the planned MDE (Part A), what was measured
    and the verdict."""
    mde_header = " MDE (planned) |" if study.part == "cpu" else ""
    lines = [f"| claim | paper (source) | paper's numbers |{mde_header} measured | verdict |",
             "|---|---|---|" + ("---|" if mde_header else "") + "---|---|"]
    for claim in study.claims:
        v = judge(claim, study, summary)
        cell = ""
        if mde_header:
            limit = planned_mde(claim, study)
            cell = f" {limit:.3g}{claim.unit} |" if limit is not None else " no estimate |"
        role = {"beside": "*beside (not counted)* ",
                "not_comparable": "*not comparable (not counted)* "}.get(claim.role, "")
        lines.append(f"| {role}{claim.statement} | {claim.source} | {claim.paper} |{cell} "
                     f"{_measured(v, study)} | {v.verdict} |")
    return [*lines, ""]


def _choice_lines(summary: dict) -> list[str]:
    """What each loss's grid chose, from the summary's ``choices``."""
    from studies.repro.studies import LOSS_LABELS, TUNINGS

    lines = []
    for name, tuning in TUNINGS.items():
        choice = (summary.get("choices") or {}).get(name) or {}
        cell = next((c for c in tuning.grid if c.name == choice.get("chosen")), None)
        scores = choice.get("scores") or {}
        loss = LOSS_LABELS[name]
        if cell is None:
            done = sum(v is not None for v in scores.values())
            lines.append(f"* {loss}: not chosen yet ({done} of {len(tuning.grid)} cells scored).")
            continue
        others = ", ".join(f"{settings_text(c.overrides)} {100 * scores[c.name]:.2f}%"
                           for c in tuning.grid if c is not cell)
        lines.append(f"* {loss}: chosen {settings_text(cell.overrides)} (validation 1-NN "
                     f"{100 * scores[cell.name]:.2f}%; the other cells: {others}).")
    return [*lines, ""]


def write_report(summary: dict, doc: Path, figures_dir: Path) -> Path:
    """Write the report of ``summary`` to ``doc`` (atomically) and its figures to
    ``figures_dir``, linked relative to ``doc``; return ``doc``. The ``repro_*.png`` figures
    of an earlier report that this one no longer shows are removed from ``figures_dir``."""
    text = render_report(summary, figures_dir, doc.parent)
    fd, tmp = temp_file_beside(doc)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, doc)
    shown = set(re.findall(r"\]\((?:[^)]*/)?(repro_[^)/]+\.png)\)", text))
    for stale in figures_dir.glob("repro_*.png"):
        if stale.name not in shown:
            stale.unlink()
    return doc
