"""The one answer to "did pretraining help?" for a checkpoint on its data: kNN and the fast
linear probe, each against raw pixels and the random initialisation (:mod:`.baselines`),
weighed by :func:`~contrastkit.eval.verdict.weigh`.

``eval knn|linear|lowshot --baselines`` gives its own protocol's comparisons
(:func:`protocol_evidence`) and :func:`pretraining_verdict` adds the protocol it lacks (kNN with
the run's monitor settings, or the fast linear probe with its defaults and validation split),
computed by :func:`contrastkit.eval.protocols.companion_evidence` on the same cached features;
``analyze`` computes both. With the defaults, the three commands print the same verdict for one
checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from contrastkit.eval.baselines import comparisons
from contrastkit.eval.linear import too_small_text
from contrastkit.eval.verdict import Evidence, Verdict, weigh

#: A probe whose train top-1 exceeds its validation top-1 by more than this overfits.
OVERFIT_GAP = 0.2
#: The protocols the verdict always weighs (computed when a command lacks them), and the order.
COMPANIONS = ("knn", "linear")
_ORDER = ("knn", "linear", "lowshot")


def _linear_note(config: dict, metrics: dict, classes: int) -> str:
    stop = config.get("early_stopping")
    if not stop or metrics["train_top1"] - metrics["validation_top1"] <= OVERFIT_GAP:
        return ""
    return (f"The probe fits its {stop['num_fit']} training images (about "
            f"{stop['num_fit'] // max(classes, 1)} per class) far better than held-out ones "
            f"(train {100 * metrics['train_top1']:.1f}%, validation "
            f"{100 * metrics['validation_top1']:.1f}%): with so few labels this reading is "
            "weak either way.")


def protocol_evidence(protocol: str, config: dict, metrics: dict, classes: int,
                      baselines: dict) -> Evidence:
    """The :class:`~contrastkit.eval.verdict.Evidence` of one protocol's run with
    ``--baselines``: its name (``knn``, ``linear``, ``lowshot``), the pretrained run's
    ``config`` and ``metrics`` (as in ``results.json``), the number of classes and
    ``baselines`` (:func:`~contrastkit.eval.baselines.run_baselines`)."""
    c = config
    if protocol == "knn":
        return Evidence("knn", f"k {c['k']}, t {c['temperature']:g}", comparisons(baselines))
    if protocol == "lowshot":
        shots = "/".join(map(str, c["shots"]))
        return Evidence("lowshot", f"{shots} images per class, {len(c['seeds'])} seeds, "
                        f"{c['epochs']} epochs", comparisons(baselines))
    if protocol == "linear":
        stop, small = c.get("early_stopping"), c.get("validation_too_small")
        settings = f"{c['epochs']} epochs, last epoch"
        if stop:
            settings = (f"{c['epochs']} epochs, epoch {stop['best_epoch']} kept by a "
                        f"{100 * c['validation']:g}% validation split")
        elif small:
            settings += (f": the {100 * c['validation']:g}% validation split has "
                         f"{too_small_text(small)}")
        return Evidence("linear", settings, comparisons(baselines),
                        _linear_note(c, metrics, classes))
    raise ValueError(f"--baselines takes knn, linear or lowshot, not {protocol}")


def pretraining_verdict(given: Sequence[Evidence],
                        companion: Callable[[str], Evidence]) -> Verdict:
    """The verdict over ``given`` and over kNN and the fast linear probe where ``given`` lacks
    them (``companion(name)``: that protocol's evidence with its default options)."""
    evidence = {e.protocol: e for e in given}
    for name in COMPANIONS:
        if name not in evidence:
            evidence[name] = companion(name)
    return weigh([evidence[name] for name in _ORDER if name in evidence])
