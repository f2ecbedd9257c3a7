"""The planned cost of Part A: an estimate made before the runs, not a measured study cost.

CPU cost of one run = steps x CPU-seconds per step (:data:`STEP_SECONDS`, by config) + the
CPU-seconds of each of its evaluations (:data:`EVAL_SECONDS`); a run shared by several studies
(the SimCLR runs, the random-initialisation baseline) is counted once, in the first study that
lists it, with the union of the evaluations its studies need. :func:`planned_cost` sums this
per study and per lane (:data:`LANES`: two processes of one thread each, started together).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contrastkit.repro.studies import Study

#: Optimiser steps of one trained Part A run: 30 epochs of 39 full batches (10,000 images,
#: batch 256, the last partial batch dropped), and of the random-init baseline (1 step).
STEPS = {"trained": 30 * 39, "random_init": 1}

#: CPU-seconds per training step with one torch thread, batch 256, 32 px, ResNet-18 width 16
#: CIFAR stem, augmentation included, per config stem prefix (see docs/reproduction.md for
#: the measurement, its machine and load).
STEP_SECONDS: dict[str, float] = {"simclr": 1.76, "dystress": 1.74, "sce": 1.17, "moco": 1.18,
                                  "ressl": 1.17, "supcon": 1.82, "sincere": 1.97,
                                  "random_init": 1.76}

#: CPU-seconds of one evaluation of a width-16 checkpoint, start-up included.
EVAL_SECONDS: dict[str, float] = {"knn200": 60.0, "knn1": 60.0, "knn5": 60.0, "analyze": 90.0}

#: The two lanes of ``contrastkit repro cpu`` the plan assumes (``--study`` lists).
LANES = (("dystress", "temperature"), ("baselines", "sincere", "sce_lambda_tau"))


@dataclass(frozen=True)
class StudyCost:
    """Planned CPU-seconds of the runs a study adds (those not counted before it)."""

    study: str
    runs: int
    train_seconds: float
    eval_seconds: float

    @property
    def seconds(self) -> float:
        return self.train_seconds + self.eval_seconds


def _step_seconds(stem: str) -> float:
    for prefix, seconds in STEP_SECONDS.items():
        if stem.startswith(prefix):
            return seconds
    raise KeyError(f"no planned step cost for config {stem!r}")


def planned_cost(studies: Sequence[Study]) -> list[StudyCost]:
    """Per study, in order: the runs it adds over ``seeds x variants`` and their CPU-seconds."""
    evals: dict[tuple[str, int], set[str]] = {}
    owner: dict[tuple[str, int], str] = {}
    for study in studies:
        for seed in study.seeds:
            for v in study.variants:
                owner.setdefault((v.stem, seed), study.name)
                evals.setdefault((v.stem, seed), set()).update(v.evals)
    out = []
    for study in studies:
        keys = [k for k, name in owner.items() if name == study.name]
        train = sum(STEPS["random_init" if stem == "random_init" else "trained"]
                    * _step_seconds(stem) for stem, _ in keys)
        evaluation = sum(EVAL_SECONDS[p] for k in keys for p in evals[k])
        out.append(StudyCost(study.name, len(keys), train, evaluation))
    return out


def lane_seconds(costs: Sequence[StudyCost],
                 lanes: Sequence[Sequence[str]] = LANES) -> list[float]:
    """Planned CPU-seconds of each lane (the sum of its studies' costs)."""
    by_name = {c.study: c.seconds for c in costs}
    return [sum(by_name[name] for name in lane) for lane in lanes]
