"""Figures of the reproduction report (``docs/figures/repro_*.png``), from measured runs only.

Per Part A study: the learning curves of its runs (the online 200-NN monitor every 5 epochs)
next to the random-initialisation baseline under the same monitor. Per study: 200-NN
accuracy, uniformity and tolerance against the temperature (study 2, Wang & Liu 2021); the
training loss curves of SINCERE and SupCon (Feeney & Hughes 2023, Table 4
compares their first and last epochs); bar charts of the seed mean accuracy (DySTreSS and
baseline studies); the random-initialisation baseline as a dashed line; and copies of the
runs' own ``analyze`` figures (local separation, Wang & Liu 2021 supplement Fig. 1, the
ordinary loss on CIFAR-10; nearest target and noise similarity histograms, Feeney & Hughes
2023 Fig. 2).
Every file is written atomically.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
from pathlib import Path

from contrastkit.outputs import temp_file_beside
from studies.repro import layout
from studies.repro.collection import run_tags, seed_values
from studies.repro.layout import RUNS
from studies.repro.schema import Study
from studies.repro.studies import TEMPERATURES


def _monitor_splits(study: Study) -> tuple[str, str]:
    """The online monitor's queries and bank, in words, from the study's first trained config
    (``data.subset`` training images, of ``data.classes`` in every split when it is set)."""
    trained = next(v for v in study.variants if not v.name.endswith("random_init"))
    data = layout.read_config(trained.config).get("data") or {}
    classes = data.get("classes")
    subset = f"{data['subset']:,} " if data.get("subset") else ""
    if not classes:
        return "the test split", f"the {subset}training images"
    kind = " and ".join(classes)
    return f"the test split's {kind} images", f"the {subset}{kind} training images"


def make_figures(study: Study, summary: dict, figures_dir: Path) -> list[tuple[str, str]]:
    """Write the study's figures (only from measured runs) and return (file, caption) pairs."""
    tags = run_tags(summary, study.part)
    if not tags:
        return []
    tag = tags[0]
    made: list[tuple[str, str]] = []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures_dir.mkdir(parents=True, exist_ok=True)

    def mean(stem: str, metric: str, scale: float = 1.0) -> float | None:
        vals = seed_values(summary, tag, stem, metric)
        return scale * sum(vals) / len(vals) if vals else None

    def save(fig, name: str, caption: str) -> None:
        path = figures_dir / name
        fd, tmp = temp_file_beside(path, suffix=".png")
        os.close(fd)
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        plt.close(fig)
        os.replace(tmp, path)
        made.append((name, caption))

    if study.part == "cpu" and study.variants:
        drawn = _learning_curves(study, summary, tag, plt)
        if drawn is not None:
            fig, with_baseline = drawn
            baseline = ("; dashed: the random-init baseline under the same monitor"
                        if with_baseline else "")
            queries, bank = _monitor_splits(study)
            save(fig, f"repro_{study.name}_learning_curves.png",
                 f"{study.title}: learning curves, the online 200-NN monitor ({queries} against "
                 f"{bank}, k 200, t 0.1) every 5 epochs; seed mean, band: "
                 f"lowest to highest seed (where a run has more than one){baseline} "
                 f"(`runs/repro/{tag}`). The tables' kNN accuracies use the whole train split "
                 "as bank, so their numbers differ from the last point.")
    if study.name == "temperature":
        panels = [("knn200/top1", 100.0, "200-NN top-1 (%)"),
                  ("analyze_projector/uniformity", 1.0,
                   "uniformity, projector (lower: more uniform)"),
                  ("analyze_projector/tolerance", 1.0, "tolerance, projector"),
                  ("analyze/uniformity", 1.0, "uniformity, backbone"),
                  ("analyze/tolerance", 1.0, "tolerance, backbone")]
        grid = [study.variant(f"simclr_t{t}").stem for t in TEMPERATURES]
        if any(mean(stem, m) is not None for stem in grid for m, _, _ in panels):
            fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6),
                                     constrained_layout=True)
            for ax, (metric, scale, ylabel) in zip(axes, panels, strict=True):
                xs, ys = [], []
                for t, stem in zip(TEMPERATURES, grid, strict=True):
                    y = mean(stem, metric, scale)
                    if y is not None:
                        xs.append(float(t))
                        ys.append(y)
                ax.plot(xs, ys, "o-", label="ordinary loss (SimCLR)")
                base = mean(study.variant("random_init").stem, metric, scale)
                if base is not None:
                    ax.axhline(base, color="grey", linestyle="--", label="random init")
                ax.set_xscale("log")
                ax.set_xticks([float(t) for t in TEMPERATURES], labels=list(TEMPERATURES))
                ax.minorticks_off()
                ax.set_xlabel("temperature")
                ax.set_ylabel(ylabel)
                ax.legend(fontsize=7)
            save(fig, "repro_temperature.png",
                 "Study 2: 200-NN accuracy, and uniformity and tolerance of the projector's "
                 "output (the claims' layer) and of the backbone's features, against the "
                 "temperature "
                 f"(`runs/repro/{tag}`, seed mean; dashed: the random-init baseline).")
        made += _copy_run_figures(study, summary, tag, figures_dir,
                                  [(f"simclr_t{t}", "analyze_projector/local_separation.png")
                                   for t in (TEMPERATURES[0], TEMPERATURES[-1])],
                                  "local separation (Wang & Liu supplement Fig. 1: the "
                                  "ordinary loss on CIFAR-10)")
    elif study.name in ("sincere", "cifar2"):
        from contrastkit.train.callbacks import read_metrics_csv

        prefix = "" if study.name == "sincere" else "cifar2_"
        curves = {}
        for v in study.variants:
            if (v.name.endswith("random_init") or v.tuning is not None
                    or f"{tag}/{v.stem}/seed0" not in summary.get("runs", {})):
                continue  # random init: one step, no curve; a run the summary lacks: none
            metrics_csv = layout.REPO / RUNS / tag / v.stem / "seed0" / "pretrain" / "metrics.csv"
            if metrics_csv.is_file():
                curves[v.label] = read_metrics_csv(metrics_csv, "train/loss")
        if curves:
            fig, ax = plt.subplots(figsize=(5, 3.2))
            for label, (steps, losses) in curves.items():
                ax.plot(steps, losses, label=label)
            ax.set_xlabel("optimiser step")
            ax.set_ylabel("training loss")
            # beside the axes: a tuned run's label (its setting) is as wide as the plot
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
            save(fig, f"repro_{study.name}_loss.png",
                 f"{study.title}: training loss (seed 0, `runs/repro/{tag}`; SINCERE Table 4 "
                 "compares the first and last epochs' values).")
        made += _copy_run_figures(study, summary, tag, figures_dir,
                                  [(f"{prefix}{loss}",
                                    "analyze_projector/similarity_histograms.png")
                                   for loss in ("supcon", "sincere")],
                                  "nearest target / noise similarity histograms (SINCERE Fig. 2)")
    elif study.name in ("baselines", "dystress", "gpu_table6", "gpu_table3"):
        metric = "linear_d1/top1" if study.name == "gpu_table6" else "knn200/top1"
        fig = _bar_chart(study, summary, tag, metric, plt)
        if fig is not None:
            save(fig, f"repro_{study.name}.png",
                 f"Study {study.name}: {metric.split('/')[0]} top-1 (seed mean; error bar: "
                 "sample std over seeds, drawn only where a run has more than one; its number "
                 f"of seeds under each bar; `runs/repro/{tag}`; dashed: the random-init "
                 "baseline where run).")
    return made


