"""contrastkit.repro.report and .figures: the generated page and its figures."""

from __future__ import annotations

from repro_summaries import fake_sincere_summary, run_entry

from contrastkit.repro import layout
from contrastkit.repro.figures import make_figures
from contrastkit.repro.report import render_report, write_report
from contrastkit.repro.studies import STUDIES


def test_a_part_without_runs_says_why():
    text = render_report(fake_sincere_summary())  # Part A runs only
    part_b = text[text.index("## Part B"):]
    assert part_b.splitlines()[2].startswith("No run of this part exists yet. It needs a GPU")
    part_a = text[text.index("## Part A"):text.index("## Part B")]
    assert "No run of this part exists yet" not in part_a


def test_report_tables_and_figures(tmp_path):
    summary = fake_sincere_summary()
    for seed in (0, 1):
        for stem, acc in (("baselines_sce", 0.70), ("baselines_moco", 0.66),
                          ("baselines_ressl", 0.69)):
            summary["runs"] |= run_entry(stem, seed, {"linear/top1": acc + 0.01 * seed,
                                                 "knn200/top1": acc - 0.02})
    figures = tmp_path / "docs" / "figures"
    doc = write_report(summary, tmp_path / "docs" / "reproduction.md", figures)
    text = doc.read_text()
    # every claim of every study is listed with its source and the paper's numbers
    for study in STUDIES.values():
        assert f"### {study.title}" in text
        for claim in study.claims:
            assert f"| {claim.statement} | {claim.source} | {claim.paper} |" in text
    row = next(line for line in text.splitlines()
               if line.startswith("| SINCERE widens the target-noise margin"))
    assert row.endswith("| reproduced |") and "s0: +0.200" in row and "s1: +0.210" in row
    row = next(line for line in text.splitlines() if "5-NN accuracy of SINCERE" in line
               and "CIFAR-2" in line)
    assert "[+1.00, +7.00]" in row and "| not reproduced (measured +4.000" in row
    assert text.count("| not yet run |") >= 20
    # the overview counts every claim once, by the first words of its verdict
    n_gpu = sum(len(st.claims) for st in STUDIES.values() if st.part == "gpu")
    assert f"| B (GPU, full scale) | {n_gpu} | 0 | 0 | 0 | {n_gpu} |" in text
    row = next(line for line in text.splitlines() if line.startswith("| A (CPU scale) |"))
    cells = [int(c) for c in row.strip("|").split("|")[1:]]
    assert cells[0] == sum(cells[1:]) == sum(
        len(st.claims) for st in STUDIES.values() if st.part == "cpu")
    assert cells[1] >= 2 and cells[2] >= 1  # the fake margins reproduce, the fake 5-NN does not
    # per-run tables: mean ± sample std over seeds, "not yet run" where nothing was measured
    assert "| SINCERE | 30 | 0.305 ± 0.007 (2 seeds) |" in text
    assert "| SCE | 30 | 68.00 ± 0.00 (2 seeds) | 70.50 ± 0.71 (2 seeds) |" in text
    assert "| MoCo v2 | 30 |" in text
    assert "| ordinary t=0.05 | – | not yet run |" in text
    # the bar chart of the measured study exists and is linked relative to the document
    assert (figures / "repro_baselines.png").is_file()
    assert "![Study baselines" in text and "(figures/repro_baselines.png)" in text
    assert not (figures / "repro_temperature.png").exists()  # nothing measured, no figure


def test_sincere_loss_curves_figure(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    for stem, start in (("sincere_cifar2_sincere", 6.0), ("sincere_cifar2_supcon", 7.0)):
        pre = tmp_path / "runs" / "repro" / "cpu" / stem / "seed0" / "pretrain"
        pre.mkdir(parents=True)
        (pre / "metrics.csv").write_text("epoch,step,train/loss\n,9,\n"
                                         f"0,9,{start}\n1,19,{start - 1}\n")
    made = make_figures(STUDIES["sincere_cifar2"], fake_sincere_summary(),
                              tmp_path / "figures")
    assert ("repro_sincere_cifar2_loss.png" in [name for name, _ in made])
    assert (tmp_path / "figures" / "repro_sincere_cifar2_loss.png").stat().st_size > 0
