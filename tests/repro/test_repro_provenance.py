"""studies.repro.provenance: every command the runner makes records the checkout's commit
(and whether its code differed from it), the versions and the hardware; the collection folds
them into the summary."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest

from studies.repro import layout
from studies.repro.provenance import (
    PACKAGES,
    PROVENANCE_LOG,
    append_provenance,
    environment,
    git_state,
    read_provenance,
)
from studies.repro.runner import Runner

START = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.timezone.utc)


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path):
    """A git checkout with one committed source file and the study's output folders."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "code.py").write_text("x = 1\n")
    (repo / "docs" / "reproduction" / "runs").mkdir(parents=True)
    (repo / "docs" / "reproduction" / "runs" / "old.json").write_text("{}\n")
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "add", ".")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "c")
    return repo


def test_git_state_names_the_commit_and_code_changes_only(checkout):
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert git_state(checkout) == {"commit": head, "dirty": False}
    # the runner's own output (records) and untracked files do not make the code dirty
    (checkout / "docs" / "reproduction" / "runs" / "old.json").write_text('{"new": 1}\n')
    (checkout / "scratch.txt").write_text("untracked\n")
    assert git_state(checkout) == {"commit": head, "dirty": False}
    (checkout / "src" / "code.py").write_text("x = 2\n")  # a tracked source file changed
    assert git_state(checkout) == {"commit": head, "dirty": True}


def test_git_state_outside_a_checkout(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "dirty": None}


def test_environment_holds_versions_and_hardware(checkout, monkeypatch):
    import numpy
    import torch

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    env = environment(checkout)
    assert env["torch"] == torch.__version__ and env["numpy"] == numpy.__version__
    assert set(PACKAGES) <= set(env) and env["lightning"]
    assert env["omp_num_threads"] == "1" and env["torch_threads"] == torch.get_num_threads()
    assert env["cpu"] and env["cpu_count"] >= 1
    assert env["gpu"] is None or isinstance(env["gpu"], str)
    assert len(env["commit"]) == 40 and env["dirty"] is False


def test_the_runner_logs_each_command_and_the_collection_folds_them(checkout, monkeypatch):
    monkeypatch.setattr(layout, "REPO", checkout)
    run = Runner(log=lambda line: None)
    folder = layout.RUNS / "cpu" / "x" / "seed0"
    for step in ("pretrain", "knn200"):
        assert run([sys.executable, "-c", "pass"], folder / "cost.jsonl", step) == 0
    lines = [json.loads(line) for line in
             (checkout / folder / PROVENANCE_LOG).read_text().splitlines()]
    assert [line["step"] for line in lines] == ["pretrain", "knn200"]
    assert all(len(line["commit"]) == 40 and line["dirty"] is False for line in lines)
    folded = read_provenance(checkout / folder)
    assert folded["commits"] == [lines[0]["commit"]] and folded["dirty"] is False
    assert folded["torch"] == lines[0]["torch"] and folded["cpu"] == lines[0]["cpu"]


def test_read_provenance_of_a_resumed_run_lists_both_commits(tmp_path):
    assert read_provenance(tmp_path) == {}  # recorded before provenance was
    log = tmp_path / PROVENANCE_LOG
    base = {"dirty": False, "torch": "2.13.0+cpu", "cpu": "AMD EPYC"}
    append_provenance(log, "pretrain", {**base, "commit": "a" * 40}, START)
    append_provenance(log, "pretrain", {**base, "commit": "b" * 40, "dirty": True}, START)
    append_provenance(log, "knn200", {**base, "commit": "c" * 40, "cpu": "Intel Xeon"}, START)
    with open(log, "a") as handle:
        handle.write('{"step": "kn')  # a line cut short by a crash
    folded = read_provenance(tmp_path)
    assert folded["commits"] == ["a" * 40, "b" * 40]  # the pretraining commands' commits
    assert folded["dirty"] is True
    assert folded["cpu"] == "AMD EPYC"  # what trained it; the evaluation ran elsewhere
    assert folded["evaluated_elsewhere"] == [["knn200", "c" * 40, False]]


def test_the_page_names_a_command_run_at_another_commit_than_the_training():
    """An evaluation made after a fix (study 6's DINO projector analysis) is named with its
    commit under the provenance table, which names the training's."""
    from repro_summaries import run_entry

    from studies.repro.provenance import provenance_lines

    clean = {"commits": ["a" * 40], "dirty": False, "evaluated_elsewhere": []}
    summary = {"runs": {**run_entry("byol", 0, {}, provenance=clean),
                        **run_entry("dino", 0, {}, provenance={
                            **clean, "evaluated_elsewhere": [["analyze_projector", "d" * 40,
                                                              False]]})}}
    text = "\n".join(provenance_lines(summary, []))
    assert "| 2: byol s0, dino s0 |" in text
    assert ("Commands run at another commit than the run's training (the table names the "
            "training's; each is in the run's `provenance.jsonl`): dino s0: analyze_projector "
            f"at {'d' * 10}.") in text
    summary["runs"]["cpu/dino/seed0"]["provenance"]["evaluated_elsewhere"] = []
    assert "another commit" not in "\n".join(provenance_lines(summary, []))
