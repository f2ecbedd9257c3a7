"""The Markdown report of the reproduction study (``docs/reproduction.md``).

:func:`render_report` turns a collected summary into the page. Its first screen is the
headline (:mod:`studies.repro.headline`: the scale first, then what is and is not reproduced);
then the verdict rules (:mod:`studies.repro.rules`), the tally, the runs not shown to train
past their random initialisation and the results table; after the results, the deviations
from the papers (:mod:`studies.repro.deviations`), which checkout trained the records
(:mod:`studies.repro.provenance`), the gains over random initialisation and the outside anchor
(lightly's SimCLR, :mod:`studies.repro.lightly_anchor`); then per study its
claims (paper's numbers, measured values per seed, verdict), each tuning grid's choice
(:mod:`studies.repro.grid_section`), a table of its runs per tag (with the runs that collapsed
or did not train past random initialisation named under it; study 6, one seed per method, its
own tables: :mod:`studies.repro.baselines_section`) and its figures
(:mod:`studies.repro.figures`); last Part B, how to rerun, what the scale can show and the
planned and measured cost (:mod:`studies.repro.scale`). Tuned runs are shown as their grid
chose (:mod:`studies.repro.tuning`). The page holds only what the summary and the checkout's
configs say (no date, no path of the machine), so the same records give the same page, byte
for byte. :func:`write_report` writes it atomically.
"""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Sequence
from pathlib import Path

from contrastkit.outputs import temp_file_beside
from studies.repro.baselines_section import baselines_cpu_lines
from studies.repro.collection import run_tags, seed_runs, seed_values
from studies.repro.deviations import deviation_lines
from studies.repro.figures import make_figures
from studies.repro.grid_section import choice_lines, tunings_of
from studies.repro.headline import (
    headline_lines,
    results_lines,
    tally_lines,
    uncommitted_counted_runs,
)
from studies.repro.lightly_anchor import COMMAND as ANCHOR_COMMAND
from studies.repro.lightly_anchor import SEEDS as ANCHOR_SEEDS
from studies.repro.lightly_anchor import anchor_lines
from studies.repro.partb import partb_lines
from studies.repro.plan import ROUND_THREE
from studies.repro.provenance import CONTINUE_AT_STUDY_CHECKOUT, provenance_lines
from studies.repro.records import wall_minutes_text
from studies.repro.rules import COUNTED_ROLES, ROLE_WORDS, verdict_rule_lines
from studies.repro.scale import measured_cost_lines, plan_lines, scale_lines
from studies.repro.schema import Study
from studies.repro.stats import t_interval
from studies.repro.studies import BASELINES_CPU, STUDIES
from studies.repro.superseded import (
    PREVIOUS_COMMIT,
    SUPERSEDED_RUNS,
    previous_study,
    superseded_runs,
)
from studies.repro.trained import (
    COLLAPSE_MAX_DROP,
    COLLAPSE_SIMILARITY,
    NEAR_CHANCE,
    PROTOCOL_WORDS,
    baseline,
    chance,
    collapsed,
    gain_protocol,
    gains_over_random_init,
    not_past_random_init,
    untrained_text,
)
from studies.repro.tuning import resolve_study
from studies.repro.verdicts import EQUIVALENCE_CONFIDENCE, Verdict, judge, planned_effect

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
    """Seed mean ± std; for one seed of an accuracy, its bootstrap interval instead; the wall
    minutes marked where they miss an unlogged invocation (:func:`wall_minutes_text`)."""
    values = seed_values(summary, tag, stem, metric)
    low = seed_values(summary, tag, stem, f"{metric}_ci_low")
    high = seed_values(summary, tag, stem, f"{metric}_ci_high")
    if len(values) == 1 and len(low) == 1 and len(high) == 1:
        return (f"{scale * values[0]:.{digits}f} [{scale * low[0]:.{digits}f}, "
                f"{scale * high[0]:.{digits}f}] (1 seed)")
    text = _mean_std(values, scale, digits)
    if metric != WALL_MINUTES or not values:
        return text
    return wall_minutes_text([run.get("metrics", {}) for run in seed_runs(summary, tag, stem)],
                             text)


#: Per-study table columns: (header, metric, scale, digits).
_LOSSES = [("initial loss (first epoch's logged steps)", "pretrain/initial_loss", 1, 2),
           ("final loss (last epoch's)", "pretrain/final_loss", 1, 2)]
