"""studies.repro.commands and .runner: the public commands each study runs (dry runs:
nothing trains), chunked Part B training, the step budget, the lock two lanes share, and the
resume of a run killed mid-way (a real tiny run)."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import child_runs
import pytest
import torch

from studies.repro import commands, layout, runner
from studies.repro.collection import pretrain_finished, read_losses
from studies.repro.commands import (
    chunk_arguments,
    format_duration,
    parse_duration,
    trained_seconds,
)
from studies.repro.grids import TUNINGS, VALIDATION
from studies.repro.layout import ARCHIVE, eval_dir, run_dir
from studies.repro.records import compared
from studies.repro.runner import Runner, run_lock, run_studies, selected
from studies.repro.schema import Study, Tuning, Variant
from studies.repro.studies import STUDIES


def _dry_run(part, names, seeds=None, **kwargs):
    runner = Runner(dry_run=True, log=lambda line: None)
    run_studies(part, [STUDIES[n] for n in names], seeds, runner, **kwargs)
    return runner.commands


def _option(cmd, name):
    return cmd[cmd.index(name) + 1]


@pytest.mark.parametrize("name", ["sincere_grid", "cifar2", "temperature", "dystress",
                                  "baselines"])
def test_dry_run_lists_pretrain_evals_and_compares(name, monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)  # no checkpoint exists there: no --resume
    study = STUDIES[name]
    runs = [v for v in study.variants if v.tuning is None]  # tuned runs wait for their grid
    seeds = [0, 1] if len(study.seeds) > 1 else [0]
    commands = _dry_run("cpu", [name], seeds=seeds)
    pretrain = [c for c in commands if c[1] == "pretrain"]
    assert [(_option(c, "--config"), _option(c, "--seed_everything"), _option(c, "--output"))
            for c in pretrain] == [
        (v.config, str(seed), f"runs/repro/cpu/{v.stem}/seed{seed}/pretrain")
        for seed in seeds for v in runs]
    for cmd, v in zip(pretrain, [v for _ in seeds for v in runs], strict=True):
        assert "--resume" not in cmd and "--trainer.max_time" not in cmd
        assert all(arg in cmd for arg in v.overrides)  # a grid cell's settings
    evals = [c for c in commands if c[1] in ("eval", "analyze")]
    assert len(evals) == len(seeds) * sum(len(v.evals) for v in runs)
    for cmd in evals:
        ckpt = _option(cmd, "--checkpoint")
        assert ckpt.startswith("runs/repro/cpu/")
        assert ckpt.endswith("pretrain/checkpoints/last.ckpt")
        assert _option(cmd, "--device") == "cpu"
        if name == "cifar2":  # CIFAR-2: the cat and dog images in every evaluation
            assert cmd[-3:] == ["--classes", "cat", "dog"]
    compares = [c for c in commands if c[1] == "compare"]
    resolved = [pair for pair in study.all_pairs()
                if all(study.variant(n).tuning is None for n in pair[:2])]
    assert len(compares) == len(seeds) * len(resolved)
    # every command is a public contrastkit command
    assert {c[0] for c in commands} == {"contrastkit"}
    assert {c[1] for c in commands} <= {"pretrain", "eval", "analyze", "compare"}


def test_a_study_without_runs_runs_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    assert _dry_run("cpu", ["sce_lambda_tau"], seeds=[0, 1, 2]) == []


def test_dry_run_of_the_grid_scores_each_cell_on_held_out_images(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    commands = _dry_run("cpu", ["sincere_grid"])
    lines = [" ".join(c) for c in commands]
    assert lines[0] == (
        "contrastkit pretrain --config configs/repro/cpu/sincere.yaml --output "
        "runs/repro/cpu/sincere_t0.05_lr0.05/seed0/pretrain --seed_everything 0 "
        "--trainer.enable_progress_bar false --model.method.init_args.temperature 0.05 "
        "--model.optimizer.base_lr 0.05 --overwrite")
    validation = commands[1]
    assert validation[:7] == ["contrastkit", "eval", "knn", "--k", "1", "--space", "projector"]
    assert validation[7:11] == ["--subset", "10000", "--held-out", "5000"]
    assert _option(validation, "--output") == (
        "runs/repro/cpu/sincere_t0.05_lr0.05/seed0/eval/knn1_heldout_projector")
    # 26 cells (the first grid and its extensions): pretrain and the validation 1-NN
    assert len(commands) == 52
    # the extension's cells train with SINCERE App. J's warm-up scaled to this budget
    extended = next(c for c in commands
                    if "runs/repro/cpu/sincere_t0.2_lr0.02_warmup/seed0/pretrain" in c)
    assert extended[-9:] == ["--model.method.init_args.temperature", "0.2",
                             "--model.optimizer.base_lr", "0.02",
                             "--model.optimizer.warmup_fraction", "0.0125",
                             "--model.optimizer.warmup_start_ratio", "0.001", "--overwrite"]
    second = [c for c in commands if c[1] == "pretrain" and "0.4" in c and "0.05" in c]
    assert [_option(c, "--output") for c in second] == [
        f"runs/repro/cpu/{loss}_t0.4_lr0.05_warmup/seed0/pretrain"
        for loss in ("sincere", "supcon")]


def test_dry_run_sincere_names_the_tuned_runs_and_evaluates_the_baseline(monkeypatch,
                                                                          tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    lines: list[str] = []
    runner = Runner(dry_run=True, log=lines.append)
    run_studies("cpu", [STUDIES["sincere"]], [0], runner)
    assert lines[:2] == [
        "# sincere seed 0: sincere is trained at the setting its grid (sincere) chooses, once "
        "the grid is evaluated",
        "# sincere seed 0: supcon is trained at the setting its grid (supcon) chooses, once "
        "the grid is evaluated"]
    commands = runner.commands
    # the random-init baseline (every protocol of every study's runs)
    assert [_option(c, "--config") for c in commands if c[1] == "pretrain"] == [
        "configs/repro/cpu/random_init.yaml"]
    init = [c for c in commands if c[1] in ("eval", "analyze")]
    knn = [["eval", "knn", "--k", k] for k in ("1", "5", "200", "1", "5")]
    assert [c[1:5] if c[1] == "eval" else c[1:2] for c in init] == [
        *knn[:3], ["analyze"], *knn[3:], ["analyze"]]
    assert ["--space" in c and _option(c, "--space") for c in init] == [False] * 4 + [
        "projector"] * 3
    assert _option(init[0], "--data") == "image_archive" and _option(init[0], "--root") == ARCHIVE
    assert not [c for c in commands if c[1] == "compare"]


def test_dry_run_trains_a_tuned_run_at_the_setting_its_evaluated_grid_chose(monkeypatch,
                                                                            tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    for loss, best in (("sincere", 3), ("supcon", 1)):  # each grid's validation scores
        for i, cell in enumerate(TUNINGS[loss].grid):
            folder = tmp_path / eval_dir(run_dir("cpu", cell.stem, 0), VALIDATION)
            folder.mkdir(parents=True)
            score = 0.6 if i == best else 0.4
            (folder / "results.json").write_text(json.dumps({"metrics": {"top1": score}}))
    lines: list[str] = []
    runner = Runner(dry_run=True, log=lines.append)
    run_studies("cpu", [STUDIES["cifar2"]], [1], runner)
    assert not [line for line in lines if "once the grid is evaluated" in line]
    pretrain = {_option(c, "--config"): c for c in runner.commands if c[1] == "pretrain"}
    for loss, best in (("sincere", 3), ("supcon", 1)):
        cmd = pretrain[f"configs/repro/cpu/cifar2_{loss}.yaml"]
        # its folder is named after its config and the chosen cell: a run at another choice
        # (the first grid's, in cifar2_<loss>) is never taken for it
        cell = TUNINGS[loss].grid[best].stem.removeprefix(f"{loss}_")
        assert _option(cmd, "--output") == f"runs/repro/cpu/cifar2_{loss}_{cell}/seed1/pretrain"
        assert all(arg in cmd for arg in TUNINGS[loss].grid[best].overrides)
    compares = [c for c in runner.commands if c[1] == "compare"]
    assert {c[2] for c in compares} == {
        f"runs/repro/cpu/cifar2_sincere_t0.2_lr0.05_warmup/seed1/eval/{p}"
        for p in ("knn1_projector", "knn5_projector")}


def test_dry_run_cifar10_evaluations_use_the_archive(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    commands = _dry_run("cpu", ["temperature"], seeds=[0])
    analyze = [c for c in commands if c[1] == "analyze"]
    # t = 0.1, 0.2, 0.5 on the backbone and on the projector's output, then the random-init
    # baseline's on the backbone and the projector
    assert len(analyze) == 8
    assert [_option(c, "--space") if "--space" in c else None for c in analyze] == [
        None, "projector"] * 4
    assert all("random_init" in _option(c, "--checkpoint") for c in analyze[6:])
    assert all(_option(c, "--data") == "image_archive" and
               _option(c, "--root") == "../shared/data/cifar10-jpg.tar.gz" for c in analyze)
    assert _option(analyze[0], "--temperatures") == "0.1"
    assert _option(analyze[1], "--temperatures") == "0.1"  # the projector's analyze too
    assert _option(analyze[0], "--dystress") == "0.07"
    knn = [c for c in commands if c[1:3] == ["eval", "knn"]]
    # random init last: 1-, 5-, 200-NN on the backbone, 1-, 5-NN on the projector's output
    assert [_option(c, "--k") for c in knn] == ["200"] * 3 + ["1", "5", "200", "1", "5"]


def test_shared_runs_train_once_and_get_every_evaluation(monkeypatch, tmp_path):
    """The SimCLR runs of the DySTreSS and temperature studies, and the random-init baseline of
    every study, are pretrained once per seed; the baseline is evaluated with every protocol
    any study needs."""
    monkeypatch.setattr(layout, "REPO", tmp_path)
    commands = _dry_run("cpu", ["dystress", "temperature", "sincere", "baselines"], seeds=[0])
    configs = [_option(c, "--config") for c in commands if c[1] == "pretrain"]
    # SINCERE, SupCon and study 5's ReSSL wait for their grids
    assert len(configs) == len(set(configs)) == 7
    init = "runs/repro/cpu/random_init/seed0/pretrain/checkpoints/last.ckpt"
    evals = [" ".join(c[1:5]) for c in commands if c[1] == "eval" and init in c]
    assert sorted(evals) == ["eval knn --k 1", "eval knn --k 1", "eval knn --k 200",
                             "eval knn --k 5", "eval knn --k 5"]
    # DySTreSS against SimCLR at t_max: the study's one paired comparison
    compare = [c for c in commands if c[1] == "compare"]
    assert [c[2:4] for c in compare if "dystress" in c[2]] == [[
        "runs/repro/cpu/dystress/seed0/eval/knn200",
        "runs/repro/cpu/simclr_t0.2/seed0/eval/knn200"]]


def test_dry_run_resumes_an_existing_checkpoint(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    ckpt = tmp_path / "runs/repro/cpu/moco/seed0/pretrain/checkpoints/last.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"x")
    commands = _dry_run("cpu", ["baselines"], seeds=[0])
    pretrain = {_option(c, "--config"): c for c in commands if c[1] == "pretrain"}
    assert pretrain["configs/repro/cpu/moco.yaml"][-2:] == ["--resume", "last"]
    assert "--resume" not in pretrain["configs/repro/cpu/sce.yaml"]


def test_dry_run_gpu_chunks_and_epoch_override(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "REPO", tmp_path)
    commands = _dry_run("gpu", ["gpu_table6"], seeds=[0], chunk_seconds=510,
                        device="cuda")
    pretrain = [c for c in commands if c[1] == "pretrain"]
    assert len(pretrain) == 3
    for cmd in pretrain:
        assert "--trainer.max_time" not in cmd
        assert "--trainer.callbacks+=lightning.pytorch.callbacks.Timer" in cmd
        assert _option(cmd, "--trainer.callbacks.duration") == "00:00:08:30"
        assert _option(cmd, "--trainer.callbacks.interval") == "epoch"
    lin = [c for c in commands if c[1:3] == ["eval", "linear"]]
    assert all(_option(c, "--device") == "cuda" for c in lin)
    assert [_option(c, "--protocol") for c in lin] == ["sce_d1"] * 3  # SCE D.1's probe
    commands = _dry_run("cpu", ["dystress"], seeds=[3], epochs=2)
    pretrain = [c for c in commands if c[1] == "pretrain"]
    assert all(_option(c, "--trainer.max_epochs") == "2" for c in pretrain)
    assert _option(pretrain[0], "--output") == "runs/repro/cpu-e2/simclr_t0.1/seed3/pretrain"


def test_chunk_duration_adds_the_time_already_trained(tmp_path):
    """Lightning restores the Timer's elapsed time on resume: each chunk's duration is the
    time already trained (from the checkpoint) plus the chunk."""
    ckpt = tmp_path / "last.ckpt"
    assert trained_seconds(ckpt) == 0.0
    torch.save({"callbacks": {"Timer": {"time_elapsed": {"train": 1234.7, "validate": 9.0}}}},
               ckpt)
    assert trained_seconds(ckpt) == pytest.approx(1234.7)
    args = chunk_arguments(parse_duration("00:00:08:30"), trained_seconds(ckpt))
    assert args[args.index("--trainer.callbacks.duration") + 1] == "00:00:29:04"  # 1744 s
    assert format_duration(2 * 86400 + 3 * 3600 + 4 * 60 + 5) == "02:03:04:05"
    with pytest.raises(SystemExit, match="DD:HH:MM:SS"):
        parse_duration("9:30")


def test_step_budget():
    runner = Runner(dry_run=True, log=lambda line: None, max_steps=2)
    assert [runner.spend() for _ in range(3)] == [True, True, False]
    assert Runner(dry_run=True).spend()


def test_unknown_study_is_rejected():
    with pytest.raises(SystemExit, match="unknown cpu study"):
        selected(["gpu_table6"], "cpu")


def _hold_lock(folder: Path, released: Path) -> subprocess.Popen:
    """Another process ("lane") that takes ``folder/.lock``, prints ``locked``, holds it 1.5 s,
    creates ``released`` and lets go (then idles until killed)."""
    return subprocess.Popen(
        [sys.executable, "-c", "import fcntl, time\n"
         f"handle = open({str(folder / '.lock')!r}, 'a')\n"
         "fcntl.flock(handle, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(1.5)\n"
         f"open({str(released)!r}, 'w').close()\nfcntl.flock(handle, fcntl.LOCK_UN)\n"
         "time.sleep(60)"], stdout=subprocess.PIPE, text=True)


def test_run_lock_waits_for_another_process(tmp_path):
    """A second lane waits for the lock a first lane holds on a shared run, and takes it only
    once that lane is gone."""
    folder, released = tmp_path / "run", tmp_path / "released"
    folder.mkdir()
    holder = _hold_lock(folder, released)
    try:
        assert holder.stdout.readline() == "locked\n"
        lines = []
        with run_lock(folder, Runner(log=lines.append)):
            assert released.is_file()  # granted only after the holder let go
    finally:
        holder.kill()
        holder.wait()
    assert lines == [f"# {folder}: another process is running it; waiting"]
    with run_lock(folder, Runner(log=lines.append)):  # free: taken at once, nothing logged
        pass
    assert len(lines) == 1


def _stub_lane(monkeypatch, train_and_eval) -> None:
    """A lane that runs ``train_and_eval`` in place of pretraining and evaluating a run, and
    restores, records and collects nothing."""
    monkeypatch.setattr(runner, "_train_and_eval", train_and_eval)
    for name in ("record", "write_summary"):
        monkeypatch.setattr(runner, name, lambda *a: None)
    monkeypatch.setattr(runner, "restore", lambda tag: [])
    monkeypatch.setattr(runner, "collect", dict)


def test_a_lane_takes_the_next_free_run_and_waits_for_the_held_one_last(monkeypatch,
                                                                        tmp_path):
    """Two lanes on the same study: a run the other lane holds is left for later, the next free
    one taken at once; the held one is waited for after all others, then finished."""
    monkeypatch.setattr(layout, "REPO", tmp_path)
    calls: list[str] = []
    _stub_lane(monkeypatch,
               lambda part, variant, seed, run, **kw: calls.append(variant.stem) or True)
    study = Study("pair", "cpu", "pair", (0,), tuple(
        Variant(name, name, f"configs/{name}.yaml", ()) for name in ("a", "b", "c")))
    held, released = tmp_path / "runs/repro/cpu/a/seed0", tmp_path / "released"
    held.mkdir(parents=True)
    holder = _hold_lock(held, released)
    lines: list[str] = []
    try:
        assert holder.stdout.readline() == "locked\n"
        assert run_studies("cpu", [study], None, Runner(log=lines.append))
    finally:
        holder.kill()
        holder.wait()
    assert calls == ["b", "c", "a"] and released.is_file()
    assert lines == ["# this study list: 3 runs; 3 to train, 0 to evaluate, 0 done",
                     f"# {held}: another process is running it; taking the next run",
                     f"# {held}: another process is running it; waiting"]


TINY = """\
# A tiny run for the interruption test: digits, small conv net, 12 epochs of 4 steps, the
# kNN monitor every 4 epochs (so the last checkpoint is written at a validation's end).
model:
  method:
    class_path: contrastkit.methods.SimCLR
    init_args:
      backbone: {name: small_convnet, width: 8, out_dim: 32}
      projector: {hidden_dim: 32, out_dim: 16}
      temperature: 0.2
  views: {size: 16, normalize: digits}
  optimizer: {warmup_epochs: 0}
  online_eval: {linear: false}
