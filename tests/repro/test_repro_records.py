"""studies.repro.records: the finished mark, the cost log, and the record of finished runs
and comparisons that a fresh checkout restores."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from studies.repro import layout
from studies.repro.collection import collect
from studies.repro.layout import RECORDS, RUNS, compare_dir, run_dir
from studies.repro.provenance import PROVENANCE_LOG, append_provenance
from studies.repro.records import (
    append_cost,
    failure,
    finished,
    mark_finished,
    read_costs,
    record,
    restore,
    wall_minutes_text,
)

CHECKOUT = layout.REPO  # the real checkout: its configs give the runs' epochs
START = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.timezone.utc)


def _finished_run(repo, stem="sce", seed=0):
    """A finished run's working folder: checkpoint, marks, metrics, one evaluation."""
    out = run_dir("cpu", stem, seed)
    pre = repo / out / "pretrain"
    (pre / "checkpoints").mkdir(parents=True)
    (pre / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    (repo / out / ".lock").write_text("")
    mark_finished(pre, 30)
    (pre / "metrics.csv").write_text("epoch,step,train/loss\n0,0,7.0\n29,1169,5.0\n")
    knn = repo / out / "eval" / "knn200"
    knn.mkdir(parents=True)
    (knn / "results.json").write_text(json.dumps({"metrics": {"top1": 0.4}}))
    append_cost(repo / out / "cost.jsonl", "pretrain", 1500.0, 1600.0, 0, START)
    append_cost(repo / out / "cost.jsonl", "pretrain", 500.0, 560.0, 0, START)  # resumed
    append_cost(repo / out / "cost.jsonl", "knn200", 70.0, 75.0, 0, START)
    return out


def _event_file(pretrain: Path, started: dt.datetime, steps: range) -> None:
    """One pretraining invocation's TensorBoard file: the training loss at ``steps``, a
    minute apart from ``started`` on."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(pretrain / "tensorboard"), filename_suffix=f".{started:%H%M}")
    for i, step in enumerate(steps):
        writer.add_scalar("train/loss", 5.0, step, walltime=started.timestamp() + 60 * (i + 1))
        writer.add_scalar("epoch", 1.0, step, walltime=started.timestamp() + 60 * (i + 1))
    writer.close()


def test_an_invocation_ended_with_its_machine_is_estimated_from_the_logged_ones(tmp_path):
    """A run resumed across a lost machine: its first invocation (steps 0-99, logged every 10
    steps) left an event file but no cost line; the second resumed from the checkpoint of
    step 80 (steps 80-199: 120 steps) and logged 600 CPU-seconds, 5 per step. The unlogged
    100 steps are estimated at that rate; a cost line of a command that died before its first
    log (no event file) counts as it is."""
    pytest.importorskip("tensorboard")
    pre = tmp_path / "pretrain"
    _event_file(pre, START, range(9, 100, 10))
    resumed = START + dt.timedelta(hours=3)
    _event_file(pre, resumed + dt.timedelta(seconds=40), range(89, 200, 10))
    append_cost(tmp_path / "cost.jsonl", "pretrain", 600.0, 800.0, 0, resumed)
    append_cost(tmp_path / "cost.jsonl", "pretrain", 2.0, 6.0, -15, resumed
                - dt.timedelta(minutes=5))
    append_cost(tmp_path / "cost.jsonl", "knn200", 70.0, 75.0, 0, resumed)
    costs = read_costs(tmp_path)
    assert costs["cost/pretrain_cpu_seconds"] == 602.0  # what was logged, unchanged
    assert costs["cost/pretrain_invocations"] == 2
    assert costs["cost/pretrain_invocations_logged"] == 1
    assert costs["cost/pretrain_steps"] == 220 and costs["cost/pretrain_steps_logged"] == 120
    assert costs["cost/pretrain_cpu_seconds_estimated"] == pytest.approx(602.0 + 5.0 * 100)
    # once every invocation is logged, the estimate is the logged sum itself
    append_cost(tmp_path / "cost.jsonl", "pretrain", 450.0, 6000.0, -15, START)
    costs = read_costs(tmp_path)
    assert costs["cost/pretrain_invocations_logged"] == 2
    assert costs["cost/pretrain_cpu_seconds_estimated"] == pytest.approx(1052.0)


def test_a_run_without_event_files_has_no_estimate(tmp_path):
    append_cost(tmp_path / "cost.jsonl", "pretrain", 500.0, 700.0, 0, START)
    assert set(read_costs(tmp_path)) == {"cost/cpu_seconds", "cost/wall_seconds",
                                         "cost/pretrain_cpu_seconds", "pretrain/wall_minutes"}


def test_finished_mark(tmp_path):
    assert not finished(tmp_path, 30)  # no mark
    mark_finished(tmp_path, 30)
    assert finished(tmp_path, 30) and finished(tmp_path, 29) and not finished(tmp_path, 31)
    (tmp_path / "finished.json").write_text("{not json")
    assert not finished(tmp_path, 1)


def test_costs_sum_every_command_and_the_pretraining_invocations(tmp_path):
    assert read_costs(tmp_path) == {}
    out = _finished_run(tmp_path)
    costs = read_costs(tmp_path / out)
    assert costs["cost/cpu_seconds"] == pytest.approx(2070.0)
    assert costs["cost/wall_seconds"] == pytest.approx(2235.0)
    assert costs["cost/pretrain_cpu_seconds"] == pytest.approx(2000.0)
    assert costs["pretrain/wall_minutes"] == pytest.approx(2160.0 / 60)
    with open(tmp_path / out / "cost.jsonl", "a") as handle:  # a crash mid-write
        handle.write('\n{"step": "knn1", "cpu_sec')
    assert read_costs(tmp_path / out) == costs
    line = json.loads((tmp_path / out / "cost.jsonl").read_text().splitlines()[0])
    assert line == {"step": "pretrain", "cpu_seconds": 1500.0, "wall_seconds": 1600.0,
                    "exit_status": 0, "started": "2026-11-26T12:00:00+00:00"}


def test_record_keeps_everything_but_checkpoints_and_the_lock(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    out = _finished_run(tmp_path)
    target = record(out)
    assert target == tmp_path / RECORDS / "cpu" / "sce" / "seed0"
    kept = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert kept == ["cost.jsonl", "eval/knn200/results.json", "pretrain/finished.json",
                    "pretrain/metrics.csv"]
    # a second record of the same files writes nothing; a changed run replaces the record whole
    before = (target / "cost.jsonl").stat().st_mtime_ns
    record(out)
    assert (target / "cost.jsonl").stat().st_mtime_ns == before
    (tmp_path / out / "eval" / "knn200" / "results.json").unlink()
    (tmp_path / out / "eval" / "knn1").mkdir()
    (tmp_path / out / "eval" / "knn1" / "results.json").write_text("{}")
    record(out)
    assert not (target / "eval" / "knn200").exists()
    assert (target / "eval" / "knn1" / "results.json").is_file()
    assert [p.name for p in target.parent.iterdir()] == ["seed0"]  # no staging left behind


def test_a_fresh_checkout_restores_and_collects_the_recorded_runs(monkeypatch, tmp_path):
    """A finished run and a comparison, recorded in one checkout, come back in another one
    that has only the records (a clone on a new machine): finished without a checkpoint,
    with its metrics and costs."""
    first, fresh = tmp_path / "first", tmp_path / "fresh"
    monkeypatch.setattr(layout, "REPO", first)
    out = _finished_run(first)
    record(out)
    cmp = compare_dir("cpu", "sce", "moco", "knn200", 0)
    (first / cmp).mkdir(parents=True)
    (first / cmp / "comparison.json").write_text(json.dumps({"difference": 1.5}))
    record(cmp)
    (fresh / RECORDS).parent.mkdir(parents=True)
    (first / RECORDS).rename(fresh / RECORDS)
    shutil.copytree(CHECKOUT / "configs", fresh / "configs")
    monkeypatch.setattr(layout, "REPO", fresh)
    assert restore("cpu-e2") == []  # another tag: nothing
    assert sorted(map(str, restore())) == sorted([str(cmp), str(out)])
    assert not (fresh / out / "pretrain" / "checkpoints").exists()
    assert json.loads((fresh / cmp / "comparison.json").read_text()) == {"difference": 1.5}
    runs = collect()["runs"]
    sce = runs["cpu/sce/seed0"]
    assert sce["pretrain_finished"] and sce["evals_done"] == ["knn200"]
    assert sce["metrics"]["knn200/top1"] == 0.4
    assert sce["metrics"]["cost/cpu_seconds"] == pytest.approx(2070.0)
    assert sce["metrics"]["pretrain/initial_loss"] == 7.0
    assert restore() == []  # already there: nothing to restore
    # a folder holding only a lane's lock (the runner took it, then its step budget ran
    # out) is no run: the summary is the same as a clean clone's
    (fresh / run_dir("cpu", "moco", 0)).mkdir(parents=True)
    (fresh / run_dir("cpu", "moco", 0) / ".lock").write_text("")
    assert "cpu/moco/seed0" not in collect()["runs"]


def test_a_failure_is_the_last_logged_command_exiting_1_to_127(tmp_path):
    """A command that failed (1: a traceback; 2: contrastkit's one-line error) is a failure
    with its error line, unless a later command of the folder succeeded; a stop by a signal
    (130 and 143 from a command that caught it, -9 from one the kernel killed) is not."""
    log = tmp_path / "cost.jsonl"
    assert failure(tmp_path) is None  # nothing logged
    append_cost(log, "pretrain", 10.0, 11.0, 143, START)
    append_cost(log, "pretrain", 10.0, 11.0, -9, START)
    assert failure(tmp_path) is None
    append_cost(log, "pretrain", 10.0, 11.0, 2, START, error="x: error: NaN at step 9")
    assert failure(tmp_path) == {"step": "pretrain", "exit_status": 2,
                                 "error": "x: error: NaN at step 9"}
    append_cost(log, "knn200", 10.0, 11.0, 0, START)
    assert failure(tmp_path) is None
    append_cost(log, "knn200", 10.0, 11.0, 1, START, error="E" * 900)
    assert failure(tmp_path)["error"] == "E" * 500  # kept to one line's worth


def test_a_failed_run_is_restored_once_and_collected_as_failed(monkeypatch, tmp_path):
    """A run whose pretraining failed before its first checkpoint (only its logs are left),
    recorded in one checkout, comes back in a fresh one, once; the collection says failed."""
    first, fresh = tmp_path / "first", tmp_path / "fresh"
    monkeypatch.setattr(layout, "REPO", first)
    out = run_dir("cpu", "vicreg", 0)
    append_cost(first / out / "cost.jsonl", "pretrain", 30.0, 31.0, 2, START,
                error="contrastkit pretrain: error: the training loss became NaN")
    record(out)
    (fresh / RECORDS).parent.mkdir(parents=True)
    (first / RECORDS).rename(fresh / RECORDS)
    shutil.copytree(CHECKOUT / "configs", fresh / "configs")
    monkeypatch.setattr(layout, "REPO", fresh)
    assert restore() == [out]
    assert restore() == []
    vicreg = collect()["runs"]["cpu/vicreg/seed0"]
    assert vicreg["status"] == "failed" and not vicreg["pretrain_finished"]
    assert vicreg["failure"]["error"].endswith("became NaN")


def test_a_run_under_way_is_not_replaced_by_its_record(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    out = _finished_run(tmp_path)
    record(out)
    working = tmp_path / out
    (working / "pretrain" / "finished.json").unlink()  # now: a checkpoint, not finished
    (working / "pretrain" / "metrics.csv").write_text("epoch,step,train/loss\n0,0,7.0\n")
    assert restore() == []
    assert not (working / "pretrain" / "finished.json").exists()
    assert (working / "pretrain" / "metrics.csv").read_text().count("\n") == 2
    (working / "pretrain" / "checkpoints" / "last.ckpt").unlink()  # nothing trained: restored
    assert restore() == [out]
    assert finished(working / "pretrain", 30)


def _record_into(out: Path, first: Path, fresh: Path, monkeypatch) -> None:
    """Record run ``out`` in checkout ``first`` and bring its records into checkout ``fresh``
    (as a commit carries them), which becomes the checkout."""
    monkeypatch.setattr(layout, "REPO", first)
    record(out)
    shutil.rmtree(fresh / RECORDS, ignore_errors=True)
    (fresh / RECORDS).parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(first / RECORDS, fresh / RECORDS)
    monkeypatch.setattr(layout, "REPO", fresh)


def _file_names(folder: Path) -> list[str]:
    """The files under ``folder``, relative to it, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_a_restored_run_gets_the_evaluations_recorded_since(monkeypatch, tmp_path):
    """A checkout that restored a run earlier gets the evaluations another lane recorded for
    it later; a run trained here (with its checkpoint) is left as it is."""
    first, fresh = tmp_path / "first", tmp_path / "fresh"
    monkeypatch.setattr(layout, "REPO", first)
    out = _finished_run(first)
    _record_into(out, first, fresh, monkeypatch)
    assert restore() == [out]
    added = Path("eval") / "knn1_projector" / "results.json"
    (first / out / added).parent.mkdir(parents=True)
    (first / out / added).write_text('{"metrics": {"top1": 0.5}}')
    append_cost(first / out / "cost.jsonl", "knn1_projector", 90.0, 95.0, 0, START)
    _record_into(out, first, fresh, monkeypatch)
    assert restore() == [out]
    assert json.loads((fresh / out / added).read_text()) == {"metrics": {"top1": 0.5}}
    # and its cost log, which grew with that evaluation: the run's cost counts it
    assert (fresh / out / "cost.jsonl").read_text() == (first / out / "cost.jsonl").read_text()
    assert "knn1_projector" in (fresh / out / "cost.jsonl").read_text()
    assert restore() == []  # nothing missing any more
    monkeypatch.setattr(layout, "REPO", first)  # trained here: its record is not copied back
    (first / out / added).unlink()
    assert restore() == []
    assert not (first / out / added).exists()


def test_a_run_trained_again_elsewhere_replaces_the_working_copy_restored_earlier(
        monkeypatch, tmp_path):
    """The random init's seed 1 was retrained in the study checkout (issue 54, item 3): a
    checkout that had restored the first round's record (no provenance) must take the new
    record whole, not keep the old evaluations and files beside it."""
    first, fresh = tmp_path / "first", tmp_path / "fresh"
    monkeypatch.setattr(layout, "REPO", first)
    out = _finished_run(first)
    _record_into(out, first, fresh, monkeypatch)
    assert restore() == [out]
    (fresh / out / "stale.png").write_text("the old training's figure")
    # trained again in the first checkout: another result, and a provenance log
    shutil.rmtree(first / out / "eval" / "knn200")
    result = first / out / "eval" / "knn1" / "results.json"
    result.parent.mkdir(parents=True)
    result.write_text('{"metrics": {"top1": 0.7}}')
    append_provenance(first / out / PROVENANCE_LOG, "pretrain",
                      {"commit": "e5942a8", "dirty": False}, START)
    _record_into(out, first, fresh, monkeypatch)
    assert restore() == [out]
    kept = _file_names(fresh / out)
    assert kept == _file_names(fresh / RECORDS / "cpu" / "sce" / "seed0")
    assert "stale.png" not in kept and "eval/knn200/results.json" not in kept
    assert json.loads((fresh / out / "eval/knn1/results.json").read_text())["metrics"] == {
        "top1": 0.7}
    assert restore() == []  # the same training now: nothing to copy


def test_records_live_beside_the_report():
    assert RECORDS.parts[:2] == ("docs", "reproduction") and RUNS.parts[0] == "runs"


def test_wall_minutes_missing_an_unlogged_invocation_are_marked_a_lower_bound():
    """BYOL's study 6 row read 42.1 minutes: the last of its two invocations; the first ended
    with the session before the runner logged it."""
    whole = {"cost/pretrain_invocations": 2.0, "cost/pretrain_invocations_logged": 2.0}
    cut = {"cost/pretrain_invocations": 2.0, "cost/pretrain_invocations_logged": 1.0}
    assert wall_minutes_text([whole], "42.1") == "42.1"
    assert wall_minutes_text([whole, cut], "42.1 ± 3.0") == "≥ 42.1 ± 3.0"
    assert wall_minutes_text([{}], "0.6") == "0.6"  # no event file: nothing to compare


def test_a_comparison_made_again_elsewhere_replaces_the_one_restored_earlier(
        monkeypatch, tmp_path):
    """SCE vs MoCo v2 seed 0 was made again in the study checkout once both runs were trained
    again (issue 54): main, which had restored the first round's comparison, kept it beside the
    new runs, and the page showed its old interval beside the new difference. A comparison made
    here of the runs as they are (not recorded yet) stays."""
    first, fresh = tmp_path / "first", tmp_path / "fresh"
    monkeypatch.setattr(layout, "REPO", first)
    runs = [_finished_run(first, stem) for stem in ("sce", "moco")]
    evals = [out / "eval" / "knn200" for out in runs]
    out = compare_dir("cpu", "sce", "moco", "knn200", 0)

    def evaluate_and_compare(sha: str, difference: float) -> None:
        for folder in evals:
            (layout.REPO / folder / "results.json").write_text(json.dumps(
                {"metrics": {"top1": 0.4}, "checkpoint": {"sha256": f"{sha}-{folder}"}}))
        (layout.REPO / out).mkdir(parents=True, exist_ok=True)
        (layout.REPO / out / "comparison.json").write_text(json.dumps(
            {side: {"folder": str(folder), "checkpoint": f"{sha}-{folder}"}
             for side, folder in zip("ab", evals, strict=True)}
            | {"difference": difference}))

    evaluate_and_compare("old", 0.0161)
    for folder in (*runs, out):
        _record_into(folder, first, fresh, monkeypatch)
    assert sorted(restore()) == sorted([*runs, out])
    monkeypatch.setattr(layout, "REPO", first)  # both trained again there, and compared
    for folder in runs:
        append_provenance(first / folder / PROVENANCE_LOG, "pretrain",
                          {"commit": "e5942a8", "dirty": False}, START)
    evaluate_and_compare("new", 0.0054)
    for folder in (*runs, out):
        _record_into(folder, first, fresh, monkeypatch)
    restore()
    assert json.loads((fresh / out / "comparison.json").read_text())["difference"] == 0.0054
    assert restore() == []
    made_here = json.loads((fresh / out / "comparison.json").read_text()) | {"difference": 0.9}
    (fresh / out / "comparison.json").write_text(json.dumps(made_here))
    assert restore() == []  # of the runs as they are: kept
    assert json.loads((fresh / out / "comparison.json").read_text())["difference"] == 0.9
