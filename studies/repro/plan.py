"""The planned cost of Part A: an estimate made before the runs, not a measured study cost.

CPU cost of one run = its optimiser steps (from its config: epochs x full batches of its
images, or ``limit_train_batches``) x CPU-seconds per step (:data:`STEP_SECONDS`, by config
stem) + the CPU-seconds of its evaluations (:data:`EVAL_SECONDS`). A run shared by several
studies (the SimCLR runs, the random-initialisation baseline) is counted once, in the first
study that lists it, with the union of the evaluations its studies need. A tuned run
(:mod:`studies.repro.tuning`) that reuses its grid's chosen run adds, at the grid's seed,
only the evaluations the grid run lacks. :func:`planned_cost` sums this per study; the runs a
round reuses from the rounds before are left out (issue 54's round:
:data:`REUSED_BY_ROUND_THREE`; issue 53's study 6: :data:`REUSED_BY_BASELINES_ROUND`). Study
6's steps are planned from its configs' pilots (:data:`BASELINE_PILOT_STEP_SECONDS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from studies.repro import layout
from studies.repro.grids import FIRST_GRIDS
from studies.repro.schema import Study, Variant
from studies.repro.studies import BASELINES_CPU

#: Study 6's configs (issue 53), planned from their pilots before the runs: SimCLR's 2.03
#: times each config's CPU-seconds per step over SimCLR t = 0.2's in the same pilot (2 epochs
#: on 2,048 images, 16 steps, one thread at nice 10 on the shared 2-core machine: the process
#: CPU time of the 16-step run minus that of a 1-step run, over 15 steps; SimCLR's 2.35, BYOL
#: 3.39, MoCo v3 3.45, W-MSE 2.41, SwAV 2.49, DINO 3.18, NNCLR 2.47, Barlow Twins 2.55, VICReg
#: 2.69, DCLW 2.12: the start-up's spread, about 0.2 per step, included).
BASELINE_PILOT_STEP_SECONDS: dict[str, float] = {
    "byol": 2.93, "mocov3": 2.98, "wmse": 2.08, "swav": 2.15, "dino": 2.75, "nnclr": 2.14,
    "barlow_twins": 2.20, "vicreg": 2.32, "dclw": 1.83}

#: CPU-seconds per training step with one torch thread, batch 256, 32 px, ResNet-18 width 16
#: CIFAR stem, augmentation included, by config stem prefix (the longest matching prefix):
#: the first round's measured pretraining CPU time per run over its 1,170 steps (its final
#: per-config table: SimCLR t = 0.1 / 0.2 / 0.5 40.3 / 39.6 / 38.3 CPU-minutes, DySTreSS
#: 38.0, SINCERE 40.2, SupCon 40.4; two lanes of one thread on this project's shared 2-core
#: machine; SCE, MoCo v2, ReSSL 30.3, 32.2, 31.4 CPU-minutes over 1,170 steps, MoCo v2's seed
#: 0 over 1,350); CIFAR-2 runs as their CIFAR-10 loss, the random-init step as SimCLR's.
STEP_SECONDS: dict[str, float] = {"simclr": 2.03, "dystress": 1.95, "sincere": 2.06,
                                  "supcon": 2.07, "cifar2_sincere": 2.06,
                                  "cifar2_supcon": 2.07, "cifar2_random_init": 2.03,
                                  "random_init": 2.03, "sce": 1.55, "moco": 1.57,
                                  "ressl": 1.61, **BASELINE_PILOT_STEP_SECONDS}

#: CPU-seconds of evaluations of a width-16 checkpoint, start-up included, from the first
#: round's ``cost.jsonl`` (means over its runs): extracting and caching one split pair's
#: features in one space (backbone or projector) with the first kNN evaluation (``features``
#: 80 + ``knn`` 5: a first 200-NN or 1-NN cost 81-93), each further kNN evaluation in that
#: space reading them (``knn`` 5), ``analyze`` after them (44); the held-out validation's
#: features are those of 15,000 training images (``heldout_features``).
EVAL_SECONDS: dict[str, float] = {"features": 80.0, "knn": 5.0, "analyze": 44.0,
                                  "heldout_features": 25.0}

#: The studies of issue 54's round, in the order its lanes take them: the grids' extension and
#: ReSSL's grid, then the runs tuned on them, and study 5's first-round runs trained again at
#: one recorded commit.
ROUND_THREE = ("sincere_grid", "ressl_grid", "sincere", "cifar2", "baselines")
#: The runs issue 54's round reuses from the second (not trained again): the first grid's cells
#: (seeds 0-2 of its choice among them) and CIFAR-2's random init.
REUSED_BY_ROUND_THREE = frozenset({
    *(cell.stem for cells in FIRST_GRIDS.values() for cell in cells), "cifar2_random_init"})
#: Issue 53's round: study 6, one seed of each baseline.
BASELINES_ROUND = (BASELINES_CPU,)
#: The runs study 6 reads and does not train (seed 0 of each): SimCLR t = 0.2 of the second
#: round, the random init that issue 54's round trains again.
REUSED_BY_BASELINES_ROUND = frozenset({"random_init", "simclr_t0.2"})
#: Lanes of a round: two processes of one thread sharing its study list.
LANES = 2


def config_steps(config: str, epochs: int | None = None) -> int:
    """Optimiser steps of one run of ``config`` (path relative to the checkout):
    ``limit_train_batches`` when set, else full batches of its images (``data.subset``), per
    epoch, times ``epochs`` (default: its ``max_epochs``)."""
    raw = layout.read_config(config)
    trainer, data = raw.get("trainer") or {}, raw.get("data") or {}
    per_epoch = trainer.get("limit_train_batches") or int(data["subset"]) // int(
        data["batch_size"])
    return int(epochs or trainer.get("max_epochs", 1)) * int(per_epoch)


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


def planned_train_seconds(config: str, epochs: int | None = None) -> float:
    """The plan's training CPU-seconds of one run of ``config`` (``epochs``: instead of the
    config's ``max_epochs``, as ``studies.repro cpu --epochs`` trains it)."""
    return config_steps(config, epochs) * planned_step_seconds(Path(config).stem)