data: {dataset: digits, batch_size: 64, subset: 256, val_split: test}
trainer: {max_epochs: 12, accelerator: cpu, devices: 1, log_every_n_steps: 1,
          check_val_every_n_epoch: 4}
"""

#: The lanes import ``studies`` from the checkout's root, as ``python -m studies.repro`` does.
#: The lanes' records name a clean commit (the temporary checkouts are no git checkouts), as
#: a record must to be restored as done (a record naming none is trained again).
LANE_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")) if p),
    "REPRO_COMMIT": "c" * 40, "REPRO_DIRTY": "0"}

LANE = """\
import sys
from dataclasses import replace
from pathlib import Path

from studies.repro import layout
from studies.repro.runner import Runner, run_studies
from studies.repro.schema import Study, Variant

layout.REPO = Path(sys.argv[1])
study = Study("tiny", "cpu", "tiny", (0,),
              (Variant("tiny", "tiny", "configs/repro/cpu/tiny.yaml", ()),))
sys.exit(0 if run_studies("cpu", [study], None, Runner()) else 1)
"""


def _start_lane(repo: Path) -> subprocess.Popen:
    """``python -m studies.repro cpu`` of the tiny study in ``repo``, in its own process group."""
    (repo / "configs/repro/cpu").mkdir(parents=True)
    (repo / "configs/repro/cpu/tiny.yaml").write_text(TINY)
    (repo / "lane.py").write_text(LANE)
    return subprocess.Popen([sys.executable, str(repo / "lane.py"), str(repo)], env=LANE_ENV,
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _stop_after_first_checkpoints(lanes: dict[str, subprocess.Popen], ckpts: dict[str, Path],
                                  stops: dict[str, int]) -> dict[str, int | None]:
    """Send each lane's signal to its process group as soon as its checkpoint exists; their
    exit statuses (None: the signal did not stop it)."""
    waiting, deadline = set(lanes), time.monotonic() + 600
    while waiting:
        for name in sorted(waiting):
            if ckpts[name].is_file() or lanes[name].poll() is not None \
                    or time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):  # a lane already gone
                    os.killpg(lanes[name].pid, stops[name])
                waiting.discard(name)
        time.sleep(0.1)
    codes: dict[str, int | None] = {}
    for name, lane in lanes.items():
        try:
            codes[name] = lane.wait(timeout=120)
        except subprocess.TimeoutExpired:  # the signal did not stop it: fail below
            os.killpg(lane.pid, signal.SIGKILL)
            lane.wait()
            codes[name] = None
    return codes


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path):
    """``python -m studies.repro cpu`` stopped after the first epoch's checkpoint, by SIGKILL to its
    process group (a machine's session ending) or SIGINT (Ctrl-C in its terminal): the next
    call resumes that run with ``--resume last`` and finishes it, every step logged once, its
    cost logged, the finished run recorded; a checkout with only the records trains nothing.
    The two lanes (one per signal, each in its own folder) run side by side, and so do the
    two next calls: their start-ups dominate."""
    stops = {"SIGKILL": signal.SIGKILL, "SIGINT": signal.SIGINT}
    lanes = {name: _start_lane(tmp_path / name) for name in stops}
    pre = {name: tmp_path / name / "runs/repro/cpu/tiny/seed0/pretrain" for name in stops}
    ckpt = {name: pre[name] / "checkpoints" / "last.ckpt" for name in stops}
    try:
        codes = _stop_after_first_checkpoints(lanes, ckpt, stops)
    finally:
        for lane in lanes.values():
            if lane.poll() is None:
                os.killpg(lane.pid, signal.SIGKILL)
                lane.wait()
    for name in stops:
        assert codes[name] is not None and codes[name] != 0, name  # stopped, not finished
        assert ckpt[name].is_file() and not pretrain_finished(ckpt[name], 12), name
    # the next call of each lane: the same study again, its log lines on stdout
    logs = {name: tmp_path / f"{name}-next.log" for name in stops}
    child_runs.finish(*(child_runs.start(
        [sys.executable, "-u", str(tmp_path / name / "lane.py"), str(tmp_path / name)],
        dict(LANE_ENV), logs[name]) for name in stops))
    for name in stops:
        lines = logs[name].read_text().splitlines()
        (pretrain,) = [line for line in lines if line.startswith("$ contrastkit pretrain")]
        assert pretrain.endswith("--resume last"), name
        assert pretrain_finished(ckpt[name], 12), name
        assert read_losses(pre[name] / "metrics.csv")["logged_epochs"] == 12, name
        with open(pre[name] / "metrics.csv", newline="") as handle:
            rows = [row for row in csv.DictReader(handle) if row.get("train/loss")]
        assert sorted({int(float(row["epoch"])) for row in rows}) == list(range(12)), name
        steps = [int(row["step"]) for row in rows]
        assert sorted(steps) == list(range(48)), name  # each of the 4 x 12 steps logged once
        # the cost log: SIGINT reached the runner, which waited for pretraining to stop and
        # logged it; SIGKILL left no line; the resumed call logged the rest
        costs = [json.loads(line) for line in
                 (pre[name].parent / "cost.jsonl").read_text().splitlines()]
        assert [c["step"] for c in costs] == ["pretrain"] * (2 if name == "SIGINT" else 1)
        assert costs[-1]["exit_status"] == 0 and costs[-1]["cpu_seconds"] > 0, name
        if name == "SIGINT":
            assert costs[0]["exit_status"] != 0
        # the finished run is recorded, without its checkpoints
        recorded = tmp_path / name / "docs/reproduction/runs/cpu/tiny/seed0"
        assert (recorded / "pretrain" / "finished.json").is_file(), name
        assert (recorded / "pretrain" / "metrics.csv").is_file(), name
        assert not list(recorded.rglob("*.ckpt")), name
    # a fresh checkout with the records only (a clone on another machine) trains nothing
    fresh = tmp_path / "fresh"
    shutil.copytree(tmp_path / "SIGINT" / "configs", fresh / "configs")
    shutil.copytree(tmp_path / "SIGINT" / "docs", fresh / "docs")
    shutil.copy(tmp_path / "SIGINT" / "lane.py", fresh / "lane.py")
    done = subprocess.run([sys.executable, "-u", str(fresh / "lane.py"), str(fresh)],
                          env=LANE_ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(
        "# restored 1 recorded runs and comparisons into runs/repro/cpu (docs/reproduction/runs)\n"
        "# this study list: 1 runs; 0 to train, 0 to evaluate, 1 done\n")
    assert "$ contrastkit" not in done.stdout


def test_a_tuned_run_trains_at_the_setting_its_grid_chose(monkeypatch, tmp_path):
    """The grid's runs are trained and scored on validation; the tuned variant becomes the
    best cell (its seed-0 run reused, seeds 1 and 2 trained in its folder with the study's
    evaluations), and a variant tuned without reuse trains its own config with the cell's
    overrides."""
    monkeypatch.setattr(layout, "REPO", tmp_path)
    scores = {"g_a": 0.40, "g_b": 0.55, "g_c": 0.55}  # a tie: the first of them wins
    calls: list[tuple[str, int, tuple[str, ...], tuple[str, ...]]] = []

    def fake(part, variant, seed, run, **kw):
        calls.append((variant.stem, seed, variant.evals, variant.overrides))
        for protocol in variant.evals:
            folder = tmp_path / runner.eval_dir(runner.run_dir(part, variant.stem, seed),
                                                protocol)
            folder.mkdir(parents=True, exist_ok=True)
            if not (folder / "results.json").is_file():  # as the runner: made once
                (folder / "results.json").write_text(json.dumps(
                    {"metrics": {"top1": scores.get(variant.name, 0.0)}}))
        return True

    _stub_lane(monkeypatch, fake)
    grid = tuple(Variant(n, n, "configs/g.yaml", ("val",), folder=n,
                         overrides=("--model.optimizer.base_lr", lr))
                 for n, lr in (("g_a", "0.1"), ("g_b", "0.2"), ("g_c", "0.3")))
    tuning = Tuning("g", grid, "val")
    tuned = Study("tuned", "cpu", "tuned", (0, 1, 2), (
        Variant("best", "G (tuned)", "configs/g.yaml", ("knn1",), folder="best-not-chosen",
                tuning=tuning),
        Variant("other", "H (tuned)", "configs/h.yaml", ("knn1",), tuning=replace(
            tuning, reuse=False))))
    grid_study = Study("grid", "cpu", "grid", (0,), grid)
    monkeypatch.setitem(commands.EVALS, "val", ["eval", "knn"])
    # the tuned study first: its runs wait for the grid, which this lane then trains
    assert run_studies("cpu", [tuned, grid_study], None, Runner(log=lambda line: None))
    assert [c[:2] for c in calls[:3]] == [("g_a", 0), ("g_b", 0), ("g_c", 0)]
    trained = [c for c in calls[3:] if c[0] != "g_b" or c[1] != 0 or "knn1" in c[2]]
    assert ("g_b", 0, ("val", "knn1"), ("--model.optimizer.base_lr", "0.2")) in trained
    # without reuse, in a folder named after its config and the chosen cell
    assert {(c[0], c[1]) for c in trained} == {("g_b", 0), ("g_b", 1), ("g_b", 2),
                                               ("h_b", 0), ("h_b", 1), ("h_b", 2)}
    assert all(c[3] == ("--model.optimizer.base_lr", "0.2") for c in trained)
    assert not (tmp_path / "runs/repro/cpu/best-not-chosen").exists()


#: A pretraining that diverges: a line of its progress, then contrastkit's one-line error.
DIVERGING = """\
import sys
from pathlib import Path
calls = Path(sys.argv[1])
calls.write_text(calls.read_text() + "x" if calls.is_file() else "x")
print("epoch 1/30 (step 9): train/loss nan", file=sys.stderr)
print("contrastkit pretrain: error: the training loss became NaN or infinite at step 9 "
      "(epoch 1, batch 9); the run stops here", file=sys.stderr)
sys.exit(2)
"""


def test_a_failed_run_is_recorded_with_its_error_and_tried_again(monkeypatch, tmp_path, capfd):
    """A pretraining that fails: its stderr reaches the lane's log as it comes, its cost line
    keeps its last line, the run is recorded (a diverged loss is a result the page shows), and
    the next call tries it again (newer code may mend it), recording the second failure too."""
    monkeypatch.setattr(layout, "REPO", tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs/v.yaml").write_text("trainer: {max_epochs: 30}\n")
    (tmp_path / "diverge.py").write_text(DIVERGING)
    calls = tmp_path / "calls"
    monkeypatch.setattr(runner, "pretrain_command", lambda *a, **kw: [
        sys.executable, str(tmp_path / "diverge.py"), str(calls)])
    monkeypatch.setattr(runner, "collect", dict)
    monkeypatch.setattr(runner, "write_summary", lambda summary, path: None)
    study = Study("one", "cpu", "one", (0,), (Variant("v", "V", "configs/v.yaml", ("knn200",)),))
    recorded = tmp_path / "docs/reproduction/runs/cpu/v/seed0/cost.jsonl"
    out = run_dir("cpu", "v", 0)
    for attempt in (1, 2):
        lines: list[str] = []
        assert not run_studies("cpu", [study], None, Runner(log=lines.append))
        assert "train/loss nan" in capfd.readouterr().err
        assert lines[-1] == f"# {out}: pretraining failed with exit status 2"
        costs = [json.loads(line) for line in recorded.read_text().splitlines()]
        assert len(costs) == attempt and calls.read_text() == "x" * attempt
        assert costs[-1]["exit_status"] == 2
        assert costs[-1]["error"].endswith("the run stops here")


def test_a_lane_starts_by_counting_the_runs_left_and_their_planned_hours(monkeypatch, tmp_path):
    """The line a lane prints after restoring the records: a run listed by two studies counts
    once; a finished run lacking an evaluation is left to evaluate; a run not finished is left
    to train, at the plan's cost (steps x the config stem's CPU-seconds per step), as is one
    restored from a record naming no clean commit; a tuned run
    whose grid has not chosen counts at its own config's cost, and not at all at its grid's
    seed when it reuses the grid's chosen run."""
    monkeypatch.setattr(layout, "REPO", tmp_path)
    config = "configs/repro/cpu/simclr_t0.2.yaml"
    (tmp_path / config).parent.mkdir(parents=True)
    (tmp_path / config).write_text("trainer:\n  max_epochs: 30\n"
                                   "data:\n  subset: 10000\n  batch_size: 256\n")
    done, evaluate, train, old = (Variant(name, name, config, ("knn200",), folder=name)
                                  for name in ("done", "evaluate", "train", "old"))
    grid = Tuning(name="g", grid=(train,), protocol="knn200", reuse=False)
    tuned = Variant("tuned", "tuned", config, ("knn200",), tuning=grid)
    # reusing its grid's chosen run: at the grid's seed it is that run, one of the grid's cells
    reused = Variant("reused", "reused", config, ("knn200",), tuning=replace(grid, reuse=True))
    for variant, evaluated in ((done, True), (evaluate, False)):
        out = run_dir("cpu", variant.stem, 0)
        (tmp_path / out / "pretrain").mkdir(parents=True)
        (tmp_path / out / "pretrain" / "finished.json").write_text('{"epochs": 30}\n')
        (tmp_path / out / "provenance.jsonl").write_text(json.dumps(
            {"step": "pretrain", "commit": "f" * 40, "dirty": False}) + "\n")
        if evaluated:
            (tmp_path / eval_dir(out, "knn200")).mkdir(parents=True)
            (tmp_path / eval_dir(out, "knn200") / "results.json").write_text("{}")
    _restored(tmp_path, "old", None)  # a record naming no commit: trained again
    first = Study("first", "cpu", "first", (0,), (done, evaluate, train, old))
    second = Study("second", "cpu", "second", (0,), (done, tuned, reused))
    pending = [(s, 0, v) for s in (first, second) for v in s.variants]
    line = runner._left_line("cpu", pending, None,
                             lambda v: None if v.tuning is not None else v)
    hours = 3 * 30 * (10000 // 256) * 2.03 / 3600  # train, old, tuned: 1,170 steps each
    assert line == (f"# this study list: 5 runs; 3 to train (about {hours:.1f} CPU-hours by the "
                    "plan's per-step costs, studies.repro.plan, evaluations aside), "
                    "1 to evaluate, 1 done")


def _fake_lane(monkeypatch, tmp_path) -> list[tuple[str, bool]]:
    """Run studies in ``tmp_path`` with a pretraining and evaluation that only note
    ``(stem, whether its folder still held an earlier metrics.csv)``; nothing recorded."""
    monkeypatch.setattr(layout, "REPO", tmp_path)
    calls: list[tuple[str, bool]] = []

    def fake(part, variant, seed, run, **kw):
        out = tmp_path / runner.run_dir(part, variant.stem, seed)
        calls.append((variant.stem, (out / "pretrain" / "metrics.csv").is_file()))
        return True

    _stub_lane(monkeypatch, fake)
    return calls


def _restored(tmp_path: Path, stem: str, commit: str | None) -> Path:
    """A finished run as restored from its record (no checkpoint), whose provenance names
    ``commit`` (None: no provenance log, as the first round's records)."""
    out = tmp_path / run_dir("cpu", stem, 0)
    (out / "pretrain").mkdir(parents=True)
    (out / "pretrain" / "finished.json").write_text('{"epochs": 30}\n')
    (out / "pretrain" / "metrics.csv").write_text("epoch,train/loss\n")
    (out / ".lock").write_text("")
    if commit is not None:
        (out / "provenance.jsonl").write_text(json.dumps(
            {"step": "pretrain", "commit": commit, "dirty": False}) + "\n")
    return out


def test_a_run_restored_from_a_record_without_a_clean_commit_is_trained_again(
        monkeypatch, tmp_path):
    """Issue 54: a record that names no clean commit counts in no claim, so a lane does not
    take it as done: it empties the run's folder (its lock kept) and trains it again; a
    record naming a clean commit is kept as it is."""
    calls = _fake_lane(monkeypatch, tmp_path)
    old = _restored(tmp_path, "first_round", None)
    dirty = _restored(tmp_path, "dirty", "d" * 40)
    (dirty / "provenance.jsonl").write_text(json.dumps(
        {"step": "pretrain", "commit": "d" * 40, "dirty": True}) + "\n")
    kept = _restored(tmp_path, "clean", "e" * 40)
    study = Study("s", "cpu", "s", (0,), tuple(
        Variant(n, n, f"configs/{n}.yaml", ("knn200",), folder=n)
        for n in ("first_round", "dirty", "clean")))
    lines: list[str] = []
    assert run_studies("cpu", [study], None, Runner(log=lines.append))
    assert calls == [("first_round", False), ("dirty", False), ("clean", True)]
    assert sorted(p.name for p in old.iterdir()) == [".lock"]
    assert (kept / "provenance.jsonl").is_file()
    assert "# runs/repro/cpu/first_round/seed0: its record names no clean commit (issue 54); " \
           "training it again" in lines


def test_a_comparison_of_a_run_trained_again_is_made_again(monkeypatch, tmp_path):
    """A comparison is made once per pair of evaluations as they are: one whose recorded
    checkpoints are no longer its evaluations' (a run trained again) is made again; one whose
    are is not."""
    monkeypatch.setattr(layout, "REPO", tmp_path)
    a, b = (run_dir("cpu", stem, 0) for stem in ("a", "b"))
    for folder, sha in ((a, "new"), (b, "same")):
        (tmp_path / eval_dir(folder, "knn200")).mkdir(parents=True)
        (tmp_path / eval_dir(folder, "knn200") / "results.json").write_text(json.dumps(
            {"checkpoint": {"sha256": sha}}))
    out = Path("runs/repro/cpu/compare/a__vs__b/knn200/seed0")
    (tmp_path / out).mkdir(parents=True)
    made = {"a": {"checkpoint": "old"}, "b": {"checkpoint": "same"}}
    (tmp_path / out / "comparison.json").write_text(json.dumps(made))
    da, db = eval_dir(a, "knn200"), eval_dir(b, "knn200")
    assert not compared(out, da, db)
    made["a"]["checkpoint"] = "new"
    (tmp_path / out / "comparison.json").write_text(json.dumps(made))
    assert compared(out, da, db)
    assert not compared(out, da, Path("runs/repro/cpu/missing/seed0/eval/knn200"))
