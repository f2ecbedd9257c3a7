"""The Markdown report of the reproduction study (``docs/reproduction.md``).

:func:`render_report` turns a collected summary into the page: how to rerun, the budget, the
verdict rules, a count of verdicts per part, then per study its claims (paper's numbers,
measured values per seed, verdict), a table of its runs per tag and its figures
(:mod:`contrastkit.repro.figures`). :func:`write_report` writes it atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

from contrastkit.outputs import temp_file_beside
from contrastkit.repro.collection import run_tags, seed_values
from contrastkit.repro.figures import make_figures
from contrastkit.repro.studies import STUDIES, Study
from contrastkit.repro.verdicts import (
    ABSOLUTE_TOLERANCE,
    COLLAPSE_MAX_DROP,
    COLLAPSE_SIMILARITY,
    SIGN_STANDARD_ERRORS,
    collapsed,
    judge,
)

#: How Part A was sized and run (machine, date, commands); the per-run times are in the tables.
BUDGET_NOTE = (
    "Sized on 2 idle AMD EPYC cores, 2026-11-21: one forward and backward pass of 512 CIFAR",
    "views takes 0.53 s for ResNet-18 at width 8 and 2.1 s at width 16 (2 threads); one epoch of",
    "10,000 images at width 8 took about 30 s (`contrastkit pretrain --config",
    "configs/repro/cpu/temperature_contrastive_t0.2.yaml --trainer.max_epochs 2`, width 8).",
    "All 27 seed-0 runs had to fit in about 1.5 hours of those 2 cores, so the unsupervised",
    "studies train ResNet-18 width 8 for 4 epochs (156 steps) and study 1 trains width 16 for 3",
    "epochs (117 steps: at width 8 both supervised losses stayed in the collapsed state).",
    "The seed-0 runs below were made as two lanes of one thread each (with `scripts/repro.py`,",
    "which `contrastkit repro` replaced with the same code and options):",
    "`OMP_NUM_THREADS=1 contrastkit repro cpu --seeds 0 --study sincere_cifar2",
    "sincere_cifar10 dystress baselines` beside `OMP_NUM_THREADS=1 contrastkit repro cpu",
    "--seeds 0 --study temperature sce_lambda sce_tau_m`; `make repro-cpu` runs every study's",
    "default seeds in one lane instead. Seed 1 followed the same way for the studies where",
    "differences were small (SINCERE on CIFAR-10, DySTreSS, SCE, baselines) and for five of",
    "the temperature configs (those the sign claims and the t = 0.2 / t = 1.0 comparisons",
    "read): 54 pretraining runs, 133 min of pretraining, 14:58-16:52 UTC in the two lanes.",
    "The *pretrain min* column is the measured wall time of each pretraining run (start-up",
    "included, one thread); evaluation adds 1-3 min per run.",
)

#: Why a part may have no runs yet, printed under its heading while it has none.
PART_PENDING = {
    "gpu": "It needs a GPU, and none was available to the sessions that built this study "
           "(up to 2026-11-21). On a GPU "
           "machine, `contrastkit repro gpu --max-steps 1` trains one chunk of at most "
           "10 minutes (or one evaluation) per call and resumes exactly from the last epoch; "
           "repeat it until every run is done, then `contrastkit repro report`.",
}


def _mean_std(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
    if not values:
        return "not yet run"
    vals = [scale * v for v in values]
    mean = sum(vals) / len(vals)
    if len(vals) == 1:
        return f"{mean:.{digits}f} (1 seed)"
    var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
    return f"{mean:.{digits}f} ± {var ** 0.5:.{digits}f} ({len(vals)} seeds)"


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
COLUMNS: dict[str, list[tuple[str, str, float, int]]] = {
    "sincere": [("target-noise margin", "analyze/target_noise_margin", 1, 3),
                ("initial loss", "pretrain/initial_loss", 1, 2),
                ("final loss", "pretrain/final_loss", 1, 2),
                ("1-NN top-1 %", "knn1/top1", 100, 2), ("5-NN top-1 %", "knn5/top1", 100, 2)],
    "temperature": [("200-NN top-1 %", "knn200/top1", 100, 2),
                    ("linear top-1 %", "linear/top1", 100, 2),
                    ("uniformity", "analyze/uniformity", 1, 3),
                    ("tolerance", "analyze/tolerance", 1, 3),
                    ("positive sim.", "analyze/positive_similarity_mean", 1, 3),
                    ("nearest negative sim.", "analyze/nearest_negative_similarity_mean", 1, 3)],
    "sce": [("200-NN top-1 %", "knn200/top1", 100, 2), ("linear top-1 %", "linear/top1", 100, 2)],
    "dystress": [("200-NN top-1 %", "knn200/top1", 100, 2),
                 ("uniformity", "analyze/uniformity", 1, 4),
                 ("alignment", "analyze/alignment", 1, 4),
                 ("inter-class uniformity", "analyze/interclass_uniformity", 1, 4)],
    "gpu_table6": [("linear (D.1) top-1 %", "linear_d1/top1", 100, 2),
                   ("linear (fast) top-1 %", "linear/top1", 100, 2),
                   ("200-NN top-1 %", "knn200/top1", 100, 2)],
}


#: Appended to every study's run table: the measured pretraining time (see ``pretrain_minutes``).
TIME_COLUMN = ("pretrain min", "pretrain/wall_minutes", 1, 1)


def _columns(study: Study) -> list[tuple[str, str, float, int]]:
    if study.name.startswith("sincere"):
        cols = COLUMNS["sincere"]
    elif study.name in ("sce_lambda", "sce_tau_m", "baselines"):
        cols = COLUMNS["sce"]
    elif study.name == "gpu_table3":
        cols = COLUMNS["dystress"]
    else:
        cols = COLUMNS.get(study.name, COLUMNS["sce"])
    return [*cols, TIME_COLUMN]


def render_report(summary: dict, figures_dir: Path | None = None,
                  doc_dir: Path | None = None) -> str:
    """Markdown of docs/reproduction.md; figures are written to ``figures_dir`` when given."""
    lines = [
        "# Reproduction of the papers' claims",
        "",
        "Generated by `contrastkit repro report` from `runs/repro/summary.json` (written by",
        "`contrastkit repro cpu` / `gpu`; its copy beside this page, `reproduction.json`,",
        "holds every number); do not edit by hand. Every number below was",
        "measured by the public commands (`contrastkit pretrain`, `eval`, `analyze`, `compare`)",
        "on the configs of `configs/repro/`; a claim whose runs do not exist yet says",
        "**not yet run**.",
        "",
        f"Summary generated: {summary.get('generated', '–')}.",
        "",
        "## How to rerun",
        "",
        "```bash",
        "make repro-cpu                                   # Part A end to end (resumable)",
        "contrastkit repro cpu --study sincere_cifar2 --seeds 0   # one study, one seed",
        "contrastkit repro cpu --dry-run                  # the commands, without running them",
        "contrastkit repro gpu --max-steps 1              # Part B: one chunk (<= 10 min) per call",
        "contrastkit repro report                         # this page and docs/figures/repro_*",
        "```",
        "",
        "Part A (CPU): ResNet-18 with the CIFAR stem (width 8; width 16 in study 1), the first",
        "10,000 images of a fixed shuffle of the CIFAR-10 JPEG archive's train split (CIFAR-2:",
        "all 10,000 cat and dog images), batch 256, the epochs of each config (4; 3 in study 1);",
        "evaluation on the full train (bank) and test splits of the archive (CIFAR-2: their cat",
        "and dog images). Part B (one GPU): full width, the 50,000 training images, 200 epochs,",
        "bf16, GPU augmentation. The archive's",
        "JPEG re-encoding makes accuracies close to, not equal to, the official files'.",
        "",
        "## Budget (Part A)",
        "",
        *BUDGET_NOTE,
        "",
        "## Verdict rules",
        "",
        "* *A beats B* (accuracy): reproduced when, in every finished seed, the paired bootstrap",
        "  95% interval of A - B (`contrastkit compare`, 1,000 test-set resamples) lies above 0.",
        "* *A and B do not differ* (SINCERE App. M): reproduced when every seed's interval",
        "  contains 0. *A is not worse than B*: no seed's interval lies below 0.",
        "* Other quantities (margin, loss, uniformity, differences of differences): reproduced",
        "  when the measured value has the paper's sign in every finished seed and the seed mean",
        f"  exceeds {SIGN_STANDARD_ERRORS:g} standard errors (sample std / sqrt(seeds)); with a "
        "single seed they are",
        "  *inconclusive* (no test-set interval exists for them, and no seed spread to judge by).",
        f"* Absolute numbers (Part B): reproduced when the seed mean is at most "
        f"{ABSOLUTE_TOLERANCE:g} point below",
        "  the paper's.",
        "* *Inconclusive* when a run the claim reads collapsed, or nearly, in pretraining (last "
        "epoch: the",
        f"  views' mean cosine similarity >= {COLLAPSE_SIMILARITY}, the loss down by less than "
        f"{COLLAPSE_MAX_DROP:.0%}).",
        "* Otherwise *not reproduced*, with the measured value, the paper's and the gap",
        "  (measured - paper); *not yet run* while no seed has every number a claim needs.",
        "* Values are oriented so that the paper's claim says *positive*; accuracies in points.",
        "  At Part A's scale only directions can be compared, never absolute numbers.",
        "",
    ]
    lines += _at_a_glance(summary)
    for part, title in (("cpu", "Part A: CPU-scale study"), ("gpu", "Part B: GPU, full scale")):
        lines += [f"## {title}", ""]
        if not run_tags(summary, part):
            lines += [f"No run of this part exists yet. {PART_PENDING.get(part, '')}".rstrip(),
                      ""]
        for study in (s for s in STUDIES.values() if s.part == part):
            lines += _study_section(study, summary, figures_dir, doc_dir)
    return "\n".join(lines).rstrip() + "\n"


def _at_a_glance(summary: dict) -> list[str]:
    """Count of verdicts per part (the first word of each claim's verdict)."""
    lines = ["## At a glance", "", "| part | claims | reproduced | not reproduced | inconclusive "
             "| not yet run |", "|---|---|---|---|---|---|"]
    for part, title in (("cpu", "A (CPU scale)"), ("gpu", "B (GPU, full scale)")):
        counts = {"reproduced": 0, "not reproduced": 0, "inconclusive": 0, "not yet run": 0}
        for study in (s for s in STUDIES.values() if s.part == part):
            for claim in study.claims:
                verdict = judge(claim, study, summary).verdict
                counts[next(k for k in ("not yet run", "not reproduced", "inconclusive",
                                        "reproduced") if verdict.startswith(k))] += 1
        lines.append(f"| {title} | {sum(counts.values())} | " + " | ".join(
            str(counts[k]) for k in ("reproduced", "not reproduced", "inconclusive",
                                     "not yet run")) + " |")
    return [*lines, ""]


def _study_section(study: Study, summary: dict, figures_dir: Path | None,
                   doc_dir: Path | None) -> list[str]:
    tags = [study.part, *(t for t in run_tags(summary, study.part) if t != study.part)]
    lines = [f"### {study.title}", ""]
    if study.note:
        lines += [study.note, ""]
    lines.append(f"Study `{study.name}`; default seeds {list(study.seeds)}; configs: "
                 + ", ".join(f"`{v.config}`" for v in dict.fromkeys(study.variants)) + ".")
    lines.append("")
    lines += ["| claim | paper (source) | paper's numbers | measured (per seed) | verdict |",
              "|---|---|---|---|---|"]
    for claim in study.claims:
        v = judge(claim, study, summary)
        if v.values:
            cells = []
            for i, (seed, value) in enumerate(zip(v.seeds, v.values, strict=True)):
                cell = f"s{seed}: {_signed(value)}"
                if i < len(v.intervals):
                    cell += f" [{v.intervals[i][0]:+.2f}, {v.intervals[i][1]:+.2f}]"
                cells.append(cell)
            per_seed = ", ".join(cells)
            if v.tag != study.part:
                per_seed += (f" ({v.tag}: {v.tag.partition('-e')[2]} epochs instead of the "
                             "configs': a pipeline check, not evidence)")
        else:
            per_seed = "–"
        lines.append(f"| {claim.statement} | {claim.source} | {claim.paper} | {per_seed} | "
                     f"{v.verdict} |")
    lines.append("")
    cols = _columns(study)
    for tag in tags:
        header = ["run", "epochs", *[c[0] for c in cols]]
        rows = []
        for variant in study.variants:
            epochs = next((r["epochs"] for r in summary.get("runs", {}).values()
                           if r.get("tag") == tag and r.get("stem") == variant.stem), None)
            cells = [_cell(summary, tag, variant.stem, m, s, d) for _, m, s, d in cols]
            rows.append([variant.label, str(epochs) if epochs else "–", *cells])
        if all(all(c == "not yet run" for c in r[2:]) for r in rows) and tag != tags[0]:
            continue
        lines.append(f"Runs under `runs/repro/{tag}/` (mean ± sample std over seeds; for a "
                     "single seed, accuracies carry their 95% test-set bootstrap interval):")
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
                      "vector, so claims that read these runs are *inconclusive*.", ""]
    if figures_dir is not None:
        for name, caption in make_figures(study, summary, figures_dir):
            rel = os.path.relpath(figures_dir / name, doc_dir) if doc_dir else str(
                figures_dir / name)
            lines += [f"![{caption}]({rel})", "", f"*{caption}*", ""]
    return lines


def write_report(summary: dict, doc: Path, figures_dir: Path) -> Path:
    """Write the report of ``summary`` to ``doc`` (atomically) and its figures to
    ``figures_dir``, linked relative to ``doc``; return ``doc``."""
    text = render_report(summary, figures_dir, doc.parent)
    fd, tmp = temp_file_beside(doc)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, doc)
    return doc
