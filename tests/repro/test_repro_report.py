"""studies.repro.report and .figures: the generated page (a partial study included) and its
figures."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from repro_summaries import (
    SINCERE_CELL,
    SINCERE_TUNED,
    SUPCON_CELL,
    SUPCON_TUNED,
    fake_choices,
    fake_sincere_summary,
    run_entry,
)
from scipy import stats

from studies.repro import layout
from studies.repro.collection import read_monitor
from studies.repro.figures import _bar_chart, _learning_curves, make_figures
from studies.repro.grids import TUNINGS
from studies.repro.provenance import (
    PLAN_CHECKOUT,
    RESUMED_CHECKOUT,
    SECOND_EXTENSION_CHECKOUT,
    SECOND_ROUND_CHECKOUT,
    STUDY_CHECKOUT,
)
from studies.repro.report import cpu_study_order, render_report, write_report
from studies.repro.scale import round_runs, rounds
from studies.repro.studies import STUDIES
from studies.repro.superseded import PENDING, PREVIOUS_COMMIT, SUPERSEDED_RUNS
from studies.repro.tuning import resolve_study


def _row(text, start):
    return next(line for line in text.splitlines() if line.startswith(start))


def test_a_part_without_runs_says_why():
    text = render_report(fake_sincere_summary())  # Part A runs only
    part_b = text[text.index("## Part B"):]
    assert part_b.splitlines()[2].startswith("No run of this part exists yet. It needs a GPU")
    part_a = text[text.index("## Part A"):text.index("## Part B")]
    assert "No run of this part exists yet" not in part_a


def test_make_repro_cpu_resumes_every_cpu_study_as_the_page_says():
    makefile = (layout.REPO / "Makefile").read_text()
    listed = next(line for line in makefile.splitlines() if line.startswith("REPRO_STUDIES ="))
    assert listed.split("=", 1)[1].split() == cpu_study_order()
    assert set(cpu_study_order()) == {n for n, s in STUDIES.items() if s.part == "cpu"}
    text = render_report(fake_sincere_summary())
    rerun = text[text.index("## How to rerun"):]
    assert "\nmake repro-cpu\n" in rerun
    assert f"--study {' '.join(cpu_study_order())} &" in rerun


def test_the_readme_counts_what_the_committed_page_counts():
    """The README's sentence on the study states the tally of docs/reproduction.md as
    committed (regenerate both together); it names the claims pending a rerun while there are
    any."""
    readme = " ".join((layout.REPO / "README.md").read_text().split())
    found = re.search(r"of the page's (\d+) counted Part A claims, (\d+) are reproduced, (\d+) "
                      r"reproduced in direction only, (\d+) reversed at that scale, (\d+) "
                      r"contradicted, (\d+) not reproduced, (\d+) not testable at that scale "
                      r"with the paper's effect excluded, (\d+) not testable at that scale"
                      r"(?:,| and) (\d+) inconclusive \(not trained\)"
                      r"(?: and (\d+) pending their rerun)?", readme)
    assert found, "README.md: the study's tally sentence is missing"
    page = (layout.REPO / layout.DOC).read_text()
    cells = [int(c) for c in _row(page, "| A (CPU scale) |").strip("|").split("|")[1:]]
    total, reproduced, direction, reversed_, contradicted, not_reproduced, excluded, \
        untestable, collapsed, inconclusive, pending, not_run = cells[:12]
    assert [int(g or 0) for g in found.groups()] == [
        total, reproduced, direction, reversed_, contradicted, not_reproduced, excluded,
        untestable, inconclusive, pending]
    assert collapsed == not_run == 0, "the README's sentence names no other label: add it"


def test_the_committed_page_is_what_its_summary_renders(tmp_path):
    """docs/reproduction.md is render_report of docs/reproduction.json, byte for byte (its
    figure blocks aside, drawn by the slow test of the whole command): no date, no path of
    the machine that made it."""
    import json

    page = (layout.REPO / layout.DOC).read_text()
    summary = json.loads((layout.REPO / layout.DOC_SUMMARY).read_text())
    assert "generated" not in summary
    lines, kept = page.split("\n"), []
    for i, line in enumerate(lines):  # a figure block: its link, a blank line, its caption
        figure = line.startswith("![") or (i >= 2 and lines[i - 2].startswith("!["))
        if figure or (i >= 1 and lines[i - 1].startswith("![")) or (
                i >= 3 and lines[i - 3].startswith("![")):
            continue
        kept.append(line)
    assert render_report(summary) == "\n".join(kept)
    assert render_report(summary) == render_report(json.loads(json.dumps(summary)))
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", page)  # no timestamp


def _in_tmp_checkout(tmp_path, monkeypatch):
    """``layout.REPO`` at ``tmp_path`` with the checkout's configs and the superseded runs'
    extract (the plan reads the configs; pending claims read the extract), no run files."""
    (tmp_path / "configs").symlink_to(layout.REPO / "configs")
    (tmp_path / SUPERSEDED_RUNS).parent.mkdir(parents=True)
    (tmp_path / SUPERSEDED_RUNS).symlink_to(layout.REPO / SUPERSEDED_RUNS)
    monkeypatch.setattr(layout, "REPO", tmp_path)


def test_verdict_table_of_a_finished_study(tmp_path, monkeypatch):
    _in_tmp_checkout(tmp_path, monkeypatch)
    summary = fake_sincere_summary()
    figures = tmp_path / "docs" / "figures"
    text = write_report(summary, tmp_path / "docs" / "reproduction.md", figures).read_text()
    # every claim of every study is listed with its source and the paper's numbers
    roles = {"beside": "*beside (not counted)* ", "table": "*read off a table (not counted)* ",
             "not_comparable": "*not comparable (not counted)* ", "primary": ""}
    for study in STUDIES.values():
        assert f"### {study.title}" in text
        for claim in study.claims:
            assert (f"| {roles[claim.role]}{claim.statement} | {claim.source} | "
                    f"{claim.paper} |") in text
    margin = _row(text, "| SINCERE widens the target-noise margin")
    # no noise estimate for the margin; mean, t-interval, signs, then each seed
    assert ("| no estimate | mean +0.210 [+0.185, +0.235], 3/3 positive; s0: +0.200, "
            "s1: +0.210, s2: +0.220 | reproduced |") in margin
    knn1 = _row(text, "| SINCERE's and SupCon's 1-NN accuracies are equivalent")
    assert "| 4.47 points | mean +1.100 [" in knn1 and "s0: +1.000 [-1.00, +3.00]" in knn1
    assert "; 90% t-interval [+0.931, +1.269] |" in knn1
    assert "| not testable at this scale (margin 3.5 < the effect 3 seeds detect" in knn1
    knn5 = _row(text, "| SINCERE's and SupCon's 5-NN accuracies are equivalent")
    assert "| contradicted (mean -7 points, 90% t-interval [-8.69, " in knn5
    # not testable: SCE's 4 claims (not run), and DySTreSS's three planned so (no run here);
    # pending: CIFAR-2's and study 5's claims, with their 0f3dae1 runs' verdicts
    assert text.count("| not testable at this scale (paper effect") == 4 + 3
    assert text.count(f"| {PENDING}; {PREVIOUS_COMMIT}'s runs under the revised rules: ") == (
        4 + 3)
    cifar2 = _row(text, "| 1b | SINCERE's and SupCon's 1-NN accuracies")
    assert cifar2.endswith(f"| **{PENDING}**<br>{PREVIOUS_COMMIT}'s runs, revised rules: "
                           "**inconclusive**<br>was *not reproduced* at 0f3dae1: a run it reads "
                           "is not shown past its random initialisation, so it carries no "
                           "evidence either way (new rule) |")
    assert "| 1b | SINCERE's and SupCon's 1-NN accuracies are equivalent" in text
    assert f"| {PREVIOUS_COMMIT}'s runs: +5.48 [-1.73, +12.7], d = +1.9 (3 seeds) |" in cifar2
    ressl = _row(text, "| 5 | *read off a table (not counted)* ReSSL beats MoCo v2")
    assert ressl.endswith("**reversed at this scale**<br>was *reversed at this scale*, counted "
                          "at 0f3dae1: read off a table (not counted) now, by the one counting "
                          "rule: read off a table, no sentence of the paper states it |")
    assert text.count("not testable at this scale (paper effect +1.4 < the effect 3 seeds "
                      "detect with 80% power, 4.47 points; not run)") == 1
    # the overview counts every counted claim once, by the first words of its verdict;
    # claims beside, read off a table and not comparable apart
    n_gpu = sum(len(st.claims) for st in STUDIES.values() if st.part == "gpu")
    assert (f"| B (GPU, full scale) | {n_gpu} | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | "
            f"{n_gpu} | 0 | 0 | 0 |" in text)
    assert ("| part | claims | reproduced | direction only | reversed at this scale | "
            "contradicted | not reproduced | not testable at this scale, the paper's effect "
            "excluded | not testable at this scale | collapsed | inconclusive | pending rerun "
            "(issue 54) | not yet run | beside | read off a table | not comparable |") in text
    row = _row(text, "| A (CPU scale) |")
    cells = [int(c) for c in row.strip("|").split("|")[1:]]
    claims = [c for st in STUDIES.values() if st.part == "cpu" for c in st.claims]
    assert cells[0] == sum(cells[1:12]) == sum(c.role == "primary" for c in claims) == 20
    # reproduced (margin), reversed (loss), contradicted (5-NN), not testable (1-NN, SCE's 4,
    # DySTreSS's 2); pending: CIFAR-2 (4), study 5 (2); not yet run: the temperature claims
    # (3) and DySTreSS's uniformity
    assert cells[1:12] == [1, 0, 1, 1, 0, 0, 7, 0, 0, 6, 4]
    assert cells[12:] == [4, 1, 1]
    # the order: the headline, the rules, then the results; the details after them
    order = ["## Headline", "## Verdict rules", "## At a glance", "## Results (Part A)",
             "## Deviations from the papers", "## Provenance", "## Part A: CPU-scale study",
             "## Part B: GPU, full scale", "## How to rerun",
             "## What the CPU scale can and cannot show", "## Plan and cost (Part A)"]
    assert [text.index(h) for h in order] == sorted(text.index(h) for h in order)
    loss = _row(text, "| 1 | SINCERE's training loss falls further")
    assert "*reworded*; the paper: “the final training value for SINCERE loss" in loss
    assert ("| +4.26 | -1 [-1, -1], d = -inf (3 seeds) | **reversed at this scale**<br>was "
            "*reproduced* at 0f3dae1: measured on the runs issue 54's round trained again |"
            in loss)
    assert ("| +0.584 | +0.21 [+0.185, +0.235], d = +21.0 (3 seeds) | **reproduced** |" in
            _row(text, "| 1 | SINCERE widens"))
    align = _row(text, "| 4 | *not comparable (not counted)* DySTreSS's alignment")
    assert "Not a claim the DySTreSS text makes" in align
    # run table: the tuned runs' labels say their setting; the paired gain over random init
    assert "| run | epochs | target-noise margin | nearest-target sim. (median) |" in text
    assert "| 5-NN top-1 % | backbone: margin |" in text
    assert "| backbone: 5-NN % | pretrain min | 1-NN vs random init (points) |" in text
    gains = [100 * (0.80 + 0.001 * s - 0.30 - 0.01 * s) for s in (0, 1, 2)]  # 50.0, 49.1, 48.2
    low, high = stats.t.interval(0.95, 2, loc=49.1, scale=stats.sem(gains))
    sincere = _row(text, f"| {SINCERE_TUNED} | 30 |")
    assert sincere.endswith(f"| +49.10 [{low:+.2f}, {high:+.2f}] (3 seeds) |")
    init = _row(text, "| random init (not trained) | 30 |")
    assert init.endswith("| – |")
    # a metric the finished baseline does not have (no margin here) is "–", not "not yet run"
    assert init.split("|")[3].strip() == "–" and "not yet run" not in init
    assert "(figures/repro_sincere_" not in text  # no loss curve without metrics.csv files
    # the grid's choice: interior, or which side is open and why the grid stops there
    chosen = _row(text, "* SINCERE: chosen t=0.2, lr=0.02, warm-up (validation 1-NN 50.00%); "
                  "**not interior**, open where no cell at t above 0.2 (lr=0.02); no cell at "
                  "lr below 0.02 (t=0.2) (lower elsewhere: ")
    assert ("); not run further, because the grids stop at their third extension, decided on "
            "its results before any further run:") in chosen
    # the verdict rules: the MDE with its power, the effect at 80% power
    assert "a power of only about 61%" in text and "4.47 points over 3 seeds" in text
    assert "| accuracy | 1.37 | 3.4 | 4.47 |" in text
    # the deviations table and the provenance section: runs without a clean commit named
    assert "| SINCERE and SupCon settings |" in text and "sha256 5ad50ced" in text
    assert "config_supcon/cifar10_supcon.py and cifar10_sincere.py" in text
    assert "Every counted run (read by a counted claim, or the random init of its study) " \
           "names a clean commit." in text


def test_partial_study_renders_what_has_finished(tmp_path):
    """Two of three seeds of SINCERE/SupCon and one seed of the baselines: the finished
    numbers, t-intervals where two seeds exist, and *pending* verdicts (the studies issue 54's
    round reruns), with what the revised rules make of the runs they replace."""
    summary = fake_sincere_summary(seeds=(0, 1))
    for stem, acc in (("sce", 0.50), ("moco", 0.47), ("random_init", 0.31)):
        summary["runs"] |= run_entry(stem, 0, {"knn200/top1": acc})
    text = render_report(summary)
    margin = _row(text, "| SINCERE widens the target-noise margin")
    assert "mean +0.205 [" in margin and "2/2 positive; s0: +0.200, s1: +0.210" in margin
    assert margin.endswith("(study 1a) |")
    assert f"| {PENDING}; {PREVIOUS_COMMIT}'s runs under the revised rules: direction only (" \
        in margin
    assert _row(text, "| 1 | SINCERE widens").endswith(
        f"| +0.205 [+0.141, +0.269], d = +29.0 (2 seeds) | **{PENDING}**<br>{PREVIOUS_COMMIT}'s "
        "runs, revised rules: **direction only**<br>was *reproduced* at 0f3dae1: the sign "
        "agrees, but 38 times below the paper's effect and the paper's mechanism, SINCERE "
        "lowering the nearest-noise similarity reversed (-0.129 [-0.155, -0.104]) (new label) |")
    assert f"| {SINCERE_TUNED} | 30 | 0.305 ± 0.007 (2 seeds) |" in text
    # a baseline with seeds still to run: its missing margin may yet come
    assert _row(text, "| random init (not trained) | 30 |").split("|")[3].strip() == "not yet run"
    assert _row(text, "| SCE | 30 |").endswith("| +19.00 (1 seed) |")
    assert _row(text, "| ReSSL (tuned: t=0.1, t_m=0.04) | – |") == (
        "| ReSSL (tuned: t=0.1, t_m=0.04) | – | not yet run | not yet run | – |")
    assert _row(text, "| SCE is not worse than ReSSL").endswith(
        "ReSSL at the setting its grid chooses (study 5a) |")
    # the runs replaced, as the pending verdicts read them, in the study's section
    assert (f"The runs at {PREVIOUS_COMMIT} that the rerun replaces, which the pending claims' "
            "verdicts judge meanwhile") in text
    assert "| SINCERE (0f3dae1: t=0.1, lr=0.05) | 30 | 0.019 ± 0.001 (3 seeds) | 0.654" in text
    # tuned runs whose grid has not chosen: their rows wait
    summary.pop("choices")
    assert "| SINCERE (tuned) | – | not yet run |" in render_report(summary)


def test_the_mechanism_is_shown_seed_by_seed_with_the_numbers_it_reads():
    """SINCERE's margin claim, pending its rerun: the runs it replaces show SINCERE's and
    SupCon's median nearest-noise similarity in every seed, the paper's mechanism reversed."""
    text = render_report({"runs": {}, "comparisons": {}})
    margin = _row(text, "| SINCERE widens the target-noise margin")
    assert ("*mechanism*: SINCERE lowers the similarity of test images to their nearest noise "
            "(other class) training image") in margin
    assert ("SupCon's median nearest-noise similarity minus SINCERE's: mean -0.129 [-0.155, "
            "-0.104]; s0: -0.140 (sincere noise_similarity_median 0.638, supcon "
            "noise_similarity_median 0.498), s1: -0.120 (") in margin


def test_bar_chart_with_the_random_init_line(tmp_path):
    summary = {"runs": {}}
    for seed in (0, 1):
        for stem, acc in (("sce", 0.50), ("moco", 0.47), ("ressl", 0.49), ("random_init", 0.3)):
            summary["runs"] |= run_entry(stem, seed, {"knn200/top1": acc + 0.01 * seed})
    made = make_figures(STUDIES["baselines"], summary, tmp_path)
    assert [name for name, _ in made] == ["repro_baselines.png"]
    assert (tmp_path / "repro_baselines.png").stat().st_size > 0
    # the temperature study: its random-init baseline alone makes no figure
    assert make_figures(STUDIES["temperature"], summary, tmp_path) == []


def test_bar_chart_draws_the_seed_spread_only_where_there_is_one():
    """Two seeds: the bar's error bar is their sample std; one seed: no error bar (a zero-width
    one would claim no spread); every label names its number of seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.container import BarContainer

    summary = {"runs": {}}
    for seed, acc in ((0, 0.50), (1, 0.54)):
        summary["runs"] |= run_entry("sce", seed, {"knn200/top1": acc})
    summary["runs"] |= run_entry("moco", 0, {"knn200/top1": 0.47})
    summary["runs"] |= run_entry("random_init", 0, {"knn200/top1": 0.30})
    fig = _bar_chart(STUDIES["baselines"], summary, "cpu", "knn200/top1", plt)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["SCE\n(2 seeds)", "MoCo v2\n(1 seed)"]
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [b.get_height() for b in bars] == pytest.approx([52.0, 47.0])
    segments = bars.errorbar.lines[2][0].get_segments()
    sce_std = (2 * 2.0**2) ** 0.5  # sample std of 50 and 54
    assert segments[0][:, 1] == pytest.approx([52.0 - sce_std, 52.0 + sce_std])
    assert np.isnan(segments[1]).all()  # MoCo's single seed: nothing drawn
    assert ax.get_ylim()[0] == pytest.approx(30.0 - 2.0)  # the random init's line fits
    plt.close(fig)
    assert _bar_chart(STUDIES["baselines"], {"runs": {}}, "cpu", "knn200/top1", plt) is None


