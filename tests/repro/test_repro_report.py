"""studies.repro.report and .figures: the generated page (a partial study included) and its
figures."""

from __future__ import annotations

from repro_summaries import fake_sincere_summary, run_entry
from scipy import stats

from studies.repro import layout
from studies.repro.collection import read_monitor
from studies.repro.figures import _learning_curves, make_figures
from studies.repro.report import render_report, write_report
from studies.repro.studies import STUDIES


def _row(text, start):
    return next(line for line in text.splitlines() if line.startswith(start))


def test_a_part_without_runs_says_why():
    text = render_report(fake_sincere_summary())  # Part A runs only
    part_b = text[text.index("## Part B"):]
    assert part_b.splitlines()[2].startswith("No run of this part exists yet. It needs a GPU")
    part_a = text[text.index("## Part A"):text.index("## Part B")]
    assert "No run of this part exists yet" not in part_a


def test_verdict_table_of_a_finished_study(tmp_path, monkeypatch):
    monkeypatch.setattr(layout, "REPO", tmp_path)  # no run files: not those of the checkout
    summary = fake_sincere_summary()
    figures = tmp_path / "docs" / "figures"
    text = write_report(summary, tmp_path / "docs" / "reproduction.md", figures).read_text()
    # every claim of every study is listed with its source and the paper's numbers
    for study in STUDIES.values():
        assert f"### {study.title}" in text
        for claim in study.claims:
            assert f"| {claim.statement} | {claim.source} | {claim.paper} |" in text
    margin = _row(text, "| SINCERE widens the target-noise margin")
    # no noise estimate for the margin; mean, t-interval, signs, then each seed
    assert ("| no estimate | mean +0.210 [+0.185, +0.235], 3/3 positive; s0: +0.200, "
            "s1: +0.210, s2: +0.220 | reproduced |") in margin
    knn1 = _row(text, "| SINCERE's 1-NN accuracy is not worse")
    assert "| 3.4 points | mean +1.100 [" in knn1 and "s0: +1.000 [-1.00, +3.00]" in knn1
    assert knn1.endswith("| reproduced |")
    knn5 = _row(text, "| SINCERE's 5-NN accuracy is not worse")
    assert "| not reproduced (mean -7 points, 95% t-interval [-9.48, " in knn5
    # not testable: SCE's 4 claims (not run), the baselines' two "beats" claims, DySTreSS's
    # accuracy and inter-class uniformity claims
    assert text.count("not testable at this scale (paper effect") == 8
    assert text.count("not testable at this scale (paper effect +1.4 < MDE 3.4 points; "
                      "not run)") == 1
    # the overview counts every claim once, by the first words of its verdict
    n_gpu = sum(len(st.claims) for st in STUDIES.values() if st.part == "gpu")
    assert f"| B (GPU, full scale) | {n_gpu} | 0 | 0 | 0 | 0 | 0 | {n_gpu} |" in text
    row = _row(text, "| A (CPU scale) |")
    cells = [int(c) for c in row.strip("|").split("|")[1:]]
    n_cpu = sum(len(st.claims) for st in STUDIES.values() if st.part == "cpu")
    assert cells[0] == sum(cells[1:]) == n_cpu
    assert cells[1:4] == [2, 2, 8]  # reproduced, not reproduced, not testable
    # run table: the random-init row and each run's paired gain over it
    assert "| run | epochs | target-noise margin |" in text
    assert "| 5-NN top-1 % | backbone: margin |" in text
    assert "| backbone: 5-NN % | pretrain min | 1-NN vs random init (points) |" in text
    gains = [100 * (0.80 + 0.001 * s - 0.30 - 0.01 * s) for s in (0, 1, 2)]  # 50.0, 49.1, 48.2
    low, high = stats.t.interval(0.95, 2, loc=49.1, scale=stats.sem(gains))
    sincere = _row(text, "| SINCERE | 30 |")
    assert sincere.endswith(f"| +49.10 [{low:+.2f}, {high:+.2f}] (3 seeds) |")
    init = _row(text, "| random init (not trained) | 30 |")
    assert init.endswith("| – |")
    # a metric the finished baseline does not have (no margin here) is "–", not "not yet run"
    assert init.split("|")[3].strip() == "–" and "not yet run" not in init
    assert "(figures/repro_sincere_" not in text  # no loss curve without metrics.csv files
    # the verdict rules, with the planned MDE of an accuracy difference
    assert "MDE = 3.40 points over 3 seeds" in text
    assert "| accuracy | 1.37 | 3.4 |" in text


def test_partial_study_renders_what_has_finished(tmp_path):
    """Two of three seeds of SINCERE/SupCon and one seed of the baselines: the finished
    numbers, t-intervals where two seeds exist, and 'not yet run' verdicts."""
    summary = fake_sincere_summary(seeds=(0, 1))
    for stem, acc in (("sce", 0.50), ("moco", 0.47), ("random_init", 0.31)):
        summary["runs"] |= run_entry(stem, 0, {"knn200/top1": acc})
    text = render_report(summary)
    margin = _row(text, "| SINCERE widens the target-noise margin")
    assert "mean +0.205 [" in margin and "2/2 positive; s0: +0.200, s1: +0.210" in margin
    assert margin.endswith("| not yet run (2 of 3 planned seeds finished) |")
    assert "| SINCERE | 30 | 0.305 ± 0.007 (2 seeds) |" in text
    # a baseline with seeds still to run: its missing margin may yet come
    assert _row(text, "| random init (not trained) | 30 |").split("|")[3].strip() == "not yet run"
    assert _row(text, "| SCE | 30 |").endswith("| +19.00 (1 seed) |")
    assert _row(text, "| ReSSL | – |") == ("| ReSSL | – | not yet run | not yet run | – |")
    assert _row(text, "| SCE is not worse than ReSSL").endswith("| not yet run |")


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