_SUPERVISED = [("target-noise margin", "analyze_projector/target_noise_margin", 1, 3),
               ("nearest-target sim. (median)", "analyze_projector/target_similarity_median",
                1, 3),
               ("nearest-noise sim. (median)", "analyze_projector/noise_similarity_median", 1, 3),
               *_LOSSES,
               ("1-NN top-1 %", "knn1_projector/top1", 100, 2),
               ("5-NN top-1 %", "knn5_projector/top1", 100, 2)]
_POSITIVE = ("last-epoch positive cosine", "pretrain/final_positive_similarity", 1, 3)
COLUMNS: dict[str, list[tuple[str, str, float, int]]] = {
    "sincere": [*_SUPERVISED,
                ("backbone: margin", "analyze/target_noise_margin", 1, 3),
                ("backbone: 1-NN %", "knn1/top1", 100, 2),
                ("backbone: 5-NN %", "knn5/top1", 100, 2)],
    "sincere_grid": [("validation 1-NN % (projector, held-out)",
                      "knn1_heldout_projector/top1", 100, 2), *_LOSSES, _POSITIVE],
    "ressl_grid": [("validation 200-NN % (backbone, held-out)", "knn200_heldout/top1", 100, 2),
                   *_LOSSES, _POSITIVE],
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
WALL_MINUTES = "pretrain/wall_minutes"
TIME_COLUMN = ("pretrain min", WALL_MINUTES, 1, 1)


def _columns(study: Study) -> list[tuple[str, str, float, int]]:
    cols = COLUMNS["dystress" if study.name == "gpu_table3" else study.name]
    return [*cols, TIME_COLUMN]


def cpu_study_order() -> list[str]:
    """Every Part A study, issue 54's round first (in its order: the grids before the runs
    tuned on them), as ``make repro-cpu`` lists them."""
    return [*ROUND_THREE,
            *(n for n, s in STUDIES.items() if s.part == "cpu" and n not in ROUND_THREE)]


def render_report(summary: dict, figures_dir: Path | None = None,
                  doc_dir: Path | None = None) -> str:
    """Markdown of docs/reproduction.md; figures are written to ``figures_dir`` when given.

    Its first screen is the headline; the rules come before the results, the details
    after them."""
    choices = summary.get("choices") or {}
    cpu_studies = " ".join(cpu_study_order())
    lines = [
        "# Reproduction of the papers' claims",
        "",
        "Generated by `python -m studies.repro report` from `runs/repro/summary.json` (its copy "
        "beside this page, `reproduction.json`, holds every number; the finished runs' own "
        "files, checkpoints aside, are recorded in `reproduction/runs/`); do not edit by hand: "
        "the same records give this page byte for byte. Every number was measured by the "
        "public commands (`contrastkit pretrain`, `eval`, `analyze`, `compare`) on the configs "
        "of `configs/repro/`; a claim whose runs do not exist yet says **not yet run**.",
        "",
        *headline_lines(summary),
        *verdict_rule_lines(),
        *tally_lines(summary),
        *_untrained_lines(summary),
        *results_lines(summary),
        *deviation_lines(),
        *provenance_lines(summary, uncommitted_counted_runs(summary)),
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
    lines += [
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
        f"python -m studies.repro cpu --study {BASELINES_CPU}   # study 6 alone: its nine runs "
        "(seed 0)",
        "python -m studies.repro gpu                   # Part B: the next block's device call",
        "python -m studies.repro report                # this page and docs/figures/repro_*",
        "# the outside anchor, lightly's SimCLR (the timm lane's venv; \"Outside anchor\" above):",
        *(ANCHOR_COMMAND.format(seed=seed) for seed in ANCHOR_SEEDS),
        "```",
        "",
        "A run goes on from its last checkpoint after any stop on the same machine. Once a run",
        "is finished and evaluated, the runner records its files, checkpoints aside, in",
        "`docs/reproduction/runs/` (and each comparison once made): commit them, and the study",
        "goes on from there on any machine (a clean clone with `../shared/data` beside it), whose",
        "`make repro-cpu` (`python -m studies.repro cpu`) and `report` restore them instead of",
        "training those runs again. A run under way when its machine is lost starts again from",
        "its first epoch. A run whose command failed (a diverged loss, for one; a stop by a",
        "signal is not a failure) is recorded too, with the command's last error line in its",
        "`cost.jsonl`, and the page gives the error; the next call tries that command again",
        "(a failure that newer code mends goes away). A tuned run (`sincere`, `cifar2`; study 5's",
        "`ressl`) is trained once its grid (`sincere_grid`; `ressl_grid`) has chosen its",
        "setting; a lane that reaches it earlier goes on with other runs.",
        "",
        *CONTINUE_AT_STUDY_CHECKOUT,
        "Part A (CPU): ResNet-18 width 16 with the CIFAR stem, the first 10,000 images of a",
        "fixed shuffle of the CIFAR-10 JPEG archive's train split (the same images for every",
        "run and seed; 958 to 1,053 images per class, close to but not exactly balanced),",
        "batch 256, 30 epochs (1,170 steps), seeds 0, 1, 2 paired across the",
        "runs of each claim (study 6: seed 0 of each baseline, its config's header naming what",
        "it takes from lightly's or solo-learn's recipe); shuffled key batch norm (8 virtual",
        "devices) for MoCo v2, ReSSL and",
        "SCE; batch norm after both projector layers for SINCERE and SupCon; one random-",
        "initialisation baseline per seed (`configs/repro/cpu/random_init.yaml`; CIFAR-2's:",
        "`cifar2_random_init.yaml`) evaluated with every study's protocols and shown in every",
        "run table. An online 200-NN monitor every 5 epochs (the 10,000 training images as",
        "bank, the test split as queries; CIFAR-2: its 4,000 training images, the test split's",
        "cat and dog images) draws the learning curves; it changes nothing in training.",
        "The training loss is logged every 10th step, so a run's initial and final loss are",
        "the means of its first and last epochs' logged steps (3 or 4 of CIFAR-10's 39 steps",
        "per epoch, 1 of CIFAR-2's 15), not the epochs' means.",
        "Evaluation on the full train (bank) and test splits of the archive. Part B",
        "(one GPU): full width, the 50,000 training images, 200 epochs, bf16, GPU augmentation.",
        "",
        *scale_lines(),
        "## Plan and cost (Part A)",
        "",
        *plan_lines(),
        "",
        *measured_cost_lines(summary),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _past_random_init(summary: dict) -> list[str]:
    """Each trained Part A run's accuracy minus that of the random-init baseline of its seed
    and study (points, on the protocol of :func:`studies.repro.trained.gain_protocol`), and
    the smallest gain."""
    choices = summary.get("choices") or {}
    rows, gains = [], []
    planned = 0  # trained runs of the plan with a test evaluation
    seen: set[str] = set()
    for study in (resolve_study(s, choices) for s in STUDIES.values() if s.part == "cpu"):
        base_variant = baseline(study)
        for v in study.variants:
            protocol = gain_protocol(v)
            if (v is base_variant or v.stem in seen or v.tuning is not None
                    or protocol is None or base_variant is None):
                continue
            seen.add(v.stem)
            cells = []
            measured = gains_over_random_init(study, summary, "cpu", f"{protocol}/top1", v.stem)
            for seed in study.seeds:
                planned += 1
                if seed in measured:
                    gains.append((measured[seed], f"study {study.number}, {v.label}", seed))
                    cells.append(f"s{seed}: {measured[seed]:+.1f}")
            rows.append(f"| {study.number} | {v.label} | {protocol} | "
                        f"{', '.join(cells) or 'not yet run'} |")
    lines = ["## Trained past random initialisation", "",
             "Each finished run's top-1 minus that of the same network randomly initialised "
             "with the same seed (points, test split; 200-NN on the backbone, or 1-NN in the "
             "projector's output where the claims read it; CIFAR-2 runs against CIFAR-2's):", "",
             "| study | run | protocol | gain over random init, per seed |", "|---|---|---|---|",
             *rows, ""]
    if gains:
        low = min(gains)
        so_far = " so far" if len(gains) < planned else ""
        lines += [f"Smallest gain{so_far}: {low[0]:+.1f} points ({low[1]}, seed {low[2]}), "
                  f"over {len(gains)} of the {planned} trained runs.", ""]
    return lines


def _mechanism_text(v: Verdict) -> str:
    """The measured mechanisms of a claim, each with its seeds' values."""
    parts = []
    for m in v.mechanisms:
        if not m.values:
            continue
        seeds = ", ".join(
            f"s{s}: {_signed(x)} (" + ", ".join(f"{k} {v:.3f}" for k, v in numbers.items()) + ")"
            for s, x, numbers in zip(m.seeds, m.values, m.inputs, strict=True))
        interval = (f" [{_signed(m.t_interval[0])}, {_signed(m.t_interval[1])}]"
                    if m.t_interval else "")
        parts.append(f"<br>*mechanism*: {m.statement}: mean "
                     f"{_signed(sum(m.values) / len(m.values))}{interval}; {seeds}")
    return "".join(parts)


def _measured(v: Verdict, study: Study) -> str:
    """The claim's measured cell: mean, t-interval and signs, then each seed's value, then its
    mechanisms."""
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
    return text + _mechanism_text(v)


def _versus_random_init(study: Study, summary: dict, tag: str, metric: str,
                        stem: str) -> str:
    """Mean over seeds of (run - random init of the same seed) on ``metric``, in points, with
    its 95% t-interval from two seeds on."""
    diffs = list(gains_over_random_init(study, summary, tag, metric, stem).values())
    if not diffs:
        return "–"
    if len(diffs) == 1:
        return f"{diffs[0]:+.2f} (1 seed)"
    mean, low, high = t_interval(diffs)
    return f"{mean:+.2f} [{low:+.2f}, {high:+.2f}] ({len(diffs)} seeds)"


def _untrained_lines(summary: dict) -> list[str]:
    """Under the tally: the Part A studies with a run not trained past its random init, and
    how many of their counted claims read such a run."""
    choices = summary.get("choices") or {}
    found = []
    for study in (resolve_study(s, choices) for s in STUDIES.values() if s.part == "cpu"):
        untrained = not_past_random_init(study, summary, study.part)
        if not untrained:
            continue
        names = {v.name for v, *_ in untrained}
        claims = [c for c in study.claims if c.role in COUNTED_ROLES
                  and any(name in names for name, _ in c.needs)]
        found.append(f"study {study.number} ({untrained_text(untrained)}; {len(claims)} of "
                     f"its counted claims read them)")
    if not found:
        return []
    return ["Not trained past random initialisation at this budget, the gain's 95% t-interval "
            "over the seeds not above 0: " + "; ".join(found) + ". The claims that read them "
            "are *inconclusive (not trained)*: they compare networks not shown to be better "
            "than the same ones untrained.", ""]


def _study_section(study: Study, summary: dict, figures_dir: Path | None,
                   doc_dir: Path | None) -> list[str]:
    tags = [study.part, *(t for t in run_tags(summary, study.part) if t != study.part)]
    lines = [f"### {study.title}", ""]
    if study.note:
        lines += [study.note, ""]
    configs = ", ".join(f"`{c}`" for c in dict.fromkeys(v.config for v in study.variants))
    lines += [f"Study `{study.name}`; seeds {list(study.seeds)}; configs: {configs or 'none'}.",
              ""]
    if study.claims:  # a study that only chooses settings (a tuning grid) has none
        lines += _claims_table(study, summary)
    if tunings_of(study):
        lines += choice_lines(study, summary)
        # a chosen cell's folder also holds the tuned comparison's later seeds: the grid is
        # its own seeds only
        summary = _of_seeds(summary, study.seeds)
    if not study.variants:
        return lines
    for tag in tags if study.name != BASELINES_CPU else ():
        table = _run_table(study, summary, tag)
        if table and (tag == tags[0] or table[0] != "empty"):
            lines += [f"Runs under `runs/repro/{tag}/` (mean ± sample std over seeds; for a "
                      "single seed, accuracies carry their 95% test-set bootstrap interval; "
                      "*vs random init*: mean paired difference with its 95% t-interval; "
                      "*pretrain min*: wall-clock minutes summed over a run's logged "
                      "invocations, on cores shared with other work, so they follow the "
                      "machine's load as much as the method; *≥*: an invocation that a "
                      "session's end stopped left no cost line, so the sum misses its "
                      "minutes):", "", *table[1:]]
    if study.name == BASELINES_CPU:  # one seed per method: its own tables and rules
        lines += baselines_cpu_lines(study, summary)  # (the random init's spread: every seed)
        summary = _of_seeds(summary, study.seeds)  # its figure: the study's seed alone
    if any(judge(c, study, summary).superseded is not None for c in study.claims):
        table = _run_table(previous_study(study), superseded_runs(PREVIOUS_COMMIT), study.part)
        lines += [f"The runs at {PREVIOUS_COMMIT} that the rerun replaces, which the pending "
                  f"claims' verdicts judge meanwhile (`{SUPERSEDED_RUNS}`):", "", *table[1:]]
    if figures_dir is not None:
        for name, caption in make_figures(study, summary, figures_dir):
            rel = os.path.relpath(figures_dir / name, doc_dir) if doc_dir else str(
                figures_dir / name)
            lines += [f"![{caption}]({rel})", "", f"*{caption}*", ""]
    return lines


def _run_table(study: Study, summary: dict, tag: str) -> list[str]:
    """The study's runs under ``tag`` as a table, with the collapsed ones and those not trained
    past random initialisation named under it; its first item says whether any cell holds a
    number (``"empty"`` or ``"measured"``)."""
    cols = _columns(study)
    base = baseline(study)
    trained = next((v for v in study.variants if v is not base), None)
    protocol = gain_protocol(trained) if trained is not None else None
    header = ["run", "epochs", *[c[0] for c in cols]]
    if base is not None and protocol is not None:
        header.append(f"{PROTOCOL_WORDS[protocol]} vs random init (points)")
    rows = []
    for variant in study.variants:
        epochs = next((r["epochs"] for r in summary.get("runs", {}).values()
                       if r.get("tag") == tag and r.get("stem") == variant.stem), None)
        cells = [_cell(summary, tag, variant.stem, m, s, d) for _, m, s, d in cols]
        if _all_seeds_done(summary, study, tag, variant.stem):  # a metric it does not have
            cells = ["–" if c == "not yet run" else c for c in cells]
        if base is not None and protocol is not None:
            cells.append("–" if variant is base else _versus_random_init(
                study, summary, tag, f"{protocol}/top1", variant.stem))
        rows.append([variant.label, str(epochs) if epochs else "–", *cells])
    empty = all(all(c in ("not yet run", "–") for c in r[2:]) for r in rows)
    lines = ["empty" if empty else "measured",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
             *("| " + " | ".join(r) + " |" for r in rows), ""]
    stuck = sorted({v.label for v in study.variants for r in summary.get("runs", {}).values()
                    if r.get("tag") == tag and r.get("stem") == v.stem
                    and r.get("pretrain_finished")
                    and collapsed(r.get("metrics", {}), chance(v))})
    if stuck:
        lines += [f"Collapsed ({'; '.join(stuck)}): in the last epoch the two views' mean "
                  f"cosine similarity was >= {COLLAPSE_SIMILARITY} and the loss had fallen by "
                  f"less than {COLLAPSE_MAX_DROP:.0%} or the kNN accuracy was within "
                  f"{NEAR_CHANCE:g} points of chance: every embedding is nearly the same "
                  "vector, so claims that read these runs are *collapsed*.", ""]
    untrained = not_past_random_init(study, summary, tag)
    if untrained:
        lines += [f"Not trained past random initialisation ({untrained_text(untrained)}, "
                  "mean gain over the same network untrained with the same seed, 95% "
                  "t-interval): the interval is not above 0, so at this budget these runs "
                  "are not shown to be better than untrained, and the claims that read them "
                  "are *inconclusive (not trained)*.", ""]
    return lines


def _claims_table(study: Study, summary: dict) -> list[str]:
    """The study's claims with the paper's numbers, the planned detectable effect (Part A),
    what was measured and the verdict."""
    planned = " 80%-power effect (planned) |" if study.part == "cpu" else ""
    lines = [f"| claim | paper (source) | paper's numbers |{planned} measured | verdict |",
             "|---|---|---|" + ("---|" if planned else "") + "---|---|"]
    for claim in study.claims:
        v = judge(claim, study, summary)
        cell = ""
        if planned:
            limit = planned_effect(claim, study)
            cell = f" {limit:.3g}{claim.unit} |" if limit is not None else " no estimate |"
        role = f"*{ROLE_WORDS[claim.role]}* " if claim.role in ROLE_WORDS else ""
        measured = _measured(v, study)
        if v.superseded is not None and not v.values:
            measured = f"{PREVIOUS_COMMIT}'s runs: {_measured(v.superseded, study)}"
        lines.append(f"| {role}{claim.statement} | {claim.source} | {claim.paper} |{cell} "
                     f"{measured} | {v.verdict} |")
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
