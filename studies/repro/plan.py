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

from studies.repro.studies import Study

#: Optimiser steps of one trained Part A run: 30 epochs of 39 full batches (10,000 images,
#: batch 256, the last partial batch dropped), and of the random-init baseline (1 step).
STEPS = {"trained": 30 * 39, "random_init": 1}

#: CPU-seconds per training step with one torch thread, batch 256, 32 px, ResNet-18 width 16
#: CIFAR stem, augmentation included, per config stem prefix: issue 25's table (2-core machine
#: of this project; ReSSL taken as SCE's, the random-init step as SimCLR's).
STEP_SECONDS: dict[str, float] = {"simclr": 1.76, "dystress": 1.74, "sce": 1.17, "moco": 1.18,
                                  "ressl": 1.17, "supcon": 1.82, "sincere": 1.97,
                                  "random_init": 1.76}

#: The same, measured on 2026-11-25 with the study's own configs while the 2 cores were shared
#: (load average 7-10): process CPU time of 16 steps minus that of 1 step, over 15 steps
#: (SupCon: 78 minus 1, over 77). SCE (with shuffled key BN) 2.88, SimCLR 3.86, SupCon 3.43;
#: the others by analogy (MoCo v2 and ReSSL as SCE, DySTreSS and the random-init step as
#: SimCLR, SINCERE as SupCon). Contention inflates CPU time, so these bound a shared machine.
SHARED_STEP_SECONDS: dict[str, float] = {"simclr": 3.86, "dystress": 3.86, "sce": 2.88,
                                         "moco": 2.88, "ressl": 2.88, "supcon": 3.43,
                                         "sincere": 3.43, "random_init": 3.86}

#: CPU-seconds of the evaluations of a width-16 checkpoint, start-up included: the first kNN
#: evaluation of a run extracts and caches the features of the train and test splits
#: (``knn_first``, issue 25's figure; 134 measured on the shared machine), every further kNN
#: evaluation reads them (``knn_cached``; 8.8 measured); ``analyze`` after them: 81 measured
#: on the shared machine (docs/reproduction.md).
EVAL_SECONDS: dict[str, float] = {"knn_first": 60.0, "knn_cached": 9.0, "analyze": 81.0}

#: The two lanes of ``python -m studies.repro cpu`` the plan assumes (``--study`` lists).
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


def _step_seconds(stem: str, table: dict[str, float]) -> float:
    for prefix, seconds in table.items():
        if stem.startswith(prefix):
            return seconds
    raise KeyError(f"no planned step cost for config {stem!r}")


def _eval_seconds(protocols: set[str]) -> float:
    """CPU-seconds of one run's evaluations: features once per embedding space (backbone,
    projector: a ``_projector`` protocol) for its kNN evaluations, then each ``analyze``."""
    seconds = EVAL_SECONDS["analyze"] * sum(p.startswith("analyze") for p in protocols)
    for projector in (False, True):
        knn = sum(p.startswith("knn") and p.endswith("_projector") == projector
                  for p in protocols)
        if knn:
            seconds += EVAL_SECONDS["knn_first"] + (knn - 1) * EVAL_SECONDS["knn_cached"]
    return seconds


def planned_cost(studies: Sequence[Study],
                 step_seconds: dict[str, float] = STEP_SECONDS) -> list[StudyCost]:
    """Per study, in order: the runs it adds over ``seeds x variants`` and their CPU-seconds
    (``step_seconds``: CPU-seconds per step by config stem prefix)."""
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
                    * _step_seconds(stem, step_seconds) for stem, _ in keys)
        evaluation = sum(_eval_seconds(evals[k]) for k in keys)
        out.append(StudyCost(study.name, len(keys), train, evaluation))
    return out


def lane_seconds(costs: Sequence[StudyCost],
                 lanes: Sequence[Sequence[str]] = LANES) -> list[float]:
    """Planned CPU-seconds of each lane (the sum of its studies' costs)."""
    by_name = {c.study: c.seconds for c in costs}
    return [sum(by_name[name] for name in lane) for lane in lanes]
