"""Issue 53 item 7: nothing runs for an online monitor that is off. The backbone's features
outside training (the monitors' pass) are counted: none with both monitors off, the queries
alone for the online classifier, bank and queries for the kNN monitor, and only on the epochs
``trainer.check_val_every_n_epoch`` names. A run without monitors still checkpoints, draws its
summary, says what to run next and resumes exactly."""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
import torch
from pretrain_args import TINY, method_args

from contrastkit.cli.next_steps import finished_lines
from contrastkit.cli.pretrain import build

OFF = ["--model.online_eval.knn", "false", "--model.online_eval.linear", "false"]


class EvalRows(L.Callback):
    """Images the backbone encodes outside training (eval mode), per epoch."""

    def __init__(self) -> None:
        self.per_epoch: dict[int, int] = {}
        self.validation_batches = 0

    def on_fit_start(self, trainer, pl_module) -> None:
        def count(module, inputs, output) -> None:
            if not module.training:
                epoch = trainer.current_epoch
                self.per_epoch[epoch] = self.per_epoch.get(epoch, 0) + inputs[0].shape[0]

        pl_module.method.backbone.register_forward_hook(count)

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx,
                                  dataloader_idx: int = 0) -> None:
        self.validation_batches += 1


def _fit(out: Path, *extra: str, epochs: int = 2) -> tuple[object, EvalRows]:
    cli, _ = build([*TINY, *method_args("SimCLR"), "--output", str(out),
                    "--trainer.max_epochs", str(epochs), *extra])
    rows = EvalRows()
    cli.trainer.callbacks.append(rows)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return cli, rows


def test_no_feature_is_extracted_when_every_monitor_is_off(tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO)
    out = tmp_path / "run"
    cli, rows = _fit(out, *OFF)
    assert rows.per_epoch == {} and rows.validation_batches == 0
    assert cli.datamodule.val_set is not None  # the split is there: the monitors are off
    assert cli.trainer.val_dataloaders in (None, [])
    assert any("online monitors: none runs (model.online_eval.knn and "
               "model.online_eval.linear are false): no validation pass" in r.getMessage()
               for r in caplog.records)
    epoch_lines = [line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("epoch ")]
    assert len(epoch_lines) == 2 and not any("monitors" in line for line in epoch_lines)
    # what a run needs still works without a monitor: its checkpoint (no best: nothing
    # chose one), its summary figure, its last lines with the next command
    assert (out / "checkpoints" / "last.ckpt").is_file()
    assert not (out / "checkpoints" / "best.ckpt").exists()
    assert (out / "summary.png").is_file()
    lines = finished_lines(cli.trainer, cli.datamodule, out)
    assert "kNN monitor" not in lines and "monitors:" not in lines
    assert f"{out}/summary.png (loss per epoch)" in lines
    assert "next:    contrastkit eval knn --checkpoint" in lines


def test_the_online_classifier_alone_reads_the_queries_only(tmp_path):
    cli, rows = _fit(tmp_path / "run", "--model.online_eval.knn", "false", epochs=1)
    queries = len(cli.datamodule.val_set)
    assert len(cli.datamodule.bank_set) > 0
    assert rows.per_epoch == {0: queries}
    metrics = cli.trainer.callback_metrics
    assert "val/online_linear_top1" in metrics and "val/knn_top1" not in metrics


def test_the_knn_monitor_runs_on_the_epochs_check_val_every_n_epoch_names(tmp_path, capsys,
                                                                        caplog):
    caplog.set_level(logging.INFO)
    out = tmp_path / "run"
    cli, rows = _fit(out, "--model.online_eval.linear", "false",
                     "--trainer.check_val_every_n_epoch", "2", epochs=5)
    data = cli.datamodule
    # epochs 2 and 4 (0-based 1 and 3), bank and queries each time; epoch 5 is not a multiple
    assert rows.per_epoch == {1: len(data.bank_set) + len(data.val_set),
                              3: len(data.bank_set) + len(data.val_set)}
    assert any(f"online monitors: kNN (k 200, bank of {len(data.bank_set)} images), scored on "
               f"the {len(data.val_set)} images of data.val_split test every 2 epochs "
               "(trainer.check_val_every_n_epoch)" in r.getMessage() for r in caplog.records)
    epoch_lines = [line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("epoch ")]
    assert ["of which monitors" in line for line in epoch_lines] == [False, True, False, True,
                                                                      False]
    assert (out / "checkpoints" / "best.ckpt").is_file()
    lines = finished_lines(cli.trainer, cli.datamodule, out).splitlines()
    assert lines[0].startswith("pretraining done: 5 epochs (20 optimiser steps), kNN monitor")
    assert lines[2].startswith("monitors: 2 passes, ") and "s each on average" in lines[2]


def test_a_run_without_monitors_resumes_exactly(tmp_path):
    """2 epochs straight == 1 epoch, stop, resume, with both monitors off."""
    from pretrain_args import StopAfterEpochs

    from contrastkit.cli.pretrain import pretrain

    args = [*TINY, *method_args("SimCLR"), "--trainer.max_epochs", "2", *OFF]
    pretrain([*args, "--output", str(tmp_path / "straight")])
    cli, _ = build([*args, "--output", str(tmp_path / "split")])
    cli.trainer.callbacks.append(StopAfterEpochs(1))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    pretrain([*args, "--output", str(tmp_path / "split"), "--resume", "last"])
    a, b = (torch.load(tmp_path / name / "checkpoints" / "last.ckpt", weights_only=False)
            for name in ("straight", "split"))
    assert a["global_step"] == b["global_step"] == 8
    for key, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][key], value, rtol=1e-5, atol=1e-6, msg=key)


def test_a_resumed_run_prints_no_line_for_the_epoch_its_checkpoint_ended(tmp_path, capsys):
    """A validating epoch is checkpointed at its validation's end, before Lightning's own
    epoch end: resuming it runs that epoch's end again with no batch. No line, no time."""
    from pretrain_args import StopAfterEpochs

    from contrastkit.cli.pretrain import pretrain

    args = [*TINY, *method_args("SimCLR"), "--trainer.max_epochs", "3",
            "--model.online_eval.linear", "false", "--trainer.check_val_every_n_epoch", "2",
            "--output", str(tmp_path / "run")]
    cli, _ = build(args)
    cli.trainer.callbacks.append(StopAfterEpochs(2))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    capsys.readouterr()
    pretrain([*args, "--resume", "last"])
    epoch_lines = [line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("epoch ")]
    assert len(epoch_lines) == 1 and epoch_lines[0].startswith("epoch 3/3 (step 12, ")
    assert "train/loss" in epoch_lines[0]
