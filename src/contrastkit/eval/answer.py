"""The one answer to "did pretraining help?" for a checkpoint on its data: kNN and the fast
linear probe, each against raw pixels and the random initialisation (:mod:`.baselines`),
weighed by :func:`~contrastkit.eval.verdict.weigh`.

``eval knn|linear|lowshot --baselines`` gives its own protocol's comparisons and this adds the
protocol it lacks (kNN with the run's monitor settings, or the fast linear probe with its
defaults and validation split) on the same cached features; ``analyze`` computes both. With
the defaults, the three commands print the same verdict for one checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

from contrastkit.eval.baselines import comparisons, run_baselines
from contrastkit.eval.protocols import (
    KNN_K,
    RUNNERS,
    KnnEval,
    LinearEval,
    LowshotEval,
    Outcome,
    Protocol,
)
from contrastkit.eval.setup import Setup, open_split
from contrastkit.eval.verdict import Evidence, Verdict, weigh

#: A probe whose train top-1 exceeds its validation top-1 by more than this overfits.
OVERFIT_GAP = 0.2
_ORDER = ("knn", "linear", "lowshot")


def _linear_note(outcome: Outcome) -> str:
    m, stop = outcome.metrics, outcome.config.get("early_stopping")
    if not stop or m["train_top1"] - m["validation_top1"] <= OVERFIT_GAP:
        return ""
    classes = int(outcome.labels.max()) + 1
    return (f"The probe fits its {stop['num_fit']} training images (about "
            f"{stop['num_fit'] // max(classes, 1)} per class) far better than held-out ones "
            f"(train {100 * m['train_top1']:.1f}%, validation {100 * m['validation_top1']:.1f}%)"
            ": with so few labels this reading is weak either way.")


def protocol_evidence(protocol: Protocol, outcome: Outcome, baselines: dict) -> Evidence:
    """The :class:`~contrastkit.eval.verdict.Evidence` of one protocol's run with
    ``--baselines`` (``outcome``: the pretrained model's; ``baselines``: of
    :func:`~contrastkit.eval.baselines.run_baselines`)."""
    c = outcome.config
    if isinstance(protocol, KnnEval):
        return Evidence("knn", f"k {c['k']}, t {c['temperature']:g}", comparisons(baselines))
    if isinstance(protocol, LowshotEval):
        shots = "/".join(map(str, c["shots"]))
        return Evidence("lowshot", f"{shots} images per class, {len(c['seeds'])} seeds, "
                        f"{c['epochs']} epochs", comparisons(baselines))
    if isinstance(protocol, LinearEval):
        stop = c.get("early_stopping")
        settings = f"{c['epochs']} epochs" + (
            f", epoch {stop['best_epoch']} kept by a {100 * c['validation']:g}% validation split"
            if stop else ", last epoch")
        return Evidence("linear", settings, comparisons(baselines), _linear_note(outcome))
    raise ValueError(f"--baselines takes knn, linear or lowshot, not {protocol.name}")


def _companion(s: Setup, name: str) -> Evidence:
    """``name`` (``knn`` or ``linear``) with its default options, against the baselines."""
    if name == "knn":
        bank = len(open_split(s, s.request.train_split))  # type: ignore[arg-type]
        options: Protocol = KnnEval(k=min(int(s.run.knn_k or KNN_K), bank))
    else:
        options = LinearEval()
    runner = RUNNERS[name]
    outcome = runner(s, options, None)
    return protocol_evidence(options, outcome,
                             run_baselines(s, lambda b, o: runner(b, options, o), outcome))


def pretraining_verdict(s: Setup, given: Sequence[Evidence] = ()) -> Verdict:
    """The verdict over ``given`` and kNN and the fast linear probe where ``given`` lacks them
    (computed with their default options on ``s``'s cached features)."""
    evidence = {e.protocol: e for e in given}
    for name in ("knn", "linear"):
        if name not in evidence:
            evidence[name] = _companion(s, name)
    return weigh([evidence[name] for name in _ORDER if name in evidence])