def _bar_chart(study: Study, summary: dict, tag: str, metric: str, plt):
    """Bars of each trained run's seed mean ``metric`` (in %), with the sample std over seeds
    as error bar where there are at least two seeds (one seed has no spread to show, so it gets
    none), each label naming its number of seeds; the random init as a dashed line. ``None``
    when no trained run has the metric."""
    labels, values, errs = [], [], []
    base = None
    for v in study.variants:
        vals = [100.0 * x for x in seed_values(summary, tag, v.stem, metric)]
        if v.name.endswith("random_init"):
            base = statistics.mean(vals) if vals else None
            continue
        if not vals:
            continue
        labels.append(f"{v.label}\n({len(vals)} seed{'s' if len(vals) > 1 else ''})")
        values.append(statistics.mean(vals))
        errs.append(statistics.stdev(vals) if len(vals) > 1 else math.nan)
    if not values:
        return None
    fig, ax = plt.subplots(figsize=(1.6 * len(values) + 2, 3.2))
    ax.bar(range(len(values)), values, yerr=errs, capsize=4, color="#4c72b0")
    ax.set_xticks(range(len(values)), labels, rotation=20, ha="right", fontsize=8)
    spread = [0.0 if math.isnan(e) else e for e in errs]  # one seed: no bar end to fit
    lo = min(v - e for v, e in zip(values, spread, strict=True))
    hi = max(v + e for v, e in zip(values, spread, strict=True))
    if base is not None:
        ax.axhline(base, color="grey", linestyle="--", label="random init")
        ax.legend(fontsize=7)
        lo, hi = min(lo, base), max(hi, base)
    ax.set_ylim(max(0.0, lo - 2.0), min(100.0, hi + 1.0))
    ax.set_ylabel(f"{metric.split('/')[0]} top-1 (%)")
    return fig


