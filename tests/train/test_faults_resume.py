"""Issue 36: faults of a resumed run (docs/reliability.md counts them). A run folder copied
elsewhere keeps its best score; a resume on other data or another seed is refused, one that
changes only how the run is computed is recorded; bytes that are not UTF-8 at the end of
``metrics.csv`` are dropped like a cut row; a NaN names the epoch as the epoch lines count it.
Issue 52: a resume on an image folder whose files changed is refused, saying what changed.

The interrupted run (1 of 2 epochs done) is trained once; each test resumes its own copy."""

from __future__ import annotations

import csv
import json
import logging
import re
import shutil
from pathlib import Path

import pytest
import torch
from own_images import make_own_folder
from pretrain_args import TINY, StopAfterEpochs, method_args

from contrastkit.cli import main
from contrastkit.cli.pretrain import build, pretrain
from contrastkit.train import module as module_mod

pytestmark = pytest.mark.usefixtures("one_thread")


#: Two steps an epoch (64 digits in batches of 32).
SMALL = ["--data.subset", "64", "--data.monitor_bank_size", "64"]


def _args(out: Path, *extra: str, epochs: int = 2) -> list[str]:
    return [*TINY, *SMALL, *method_args("SCE"), "--trainer.max_epochs", str(epochs),
            "--output", str(out), *extra]


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 2 epochs stopped after its first (its checkpoints written)."""
    out = tmp_path_factory.mktemp("stopped") / "run"
    cli, _ = build(_args(out))
    cli.trainer.callbacks.append(StopAfterEpochs(1))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return out


@pytest.fixture
def copy(stopped_run: Path, tmp_path: Path) -> Path:
    """The stopped run, copied to another folder (``cp -r RUN COPY``)."""
    target = tmp_path / "copy"
    shutil.copytree(stopped_run, target)
    return target


def _best(folder: Path) -> tuple[int, float]:
    state = torch.load(folder / "checkpoints" / "best.ckpt", weights_only=True)
    entry = next(v for k, v in state["callbacks"].items() if k.startswith("BestCheckpoint"))
    return int(state["global_step"]), float(entry["best_model_score"])


def _loss_steps(path: Path) -> list[int]:
    with open(path, newline="") as handle:
        return [int(r["step"]) for r in csv.DictReader(handle) if r.get("train/loss")]


def test_a_copied_run_keeps_its_best_score_and_checkpoint(copy, monkeypatch, recwarn):
    """Lightning keyed the best score by the checkpoint folder's path: in a copy it was
    forgotten, and the first resumed epoch, however bad, replaced best.ckpt."""
    step, score = _best(copy)
    assert step == 2 and score > 0
    real = module_mod.knn_predict

    def wrong(bank, bank_y, query, **kw):  # the resumed epoch scores 0
        pred, scores = real(bank, bank_y, query, **kw)
        return torch.full_like(pred, -1), scores

    monkeypatch.setattr(module_mod, "knn_predict", wrong)
    cli = pretrain(_args(copy, "--resume", "last"))
    assert cli.trainer.global_step == 4
    assert _best(copy) == (step, score)  # best.ckpt is still epoch 1's
    best = next(c for c in cli.trainer.checkpoint_callbacks if c.monitor)
    assert best.best_model_path == str(copy / "checkpoints" / "best.ckpt")
    assert not any("dirpath has changed" in str(w.message) for w in recwarn)


@pytest.mark.parametrize(("extra", "line"), [
    (("--data.subset", "256"), "data.subset is 256 but the run was started with 64"),
    (("--seed_everything", "7"), "seed_everything is 7 but the run was started with 0"),
    (("--model.method.temperature", "0.2", "--data.monitor_bank_size", "32"),
     "data.monitor_bank_size is 32 but the run was started with 64; model.method.temperature "
     "is 0.2 but the run was started with 0.1"),
])
def test_a_resume_on_other_data_or_seed_or_method_is_refused_naming_the_keys(copy, capsys,
                                                                            extra, line):
    before = {p.name: p.read_bytes() for p in (copy / "config.yaml", copy / "checkpoints" /
                                                  "last.ckpt", copy / "metrics.csv")}
    assert main(["pretrain", *_args(copy, *extra, "--resume", "last")]) == 2
    err = capsys.readouterr().err
    assert line in err and err.count("\n") == 1, err
    assert f"--config {copy / 'config.yaml'}" in err
    after = {p.name: p.read_bytes() for p in (copy / "config.yaml", copy / "checkpoints" /
                                                 "last.ckpt", copy / "metrics.csv")}
    assert after == before  # the run's record is kept as it was


def test_a_resume_that_changes_how_the_run_is_computed_is_recorded_not_rewritten(copy):
    config = (copy / "config.yaml").read_bytes()
    pretrain(_args(copy, "--model.performance.channels_last", "false", "--resume", "last"))
    assert (copy / "config.yaml").read_bytes() == config  # the run's own config, as started
    [line] = (copy / "resumes.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["step"] == 2 and record["checkpoint"].endswith("last.ckpt")
    assert record["changed"] == {"model.performance": {
        "then": None, "now": {"channels_last": False, "compile": False,
                              "compile_mode": "default", "step": "eager"}}}


def test_bytes_that_are_not_utf8_at_the_end_of_metrics_do_not_block_resume(copy, recwarn):
    with open(copy / "metrics.csv", "ab") as handle:
        handle.write(b"\xff\xfe\x81\x00 what a damaged disk leaves\n\x80\x81\x82")
    pretrain(_args(copy, "--resume", "last"))
    assert _loss_steps(copy / "metrics.csv") == list(range(4))
    assert any(f"{copy / 'metrics.csv'}: dropped 2 incomplete row(s)" in str(w.message)
               for w in recwarn)


def test_a_nan_names_the_epoch_as_the_epoch_lines_count_it(tmp_path, capsys):
    """The first epoch is "epoch 1" in the epoch lines; the NaN message said "epoch 0"."""
    code = main(["pretrain", *TINY, *method_args("SimCLR"), "--output", str(tmp_path / "nan"),
                 "--trainer.max_epochs", "1", "--model.optimizer.warmup_epochs", "0",
                 "--model.optimizer.base_lr", "1e8"])
    assert code == 2
    line = next(ln for ln in capsys.readouterr().err.splitlines()
                if ln.startswith("contrastkit pretrain: error:"))
    assert re.search(r"NaN or infinite (at|by) step \d \(epoch 1\b", line), line


# --- issue 52, item 3: the files of an image folder ------------------------------------------
def _folder_args(root: Path, out: Path, *extra: str) -> list[str]:
    return ["--data.dataset", "folder", "--data.root", str(root), "--data.test_fraction", "0.2",
            "--data.batch_size", "8", "--model.views.size", "8", "--trainer.accelerator", "cpu",
            "--trainer.devices", "1", "--trainer.enable_progress_bar", "false",
            *method_args("SCE"), "--trainer.max_epochs", "2", "--output", str(out), *extra]


@pytest.fixture
def folder_run(tmp_path: Path) -> tuple[Path, Path]:
    """``(data.root, run)``: a held-out run on a folder of 2 x 20 images, stopped after 1 of 2
    epochs."""
    root = make_own_folder(tmp_path / "images", per_class=20, classes=("apple", "bear"),
                           sizes=((16, 16),))
    out = tmp_path / "run"
    cli, _ = build(_folder_args(root, out))
    cli.trainer.callbacks.append(StopAfterEpochs(1))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return root, out


def test_a_resume_on_a_folder_whose_images_changed_is_refused_saying_what_changed(
        folder_run, capsys, caplog):
    """At 0f3dae1 the resume was accepted without a word and the held-out split was drawn
    again from the new files: images held out before became training images. The refusal
    comes before the data is opened: no start line describes a run that does not start."""
    root, out = folder_run
    caplog.set_level(logging.INFO)
    caplog.clear()
    kept = {p: p.read_bytes() for p in (out / "config.yaml", out / "checkpoints" / "last.ckpt",
                                        out / "metrics.csv")}
    moved = sorted((root / "apple").iterdir())[:3]
    for path in moved:
        path.rename(path.with_suffix(".bak"))  # not an image extension: 3 apples fewer
    make_own_folder(root.parent / "extra", per_class=1, classes=("bear",), sizes=((16, 16),))
    (root.parent / "extra" / "bear" / "bear_0.png").rename(root / "bear" / "new.png")
    assert main(["pretrain", *_folder_args(root, out, "--resume", "last")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert (f"data.root {root} changed since the run started: 3 image(s) fewer in 'apple', "
            "1 image(s) more in 'bear';") in err
    assert f"--config {out / 'config.yaml'} --output NEW_FOLDER" in err
    assert {p: p.read_bytes() for p in kept} == kept  # nothing written
    assert not [r.getMessage() for r in caplog.records if "pretraining on" in r.getMessage()]
    (root / "bear" / "new.png").unlink()
    for path in moved:  # the files as they were: the run resumes
        path.with_suffix(".bak").rename(path)
    assert main(["pretrain", *_folder_args(root, out, "--resume", "last")]) == 0


def test_a_checkpoint_without_a_listing_resumes_with_a_note(folder_run, capsys):
    """Checkpoints written before the listing was recorded still resume (unchecked)."""
    root, out = folder_run
    last = out / "checkpoints" / "last.ckpt"
    state = torch.load(last, weights_only=True)
    assert state["callbacks"]["RunIdentity"]["data_listing"]["groups"]["apple"][0] == 20
    del state["callbacks"]["RunIdentity"]["data_listing"]
    torch.save(state, last)
    (root / "apple" / "apple_0.png").unlink()  # not seen: the checkpoint has nothing to check
    assert main(["pretrain", *_folder_args(root, out, "--resume", "last")]) == 0
    assert (f"note: --resume {last}: the checkpoint records no listing of data.root {root}"
            in capsys.readouterr().err)
    resumed = torch.load(last, weights_only=True)  # recorded from then on
    assert resumed["callbacks"]["RunIdentity"]["data_listing"]["groups"]["apple"][0] == 19
