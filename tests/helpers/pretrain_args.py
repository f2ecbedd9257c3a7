"""Tiny pretraining settings shared by the engine tests (a few seconds each on CPU)."""

from __future__ import annotations

import lightning as L

TINY = [
    "--data.dataset", "digits", "--data.batch_size", "32", "--data.subset", "128",
    "--data.monitor_bank_size", "128",
    "--model.views.size", "8",
    "--trainer.accelerator", "cpu", "--trainer.devices", "1",
    "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1",
]


def method_args(name: str, **extra: object) -> list[str]:
    """CLI arguments selecting a tiny method ``name`` with ``extra`` init args (a tiny MLP
    projector unless ``extra`` gives one: DINO's head takes other keys)."""
    args = [
        "--model.method", f"contrastkit.methods.{name}",
        "--model.method.backbone", '{"name": "small_convnet", "width": 8, "out_dim": 16}',
    ]
    if "projector" not in extra:
        args += ["--model.method.projector", '{"hidden_dim": 16, "out_dim": 8}']
    for key, value in extra.items():
        args += [f"--model.method.{key}", str(value)]
    return args


class StopAfterEpochs(L.Callback):
    """Simulate an interruption: stop once ``n`` epochs are done (their checkpoint written)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.current_epoch + 1 >= self.n:
            trainer.should_stop = True
