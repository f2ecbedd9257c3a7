"""Training a run longer: ``contrastkit pretrain --output RUN --extend-to EPOCHS``.

A run's learning-rate schedule (warm-up, then cosine decay to ``final_lr_ratio``) and the
schedules of its method (SCE's momentum, for one) are functions of the run's length, so a
plain ``--resume`` refuses another ``trainer.max_epochs``. An extension changes the length on
purpose, with this schedule, stated here and in ``docs/configs.md``:

* the run continues from its checkpoint (weights, optimiser state, queue, random state, step
  count) in its own folder, and becomes a run of ``EPOCHS`` epochs: from the epoch it had
  reached on, every schedule is that of a run planned for ``EPOCHS`` epochs with the same
  warm-up (not repeated: it is over), so the learning rate goes up from where the shorter run
  ended to the value the longer run has at that epoch, then decays to the longer run's end;
* nothing else may change (a resume's checks apply: data, seed, method, optimiser);
* the change is recorded in ``RUN/resumes.jsonl`` (with the epoch it took effect), the run's
  ``config.yaml`` takes the new length, and ``summary.png`` marks where the extension starts.

For training on with other settings, start a new run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import lightning as L

from contrastkit.train.run_identity import RESUMES

#: The key an extension changes.
LENGTH = "trainer.max_epochs"


def recorded_schedule(checkpoint: Mapping) -> dict:
    """The schedule a pretraining checkpoint records (``max_epochs``, ``max_steps``, the
    resolved ``optimizer``); empty for checkpoints written before it was recorded."""
    return dict((checkpoint.get("contrastkit") or {}).get("schedule") or {})


def epochs_done(checkpoint: Mapping) -> int:
    """Epochs a checkpoint written at an epoch's end has completed."""
    return int(checkpoint.get("epoch", -1)) + 1


def is_finished(checkpoint: Mapping) -> bool:
    """Whether the run of ``checkpoint`` reached its ``max_epochs`` (False when not recorded)."""
    max_epochs = recorded_schedule(checkpoint).get("max_epochs")
    return bool(max_epochs) and max_epochs > 0 and epochs_done(checkpoint) >= max_epochs


def extension_args(checkpoint: Mapping, epochs: int, path: str) -> list[str]:
    """The options that make the resumed run one of ``epochs`` epochs with the checkpoint's
    warm-up (appended to the command line, so they win over the config's).

    Raises:
        ValueError: when the run is measured in steps, its length is not recorded, or
            ``epochs`` is not more than the epochs it has (one line, with what to do).
    """
    schedule = recorded_schedule(checkpoint)
    then = schedule.get("max_epochs")
    if not then or then < 1:
        raise ValueError(f"--extend-to: {path} does not record its number of epochs (a "
                         "checkpoint of an older version or of a run measured in "
                         "trainer.max_steps); start a new run")
    if schedule.get("max_steps") not in (None, -1):
        raise ValueError(f"--extend-to: the run of {path} is measured in trainer.max_steps "
                         f"({schedule['max_steps']}); start a new run")
    done = epochs_done(checkpoint)
    if epochs <= max(then, done):
        raise ValueError(f"--extend-to {epochs}: the run of {path} has {then} epochs (done: "
                         f"{done}); give more, e.g. --extend-to {2 * then}")
    optimizer = schedule.get("optimizer") or {}
    args = [f"--{LENGTH}", str(epochs)]
    if optimizer.get("warmup_epochs") is not None:
        args += ["--model.optimizer.warmup_epochs", str(optimizer["warmup_epochs"]),
                 "--model.optimizer.warmup_fraction", "null"]
    return args


def how_to_extend(run: Path, epochs: int) -> str:
    """The command that trains the run in folder ``run`` (of ``epochs`` epochs) longer."""
    return (f"contrastkit pretrain --config {run / 'config.yaml'} --output {run} --extend-to "
            f"{2 * epochs}")


def extensions(run: Path) -> list[tuple[int, int, int]]:
    """``(epoch, then, now)`` of each extension recorded in ``run/resumes.jsonl``: it took
    effect after ``epoch`` completed epochs, from ``then`` to ``now`` epochs."""
    path = run / RESUMES
    if not path.is_file():
        return []
    found = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut off by a kill: the others still count
        change = (record.get("changed") or {}).get(LENGTH)
        if isinstance(change, Mapping) and record.get("epoch") is not None:
            found.append((int(record["epoch"]), int(change["then"]), int(change["now"])))
    return found


class ExtendedSchedule(L.Callback):
    """Start the extension on the longer run's schedule: the restored optimiser holds the
    learning rate the shorter run ended with (its scheduler has not stepped since), so before
    the first step each group's rate is set to what the scheduler, built for the longer run,
    gives at the restored step."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for config in trainer.lr_scheduler_configs:
            scheduler = config.scheduler
            lambdas = getattr(scheduler, "lr_lambdas", None)
            if lambdas is None:
                continue
            step = scheduler.last_epoch
            rates = [base * factor(step) for base, factor in
                     zip(scheduler.base_lrs, lambdas, strict=True)]
            for group, rate in zip(scheduler.optimizer.param_groups, rates, strict=True):
                group["lr"] = rate
            scheduler._last_lr = rates  # what get_last_lr() and the rate monitor report
