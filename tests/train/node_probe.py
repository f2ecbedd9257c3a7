"""Callbacks that the two-node tests add through the command line (``--trainer.callbacks+
node_probe.X``, this folder on ``PYTHONPATH``); they run inside each node's process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import lightning as L
import torch

from contrastkit.outputs import LOCK_FILE


class RecordStart(L.Callback):
    """Save, per process, what it holds when training starts (``start-r<rank>.pt`` in
    ``folder``): its rank and process id, the run folder's lock file's text (its holder's id),
    the weights and the optimiser state (after a resume: what was restored)."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)

    def on_train_start(self, trainer, pl_module) -> None:
        lock = Path(trainer.default_root_dir) / LOCK_FILE
        self.folder.mkdir(parents=True, exist_ok=True)
        torch.save({"rank": trainer.global_rank, "pid": os.getpid(),
                    "lock": lock.read_text().strip() if lock.is_file() else None,
                    "state_dict": {k: v.detach().clone() for k, v in
                                   pl_module.state_dict().items()},
                    "optimizer": trainer.optimizers[0].state_dict()},
                   self.folder / f"start-r{trainer.global_rank}.pt")


class HoldAtEpoch(L.Callback):
    """At the start of epoch ``epoch`` (counted from 0; the checkpoint of the epoch before it
    is written), write ``ready-r<rank>`` in ``folder`` (this process's id and its parent's,
    the node's ``torchrun``), then wait (at most 10 minutes) for a file ``go`` there: the test
    kills a node meanwhile, at a known moment."""

    def __init__(self, folder: str, epoch: int) -> None:
        self.folder, self.epoch = Path(folder), epoch

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if trainer.current_epoch != self.epoch:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"ready-r{trainer.global_rank}").write_text(
            f"{os.getpid()} {os.getppid()}")
        deadline = time.monotonic() + 600
        while not (self.folder / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
