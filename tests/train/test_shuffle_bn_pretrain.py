"""``contrastkit pretrain`` with shuffled key batch norm (``model.method.shuffle_bn``) resumes
exactly: the permutation generator is saved in the checkpoint, so a run interrupted after one
epoch and resumed draws the permutations an uninterrupted run draws."""

from __future__ import annotations

import lightning as L
import torch
from pretrain_args import TINY, method_args

from contrastkit.cli.pretrain import build, pretrain


class _StopAfterFirstEpoch(L.Callback):
    def on_train_epoch_end(self, trainer, pl_module) -> None:
        trainer.should_stop = True


def _last(path) -> dict:
    return torch.load(path / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)


def test_resume_with_shuffle_bn_is_exact(tmp_path):
    def args(name: str, seed: int = 0, epochs: int = 2) -> list[str]:
        return [*TINY, *method_args("SCE", queue_size=48, shuffle_bn=4), "--seed_everything",
                str(seed), "--model.online_eval.knn", "false", "--trainer.max_epochs",
                str(epochs), "--output", str(tmp_path / name)]

    pretrain(args("straight"))
    cli, _ = build(args("split"))
    cli.trainer.callbacks.append(_StopAfterFirstEpoch())
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    first_epoch = _last(tmp_path / "split")
    assert first_epoch["global_step"] == 4
    pretrain([*args("split"), "--resume", "last"])
    pretrain(args("other_seed", seed=1, epochs=1))

    a, b = _last(tmp_path / "straight"), _last(tmp_path / "split")
    assert a["global_step"] == b["global_step"] == 8
    key = "method.key_shuffle._extra_state"
    for name, value in a["state_dict"].items():  # weights, EMA target, queue, generator
        torch.testing.assert_close(b["state_dict"][name], value, rtol=1e-5, atol=1e-6, msg=name)
    # the run's seed seeds the permutations
    other_seed = _last(tmp_path / "other_seed")["state_dict"][key]
    assert not torch.equal(first_epoch["state_dict"][key], other_seed)
