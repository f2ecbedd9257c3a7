"""Whether a Part A run trained: past its random initialisation, and not collapsed.

Two rules of :mod:`studies.repro.verdicts` read a claim's runs before its values:

* **past random init** (:func:`not_past_random_init`): a trained run's top-1 minus that of the
  same network randomly initialised with the same seed (:func:`gains_over_random_init`, in
  points, on the protocol of :func:`gain_protocol`: the claims' layer), over every planned
  seed; a run whose gain has a 95% t-interval not above 0 is *not shown past its random
  init*, and a claim that reads it carries no evidence either way;
* **collapse** (:func:`collapsed`): in its last epoch the two views' mean cosine similarity
  is at least :data:`COLLAPSE_SIMILARITY` (every embedding nearly the same vector) and either
  the loss fell by less than :data:`COLLAPSE_MAX_DROP` of its first epoch's value or the run's
  kNN accuracy (:data:`COLLAPSE_ACCURACIES`, the first it has) lies within
  :data:`NEAR_CHANCE` points of chance (one over the number of classes).

Both are also what the page says under each run table and grid. Study 6 (one seed per method,
no claim) states its own two, for one run (:data:`studies.repro.studies.BASELINES_CPU`):

* **learned past random init, one seed** (:func:`learned_one_seed`): one seed has no
  t-interval, so a run learned when its gain over the random init of its seed exceeds the
  random init's seed-to-seed spread (:func:`random_init_spread`: the range of the random init's
  top-1 over every seed recorded), a difference no two random initialisations showed;
* **collapsed, one run** (:func:`collapsed_or_warned`): the collapse rule above, or the
  engine's collapse warning during training (``train/collapse_step``: the embedding's spread
  near zero, or the loss at the value a method states for a collapse, such as SwAV's log K,
  for 200 steps), the signs of the non-contrastive methods, whose positive cosine is high by
  design.
"""

from __future__ import annotations

from studies.repro.schema import Study, Variant
from studies.repro.stats import t_interval

#: The accuracy a run's gain over random init is measured on, the first of these its
#: evaluations include: 200-NN on the backbone (the SimCLR, DySTreSS and baseline studies),
#: else 1-NN in the projector's output (SINCERE and SupCon: the claims' layer), else 1-NN.
GAIN_PROTOCOLS = ("knn200", "knn1_projector", "knn1")
#: Each of those protocols in words.
PROTOCOL_WORDS = {"knn200": "200-NN", "knn1_projector": "1-NN", "knn1": "backbone 1-NN"}

#: Collapse, fixed after the first grid's runs (issue 54) from its three collapsed cells
#: (SINCERE t 0.05 and t 0.1 at lr 0.2, SupCon t 0.05 at lr 0.2: last-epoch positive cosine
#: 0.95-0.98, validation 1-NN 10.2-16.7% against 10% chance, the loss down 28-38% all the same)
#: and the earlier hard-loss runs (cosine 0.96-0.998, the loss stuck at log 65): every other
#: run recorded at issue 54 ended with a cosine of 0.78 or less.
COLLAPSE_SIMILARITY = 0.95
COLLAPSE_MAX_DROP = 0.03
NEAR_CHANCE = 10.0  # points above chance
#: The accuracies the collapse rule reads, the first a run has: its validation 1-NN (a grid
#: cell), else its test 1-NN in the projector's output or on the backbone, else its 200-NN.
COLLAPSE_ACCURACIES = ("knn1_heldout_projector/top1", "knn1_projector/top1", "knn1/top1",
                       "knn200/top1")
#: Classes of a Part A run's data without ``--classes``: CIFAR-10.
CIFAR10_CLASSES = 10


def chance(variant: Variant) -> float:
    """Top-1 of a guess, in points: 100 over the classes the run is evaluated on (its
    ``--classes``, e.g. CIFAR-2's cat and dog; else CIFAR-10's ten)."""
    args = list(variant.eval_args)
    if "--classes" not in args:
        return 100.0 / CIFAR10_CLASSES
    named = args[args.index("--classes") + 1:]
    count = next((i for i, arg in enumerate(named) if arg.startswith("--")), len(named))
    return 100.0 / count


def _accuracy(metrics: dict[str, float]) -> tuple[str, float] | None:
    """The first of :data:`COLLAPSE_ACCURACIES` in ``metrics``, in points."""
    key = next((k for k in COLLAPSE_ACCURACIES if k in metrics), None)
    return None if key is None else (key.split("/")[0], 100.0 * metrics[key])


def collapsed(metrics: dict[str, float], chance_points: float) -> bool:
    """Whether a run collapsed in pretraining (the module docstring's rule); False without
    its last epoch's positive similarity."""
    similarity = metrics.get("pretrain/final_positive_similarity")
    if similarity is None or similarity < COLLAPSE_SIMILARITY:
        return False
    first, final = metrics.get("pretrain/initial_loss"), metrics.get("pretrain/final_loss")
    stuck = first is not None and final is not None and final >= (1 - COLLAPSE_MAX_DROP) * first
    accuracy = _accuracy(metrics)
    return stuck or (accuracy is not None and accuracy[1] < chance_points + NEAR_CHANCE)


