"""The run's time left, after each epoch, in both progress modes (issue 19, item 5)."""

from __future__ import annotations

import re

from pretrain_args import TINY, method_args

from contrastkit.cli.pretrain import pretrain


def test_time_left_is_the_mean_of_the_last_three_epochs_times_the_epochs_to_go():
    from contrastkit.train.progress import time_left

    assert time_left([], 0, 10) == ""
    assert time_left([600.0], 1, 10) == "~90 min left"  # 9 epochs of 10 min
    assert time_left([900.0, 60.0, 60.0, 120.0], 4, 10) == "~8 min left"  # 6 x 80 s
    assert time_left([20.0], 1, 3) == "<1 min left"
    assert time_left([60.0], 3, 3) == ""  # nothing left


def test_both_progress_modes_show_the_time_left(tmp_path, capsys):
    args = [*TINY, *method_args("SimCLR"), "--trainer.max_epochs", "2"]
    pretrain([*args, "--output", str(tmp_path / "lines")])
    out = capsys.readouterr().out
    first, last = (line for line in out.splitlines() if line.startswith("epoch "))
    assert re.search(r"epoch 1/2 \(step 4, [\d.]+ s of which monitors [\d.]+ s, <1 min left\)",
                     first)
    assert "left" not in last
    bar = [a for a in args if a not in ("--trainer.enable_progress_bar", "false")]
    pretrain([*bar, "--trainer.enable_progress_bar", "true", "--output", str(tmp_path / "bar")])
    assert "left=<1 min" in capsys.readouterr().out
