"""Study 6's tables on the page (:data:`studies.repro.studies.BASELINES_CPU`): the baselines of
the papers' comparison tables, one seed each at Part A's scale, beside the study's random init
and SimCLR t = 0.2.

:func:`baselines_cpu_lines` gives two tables of the same runs and the rules under them: the
verdicts (200-NN top-1 and its gain over the random init of the same seed, the loss, the last
epoch's positive cosine and embedding spread, and the two one-run verdicts of
:mod:`studies.repro.trained`: *learned past random init* and *collapsed*), then the papers'
diagnostics from ``analyze`` on the projector's output and on the backbone (uniformity,
tolerance, local separation as the positive's against the nearest negative's similarity,
DySTreSS's inter-class uniformity). A cell whose run has not finished says *not yet run*, or
*failed* when its last command failed (the *learned* cell gives the step, exit status and
error: a diverged loss is a result, not a pending run); a quantity a finished run lacks, ``–``.
"""

from __future__ import annotations

import math

from contrastkit.train.specs import OnlineEvalSpec
from studies.repro.records import failure_text, wall_minutes_text
from studies.repro.schema import Study, Variant
from studies.repro.trained import (
    COLLAPSE_MAX_DROP,
    COLLAPSE_SIMILARITY,
    NEAR_CHANCE,
    baseline,
    chance,
    collapse_evidence,
    collapsed,
    collapsed_or_warned,
    learned_one_seed,
    random_init_spread,
)

PENDING = "not yet run"
#: A run whose last command failed (a diverged loss, for one): its cells, and its step and
#: error in the *learned* column.
FAILED = "failed"
#: The protocol of the accuracy, the gain and the learned verdict.
PROTOCOL = "knn200"
#: d of each trained run's ``train/z_std``: the dimension of the online embedding the engine's
#: collapse check reads (``method.embed_dim``: the projector's output; DINO's K outputs).
EMBEDDING_DIMS = {"byol": 256, "mocov3": 256, "wmse": 64, "swav": 128, "dino": 2048,
                  "nnclr": 256, "barlow_twins": 2048, "vicreg": 2048, "dclw": 128,
                  "simclr_t0.2": 128}
#: The diagnostics of each layer: (header, ``analyze`` metric or the pair of the local
#: separation).
_DIAGNOSTICS = (("uniformity", "uniformity"), ("tolerance", "tolerance"),
                ("positive / nearest-negative sim.",
                 ("positive_similarity_mean", "nearest_negative_similarity_mean")),
                ("inter-class uniformity", "interclass_uniformity"))
_LAYERS = (("projector", "analyze_projector"), ("backbone", "analyze"))


def _run(summary: dict, tag: str, stem: str, seed: int) -> dict | None:
    return summary.get("runs", {}).get(f"{tag}/{stem}/seed{seed}")


def _done(run: dict | None) -> bool:
    return bool(run and run.get("pretrain_finished") and run.get("status") == "done")


def _failure(run: dict | None) -> str | None:
    """Its step, exit status and error, for a run whose last command failed."""
    if not (run and run.get("failure")):
        return None
    return failure_text(run["failure"]).replace("|", "\\|")


def _not_done(run: dict | None) -> str:
    return FAILED if _failure(run) else PENDING


def _number(run: dict | None, metric: str, text) -> str:
    """``text(value)`` of the run's ``metric``; *not yet run* before the run is done (*failed*
    when its last command failed), ``–`` when a finished run lacks it."""
    if not _done(run):
        return _not_done(run)
    metrics = run.get("metrics", {})
    return text(metrics[metric]) if metric in metrics else "–"


def _accuracy(run: dict | None) -> str:
    def text(top1: float) -> str:
        metrics = run["metrics"]
        low, high = (metrics.get(f"{PROTOCOL}/top1_ci_{end}") for end in ("low", "high"))
        if low is None or high is None:
            return f"{100 * top1:.2f}"
        return f"{100 * top1:.2f} [{100 * low:.2f}, {100 * high:.2f}]"
    return _number(run, f"{PROTOCOL}/top1", text)


def _gain(run: dict | None, base: dict | None) -> float | None:
    metric = f"{PROTOCOL}/top1"
    if not (_done(run) and _done(base)) or metric not in run["metrics"] \
            or metric not in base["metrics"]:
        return None
    return 100.0 * (run["metrics"][metric] - base["metrics"][metric])


def _learned(run: dict | None, gain: float | None, spread: tuple[float, int] | None) -> str:
    if not _done(run):
        return _failure(run) or PENDING
    verdict = learned_one_seed(gain, spread)
    if verdict is None:
        return ("pending: the random init's spread needs two seeds" if spread is None
                else "pending: the random init of its seed")
    return f"{'yes' if verdict else 'no'} ({gain:+.2f} {'>' if verdict else '<='} "\
           f"{spread[0]:.2f})"


