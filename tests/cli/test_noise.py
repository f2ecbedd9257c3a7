"""Issue 37 item 9: what a command prints is about the run. ``pretrain`` prints no Lightning
accelerator lines, model summary or logging-interval warning, its bar counts epochs from 1 as
its summary lines do, and it ends with where the results are and what to run next; the
skipped-files warning comes once per evaluation."""

from __future__ import annotations

import re
import warnings

from own_images import make_own_folder
from tiny_run import TINY_PRETRAIN

from contrastkit.cli import main


def test_pretrain_prints_the_run_and_what_to_do_next(tmp_path, capfd):
    out = tmp_path / "run"
    argv = [a for a in TINY_PRETRAIN if a != "--trainer.enable_progress_bar"]
    argv.remove("false")  # the progress bar on, as a user's terminal shows it
    assert main(["pretrain", *argv, "--trainer.log_every_n_steps", "50", "--output",
                 str(out)]) == 0
    printed = capfd.readouterr()
    text = printed.out + printed.err
    for noise in ("GPU available", "TPU available", "Trainable params", "log_every_n_steps",
                  "max_epochs=2` reached", "Epoch 0"):
        assert noise not in text, noise
    assert "epoch 1/2" in text and "epoch 2/2" in text
    last = printed.out.strip().splitlines()[-6:]
    assert last[0].startswith("pretraining done: 2 epochs (8 optimiser steps), kNN monitor "
                              "top-1 ")
    # no loss logged in 8 steps at an interval of 50: no summary.png drawn, none named (issue
    # 52 item 7: it was named)
    assert not (out / "summary.png").exists()
    assert last[1] == (f"results: {out}/checkpoints/last.ckpt, {out}/metrics.csv, "
                       f"{out}/config.yaml")
    assert last[2].startswith("monitors: 2 passes, ")  # what the monitors cost
    assert last[3] == (f"next:    contrastkit eval knn --checkpoint {out}/checkpoints/last.ckpt "
                       f"--data digits --baselines --output {out}-eval/knn")
    assert last[5].startswith(f"train longer: contrastkit pretrain --config {out}/config.yaml ")
    assert f"--output {out} --extend-to 4" in last[5]


def test_the_skipped_files_warning_comes_once_per_evaluation(tiny_checkpoint, tmp_path, capsys):
    photos = make_own_folder(tmp_path / "photos", per_class=6, corrupt=2, sizes=((8, 8),))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every warning issued is recorded, none hidden
        assert main(["eval", "knn", "--checkpoint", str(tiny_checkpoint), "--data", "folder",
                     "--root", str(photos), "--skip-corrupt", "--test-fraction", "0.25",
                     "--k", "3", "--no-cache", "--quiet"]) == 0
    skipped = [w for w in caught if re.match(r"skipped 2 unreadable", str(w.message))]
    assert len(skipped) == 1, [str(w.message) for w in caught]
    assert "| skipped unreadable files | 2" in capsys.readouterr().out