def test_sincere_loss_curves_figure(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    for stem, start in ((SINCERE_CELL, 6.0), (SUPCON_CELL, 7.0)):
        pre = tmp_path / "runs" / "repro" / "cpu" / stem / "seed0" / "pretrain"
        pre.mkdir(parents=True)
        (pre / "metrics.csv").write_text("epoch,step,train/loss\n,9,\n"
                                         f"0,9,{start}\n1,19,{start - 1}\n")
    made = make_figures(resolve_study(STUDIES["sincere"], fake_choices()),
                        fake_sincere_summary(), tmp_path / "figures")
    assert "repro_sincere_loss.png" in [name for name, _ in made]
    assert (tmp_path / "figures" / "repro_sincere_loss.png").stat().st_size > 0


def test_sincere_loss_curves_leave_out_the_one_step_baseline(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    pre = tmp_path / "runs" / "repro" / "cpu" / "random_init" / "seed0" / "pretrain"
    pre.mkdir(parents=True)
    (pre / "metrics.csv").write_text("epoch,step,train/loss\n0,0,6.3\n")
    made = make_figures(resolve_study(STUDIES["sincere"], fake_choices()),
                        fake_sincere_summary(), tmp_path / "figures")
    assert "repro_sincere_loss.png" not in [name for name, _ in made]


def test_temperature_figure_from_the_simclr_grid(tmp_path):
    summary = {"runs": run_entry("random_init", 0, {"knn200/top1": 0.3})}
    for t, acc in (("0.1", 0.50), ("0.2", 0.52), ("0.5", 0.49)):
        summary["runs"] |= run_entry(f"simclr_t{t}", 0, {
            "knn200/top1": acc, "analyze_projector/uniformity": -3.0 - acc,
            "analyze_projector/tolerance": acc, "analyze/uniformity": -1.0 - acc,
            "analyze/tolerance": acc})
    made = make_figures(STUDIES["temperature"], summary, tmp_path)
    assert [name for name, _ in made] == ["repro_temperature.png"]
    assert "dashed: the random-init baseline" in made[0][1]
    assert (tmp_path / "repro_temperature.png").stat().st_size > 0


def test_monitor_curve_is_read_per_epoch_trained(tmp_path):
    csv = tmp_path / "metrics.csv"
    csv.write_text("epoch,step,train/loss,val/knn_top1\n0,9,7.0,\n4,194,,0.31\n"
                   "5,200,6.0,\n9,389,,0.42\n")
    assert read_monitor(csv) == [(5, 0.31), (10, 0.42)]
    csv.write_text("epoch,step,train/loss\n0,9,7.0\n")
    assert read_monitor(csv) == []


def test_learning_curves_beside_the_random_init_line(tmp_path):
    """Seed mean of the monitor per epoch with a lowest-to-highest band, unfinished runs left
    out, and the random-init baseline's monitor value as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = {"runs": {}}
    for seed, (a, b) in enumerate(((0.30, 0.40), (0.32, 0.44))):
        summary["runs"] |= run_entry("sce", seed, {"knn200/top1": b})
        summary["runs"][f"cpu/sce/seed{seed}"]["monitor"] = [[5, a], [10, b]]
        summary["runs"] |= run_entry("random_init", seed, {"knn200/top1": 0.3})
        summary["runs"][f"cpu/random_init/seed{seed}"]["monitor"] = [[1, 0.24 + 0.02 * seed]]
    summary["runs"] |= run_entry("moco", 0, {}, finished=False)
    summary["runs"]["cpu/moco/seed0"]["monitor"] = [[5, 0.9]]
    fig, with_baseline = _learning_curves(STUDIES["baselines"], summary, "cpu", plt)
    assert with_baseline
    ax = fig.axes[0]
    sce, base = ax.lines
    assert list(sce.get_xdata()) == [5, 10]
    assert list(sce.get_ydata()) == [31.0, 42.0]
    assert list(base.get_ydata()) == [25.0, 25.0] and base.get_linestyle() == "--"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "SCE (2 seeds)", "random init (2 seeds)"]
    assert len(ax.collections) == 1  # the band of the two SCE seeds
    # the legend lies beside the axes, right of them, where it hides no curve
    fig.canvas.draw()
    legend_box = ax.get_legend().get_window_extent()
    assert legend_box.x0 > ax.get_window_extent().x1
    plt.close(fig)
    made = make_figures(STUDIES["baselines"], summary, tmp_path)
    assert [name for name, _ in made] == ["repro_baselines_learning_curves.png",
                                          "repro_baselines.png"]
    assert (tmp_path / "repro_baselines_learning_curves.png").stat().st_size > 0
    assert "dashed: the random-init baseline under the same monitor" in made[0][1]


def test_learning_curves_without_a_random_init_run_name_no_dashed_line(tmp_path):
    """The tuning grid has no random-init run: its caption says nothing of a baseline."""
    summary = {"runs": run_entry("sincere_t0.05_lr0.05", 0, {})}
    summary["runs"]["cpu/sincere_t0.05_lr0.05/seed0"]["monitor"] = [[5, 0.35], [10, 0.43]]
    made = make_figures(STUDIES["sincere_grid"], summary, tmp_path)
    name, caption = made[0]
    assert name == "repro_sincere_grid_learning_curves.png"
    assert "dashed" not in caption and "band: lowest to highest seed (where a run" in caption


def test_the_tuning_grid_section_names_each_config_once_and_has_no_claims_table():
    """The grid chooses settings and makes no claim: no empty claims table; its twenty-six cells
    share two configs, each named once; a grid not chosen yet is *pending*, its scored cells
    and its bounds' shown, collapsed ones marked."""
    summary = {"runs": {}, "comparisons": {}, "choices": {
        "sincere": {"chosen": None, "scores": {"sincere_t0.1_lr0.02_warmup": 0.47,
                                               "sincere_t0.1_lr0.05_warmup": 0.10,
                                               "sincere_t0.2_lr0.02_warmup": None,
                                               "sincere_t0.2_lr0.05_warmup": None,
                                               "sincere_t0.05_lr0.2": 0.1038}}}}
    summary["runs"] |= run_entry("sincere_t0.05_lr0.2", 0, {
        "knn1_heldout_projector/top1": 0.1038, "pretrain/final_positive_similarity": 0.982,
        "pretrain/initial_loss": 10.43, "pretrain/final_loss": 6.45})
    text = render_report(summary)
    grid = text[text.index("### 1a."):text.index("### 1b.")]
    assert ("Study `sincere_grid`; seeds [0]; configs: `configs/repro/cpu/sincere.yaml`, "
            "`configs/repro/cpu/supcon.yaml`.") in grid
    assert "| claim |" not in grid
    assert ("* SINCERE: **pending**, not chosen yet (2 of 9 cells scored). Its cells, "
            "validation 1-NN: t=0.1, lr=0.02, warm-up 47.00%; t=0.1, lr=0.05, warm-up 10.00%; "
            "t=0.2, lr=0.02, warm-up pending; t=0.2, lr=0.05, warm-up pending; t=0.4, "
            "lr=0.05, warm-up pending; t=0.2, lr=0.1, warm-up pending; t=0.1, lr=0.1, warm-up "
            "pending; t=0.4, lr=0.1, warm-up pending; t=0.2, lr=0.2, warm-up pending. The earlier "
            "grid that bounds it (scored alike, not chosen among): t=0.05, lr=0.05 pending; "
            "t=0.05, lr=0.2 10.38% (collapsed);") in grid
    assert "* SupCon: **pending**, not chosen yet (0 of 9 cells scored)." in grid
    # a failed cell says so
    summary["runs"] |= run_entry("sincere_t0.2_lr0.05_warmup", 0, {})
    summary["runs"]["cpu/sincere_t0.2_lr0.05_warmup/seed0"].update(
        pretrain_finished=False, status="failed",
        failure={"step": "pretrain", "exit_status": 2, "error": "x: error: loss NaN; stop"})
    assert ("t=0.2, lr=0.05, warm-up failed: pretrain failed with exit status 2 (loss NaN);"
            in render_report(summary))
    assert "Collapsed (SINCERE t=0.05, lr=0.2): in the last epoch" in grid
    # ReSSL's grid likewise, in study 5a
    assert "* ReSSL: **pending**, not chosen yet (0 of 4 cells scored). Its cells, " \
           "validation 200-NN: t=0.1, t_m=0.04 pending;" in text
    # a study with claims keeps its table
    assert "| claim |" in text[text.index("### 1b."):text.index("### 2.")]


def test_a_grid_choice_is_interior_when_lower_cells_bracket_it_on_each_setting(monkeypatch):
    """SINCERE chose t 0.1, lr 0.05 with warm-up: bracketed on t by the first grid's t 0.05
    and the extension's t 0.2, on lr by 0.02 and the third extension's 0.1 (nearer than the
    first grid's 0.2), all lower: interior; a neighbour scoring higher, or one not scored
    yet, is said."""
    scores = {"sincere_t0.1_lr0.02_warmup": 0.55, "sincere_t0.1_lr0.05_warmup": 0.62,
              "sincere_t0.2_lr0.02_warmup": 0.50, "sincere_t0.2_lr0.05_warmup": 0.58,
              "sincere_t0.4_lr0.05_warmup": 0.50, "sincere_t0.2_lr0.1_warmup": 0.52,
              "sincere_t0.1_lr0.1_warmup": 0.60, "sincere_t0.4_lr0.1_warmup": 0.51,
              "sincere_t0.2_lr0.2_warmup": 0.3,
              "sincere_t0.05_lr0.05": 0.4676, "sincere_t0.05_lr0.2": 0.1038,
              "sincere_t0.1_lr0.05": 0.6176, "sincere_t0.1_lr0.2": 0.167}
    choice = {"chosen": "sincere_t0.1_lr0.05_warmup", "scores": scores}
    text = render_report({"runs": {}, "comparisons": {}, "choices": {"sincere": choice}})
    assert ("* SINCERE: chosen t=0.1, lr=0.05, warm-up (validation 1-NN 62.00%); interior: the "
            "nearest cells on each side score lower (t=0.05, lr=0.05 46.76%; t=0.2, lr=0.05, "
            "warm-up 58.00%; t=0.1, lr=0.02, warm-up 55.00%; t=0.1, lr=0.1, warm-up "
            "60.00%).") in text
    higher = {**choice, "scores": {**scores, "sincere_t0.05_lr0.05": 0.70}}
    text = render_report({"runs": {}, "comparisons": {}, "choices": {"sincere": higher}})
    assert ("**not interior**, open where t=0.05, lr=0.05 scores 70.00%, not lower (lower "
            "elsewhere: t=0.2, lr=0.05, warm-up 58.00%; t=0.1, lr=0.02, warm-up 55.00%; t=0.1, "
            "lr=0.1, warm-up 60.00%); not run further, because the grids stop") in text
    assert "the last extension's cell scores" not in text  # the choice is not its cell
    # a grid that goes on names the cells to run next instead
    monkeypatch.setitem(TUNINGS, "sincere", replace(TUNINGS["sincere"], stop=""))
    text = render_report({"runs": {}, "comparisons": {}, "choices": {"sincere": higher}})
    assert ("**not interior**, open where t=0.05, lr=0.05 scores 70.00%, not lower: the next "
            "cells to run lie on those sides (lower elsewhere: t=0.2, lr=0.05") in text
    waiting = {**choice, "scores": {**scores, "sincere_t0.1_lr0.1_warmup": None}}
    text = render_report({"runs": {}, "comparisons": {}, "choices": {"sincere": waiting}})
    assert ("(validation 1-NN 62.00%); whether it is interior waits for t=0.1, lr=0.1, "
            "warm-up.") in text


def test_a_stopped_grid_whose_choice_is_the_last_extensions_cell_says_its_gain():
    """SupCon chose t 0.2, lr 0.2, a cell of the third extension, at a corner: the page says
    why the grid stops there and how much that extension gained over the best cell before."""
    scores = {c.name: 0.40 for c in TUNINGS["supcon"].grid}
    scores |= {"supcon_t0.2_lr0.1_warmup": 0.6630, "supcon_t0.2_lr0.2_warmup": 0.6660}
    scores |= {c.name: 0.30 for c in TUNINGS["supcon"].bounds}
    choice = {"chosen": "supcon_t0.2_lr0.2_warmup", "scores": scores}
    text = render_report({"runs": {}, "comparisons": {}, "choices": {"supcon": choice}})
    assert ("* SupCon: chosen t=0.2, lr=0.2, warm-up (validation 1-NN 66.60%); **not "
            "interior**, open where no cell at t above 0.2 (lr=0.2); no cell at lr above 0.2 "
            "(t=0.2) (lower elsewhere: t=0.1, lr=0.2 30.00%; t=0.2, lr=0.1, warm-up 66.30%); "
            "not run further, because the grids stop at their third extension") in text
    assert ("may lie below this budget's optimum (the last extension's cell scores +0.30 "
            "points over the best cell before it). Its cells:") in text


def test_the_tuning_grid_section_reads_the_grid_seed_only():
    """The chosen cell's folder also holds the tuned comparison's seeds 1 and 2: the grid's
    table and learning curves are seed 0's, study 1's table all three seeds'."""
    summary = fake_sincere_summary()
    summary["choices"] = fake_choices()
    for seed in (0, 1, 2):
        run = summary["runs"][f"cpu/{SINCERE_CELL}/seed{seed}"]
        run["metrics"]["knn1_heldout_projector/top1"] = 0.50 + 0.10 * seed
    text = render_report(summary)
    grid = text[text.index("### 1a."):text.index("### 1b.")]
    row = _row(grid, "| SINCERE t=0.2, lr=0.02, warm-up | 30 |")
    assert "| 50.00 (1 seed) |" in row and "seeds)" not in row
    tuned = _row(text[text.index("### 1. "):text.index("### 1a.")], f"| {SINCERE_TUNED} | 30 |")
    assert "(3 seeds)" in tuned


def _provenance(commit=SECOND_ROUND_CHECKOUT + "a" * 33):
    return {"commits": [commit], "dirty": False, "torch": "2.13.0+cpu", "lightning": "2.6.6",
            "numpy": "2.4.6", "cpu": "AMD EPYC", "omp_num_threads": "1", "gpu": None}


def test_measured_cost_and_gains_over_random_init():
    """The second round's measured cost sums every command's CPU time of its runs (those its
    checkout trained; an unfinished run's and their comparisons' included) and gives
    per-config figures of the finished runs; the overview gives each trained run's gain over
    the random init of its seed."""
    summary = fake_sincere_summary()
    # the second round, issue 54's and issue 53's study 6
    assert render_report(summary).count("no run of it has logged its cost yet") == 3
    for seed in (0, 1, 2):
        run = summary["runs"][f"cpu/{SINCERE_CELL}/seed{seed}"]
        run["metrics"] |= {"cost/cpu_seconds": 3000.0 + 600 * seed,
                           "cost/pretrain_cpu_seconds": 2400.0, "cost/wall_seconds": 3600.0,
                           "pretrain/wall_minutes": 50.0 + seed}
        run["provenance"] = _provenance()
    summary["runs"][f"cpu/{SINCERE_CELL}/seed2"]["status"] = "partial"
    key = f"cpu/{SINCERE_CELL}__vs__{SUPCON_CELL}/knn1_projector/seed0"
    summary["comparisons"][key]["cpu_seconds"] = 360.0
    text = render_report(summary)
    total = (3000 + 3600 + 4200 + 360) / 3600
    assert (f"2 runs finished and evaluated (the plan: 33); {total:.2f} CPU-hours so far, every "
            "command included (runs under way and comparisons too); the commands' wall time "
            "sums to 3.00 hours") in text
    assert (f"| `{SINCERE_CELL}` | 2 | 40.0 (40.0-40.0) | all (no event files) | "
            "15.0 (10.0-20.0) | 50.5 (50.0-51.0) |") in text
    assert "ended with their machine" not in text
    # seed 1's first invocation ended with its machine: 600 of its 1,170 steps logged
    summary["runs"][f"cpu/{SINCERE_CELL}/seed1"]["metrics"] |= {
        "cost/pretrain_invocations": 2.0, "cost/pretrain_invocations_logged": 1.0,
        "cost/pretrain_steps": 1170.0, "cost/pretrain_steps_logged": 600.0,
        "cost/pretrain_cpu_seconds_estimated": 2400.0 / 600 * 1170}
    text = render_report(summary)
    unlogged = 2400.0 / 600 * 1170 - 2400.0
    assert ("1 of the 2 pretraining invocations ended with their machine (a session's end) "
            "before the runner could log their cost") in text
    assert (f"{unlogged / 3600:.2f} CPU-hours more, {total + unlogged / 3600:.2f} with them"
            in text)
    # per step: seed 1 alone counted its steps, (2400 + 2280) / 1170 = 4.00; SINCERE planned 2.06
    assert ("Pretraining of the finished runs, CPU-seconds per step: 4.00 against the plan's "
            "2.06 for the same runs (1.9x) on AMD EPYC (1 run); at that ratio the round's "
            "planned training") in text
    # runs trained on two machines: a rate for each (seed 0: 2400 / 1170 = 2.05)
    summary["runs"][f"cpu/{SINCERE_CELL}/seed0"]["metrics"]["cost/pretrain_steps"] = 1170.0
    summary["runs"][f"cpu/{SINCERE_CELL}/seed1"]["provenance"]["cpu"] = "Intel Xeon"
    assert ("CPU-seconds per step: 2.05 against the plan's 2.06 for the same runs (1.0x) on "
            "AMD EPYC (1 run); 4.00 against the plan's 2.06 for the same runs (1.9x) on Intel "
            "Xeon (1 run); at these ratios the round's planned training, 17.44 CPU-hours, "
            "would take about 17 and 34.") in render_report(summary)
    assert (f"| `{SINCERE_CELL}` | 2 | {(2400 + 2400 / 600 * 1170) / 2 / 60:.1f} (40.0-78.0) | "
            "1 of 2 invocations, 600 of 1,170 steps trained (the rest estimated) | ") in text
    # the provenance table: the commit that trained them
    assert (f"| {SECOND_ROUND_CHECKOUT}aaa | no | 2.13.0+cpu / 2.6.6 / 2.4.6 | AMD EPYC, "
            "OMP_NUM_THREADS=1 | 3: ") in text
    # SINCERE 1-NN 0.80 + 0.001 s, random init 0.30 + 0.01 s: gains 50.0, 49.1, 48.2 (the
    # projector's 1-NN, where the claims read)
    assert (f"| 1 | {SINCERE_TUNED} | knn1_projector | s0: +50.0, s1: +49.1, s2: +48.2 |"
            in text)
    assert (f"| 1 | {SUPCON_TUNED} | knn1_projector | s0: +49.0, s1: +48.0, s2: +47.0 |"
            in text)
    # CIFAR-2's tuned runs carry the same labels: the study column tells them apart
    assert f"| 1b | {SINCERE_TUNED} | knn1_projector | not yet run |" in text
    assert "| 5 | SCE | knn200 | not yet run |" in text
    assert f"Smallest gain so far: +47.0 points (study 1, {SUPCON_TUNED}, seed 2)" in text
    assert "## What the CPU scale can and cannot show" in text


def test_a_finished_study_reports_its_whole_cost_and_smallest_gain():
    """Every planned Part A run finished: the cost is the total, the smallest gain final."""
    choices = fake_choices()
    variants = {}
    for st in STUDIES.values():
        if st.part == "cpu":
            for v in resolve_study(st, choices).variants:
                variants.setdefault(v.stem, v)
    summary = {"runs": {}, "comparisons": {}, "choices": choices}
    validations = {"knn1_heldout_projector", "knn200_heldout"}
    for stem, v in variants.items():
        seeds = (0,) if set(v.evals) <= validations else (0, 1, 2)
        for seed in seeds:
            acc = 0.3 if stem.endswith("random_init") else 0.5 + 0.01 * seed
            summary["runs"] |= run_entry(stem, seed, {
                "knn200/top1": acc, "knn1/top1": acc, "knn1_projector/top1": acc,
                "cost/cpu_seconds": 60.0, "cost/wall_seconds": 60.0},
                provenance=_provenance(STUDY_CHECKOUT + "b" * 33))
    text = render_report(summary)
    cost = text[text.index("## Plan and cost (Part A)"):]
    assert "CPU-hours in all, every command included" in cost
    assert "so far" not in cost
    assert "Smallest gain: +20.0 points (" in text


def test_a_new_report_removes_the_figures_it_no_longer_shows(tmp_path):
    figures = tmp_path / "docs" / "figures"
    figures.mkdir(parents=True)
    (figures / "repro_old_study.png").write_bytes(b"old")
    (figures / "other.png").write_bytes(b"not the report's")
    summary = {"runs": {}}
    for stem, acc in (("sce", 0.50), ("moco", 0.47), ("ressl", 0.49), ("random_init", 0.3)):
        summary["runs"] |= run_entry(stem, 0, {"knn200/top1": acc})
    text = write_report(summary, tmp_path / "docs" / "reproduction.md", figures).read_text()
    assert "](figures/repro_baselines.png)" in text
    assert sorted(p.name for p in figures.iterdir()) == ["other.png", "repro_baselines.png"]


def _untrained_supcon(gains_over_random_init):
    """Study 1's fake summary with SupCon's projector 1-NN set to random init's plus the given
    gains (points), one per seed."""
    summary = fake_sincere_summary()
    for seed, gain in enumerate(gains_over_random_init):
        base = summary["runs"][f"cpu/random_init/seed{seed}"]["metrics"]["knn1_projector/top1"]
        summary["runs"][f"cpu/{SUPCON_CELL}/seed{seed}"]["metrics"]["knn1_projector/top1"] = (
            base + gain / 100.0)
    return summary


def test_runs_not_trained_past_random_init_are_named_under_the_tally_and_in_their_study():
    """A run whose gain over random init has a 95% t-interval not above 0 (every planned seed
    measured) is named under the tally, with the counted claims that read it, and in its
    study's section; a run clearly above random init is not."""
    gains = (-1.0, -0.8, -0.6)
    mean = float(np.mean(gains))
    half = stats.t.ppf(0.975, 2) * np.std(gains, ddof=1) / np.sqrt(3)
    interval = f"1-NN {mean:+.2f} [{mean - half:+.2f}, {mean + half:+.2f}] points"
    text = render_report(_untrained_supcon(gains))
    glance = text[text.index("## At a glance"):text.index("## Results (Part A)")]
    assert ("Not trained past random initialisation at this budget, the gain's 95% t-interval "
            f"over the seeds not above 0: study 1 ({SUPCON_TUNED}: {interval}; "
            "4 of its counted claims read them).") in glance
    section = text[text.index("### 1. "):text.index("### 1a.")]
    assert (f"Not trained past random initialisation ({SUPCON_TUNED}: "
            f"{interval}, mean gain") in section
    assert f"{SINCERE_TUNED}: 1-NN" not in text
    def study_1(text):  # the glance and study 1 (the CIFAR-2 runs replaced were not trained)
        return text[:text.index("### 1a.")]

    # an interval that straddles 0 is not above it either
    assert "Not trained past random initialisation (SupCon" in study_1(render_report(
        _untrained_supcon((2.0, -1.0, 0.5))))
    # trained past it: nothing said
    assert "Not trained past random initialisation" not in study_1(render_report(
        _untrained_supcon((5.0, 6.0, 7.0))))
    # a seed not yet measured: no verdict on the run yet
    summary = _untrained_supcon(gains)
    del summary["runs"][f"cpu/{SUPCON_CELL}/seed2"]
    assert "Not trained past random initialisation" not in study_1(render_report(summary))


def test_cifar2_learning_curves_name_its_own_monitor_splits(tmp_path):
    """CIFAR-2's monitor reads its 4,000 cat and dog training images and the test split's cat
    and dog images (the configs' data.subset and data.classes), not CIFAR-10's 10,000."""
    study = resolve_study(STUDIES["cifar2"], fake_choices())
    trained = next(v for v in study.variants if not v.name.endswith("random_init"))
    summary = {"runs": run_entry(trained.stem, 0, {})}
    summary["runs"][f"cpu/{trained.stem}/seed0"]["monitor"] = [[5, 0.55], [10, 0.58]]
    (name, caption), *_ = make_figures(study, summary, tmp_path)
    assert name == "repro_cifar2_learning_curves.png"
    assert ("the online 200-NN monitor (the test split's cat and dog images against the 4,000 "
            "cat and dog training images, k 200, t 0.1)") in caption
    (_, caption), *_ = make_figures(STUDIES["baselines"], {"runs": {
        **run_entry("sce", 0, {}),
        "cpu/sce/seed0": {**run_entry("sce", 0, {})["cpu/sce/seed0"],
                          "monitor": [[5, 0.3]]}}}, tmp_path)
    assert "(the test split against the 10,000 training images, k 200" in caption


def test_issue_54s_round_counts_its_four_checkouts_runs_and_not_study_6s():
    """The round's runs are those trained at the checkout that planned it or any that went on
    after it; study 6's runs, trained at the same checkouts, are study 6's alone."""
    _, third, study6 = rounds()
    summary = {"runs": {}}
    for stem, commit in (("random_init", PLAN_CHECKOUT), ("sincere_t0.1_lr0.02_warmup",
                                                           RESUMED_CHECKOUT),
                         ("sincere_t0.4_lr0.05_warmup", SECOND_EXTENSION_CHECKOUT),
                         ("supcon_t0.1_lr0.1_warmup", STUDY_CHECKOUT),
                         ("dclw", RESUMED_CHECKOUT), ("vicreg", PLAN_CHECKOUT),
                         ("simclr_t0.2", SECOND_ROUND_CHECKOUT)):
        summary["runs"] |= run_entry(stem, 0, {"knn200/top1": 0.5},
                                     provenance=_provenance(commit + "c" * 33))
    assert sorted(r["stem"] for r in round_runs(summary, third)) == [
        "random_init", "sincere_t0.1_lr0.02_warmup", "sincere_t0.4_lr0.05_warmup",
        "supcon_t0.1_lr0.1_warmup"]
    assert sorted(r["stem"] for r in round_runs(summary, study6)) == ["dclw", "vicreg"]
