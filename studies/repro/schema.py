"""The shape of the reproduction study's definitions (:mod:`studies.repro.studies`,
:mod:`studies.repro.grids`): a study (:class:`Study`), its runs (:class:`Variant`), how a tuned
run's setting is chosen (:class:`Tuning`), a paper's claim (:class:`Claim`) and what the paper
says causes it (:class:`Mechanism`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Variant:
    """One run of a study: a config, how it is trained and how it is evaluated.

    ``folder`` names the run folder (default: the config's stem); ``overrides`` are extra
    ``contrastkit pretrain`` arguments (a grid cell's temperature and learning rate);
    ``eval_args`` are added to each of its evaluations (e.g. ``--classes cat dog``), and
    ``protocol_args`` (``(protocol, args)`` pairs) to those of one protocol only.
    ``tuning`` marks a run whose setting is chosen after the runs of a grid
    (:class:`Tuning`, resolved by :mod:`studies.repro.tuning`); such a variant has no
    folder of its own until then.
    """

    name: str
    label: str
    config: str
    evals: tuple[str, ...]
    analyze_args: tuple[str, ...] = ()
    folder: str | None = None
    overrides: tuple[str, ...] = ()
    eval_args: tuple[str, ...] = ()
    tuning: Tuning | None = None
    protocol_args: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def stem(self) -> str:
        """The run folder's name (``runs/repro/<part>/<stem>/seed<N>``)."""
        return self.folder or Path(self.config).stem


@dataclass(frozen=True)
class Tuning:
    """How a tuned run's setting is chosen, fixed before the runs: among the ``grid``'s runs
    of seed ``seed``, the one with the highest ``metric`` of evaluation ``protocol`` (a
    validation split held out of the training images, never the test split); ties go to the
    first in grid order. ``name`` keys the choice (one per grid: the same choice serves every
    variant tuned on it). With ``reuse``, the chosen grid run is the tuned run's own (its
    folder, seed ``seed`` included, and further seeds trained beside it); without, the tuned
    variant trains its own config with the chosen cell's ``overrides``. ``bounds``: cells of
    an earlier grid, scored by the same protocol but not chosen among, that bound this grid on
    its other sides (whether the choice is interior reads them too,
    :func:`studies.repro.tuning.neighbours`). ``stop``: why the grid goes no further where
    its choice is not interior, decided before any further run (empty: the page names the
    cells to run next)."""

    name: str
    grid: tuple[Variant, ...]
    protocol: str
    metric: str = "top1"
    seed: int = 0
    reuse: bool = True
    bounds: tuple[Variant, ...] = ()
    stop: str = ""


@dataclass(frozen=True)
class Mechanism:
    """What a paper says causes or goes with its claimed effect, measured per seed like the
    claim (``value(get)``, oriented so that the paper says positive): a claim whose sign
    agrees with the paper but whose mechanism's 95% t-interval lies below 0 is reproduced in
    *direction only* (:mod:`studies.repro.verdicts`). ``short``: it in a few words."""

    statement: str
    needs: tuple[tuple[str, str], ...]
    value: Callable[[Callable[[str, str], float]], float]
    short: str = ""


@dataclass(frozen=True)
class Claim:
    """A paper's claim, how to measure it and the paper's own numbers.

    ``kind``: ``better`` / ``not_worse`` (accuracy of ``compare[0]`` vs ``compare[1]`` on
    protocol ``compare[2]``, with per-seed bootstrap intervals) or ``sign`` (another quantity),
    judged on the seeds' paired values; ``absolute`` (Part B: seed mean of ``value`` >=
    ``paper_value`` - 1 point). ``value(get)`` computes the measured quantity of one seed from
    ``get(variant, metric)``; it is oriented so that the paper's claim says it is positive
    (``paper_value`` is the paper's). ``value`` is None for a claim that is not run: its paper
    effect is below what the planned seeds detect (:func:`studies.repro.verdicts.planned_effect`).
    ``noise`` names the assumed seed standard deviation of the value (a key of
    :data:`studies.repro.stats.SEED_SD`; None: no earlier estimate exists). ``kind``
    ``equivalent``: the paper says the two runs do not differ; reproduced when the 90%
    t-interval (two one-sided tests at 5%) lies within -/+
    :data:`studies.repro.studies.EQUIVALENCE_MARGIN`.

    ``role``: ``primary`` (in the tally), ``beside`` (reported next to a primary claim, e.g.
    the same quantity in another layer or a stricter comparison; not counted), ``table``
    (read off a paper's table, no sentence of the paper states it: not counted, by the one
    counting rule of :mod:`studies.repro.rules`), or ``not_comparable`` (measured, but not
    comparable with the paper's number; the reason in ``note``; not counted).
    ``paper_sentence``: the paper's own words, quoted when the tested form differs from them (a
    *reworded* claim). ``short``: the claim in a few words, for the page's headline.
    ``mechanisms``: what the paper says causes or goes with the effect (:class:`Mechanism`).
    """

    id: str
    source: str
    statement: str
    paper: str
    kind: str
    needs: tuple[tuple[str, str], ...]
    value: Callable[[Callable[[str, str], float]], float] | None
    paper_value: float | None = None
    unit: str = ""
    compare: tuple[str, str, str] | None = None
    noise: str | None = None
    role: str = "primary"
    paper_sentence: str | None = None
    note: str = ""
    #: ``(paper's baseline value, run, metric)``: the quantity's scale in the paper and where
    #: this study measures the same baseline; the report rescales the paper's effect by the
    #: ratio (a geometric quantity whose scale differs between the two).
    paper_baseline: tuple[float, str, str] | None = None
    short: str = ""
    mechanisms: tuple[Mechanism, ...] = ()


@dataclass(frozen=True)
class Study:
    """A study of Part A (``part="cpu"``) or B (``"gpu"``): its runs, default seeds (the seeds
    its minimum detectable effects are planned for) and claims; ``pairs`` are extra accuracy
    comparisons beyond those the claims make."""

    name: str
    part: str
    title: str
    seeds: tuple[int, ...]
    variants: tuple[Variant, ...]
    claims: tuple[Claim, ...] = ()
    pairs: tuple[tuple[str, str, str], ...] = field(default=())
    note: str = ""  # printed under the study's title

    @property
    def number(self) -> str:
        """The study's number on the page, its title's first word (``"1b"`` of ``"1b. ..."``)."""
        return self.title.split(".")[0]

    def variant(self, name: str) -> Variant:
        """The run called ``name``."""
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"study {self.name} has no run {name!r}")

    def all_pairs(self) -> list[tuple[str, str, str]]:
        """Every ``(run A, run B, protocol)`` that ``contrastkit compare`` runs, once each."""
        pairs = list(self.pairs) + [c.compare for c in self.claims if c.compare]
        return list(dict.fromkeys(pairs))


def cpu_config(name: str) -> str:
    """The Part A config ``name``: ``configs/repro/cpu/<name>.yaml``."""
    return f"configs/repro/cpu/{name}.yaml"