def _loss_value(value: float) -> str:
    """Two decimals; whole numbers from 100 on (Barlow Twins' loss starts near d)."""
    return f"{value:.2f}" if abs(value) < 100 else f"{value:,.0f}"


def _loss(run: dict | None) -> str:
    def text(first: float) -> str:
        last = run["metrics"].get("pretrain/final_loss")
        return f"{_loss_value(first)} -> {_loss_value(last) if last is not None else '–'}"
    return _number(run, "pretrain/initial_loss", text)


def _spread(run: dict | None, stem: str) -> str:
    d = EMBEDDING_DIMS.get(stem)
    return _number(run, "pretrain/final_z_std", lambda z: f"{z:.4f}" if d is None
                   else f"{z:.4f} ({z * math.sqrt(d):.2f})")


def _minutes(run: dict | None) -> str:
    return _number(run, "pretrain/wall_minutes",
                   lambda minutes: wall_minutes_text([run["metrics"]], f"{minutes:.1f}"))


def _collapsed(run: dict | None, variant: Variant) -> str:
    if not _done(run):
        return _not_done(run)
    metrics = run.get("metrics", {})
    if not collapsed_or_warned(metrics, chance(variant)):
        return "no"
    found = []
    if collapsed(metrics, chance(variant)):
        found.append(collapse_evidence("the rule", metrics, chance(variant)).split(": ", 1)[1])
    if "pretrain/collapse_step" in metrics:
        found.append(f"the engine warned at step {metrics['pretrain/collapse_step']:.0f}")
    return "yes: " + "; ".join(found)


