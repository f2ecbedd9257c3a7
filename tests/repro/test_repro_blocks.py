"""studies.repro.blocks: Part B's order across blocks of GPU time, the next block (recorded runs
skipped), SimCLR's best fixed temperature from Part A, the device call and the estimate."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from repro_summaries import run_entry

from studies.repro import blocks, layout
from studies.repro.blocks import (
    BLOCK_SECONDS,
    ORDER,
    best_fixed_temperature,
    device_call,
    device_command,
    estimate,
    next_block,
    plan,
    plan_lines,
    record_dir,
)
from studies.repro.layout import eval_dir
from studies.repro.studies import CPU_SEEDS, STUDIES

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(monkeypatch, tmp_path):
    """A checkout with the Part B configs and no record."""
    shutil.copytree(REPO / "configs" / "repro" / "gpu", tmp_path / "configs" / "repro" / "gpu")
    monkeypatch.setattr(layout, "REPO", tmp_path)
    return tmp_path


def _record(variant, evals=None):
    folder = record_dir(variant)
    (folder / "pretrain").mkdir(parents=True)
    (folder / "pretrain" / "finished.json").write_text('{"epochs": 200}\n')
    for protocol in variant.evals if evals is None else evals:
        eval_dir(folder, protocol).mkdir(parents=True)
        (eval_dir(folder, protocol) / "results.json").write_text("{}")


def _part_a(knn200):
    """A Part A summary whose SimCLR runs have these 200-NN accuracies (t -> per seed)."""
    runs = {}
    for t, values in knn200.items():
        for seed, value in zip(CPU_SEEDS, values, strict=False):
            runs |= run_entry(f"simclr_t{t}", seed, {"knn200/top1": value})
    return {"runs": runs}


def test_the_order_is_the_issues():
    assert [s.run for s in ORDER] == ["sce", "simclr", "dystress", "moco", "ressl",
                                      "simclr_best"]
    for step in ORDER:  # each a Part B run of its study
        assert STUDIES[step.study].part == "gpu"
        assert step.run in {v.name for v in STUDIES[step.study].variants}


def test_the_plan_skips_recorded_runs(checkout):
    states = [b.state for b in plan({})]
    assert states == ["next", "pending", "pending", "pending", "pending", "waiting"]
    _record(blocks.variant_of(ORDER[0]))
    _record(blocks.variant_of(ORDER[2]))  # a later one recorded out of order
    assert [b.state for b in plan({})] == ["recorded", "next", "recorded", "pending", "pending",
                                           "waiting"]
    assert next_block({}).step.run == "simclr"
    # a record that lacks an evaluation is not a recorded run
    _record(blocks.variant_of(ORDER[1]), evals=("knn200",))
    assert next_block({}).step.run == "simclr"


def test_best_fixed_temperature_from_part_a(checkout):
    assert best_fixed_temperature({}) is None
    assert best_fixed_temperature(_part_a({"0.1": [0.5] * 3, "0.2": [0.6] * 3,
                                           "0.5": [0.7, 0.7]})) is None  # a seed missing
    assert best_fixed_temperature(_part_a({"0.1": [0.5] * 3, "0.2": [0.6] * 3,
                                           "0.5": [0.7] * 3})) == "0.5"
    # a tie goes to the first temperature in the order
    tie = _part_a({"0.1": [0.7, 0.6, 0.5], "0.2": [0.6] * 3, "0.5": [0.4] * 3})
    assert best_fixed_temperature(tie) == "0.1"
    (last,) = [b for b in plan(tie) if b.step.run == "simclr_best"]
    assert last.state == "pending"
    assert last.pretrain_args == ("--model.method.init_args.temperature", "0.1")
    # Part A's best is block 2's temperature: that run serves, no block is spent
    same = _part_a({"0.1": [0.5] * 3, "0.2": [0.6] * 3, "0.5": [0.4] * 3})
    (last,) = [b for b in plan(same) if b.step.run == "simclr_best"]
    assert last.state == "not needed" and "block 2" in last.note
    for step in ORDER[:-1]:
        _record(blocks.variant_of(step))
    assert next_block(same) is None
    assert next_block(tie).step.run == "simclr_best"


def test_device_call_is_one_command_within_the_tools_limits(checkout):
    block = plan(_part_a({"0.1": [0.7] * 3, "0.2": [0.6] * 3, "0.5": [0.4] * 3}))[-1]
    call = device_call(block, "a" * 40)
    assert set(call) == {"command", "carry", "timeout_s"}
    assert call["carry"] == [".whl", ".carry"] and call["timeout_s"] == 600
    command = call["command"]
    assert len(command) <= 2000
    assert command.startswith("set -o pipefail; source .carry/env.sh && python3 -m "
                              "studies.repro block simclr_best ")
    assert command.endswith('2>&1 | tee "$OUT/block.log"')
    words = shlex.split(command.split(" && ", 1)[1].rsplit(" 2>&1", 1)[0])
    assert words[words.index("--archive") + 1] == ".carry/cifar10-jpg.tar.gz"
    assert words[words.index("--commit") + 1] == "a" * 40
    assert words[words.index("--") + 1:] == ["--model.method.init_args.temperature", "0.1"]
    # a dry run's size: more block options, and more pretrain overrides after the block's
    tiny = device_command(block, "a" * 40, dirty=True, options=("--epochs", "1"),
                          pretrain=("--data.batch_size", "32"))
    assert "--dirty --epochs 1 -- --model.method.init_args.temperature 0.1 " \
           "--data.batch_size 32 2>&1" in tiny


def test_estimate_of_each_block(checkout):
    variant = blocks.variant_of(ORDER[0])
    sce = estimate(variant)  # the configs run the captured step (issue 34)
    assert sce.step == "captured"
    assert sce.train_seconds == blocks.START_SECONDS + 200 * blocks.EPOCH_SECONDS["captured"]
    assert sce.eval_seconds == sum(blocks.EVAL_SECONDS[p] for p in ("linear_d1", "knn200"))
    # whether it fits is whether the assumed epoch is at most the one at which it would fit
    assert sce.fits == (blocks.EPOCH_SECONDS["captured"] <= sce.fitting_epoch_seconds)
    assert sce.fits == (sce.device_seconds <= BLOCK_SECONDS and sce.commands <= 2)
    # the eager step: 200 epochs at the measured 7.0 s cannot fit a 15-minute block
    config = checkout / variant.config
    config.write_text(config.read_text().replace("  performance: {step: captured}\n", ""))
    eager = estimate(variant)
    assert eager.step == "eager" and not eager.fits and eager.commands > 2
    assert eager.fitting_epoch_seconds == sce.fitting_epoch_seconds  # the same evaluations
    # Table 3's runs pay for their online monitor (every 10 of 200 epochs)
    simclr = estimate(blocks.variant_of(ORDER[1]))
    assert simclr.train_seconds == (blocks.START_SECONDS + 20 * blocks.MONITOR_SECONDS
                                    + 200 * blocks.EPOCH_SECONDS["captured"])


def test_plan_lines_refuse_a_block_that_does_not_fit(checkout, monkeypatch):
    monkeypatch.setattr(blocks, "upload_bytes", lambda repo: {"working tree": 2**20})
    monkeypatch.setitem(blocks.EPOCH_SECONDS, "captured", 1.0)  # fast enough: the call
    lines, call = plan_lines({}, "b" * 40, dirty=False)
    assert call == device_call(next_block({}), "b" * 40)
    assert any(line.endswith("fits one block") or "fits one block (" in line for line in lines)
    monkeypatch.setitem(blocks.EPOCH_SECONDS, "captured", 30.0)  # too slow: no call
    lines, call = plan_lines({}, "b" * 40, dirty=False)
    assert call is None and "No device call" in lines[-1] and "DOES NOT FIT" in "\n".join(lines)
    lines, call = plan_lines({}, "b" * 40, dirty=True, force=True)
    assert call == device_call(next_block({}), "b" * 40, dirty=True)
    assert json.dumps(call) in lines and "uncommitted changes" in "\n".join(lines)
    monkeypatch.setattr(blocks, "upload_bytes", lambda repo: {"working tree": 65 * 2**20})
    assert plan_lines({}, "b" * 40, dirty=False, force=True)[1] is None


def test_without_a_contrastkit_script_the_runner_calls_the_module(monkeypatch):
    """The GPU machine has the checkout's src on PYTHONPATH, no installed script."""
    import sys

    from studies.repro import runner

    cmd = ["contrastkit", "eval", "knn", "--k", "200"]
    monkeypatch.setattr(runner.shutil, "which", lambda name, path=None: None)
    assert runner._executable(cmd) == [sys.executable, "-m", "contrastkit.cli", *cmd[1:]]
    monkeypatch.setattr(runner.shutil, "which", lambda name, path=None: f"/venv/bin/{name}")
    assert runner._executable(cmd) == ["/venv/bin/contrastkit", *cmd[1:]]


def test_block_refuses_an_empty_out(capsys):
    from studies.repro.cli import main

    assert main(["block", "sce", "--out", "", "--commit", "x"]) == 2
    assert "--out is empty" in capsys.readouterr().err
