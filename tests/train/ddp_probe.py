"""Callbacks that the multi-process pretraining tests add through the command line.

``--trainer.callbacks+ ddp_probe.RecordViews`` and ``ddp_probe.StopAfter`` (this folder on
``PYTHONPATH``) run inside every process that Lightning's DDP launcher starts.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch


class RecordViews(L.Callback):
    """Save, per process and epoch, the views of the first training batch and the crop boxes
    drawn for its online view (``views-r<rank>-e<epoch>.pt`` in ``folder``): they show what
    each process's augmentations drew."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)

    def on_fit_start(self, trainer, pl_module) -> None:
        views, probe = pl_module.train_views, self

        class Recording(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = views

            def forward(self, x):
                out = self.inner(x)
                if trainer.fit_loop.epoch_loop.batch_idx == 0:
                    probe.folder.mkdir(parents=True, exist_ok=True)
                    name = f"views-r{trainer.global_rank}-e{trainer.current_epoch}.pt"
                    boxes = views.online.steps[0].last_params["boxes"]
                    torch.save({"views": [v.detach().cpu() for v in out],
                                "boxes": boxes.detach().cpu()}, probe.folder / name)
                return out

        pl_module.train_views = Recording()


class StopAfter(L.Callback):
    """Stop once ``epochs`` epochs are done (their checkpoint written): an interrupted run."""

    def __init__(self, epochs: int) -> None:
        self.epochs = epochs

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.current_epoch + 1 >= self.epochs:
            trainer.should_stop = True
