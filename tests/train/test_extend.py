"""Issue 37 item 2: a finished run trained longer with ``--extend-to`` (a stated new schedule:
from where it stopped, the schedules of the longer run), every refusal naming that way, and
the summary figure showing both parts."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from contrastkit.cli import main
from contrastkit.figures import figure_caption
from contrastkit.optim import warmup_cosine
from contrastkit.train.extend import extensions


@pytest.fixture
def finished(tiny_run: Path, tmp_path: Path) -> Path:
    """A copy of the finished two-epoch session run (4 steps per epoch), to extend."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    return run


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_every_refusal_names_the_way_to_train_longer(finished, capsys):
    config, out = str(finished / "config.yaml"), str(finished)
    err = _error(capsys, ["pretrain", "--config", config, "--output", out, "--resume", "last"])
    assert "the run has finished its 2 epochs" in err
    assert err.endswith(f"to train it longer: contrastkit pretrain --config {config} --output "
                        f"{out} --extend-to 4 (docs/configs.md)")
    err = _error(capsys, ["pretrain", "--config", config, "--output", out, "--resume", "last",
                          "--trainer.max_epochs", "4"])
    assert "trainer.max_epochs is 4 but the run was started with 2" in err
    assert "give --extend-to 4 instead" in err
    err = _error(capsys, ["pretrain", "--config", config, "--output", out])
    assert "already holds a finished run" in err and "--extend-to N (e.g. 4)" in err
    err = _error(capsys, ["pretrain", "--config", config, "--output", out, "--extend-to", "2"])
    assert "has 2 epochs (done: 2); give more, e.g. --extend-to 4" in err
    assert not (finished / "resumes.jsonl").exists()  # nothing written by a refusal


def _logged(run: Path, key: str) -> dict[int, float]:
    with open(run / "metrics.csv", newline="") as handle:
        return {int(row["step"]): float(row[key]) for row in csv.DictReader(handle)
                if row.get(key)}


def test_a_finished_run_extended_follows_the_longer_runs_schedule(finished, capsys):
    before = _logged(finished, "train/loss")
    assert main(["pretrain", "--config", str(finished / "config.yaml"), "--output",
                 str(finished), "--extend-to", "4"]) == 0
    printed = capsys.readouterr()
    assert "extending the run from 2 to 4 epochs: from epoch 3 on" in printed.err
    last = printed.out.splitlines()[-1]  # the finished run's last line: how to go on
    assert last.startswith("train longer: ") and f"--output {finished} --extend-to 8" in last
    state = torch.load(finished / "checkpoints" / "last.ckpt", weights_only=False)
    assert state["epoch"] == 3 and state["global_step"] == 16
    assert state["contrastkit"]["schedule"]["max_epochs"] == 4
    record = json.loads((finished / "resumes.jsonl").read_text())
    assert (record["epoch"], record["step"]) == (2, 8)
    assert record["changed"]["trainer.max_epochs"] == {"then": 2, "now": 4}
    config = yaml.safe_load((finished / "config.yaml").read_text())
    assert config["trainer"]["max_epochs"] == 4  # the run is now a 4-epoch run

    loss = _logged(finished, "train/loss")
    assert {s: v for s, v in loss.items() if s < 8} == before  # the first part kept as it was
    assert sorted(loss) == list(range(16))  # then steps 8-15, each once
    # from the extension's first step on, the learning rate of a 16-step run (same warm-up)
    optimizer = config["model"]["optimizer"]
    peak = optimizer["base_lr"] * config["data"]["batch_size"] / 256
    warmup = round(optimizer["warmup_epochs"] * 16 / 4)
    rates = _logged(finished, "lr-SGD/decay")
    for step in range(8, 16):
        expected = warmup_cosine(step, 16, warmup, peak, optimizer["final_lr_ratio"] * peak)
        assert math.isclose(rates[step], expected, rel_tol=1e-9), step
    assert extensions(finished) == [(2, 2, 4)]  # what summary.png marks with a dashed line
    assert (finished / "summary.png").stat().st_mtime >= (finished / "resumes.jsonl").stat(
        ).st_mtime
    # the figure drawn after the extension was given it: its caption explains the dashed line
    assert "Dashed: the run was extended (--extend-to)" in figure_caption(finished / "summary.png")
