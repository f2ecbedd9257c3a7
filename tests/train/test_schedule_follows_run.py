"""The learning-rate schedule follows the run's length (issue 19, item 1)."""

from __future__ import annotations

import pytest
import torch
from pretrain_args import TINY, method_args

from contrastkit.cli.pretrain import build, pretrain


def _args(tmp_path, *extra: str) -> list[str]:
    return [*TINY, *method_args("SimCLR"), "--output", str(tmp_path / "run"), *extra]


def test_a_warmup_longer_than_a_quarter_of_the_run_is_clipped_with_a_notice():
    from contrastkit.optim import resolve_warmup_epochs

    assert resolve_warmup_epochs(5.0, None, 100) == (5.0, None)
    epochs, notice = resolve_warmup_epochs(5.0, None, 6)
    assert epochs == 1.5
    assert "clipped to 1.5 epochs" in notice and "\n" not in notice
    assert resolve_warmup_epochs(5.0, 0.1, 30) == (pytest.approx(3.0), None)
    with pytest.raises(ValueError, match="warmup_fraction"):
        resolve_warmup_epochs(5.0, 1.5, 30)


def test_a_short_run_decays_to_the_final_rate_and_a_longer_resume_is_refused(tmp_path, capsys):
    """Two epochs with the default 5-epoch warm-up: warm-up clipped to half an epoch, so the
    cosine reaches final_lr_ratio (0) at the last step instead of never decaying."""
    pretrain(_args(tmp_path, "--trainer.max_epochs", "2"))
    assert "warm-up clipped to 0.5 epochs" in capsys.readouterr().err
    state = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)
    assert state["lr_schedulers"][0]["_last_lr"][0] == pytest.approx(0.0, abs=1e-9)
    assert state["contrastkit"]["schedule"]["optimizer"]["warmup_epochs"] == 0.5

    with pytest.raises(ValueError, match=r"trainer.max_epochs is 3 but the run was started "
                                         r"with 2.*learning-rate schedule"):
        build(_args(tmp_path, "--trainer.max_epochs", "3", "--resume", "last"))


def test_print_config_shows_the_resolved_optimizer(capsys):
    with pytest.raises(SystemExit) as exit_:
        build([*TINY, *method_args("SimCLR"), "--trainer.max_epochs", "8",
               "--model.optimizer.warmup_epochs", "4", "--print_config"])
    assert exit_.value.code == 0
    printed = capsys.readouterr().out
    assert "optimizer: null" not in printed
    assert "warmup_epochs: 2.0" in printed and "base_lr: 0.06" in printed