def test_sincere_loss_curves_figure(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    for stem, start in (("sincere", 6.0), ("supcon", 7.0)):
        pre = tmp_path / "runs" / "repro" / "cpu" / stem / "seed0" / "pretrain"
        pre.mkdir(parents=True)
        (pre / "metrics.csv").write_text("epoch,step,train/loss\n,9,\n"
                                         f"0,9,{start}\n1,19,{start - 1}\n")
    made = make_figures(STUDIES["sincere"], fake_sincere_summary(), tmp_path / "figures")
    assert "repro_sincere_loss.png" in [name for name, _ in made]
    assert (tmp_path / "figures" / "repro_sincere_loss.png").stat().st_size > 0


def test_sincere_loss_curves_leave_out_the_one_step_baseline(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    pre = tmp_path / "runs" / "repro" / "cpu" / "random_init" / "seed0" / "pretrain"
    pre.mkdir(parents=True)
    (pre / "metrics.csv").write_text("epoch,step,train/loss\n0,0,6.3\n")
    made = make_figures(STUDIES["sincere"], fake_sincere_summary(), tmp_path / "figures")
    assert "repro_sincere_loss.png" not in [name for name, _ in made]


def test_temperature_figure_from_the_simclr_grid(tmp_path):
    summary = {"runs": run_entry("random_init", 0, {"knn200/top1": 0.3})}
    for t, acc in (("0.1", 0.50), ("0.2", 0.52), ("0.5", 0.49)):
        summary["runs"] |= run_entry(f"simclr_t{t}", 0, {
            "knn200/top1": acc, "analyze/uniformity": -1.0 - acc, "analyze/tolerance": acc})
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
    fig = _learning_curves(STUDIES["baselines"], summary, "cpu", plt)
    ax = fig.axes[0]
    sce, base = ax.lines
    assert list(sce.get_xdata()) == [5, 10]
    assert list(sce.get_ydata()) == [31.0, 42.0]
    assert list(base.get_ydata()) == [25.0, 25.0] and base.get_linestyle() == "--"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "SCE (2 seeds)", "random init (2 seeds)"]
    assert len(ax.collections) == 1  # the band of the two SCE seeds
    plt.close(fig)
    made = make_figures(STUDIES["baselines"], summary, tmp_path)
    assert [name for name, _ in made] == ["repro_baselines_learning_curves.png",
                                          "repro_baselines.png"]
    assert (tmp_path / "repro_baselines_learning_curves.png").stat().st_size > 0


def test_measured_cost_and_gains_over_random_init():
    """The measured cost sums every command's CPU time (an unfinished run's and the
    comparisons' included) and gives per-config figures of the finished runs; the overview
    gives each trained run's gain over the random init of its seed."""
    summary = fake_sincere_summary()
    assert "no Part A run has logged its cost yet" in render_report(summary)
    for seed in (0, 1, 2):
        summary["runs"][f"cpu/sincere/seed{seed}"]["metrics"] |= {
            "cost/cpu_seconds": 3000.0 + 600 * seed, "cost/pretrain_cpu_seconds": 2400.0,
            "cost/wall_seconds": 3600.0, "pretrain/wall_minutes": 50.0 + seed}
    summary["runs"]["cpu/sincere/seed2"]["status"] = "partial"
    summary["comparisons"]["cpu/sincere__vs__supcon/knn1_projector/seed0"]["cpu_seconds"] = 360.0
    text = render_report(summary)
    total = (3000 + 3600 + 4200 + 360) / 3600
    assert (f"2 of 30 runs finished and evaluated; {total:.2f} CPU-hours so far, every command "
            "included (those of runs not finished yet and 6.0 CPU-minutes of comparisons); "
            "the commands' wall time sums to 3.00 hours") in text
    assert "| `sincere` | 2 | 40.0 (40.0-40.0) | 15.0 (10.0-20.0) | 50.5 (50.0-51.0) |" in text
    # SINCERE 1-NN 0.80 + 0.001 s, random init 0.30 + 0.01 s: gains 50.0, 49.1, 48.2
    assert "| SINCERE | knn1 | s0: +50.0, s1: +49.1, s2: +48.2 |" in text
    assert "| SupCon | knn1 | s0: +49.0, s1: +48.0, s2: +47.0 |" in text
    assert "| SCE | knn200 | not yet run |" in text
    assert ("Smallest gain so far: +47.0 points (SupCon, seed 2), over 6 of the 27 trained "
            "runs.") in text
    assert "## What the CPU scale can and cannot show" in text


def test_a_finished_study_reports_its_whole_cost_and_smallest_gain():
    """Every planned Part A run finished: the cost is the total, the smallest gain final."""
    stems = {v.stem: v for st in STUDIES.values() if st.part == "cpu" for v in st.variants}
    summary = {"runs": {}, "comparisons": {}}
    for stem, v in stems.items():
        metric = "knn200/top1" if "knn200" in v.evals else "knn1/top1"
        for seed in (0, 1, 2):
            acc = 0.3 if stem == "random_init" else 0.5 + 0.01 * seed
            summary["runs"] |= run_entry(stem, seed, {
                metric: acc, "knn1/top1": acc, "cost/cpu_seconds": 60.0,
                "cost/wall_seconds": 60.0})
    text = render_report(summary)
    assert "30 of 30 runs finished and evaluated; 0.50 CPU-hours in all, every command " \
           "included (0.0 CPU-minutes of comparisons among them)" in text
    assert "so far" not in text[:text.index("## Part B")]
    assert "Smallest gain: +20.0 points (" in text and "over 27 of the 27 trained runs." in text


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