#: Line and marker of the learning curves, by tens (matplotlib's colour cycle has ten colours).
CURVE_STYLES = ("o-", "s--", "^:")


def _learning_curves(study: Study, summary: dict, tag: str, plt):
    """Monitor top-1 (%) against epochs, seed mean of each trained run of ``study`` with a
    lowest-to-highest band, and the random-init baseline's monitor value dashed where it was
    run: ``(figure, whether the baseline is drawn)``; None when no finished run has a monitor
    curve."""
    def curves(stem: str) -> list[dict[int, float]]:
        return [dict((int(e), 100.0 * v) for e, v in r.get("monitor", []))
                for r in summary.get("runs", {}).values()
                if r.get("tag") == tag and r.get("stem") == stem and r.get("pretrain_finished")
                and r.get("monitor")]

    trained = [(v.label, curves(v.stem)) for v in study.variants
               if not v.name.endswith("random_init")]
    trained = [(label, runs) for label, runs in trained if runs]
    if not trained:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, (label, runs) in enumerate(trained):
        epochs = sorted(set.intersection(*(set(r) for r in runs)))
        values = [[r[e] for r in runs] for e in epochs]
        # the colour cycle has ten colours: each further ten curves another line and marker
        style = CURVE_STYLES[i // 10 % len(CURVE_STYLES)]
        line, = ax.plot(epochs, [sum(v) / len(v) for v in values], style, markersize=3,
                        label=f"{label} ({len(runs)} seed{'s' if len(runs) > 1 else ''})")
        if len(runs) > 1:
            ax.fill_between(epochs, [min(v) for v in values], [max(v) for v in values],
                            color=line.get_color(), alpha=0.15, linewidth=0)
    init = next((v for v in study.variants if v.name.endswith("random_init")), None)
    base = [value for r in curves(init.stem) for value in r.values()] if init else []
    if base:
        ax.axhline(sum(base) / len(base), color="grey", linestyle="--",
                   label=f"random init ({len(base)} seed{'s' if len(base) > 1 else ''})")
    ax.set_xlabel("epochs trained")
    ax.set_ylabel("monitor 200-NN top-1 (%)")
    # beside the axes, not on them: a grid's eight curves leave no free corner
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    return fig, bool(base)


def _copy_run_figures(study: Study, summary: dict, tag: str, figures_dir: Path,
                      wanted: list[tuple[str, str]], what: str) -> list[tuple[str, str]]:
    """Copy each wanted ``(run, figure key)`` figure of the lowest seed that has it."""
    made = []
    for name, key in wanted:
        stem = study.variant(name).stem
        runs = sorted((r for r in summary.get("runs", {}).values()
                       if r.get("tag") == tag and r.get("stem") == stem
                       and key in r.get("figures", {})), key=lambda r: r["seed"])
        if not runs:
            continue
        source = layout.REPO / runs[0]["figures"][key]
        if not source.is_file():
            continue
        target = f"repro_{study.name}_{name}_{Path(key).stem}.png"
        fd, tmp = temp_file_beside(figures_dir / target)
        os.close(fd)
        shutil.copyfile(source, tmp)
        os.replace(tmp, figures_dir / target)
        made.append((target, f"{study.variant(name).label}: {what}; seed {runs[0]['seed']}, "
                             f"`runs/repro/{tag}`."))
    return made