def _verdict_table(study: Study, summary: dict, tag: str, seed: int) -> list[str]:
    base_variant = baseline(study)
    base = _run(summary, tag, base_variant.stem, seed) if base_variant else None
    spread = random_init_spread(summary, tag, PROTOCOL, base_variant.stem) \
        if base_variant else None
    lines = ["| run | 200-NN top-1 % [95% bootstrap] | gain over random init (points) | "
             "learned past random init | loss, first -> last epoch | last-epoch positive "
             "cosine | last-epoch z_std (x sqrt d) | collapsed | pretrain min |",
             "|---|---|---|---|---|---|---|---|---|"]
    for v in study.variants:
        run = _run(summary, tag, v.stem, seed)
        if v is base_variant:
            cells = [_accuracy(run), *["– (not trained)"] * 6]
        else:
            gain = _gain(run, base)
            cells = [_accuracy(run), _not_done(run) if not _done(run) else (
                         "–" if gain is None else f"{gain:+.2f}"),
                     _learned(run, gain, spread), _loss(run),
                     _number(run, "pretrain/final_positive_similarity", lambda c: f"{c:.3f}"),
                     _spread(run, v.stem), _collapsed(run, v)]
        cells.append(_minutes(run))
        lines.append(f"| {v.label} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _diagnostic(run: dict | None, protocol: str, metric) -> str:
    if isinstance(metric, str):
        return _number(run, f"{protocol}/{metric}", lambda x: f"{x:.3f}")
    positive, negative = (f"{protocol}/{m}" for m in metric)
    return _number(run, positive, lambda p: f"{p:.3f} / " + (
        f"{run['metrics'][negative]:.3f}" if negative in run["metrics"] else "–"))


def _diagnostics_table(study: Study, summary: dict, tag: str, seed: int) -> list[str]:
    header = [f"{layer}: {name}" for layer, _ in _LAYERS for name, _ in _DIAGNOSTICS]
    lines = ["| run | " + " | ".join(header) + " |", "|---|" + "---|" * len(header)]
    for v in study.variants:
        run = _run(summary, tag, v.stem, seed)
        cells = [_diagnostic(run, protocol, metric)
                 for _, protocol in _LAYERS for _, metric in _DIAGNOSTICS]
        lines.append(f"| {v.label} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def rule_lines(summary: dict, tag: str, study: Study) -> list[str]:
    """The two verdicts' rules and the columns' meaning, in words."""
    base_variant = baseline(study)
    spread = random_init_spread(summary, tag, PROTOCOL, base_variant.stem) \
        if base_variant else None
    measured = (f"{spread[0]:.2f} points over its {spread[1]} recorded seeds"
                if spread else "not measured yet: it needs two seeds")
    check = OnlineEvalSpec()
    dims = ", ".join(f"{v.label} {EMBEDDING_DIMS[v.stem]:,}" for v in study.variants
                     if v.stem in EMBEDDING_DIMS)
    return [
        f"*Learned past random init* (one seed has no t-interval): the run's 200-NN top-1 "
        f"minus that of the random init of its seed exceeds the random init's seed-to-seed "
        f"spread, the range of the random init's 200-NN top-1 over every seed recorded "
        f"({measured}): a gain no two random initialisations showed. *no* means not shown "
        "to learn at this budget, nothing about the method at the papers' budgets.",
        "",
        f"*Collapsed*: the other studies' rule (in the last epoch the two views' mean cosine "
        f"similarity >= {COLLAPSE_SIMILARITY}, and the loss down by less than "
        f"{COLLAPSE_MAX_DROP:.0%} or the 200-NN top-1 within {NEAR_CHANCE:g} points of "
        "chance), or the engine's collapse warning during training: `train/z_std` below "
        f"{check.collapse_spread:g} / sqrt(d), or the loss within "
        f"{check.collapse_loss_tolerance:g} (relative) of the value a collapse gives (Barlow "
        "Twins' d, VICReg's variance hinge at zero spread, SwAV's and DINO's log K), for "
        f"{check.collapse_steps} steps. The engine's signs are added because a high positive "
        "cosine is what BYOL, MoCo v3 and NNCLR train for, and SwAV's and DINO's collapse "
        "shows in their loss.",
        "",
        "*Positive cosine*: the mean cosine of the pair each loss matches (the two views' "
        "embeddings; BYOL's and MoCo v3's prediction against the other view's target, "
        "NNCLR's neighbour against the other view's prediction, DINO's student outputs of "
        "the two crops), the last epoch's logged steps. *z_std*: the spread of the "
        "L2-normalised online embedding (`train/z_std`, the same steps); x sqrt d: relative "
        "to unit vectors spread evenly over d dimensions (about 1; 0 when every embedding is "
        f"the same vector); d: {dims}.",
        "",
        "One seed at this budget ranks nothing: a difference between two rows mixes the seed, "
        "30 epochs of a quarter-width ResNet-18 on 10,000 images and a learning rate taken "
        "from the SimCLR rows, not tuned per method; no paper reports this scale. No peer "
        "publishes these diagnostics across methods (solo-learn and lightly publish "
        "accuracies only).",
        "",
    ]


def cpu_result(study: Study, summary: dict, stem: str) -> str:
    """One method's result in study 6 in words (``docs/methods.md`` quotes it, a test checks
    the quote): its 200-NN top-1, the random init's, and the two verdicts of the tables."""
    tag, seed = study.part, study.seeds[0]
    [variant] = [v for v in study.variants if v.stem == stem]
    run = _run(summary, tag, stem, seed)
    if not _done(run):
        return _failure(run) or PENDING
    base_variant = baseline(study)
    base = _run(summary, tag, base_variant.stem, seed)
    spread = random_init_spread(summary, tag, PROTOCOL, base_variant.stem)
    return (f"200-NN top-1 {_top1(run)} against {_top1(base)} for the random init; learned "
            f"past it: {_learned(run, _gain(run, base), spread)}; collapsed: "
            f"{_collapsed(run, variant)}")


def _top1(run: dict | None) -> str:
    return _number(run, f"{PROTOCOL}/top1", lambda top1: f"{100 * top1:.2f} %")


def baselines_cpu_lines(study: Study, summary: dict) -> list[str]:
    """Study 6's tables (its first seed, tag ``study.part``) and their rules."""
    tag, seed = study.part, study.seeds[0]
    return [
        f"Runs under `runs/repro/{tag}/`, seed {seed} (accuracies on the test split against "
        "the whole train split as bank; *pretrain min*: wall-clock minutes of the logged "
        "invocations on cores shared with other work, *≥* where a session's end stopped one "
        "before its cost was logged; *failed*: the run's last command failed, a diverged loss "
        "for one, with its step and error in the *learned* column):",
        "",
        *_verdict_table(study, summary, tag, seed),
        "The papers' diagnostics (`analyze`, test split) on the projector's output (the "
        "embedding each loss sees; for SwAV and DINO the embedding their prototypes score: "
        "SwAV's projector output, DINO's head's bottleneck, not the K prototype scores) and "
        "on the backbone's features (DySTreSS Table 13's layer): "
        "uniformity (DySTreSS eq. 16 after Wang & Isola: the log of the mean Gaussian "
        "potential of the pairs; lower is more uniform), tolerance (Wang & Liu: the mean cosine "
        "of same-class pairs), local separation (the mean cosine of an image's two views "
        "against that of its nearest other image, Wang & Liu supplement Fig. 1), DySTreSS's "
        "inter-class uniformity (eq. 18: the uniformity of the class centroids; lower is "
        "farther apart):",
        "",
        *_diagnostics_table(study, summary, tag, seed),
        *rule_lines(summary, tag, study),
    ]
