"""Issue 52 items 7 and 8: what a run names when it ends exists, a printed next step runs as
printed, and a run folder or checkpoint of the wrong kind is named for what it is.

At 0f3dae1: a resume of another folder's checkpoint into a new ``--output`` ended naming a
``checkpoints/best.ckpt`` that was not there; ``--trainer.max_epochs 0`` exited 0 with
"pretraining done" and listed files never written; a ``last.ckpt`` that is a folder was "no
checkpoint at"; a ``--data.root`` that is a file "does not exist"; after ``--extend-to`` the
printed evaluation command wrote into the earlier evaluation's folder and was refused.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
import torch
from pretrain_args import TINY, StopAfterEpochs, method_args

from contrastkit.cli import main
from contrastkit.cli.pretrain import build
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


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_resume_into_a_new_folder_names_no_best_checkpoint_that_is_not_there(
        stopped_run, tmp_path, monkeypatch, capsys):
    real = module_mod.knn_predict

    def wrong(bank, bank_y, query, **kw):  # the resumed epoch scores 0: no new best
        pred, scores = real(bank, bank_y, query, **kw)
        return torch.full_like(pred, -1), scores

    monkeypatch.setattr(module_mod, "knn_predict", wrong)
    before = {p.name: p.read_bytes() for p in (stopped_run / "checkpoints").iterdir()}
    new = tmp_path / "new"
    assert main(["pretrain", *_args(new, "--resume",
                                    str(stopped_run / "checkpoints" / "last.ckpt"))]) == 0
    done = next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("pretraining done: 2 epochs"))
    assert not (new / "checkpoints" / "best.ckpt").exists()
    assert "checkpoints/best.ckpt" not in done, done
    assert done.endswith(", before the resume: its checkpoint is not in this folder)"), done
    # the run resumed from is left as it was
    assert {p.name: p.read_bytes() for p in (stopped_run / "checkpoints").iterdir()} == before


def test_a_run_of_no_epochs_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    err = _error(capsys, ["pretrain", *_args(out, epochs=0)])
    assert err == ("contrastkit pretrain: error: trainer.max_epochs is 0: the run would train "
                   "nothing and write no checkpoint; give 1 or more")
    assert not out.exists()


def test_a_last_checkpoint_that_is_a_folder_is_named_with_the_way_out(stopped_run, tmp_path,
                                                                      capsys):
    run = tmp_path / "run"
    shutil.copytree(stopped_run, run)
    last = run / "checkpoints" / "last.ckpt"
    last.unlink()
    last.mkdir()
    err = _error(capsys, ["pretrain", *_args(run, "--resume", "last")])
    assert err == (f"contrastkit pretrain: error: --resume last: {last} is a folder, not a "
                   "checkpoint, and the run writes its last checkpoint there: move it away; "
                   "--resume last then continues from the intact one of best.ckpt with the "
                   "most steps")
    last.rmdir()  # moved away: the intact best.ckpt (epoch 1) is resumed, the run finishes
    assert main(["pretrain", *_args(run, "--resume", "last")]) == 0
    assert torch.load(last, weights_only=True)["global_step"] == 4


def test_a_data_root_that_is_a_file_says_so(tmp_path, capsys):
    root = tmp_path / "images.txt"
    root.write_text("not a folder\n")
    err = _error(capsys, ["pretrain", *_args(tmp_path / "run", "--data.dataset", "folder",
                                             "--data.root", str(root))])
    assert err == (f"contrastkit pretrain: error: image folder {root} is a file, not a folder "
                   "(of one sub-folder of images per class)")


def test_the_printed_evaluation_after_an_extension_runs_as_printed(tiny_run, tmp_path, capsys):
    """Issue 52 item 8: the ``next:`` command of the extended run named the first evaluation's
    folder, and ``eval`` refused it ("not empty ... pass --overwrite")."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    evaluations = Path(f"{run}-eval")
    # the evaluation the finished run printed, run as printed
    assert main(["eval", "knn", "--checkpoint", str(run / "checkpoints" / "last.ckpt"),
                 "--data", "digits", "--baselines", "--output", str(evaluations / "knn"),
                 "--no-cache", "--quiet"]) == 0
    assert main(["pretrain", "--config", str(run / "config.yaml"), "--output", str(run),
                 "--extend-to", "3"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("next:"))
    command = shlex.split(line.removeprefix("next:"))
    assert command[:3] == ["contrastkit", "eval", "knn"]
    assert command[-2:] == ["--output", str(evaluations / "knn-2")]
    assert main([*command[1:], "--no-cache", "--quiet"]) == 0, capsys.readouterr().err
    assert (evaluations / "knn" / "results.json").is_file()  # the first one is kept
