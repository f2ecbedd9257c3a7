"""A tuning grid's lines on the page: each grid's cells as scored, its choice, whether the choice
is interior, and its collapsed cells.

For each tuning a grid study trains (:func:`tunings_of`): the choice, by the rule fixed before
the runs (:mod:`studies.repro.tuning`), or *pending* while cells have no score, naming them;
every cell's validation score, its bounds' (an earlier grid's cells, not chosen among)
marked so, and *collapsed* beside each cell the collapse rule labels
(:func:`studies.repro.trained.collapsed`); and, once chosen, whether the choice is *interior*:
on each setting the grid sweeps, the nearest cells below and above it
(:func:`studies.repro.tuning.neighbours`) both score lower. When it is not, the line says which
side is open and either the cells to run next or, where the grid stops, why.
"""

from __future__ import annotations

from studies.repro.grids import LATER_EXTENSIONS, LOSS_LABELS, TUNINGS, extension_stems
from studies.repro.records import failure_text
from studies.repro.schema import Study, Tuning, Variant
from studies.repro.trained import chance, collapsed
from studies.repro.tuning import SETTING_NAMES, neighbours, swept_settings

#: The validation protocols in words.
VALIDATION_WORDS = {"knn1_heldout_projector": "validation 1-NN",
                  "knn200_heldout": "validation 200-NN"}


def tunings_of(study: Study) -> list[tuple[str, Tuning]]:
    """The tunings whose grid ``study`` trains (a grid study's), by name."""
    names = {v.name for v in study.variants}
    return [(name, t) for name, t in TUNINGS.items() if {c.name for c in t.grid} <= names]


def _setting(cell: Variant) -> str:
    """The cell's label without its loss: ``t=0.1, lr=0.05, warm-up``."""
    return cell.label.split(" ", 1)[1]


def _cell_run(cell: Variant, tuning: Tuning, summary: dict) -> dict:
    """The summary's run of a grid cell (empty before it exists)."""
    return summary.get("runs", {}).get(f"cpu/{cell.stem}/seed{tuning.seed}") or {}


def _collapsed(cell: Variant, tuning: Tuning, summary: dict) -> bool:
    run = _cell_run(cell, tuning, summary)
    return bool(run.get("pretrain_finished")) and collapsed(run.get("metrics", {}), chance(cell))


def _scored(cell: Variant, tuning: Tuning, scores: dict, summary: dict) -> str:
    """The cell's setting and score; *pending* before it is scored, or its failure (its
    grid chooses nothing until the cell is scored)."""
    score = scores.get(cell.name)
    failed = _cell_run(cell, tuning, summary).get("failure")
    text = f"{_setting(cell)} " + (f"{100 * score:.2f}%" if score is not None
                                   else f"failed: {failure_text(failed)}" if failed
                                   else "pending")
    return text + (" (collapsed)" if _collapsed(cell, tuning, summary) else "")


def _interior(tuning: Tuning, chosen: Variant, scores: dict) -> str:
    """Whether ``chosen`` is bracketed by lower-scoring cells on each setting, and if not,
    which side is open and what to run there."""
    best = scores[chosen.name]
    at = swept_settings(chosen)
    bracketed, open_sides, waiting = [], [], []
    for key, sides in neighbours(tuning, chosen).items():
        name = SETTING_NAMES[key]
        others = ", ".join(f"{SETTING_NAMES[k]}={v:g}" for k, v in at.items() if k != key)
        for word, other in zip(("below", "above"), sides, strict=True):
            where = f"{name} {word} {at[key]:g} ({others})"
            if other is None:
                open_sides.append(f"no cell at {where}")
            elif scores.get(other.name) is None:
                waiting.append(_setting(other))
            elif scores[other.name] >= best:
                open_sides.append(f"{_setting(other)} scores {100 * scores[other.name]:.2f}%, "
                                  "not lower")
            else:
                bracketed.append(f"{_setting(other)} {100 * scores[other.name]:.2f}%")
    if waiting:
        return f"whether it is interior waits for {', '.join(waiting)}"
    if not open_sides:
        return f"interior: the nearest cells on each side score lower ({'; '.join(bracketed)})"
    lower = f" (lower elsewhere: {'; '.join(bracketed)})" if bracketed else ""
    if tuning.stop:
        return (f"**not interior**, open where {'; '.join(open_sides)}{lower}; not run "
                f"further, because {tuning.stop}{_last_gain(tuning, chosen, scores)}")
    return (f"**not interior**, open where {'; '.join(open_sides)}: the next cells to run lie "
            f"on those sides{lower}")


def _last_gain(tuning: Tuning, chosen: Variant, scores: dict) -> str:
    """`` (the last extension's cell scores +2.00 points over the best before it)`` when
    ``chosen`` is a cell of the last extension, else empty."""
    last = extension_stems(LATER_EXTENSIONS[-1])
    before = [scores[c.name] for c in tuning.grid
              if c.stem not in last and scores.get(c.name) is not None]
    if chosen.stem not in last or not before:
        return ""
    return (f" (the last extension's cell scores {100 * (scores[chosen.name] - max(before)):+.2f}"
            " points over the best cell before it)")


def choice_lines(study: Study, summary: dict) -> list[str]:
    """What each grid of ``study`` chose, from the summary's ``choices``, with its scores, its
    collapsed cells and whether its choice is interior."""
    lines = []
    for name, tuning in tunings_of(study):
        choice = (summary.get("choices") or {}).get(name) or {}
        scores = choice.get("scores") or {}
        cell = next((c for c in tuning.grid if c.name == choice.get("chosen")), None)
        words = VALIDATION_WORDS.get(tuning.protocol, tuning.protocol)
        cells = "; ".join(_scored(c, tuning, scores, summary) for c in tuning.grid)
        bounds = ""
        if tuning.bounds:
            bounds = (" The earlier grid that bounds it (scored alike, not chosen among): "
                      + "; ".join(_scored(c, tuning, scores, summary) for c in tuning.bounds)
                      + ".")
        if cell is None:
            done = sum(scores.get(c.name) is not None for c in tuning.grid)
            lines.append(f"* {LOSS_LABELS[name]}: **pending**, not chosen yet ({done} of "
                         f"{len(tuning.grid)} cells scored). Its cells, {words}: {cells}."
                         + bounds)
            continue
        lines.append(f"* {LOSS_LABELS[name]}: chosen {_setting(cell)} ({words} "
                     f"{100 * scores[cell.name]:.2f}%); {_interior(tuning, cell, scores)}. "
                     f"Its cells: {cells}." + bounds)
    return [*lines, ""] if lines else []
