"""`contrastkit pretrain` and its run folder: one run per folder, nothing written before the
configuration is valid, resumed metrics without replayed rows, readable files, quiet output."""

from __future__ import annotations

import csv
import logging
import os
import shutil
import warnings
from pathlib import Path

import lightning as L
import pytest
from own_images import make_own_folder
from pretrain_args import TINY, method_args

from contrastkit.cli import main
from contrastkit.cli.pretrain import build, pretrain
from contrastkit.outputs import file_mode


def _args(out: Path, *extra: str, epochs: int = 1, method: str = "SimCLR") -> list[str]:
    return [*TINY, *method_args(method), "--trainer.max_epochs", str(epochs),
            "--output", str(out), *extra]


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _loss_steps(path: Path) -> list[int]:
    return [int(r["step"]) for r in _rows(path) if r.get("train/loss")]


def test_overwrite_replaces_the_earlier_run_and_nothing_else(tmp_path):
    out = tmp_path / "run"
    pretrain(_args(out, epochs=2))
    assert _loss_steps(out / "metrics.csv") == list(range(8))
    with pytest.raises(FileExistsError,
                       match=r"already holds a finished run.*--extend-to N.*--overwrite"):
        build(_args(out))
    pretrain(_args(out, "--overwrite"))
    assert _loss_steps(out / "metrics.csv") == list(range(4))  # the 2-epoch run's rows are gone
    events = list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) <= 1  # no second run's event file next to the first one's
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"notes\.txt"):
        build(_args(out, "--overwrite"))
    assert (out / "notes.txt").read_text() == "mine" and (out / "checkpoints").is_dir()


def test_a_non_empty_folder_without_a_run_is_refused(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text("left by a failed start\n")
    with pytest.raises(FileExistsError, match=r"not empty \(config\.yaml\).*--overwrite"):
        build(_args(out))


@pytest.mark.parametrize(("extra", "error", "message"), [
    (("--model.method.temperature", "-1"), ValueError,
     r"^SimCLR: temperature must be finite and > 0, got -1"),
    (("--data.dataset", "folder", "--data.root", "no/such/folder"), FileNotFoundError,
     r"^image folder no/such/folder does not exist$"),
])
def test_a_bad_config_fails_before_anything_is_written(tmp_path, extra, error, message):
    out = tmp_path / "run"
    with pytest.raises(error, match=message):
        pretrain(_args(out, *extra))
    assert not out.exists()


class _CopyAfterFirstEpoch(L.Callback):
    """Keep the checkpoint of epoch 1 (the run goes on and logs more rows after it)."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.current_epoch == 1:
            shutil.copy(Path(trainer.default_root_dir) / "checkpoints" / "last.ckpt", self.target)


def test_resume_drops_the_rows_logged_after_the_checkpoint(tmp_path):
    out, epoch1 = tmp_path / "run", tmp_path / "epoch1.ckpt"
    cli, _ = build(_args(out, epochs=3))
    cli.trainer.callbacks.append(_CopyAfterFirstEpoch(epoch1))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    straight = _rows(out / "metrics.csv")
    assert _loss_steps(out / "metrics.csv") == list(range(12))
    pretrain(_args(out, "--resume", str(epoch1), epochs=3))  # replays steps 4..11
    resumed = _rows(out / "metrics.csv")
    assert _loss_steps(out / "metrics.csv") == list(range(12))  # each step once
    assert [(r["epoch"], r["step"]) for r in resumed] == [(r["epoch"], r["step"]) for r in straight]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    steps = [e.step for e in events.Scalars("train/loss")]
    assert sorted(steps) == list(range(12))  # the replayed steps are purged once


def test_a_failed_resume_leaves_the_run_as_it_was(tmp_path):
    out = tmp_path / "run"
    pretrain(_args(out))
    before = {p.name: p.read_bytes() for p in (out / "config.yaml", out / "metrics.csv")}
    wider = [*_args(out, "--resume", "last"), "--model.method.backbone",
             '{"name": "small_convnet", "width": 16, "out_dim": 16}']
    with pytest.raises(ValueError, match=r"model differs.*--config .*run/config\.yaml"):
        pretrain(wider)
    assert {p.name: p.read_bytes() for p in (out / "config.yaml", out / "metrics.csv")} == before
    truncated = tmp_path / "cut.ckpt"
    truncated.write_bytes((out / "checkpoints" / "last.ckpt").read_bytes()[:4000])
    with pytest.raises(ValueError, match=r"cut\.ckpt is not a readable checkpoint"):
        build(_args(out, "--resume", str(truncated)))


def test_run_files_are_readable_like_any_other_file(tmp_path):
    out = tmp_path / "run"
    pretrain(_args(out))
    expected = file_mode()
    assert expected == 0o666 & ~_umask()
    for path in (out / "checkpoints" / "last.ckpt", out / "loss_curve.png", out / "metrics.csv"):
        assert path.stat().st_mode & 0o777 == expected, path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_one_line_per_epoch_and_no_known_noise(tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pretrain(_args(tmp_path / "run", epochs=2))
    stdout = capsys.readouterr().out
    lines = [line for line in stdout.splitlines() if line.startswith("epoch ")]
    assert [line.split(" (")[0] for line in lines] == ["epoch 1/2", "epoch 2/2"]
    assert all("train/loss" in line and "val/knn_top1" in line for line in lines)
    noise = ("LightningCLI's args parameter", "Unable to serialize", "LeafSpec")
    assert not [str(w.message) for w in caught if any(n in str(w.message) for n in noise)]
    assert not [r for r in caplog.records if "Tip:" in r.getMessage()]
    assert "Unable to serialize" not in (tmp_path / "run" / "config.yaml").read_text()


def test_help_lists_the_run_folder_options(capsys):
    with pytest.raises(SystemExit):
        build(["--help"])
    out = capsys.readouterr().out
    for option in ("--output DIR", "--resume PATH|last", "--overwrite"):
        assert option in out


def test_own_folder_with_unreadable_files_and_unlabelled_images(tmp_path, capsys, recwarn):
    own = make_own_folder(tmp_path / "own", sizes=((8, 8),), corrupt=2)
    folder = ["--data.dataset", "folder", "--data.root", str(own), "--data.test_fraction", "0.25"]
    code = main(["pretrain", *_args(tmp_path / "strict", *folder)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "apple_broken0.jpg" in err and "--data.skip_corrupt true" in err
    assert not (tmp_path / "strict").exists()
    pretrain(_args(tmp_path / "skip", *folder, "--data.skip_corrupt", "true"))
    listed = (tmp_path / "skip" / "skipped_files.txt").read_text().splitlines()
    assert sorted(Path(p).name for p in listed) == ["apple_broken0.jpg", "bear_broken1.jpg"]
    flat = make_own_folder(tmp_path / "flat", per_class=8, sizes=((8, 8),), labelled=False)
    cli = pretrain(_args(tmp_path / "unlabelled", "--data.dataset", "folder", "--data.root",
                         str(flat)))
    assert (tmp_path / "unlabelled" / "checkpoints" / "last.ckpt").is_file()
    assert cli.model.num_classes == 0 and "val/knn_top1" not in cli.trainer.callback_metrics
    assert not [w for w in recwarn if "across ranks is zero" in str(w.message)]  # no monitor
