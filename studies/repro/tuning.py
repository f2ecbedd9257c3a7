"""Tuned runs: the setting a grid of runs chooses, by a rule fixed before the runs.

A :class:`~studies.repro.studies.Variant` with a ``tuning``
(:class:`~studies.repro.studies.Tuning`) stands for "this loss at the setting its grid
chooses": among the grid's runs of the tuning's seed, the one whose validation evaluation
(``tuning.protocol``, e.g. 1-NN on training images held out of pretraining) scored highest;
ties go to the first cell in grid order. Until every grid run has that evaluation there is no
choice, and the variant is a placeholder whose folder holds no run. Once chosen:

* with ``reuse``, the tuned variant *is* the chosen grid run (its folder, so seed 0 is the grid
  run itself and seeds 1, 2 are trained beside it), with the study's evaluations added;
* without, it trains its own config with the chosen cell's ``overrides`` (another data set
  at the same temperature and learning rate), in a folder named after its config and the
  chosen cell (``cifar2_sincere_t0.1_lr0.05_warmup``), so that a run at an earlier choice is
  never taken for it.

:func:`folder_choices` reads the grid's evaluations from the run folders (the runner, the
collection, which writes them into the summary as ``choices``, the scores of the cells that
bound the grid, ``Tuning.bounds``, among them); :func:`resolve_study` turns a study's tuned
variants into concrete ones from those choices (the verdicts and the report, from the
summary). :func:`neighbours` finds the cells that bracket a choice, on each setting the grid
sweeps: a choice is *interior* when each of them scores lower (the report says whether).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from studies.repro import layout
from studies.repro.layout import eval_dir, run_dir
from studies.repro.schema import Study, Tuning, Variant

#: Short names of the overridden settings, for labels.
SETTING_NAMES = {"--model.method.init_args.temperature": "t", "--model.optimizer.base_lr": "lr",
                 "--model.method.init_args.target_temperature": "t_m",
                 "--model.optimizer.warmup_fraction": "warm-up",
                 "--model.optimizer.warmup_start_ratio": "warm-up start"}


def settings_text(overrides: Iterable[str]) -> str:
    """``t=0.2, lr=0.15`` from ``--model.method.init_args.temperature 0.2 ...``."""
    items = list(overrides)
    return ", ".join(f"{SETTING_NAMES.get(k, k.lstrip('-'))}={v}"
                     for k, v in zip(items[::2], items[1::2], strict=True))


def grid_scores(tuning: Tuning, root: Path | None = None,
                part: str = "cpu") -> dict[str, float | None]:
    """Each cell's validation score (``tuning.metric`` of ``tuning.protocol``, seed
    ``tuning.seed``), the grid's and its bounds', read from its run folder under ``root``;
    None where not evaluated yet."""
    root = layout.REPO if root is None else root
    scores: dict[str, float | None] = {}
    for cell in (*tuning.grid, *tuning.bounds):
        path = root / eval_dir(run_dir(part, cell.stem, tuning.seed), tuning.protocol)
        try:
            value = json.loads((path / "results.json").read_text())["metrics"][tuning.metric]
            scores[cell.name] = float(value)
        except (OSError, ValueError, KeyError, TypeError):
            scores[cell.name] = None
    return scores


def choose(tuning: Tuning, scores: dict[str, float | None]) -> Variant | None:
    """The grid cell with the highest score (the first of equal ones), or None while a cell
    has no score."""
    if any(scores.get(cell.name) is None for cell in tuning.grid):
        return None
    return max(tuning.grid, key=lambda cell: scores[cell.name])  # max keeps the first


def tunings(studies: Iterable[Study]) -> dict[str, Tuning]:
    """Every tuning the studies' variants use, by name."""
    return {v.tuning.name: v.tuning for s in studies for v in s.variants if v.tuning}


def folder_choices(studies: Iterable[Study], root: Path | None = None,
                   part: str = "cpu") -> dict[str, dict]:
    """``{tuning name: {"chosen": cell name or None, "scores": {cell: score or None}}}`` from
    the run folders."""
    out = {}
    for name, tuning in tunings(s for s in studies if s.part == part).items():
        scores = grid_scores(tuning, root, part)
        chosen = choose(tuning, scores)
        out[name] = {"chosen": chosen.name if chosen else None, "scores": scores}
    return out


def resolve(variant: Variant, chosen: Variant | None) -> Variant:
    """``variant`` with its tuning resolved to the ``chosen`` grid cell (the variant itself
    when it is not tuned or nothing is chosen yet)."""
    if variant.tuning is None or chosen is None:
        return variant
    label = variant.label.replace("(tuned)", f"(tuned: {settings_text(chosen.overrides)})")
    if variant.tuning.reuse:
        evals = tuple(dict.fromkeys(chosen.evals + variant.evals))
        return replace(chosen, name=variant.name, label=label, evals=evals,
                       eval_args=variant.eval_args, tuning=None)
    # its own folder per setting: a run trained at another grid's choice is not this one
    suffix = chosen.stem.removeprefix(f"{variant.tuning.name}_")
    return replace(variant, label=label, folder=f"{Path(variant.config).stem}_{suffix}",
                   overrides=chosen.overrides, tuning=None)


def resolve_study(study: Study, choices: dict[str, dict]) -> Study:
    """``study`` with every tuned variant resolved from ``choices`` (:func:`folder_choices`
    or a summary's ``choices``); unchosen ones stay placeholders."""
    if not any(v.tuning for v in study.variants):
        return study
    variants = []
    for v in study.variants:
        if v.tuning is None:
            variants.append(v)
            continue
        name = (choices.get(v.tuning.name) or {}).get("chosen")
        cell = next((c for c in v.tuning.grid if c.name == name), None)
        variants.append(resolve(v, cell))
    return replace(study, variants=tuple(variants))


#: The settings a grid may sweep, by their override.
SWEPT = ("--model.method.init_args.temperature", "--model.optimizer.base_lr",
         "--model.method.init_args.target_temperature")


def swept_settings(cell: Variant) -> dict[str, float]:
    """The cell's values of the settings in :data:`SWEPT`, by override."""
    items = list(cell.overrides)
    return {k: float(v) for k, v in zip(items[::2], items[1::2], strict=True) if k in SWEPT}


def neighbours(tuning: Tuning, chosen: Variant
               ) -> dict[str, tuple[Variant | None, Variant | None]]:
    """Per setting the grid sweeps (by its override), the nearest cells of the grid or its
    bounds below and above ``chosen`` on that setting, every other swept setting equal (None
    where there is none on that side)."""
    cells = (*tuning.grid, *tuning.bounds)
    swept = [k for k in SWEPT if len({swept_settings(c).get(k) for c in tuning.grid}) > 1]
    at = swept_settings(chosen)
    out = {}
    for key in swept:
        line = [c for c in cells if all(swept_settings(c).get(k) == at.get(k)
                                        for k in swept if k != key)]
        below = [c for c in line if swept_settings(c)[key] < at[key]]
        above = [c for c in line if swept_settings(c)[key] > at[key]]
        out[key] = (max(below, key=lambda c: swept_settings(c)[key], default=None),
                    min(above, key=lambda c: swept_settings(c)[key], default=None))
    return out


def is_resolved(variant: Variant) -> bool:
    """Whether ``variant`` names a run (not a tuned placeholder)."""
    return variant.tuning is None