def collapse_evidence(label: str, metrics: dict[str, float], chance_points: float) -> str:
    """``label: last-epoch positive cosine 0.981, loss 10.43 -> 6.45, knn1_heldout_projector
    10.4% (chance 10%)`` (the numbers :func:`collapsed` reads)."""
    similarity = metrics["pretrain/final_positive_similarity"]
    text = f"{label}: last-epoch positive cosine {similarity:.3f}"
    if "pretrain/initial_loss" in metrics and "pretrain/final_loss" in metrics:
        text += (f", loss {metrics['pretrain/initial_loss']:.2f} -> "
                 f"{metrics['pretrain/final_loss']:.2f}")
    accuracy = _accuracy(metrics)
    if accuracy is not None:
        text += f", {accuracy[0]} {accuracy[1]:.1f}% (chance {chance_points:g}%)"
    return text


def baseline(study: Study) -> Variant | None:
    """The study's random-initialisation baseline, if it has one."""
    return next((v for v in study.variants if v.name.endswith("random_init")), None)


def gain_protocol(variant: Variant) -> str | None:
    """The protocol ``variant``'s gain over random init is measured on (:data:`GAIN_PROTOCOLS`),
    or None when it has none of them (a grid cell, scored on validation only)."""
    return next((p for p in GAIN_PROTOCOLS if p in variant.evals), None)


def gains_over_random_init(study: Study, summary: dict, tag: str, metric: str,
                           stem: str) -> dict[int, float]:
    """Per seed, the finished run ``stem``'s ``metric`` minus that of the study's random init
    of the same seed, in points (empty for a study without a random init)."""
    base_variant = baseline(study)
    if base_variant is None:
        return {}
    runs = summary.get("runs", {})
    gains = {}
    for run in runs.values():
        if run.get("tag") != tag or run.get("stem") != stem or not run.get("pretrain_finished"):
            continue
        other = runs.get(f"{tag}/{base_variant.stem}/seed{run['seed']}") or {}
        if metric in run["metrics"] and metric in other.get("metrics", {}):
            gains[run["seed"]] = 100.0 * (run["metrics"][metric] - other["metrics"][metric])
    return gains


def not_past_random_init(study: Study, summary: dict, tag: str
                         ) -> list[tuple[Variant, str, float, float, float]]:
    """The study's trained runs whose gain over random init, every planned seed measured, has a
    95% t-interval not above 0: ``(variant, protocol in words, mean, low, high)`` in points."""
    base_variant = baseline(study)
    if base_variant is None or len(study.seeds) < 2:
        return []
    out = []
    for v in study.variants:
        protocol = gain_protocol(v)
        if v is base_variant or protocol is None:
            continue
        gains = gains_over_random_init(study, summary, tag, f"{protocol}/top1", v.stem)
        if sorted(gains) != sorted(study.seeds):
            continue
        mean, low, high = t_interval(list(gains.values()))
        if low <= 0:
            out.append((v, PROTOCOL_WORDS[protocol], mean, low, high))
    return out


def untrained_text(untrained: list[tuple[Variant, str, float, float, float]]) -> str:
    """``SupCon (tuned: ...): 1-NN -1.85 [-5.14, +1.44] points; ...``."""
    return "; ".join(f"{v.label}: {name} {mean:+.2f} [{low:+.2f}, {high:+.2f}] points"
                     for v, name, mean, low, high in untrained)


def random_init_spread(summary: dict, tag: str, protocol: str,
                       stem: str = "random_init") -> tuple[float, int] | None:
    """``(range in points, seeds)`` of the finished random-init runs' top-1 on ``protocol``
    over every seed recorded under ``tag``; None with fewer than two."""
    values = [100.0 * run["metrics"][f"{protocol}/top1"]
              for run in summary.get("runs", {}).values()
              if run.get("tag") == tag and run.get("stem") == stem
              and run.get("pretrain_finished") and f"{protocol}/top1" in run.get("metrics", {})]
    if len(values) < 2:
        return None
    return max(values) - min(values), len(values)


def learned_one_seed(gain: float | None, spread: tuple[float, int] | None) -> bool | None:
    """Whether a gain over random init (points) exceeds the random init's seed-to-seed spread
    (:func:`random_init_spread`); None while either is unmeasured."""
    if gain is None or spread is None:
        return None
    return gain > spread[0]


def collapsed_or_warned(metrics: dict[str, float], chance_points: float) -> bool:
    """Study 6's collapse rule for one run: :func:`collapsed`, or the engine warned of a
    collapse during training (``pretrain/collapse_step`` recorded)."""
    return collapsed(metrics, chance_points) or "pretrain/collapse_step" in metrics
