"""``python -m studies.repro`` (studies.repro.cli): ``list``, a dry run, a report from a summary
file, and one-line errors (outside a source checkout, a bad ``--summary``)."""

from __future__ import annotations

import json

import pytest
from repro_summaries import fake_sincere_summary

from studies.repro import layout
from studies.repro.cli import main
from studies.repro.studies import STUDIES


def test_repro_list_names_every_study(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for study in STUDIES.values():
        assert out.count(f"{study.name} ({study.part}, seeds {list(study.seeds)})") == 1


def test_repro_cpu_dry_run_passes_the_options(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    (tmp_path / "configs" / "repro").mkdir(parents=True)
    assert main(["cpu", "--dry-run", "--study", "baselines", "--seeds", "4",
                 "--epochs", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    pretrain = [line for line in lines if line.startswith("$ contrastkit pretrain")]
    # study 5's ReSSL waits for its grid (study 5a) to choose its temperatures
    assert len(pretrain) == len(STUDIES["baselines"].variants) - 1
    assert ("--output runs/repro/cpu-e2/sce/seed4/pretrain --seed_everything 4 "
            "--trainer.enable_progress_bar false --trainer.max_epochs 2") in pretrain[0]
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing


def test_repro_report_from_a_summary_file(tmp_path, capsys):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps(fake_sincere_summary()))
    doc = tmp_path / "out" / "reproduction.md"
    assert main(["report", "--summary", str(summary), "--output", str(doc),
                 "--figures", str(tmp_path / "out" / "figures")]) == 0
    assert capsys.readouterr().out == f"wrote {doc}\n"
    text = doc.read_text()
    assert text.startswith("# Reproduction of the papers' claims\n")
    assert "generated:" not in text.lower()  # no date: the same summary, the same page
    assert not (tmp_path / "out" / "reproduction.json").exists()  # only beside docs/


def test_repro_outside_a_checkout_is_a_one_line_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    assert main(["report"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m studies.repro: error: {tmp_path / 'configs' / 'repro'} not "
                          "found: python -m studies.repro runs from a source checkout")
    assert err.count("\n") == 1
    assert not (tmp_path / "docs").exists() and not (tmp_path / "runs").exists()


def test_repro_report_names_a_bad_summary_file(tmp_path, capsys):
    missing, broken = tmp_path / "missing.json", tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["report", "--summary", str(missing)]) == 2
    assert capsys.readouterr().err == (f"python -m studies.repro: error: --summary {missing}: "
                                       "no such file\n")
    assert main(["report", "--summary", str(broken)]) == 2
    assert capsys.readouterr().err.startswith(
        f"python -m studies.repro: error: --summary {broken} is not JSON (")


def test_repro_report_on_a_fresh_checkout_reads_the_records(monkeypatch, tmp_path, capsys):
    """A clone holds the records of finished runs, not runs/repro: ``repro report`` restores
    them and the page shows their numbers."""
    import shutil

    from studies.repro.layout import RECORDS
    from studies.repro.records import mark_finished
    from studies.repro.superseded import SUPERSEDED_RUNS

    shutil.copytree(layout.REPO / "configs", tmp_path / "configs")
    (tmp_path / SUPERSEDED_RUNS).parent.mkdir(parents=True)  # a clone has it
    shutil.copy(layout.REPO / SUPERSEDED_RUNS, tmp_path / SUPERSEDED_RUNS)
    monkeypatch.setattr(layout, "REPO", tmp_path)
    for stem, top1 in (("sce", 0.467), ("random_init", 0.3155)):
        run = tmp_path / RECORDS / "cpu" / stem / "seed0"
        (run / "pretrain").mkdir(parents=True)
        mark_finished(run / "pretrain", 1 if stem == "random_init" else 30)
        (run / "eval" / "knn200").mkdir(parents=True)
        (run / "eval" / "knn200" / "results.json").write_text(
            json.dumps({"metrics": {"top1": top1}}))
    assert main(["report"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("restored 2 recorded runs and comparisons into runs/repro\n")
    text = (tmp_path / "docs" / "reproduction.md").read_text()
    assert "| SCE | knn200 | s0: +15.2 |" in text
    assert json.loads((tmp_path / "docs" / "reproduction.json").read_text())["runs"][
        "cpu/sce/seed0"]["pretrain_finished"]


@pytest.mark.slow
def test_report_on_a_clean_checkout_reproduces_the_committed_page(monkeypatch, tmp_path,
                                                                   capsys):
    """``python -m studies.repro report`` on a clean checkout (its configs and the committed
    records, no run folder) writes docs/reproduction.md and its json byte for byte as
    committed, and the same figures."""
    import shutil

    from studies.repro.layout import DOC, DOC_SUMMARY, FIGURES

    shutil.copytree(layout.REPO / "configs", tmp_path / "configs")
    shutil.copytree(layout.REPO / "docs" / "reproduction", tmp_path / "docs" / "reproduction")
    committed = layout.REPO
    monkeypatch.setattr(layout, "REPO", tmp_path)
    assert main(["report"]) == 0
    capsys.readouterr()
    assert (tmp_path / DOC).read_bytes() == (committed / DOC).read_bytes()
    assert (tmp_path / DOC_SUMMARY).read_bytes() == (committed / DOC_SUMMARY).read_bytes()
    assert sorted(p.name for p in (tmp_path / FIGURES).glob("repro_*.png")) == sorted(
        p.name for p in (committed / FIGURES).glob("repro_*.png"))