def planned_step_seconds(stem: str, table: dict[str, float] = STEP_SECONDS) -> float:
    """The plan's CPU-seconds per step of the config or run ``stem`` (its longest prefix in
    ``table``)."""
    prefixes = sorted((p for p in table if stem.startswith(p)), key=len, reverse=True)
    if not prefixes:
        raise KeyError(f"no planned step cost for config {stem!r}")
    return table[prefixes[0]]


def _eval_seconds(protocols: set[str]) -> float:
    """CPU-seconds of one run's evaluations: features once per space (backbone, projector,
    the held-out validation) for its kNN and ``analyze`` evaluations, then each of them."""
    spaces = {("heldout" if "heldout" in p else "projector" if p.endswith("_projector")
               else "backbone") for p in protocols}
    seconds = sum(EVAL_SECONDS["heldout_features" if space == "heldout" else "features"]
                  for space in spaces)
    return seconds + sum(EVAL_SECONDS["analyze" if p.startswith("analyze") else "knn"]
                         for p in protocols)


def _runs(study: Study, variant: Variant) -> list[tuple[tuple[str, int], Variant, bool]]:
    """``((run key, seed), variant, trains)`` of each seed of ``variant`` in ``study``: a
    tuned run reusing its grid's chosen run trains nothing at the grid's seed."""
    tuning = variant.tuning
    out = []
    for seed in study.seeds:
        if tuning is not None and tuning.reuse:
            key = f"{tuning.name}-chosen" if seed != tuning.seed else f"{tuning.name}-grid"
            out.append(((key, seed), variant, seed != tuning.seed))
        else:
            out.append(((variant.stem, seed), variant, True))
    return out


def planned_cost(studies: Sequence[Study],
                 step_seconds: dict[str, float] = STEP_SECONDS,
                 reused: frozenset[str] = frozenset()) -> list[StudyCost]:
    """Per study, in order: the runs it adds over ``seeds x variants`` (leaving out the
    ``reused`` stems) and their CPU-seconds (``step_seconds``: CPU-seconds per step by config
    stem prefix)."""
    evals: dict[tuple[str, int], set[str]] = {}
    owner: dict[tuple[str, int], tuple[str, Variant, bool]] = {}
    for study in studies:
        for v in study.variants:
            if v.stem in reused:
                continue
            for key, variant, trains in _runs(study, v):
                owner.setdefault(key, (study.name, variant, trains))
                evals.setdefault(key, set()).update(variant.evals)
    out = []
    for study in studies:
        keys = [k for k, (name, _, _) in owner.items() if name == study.name]
        train = sum(config_steps(owner[k][1].config)
                    * planned_step_seconds(Path(owner[k][1].config).stem, step_seconds)
                    for k in keys if owner[k][2])
        evaluation = sum(_eval_seconds(evals[k]) for k in keys)
        out.append(StudyCost(study.name, sum(owner[k][2] for k in keys), train, evaluation))
    return out
