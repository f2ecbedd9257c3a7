"""The first round's results of the claims the second round reruns (issue 38), and why each was
superseded: shown beside a claim while its second-round runs are pending, never as a verdict.

The first round's page and records are in git history at :data:`FIRST_ROUND_COMMIT`
(``git show b27d5e1:docs/reproduction.md``); its SimCLR, DySTreSS, SINCERE and SupCon records
were removed when the second round's plan was fixed, so the values are kept here as text, quoted
from that page (95% t-intervals over its 3 seeds). The DySTreSS claim against SimCLR at
t = 0.2, new in the second round, gives the same t-interval computed from that page's records.
"""

from __future__ import annotations

#: The commit whose page and records hold the first round's results.
FIRST_ROUND_COMMIT = "b27d5e1"

#: The verdict of a claim of the second round while its runs are not all finished.
PENDING = "pending rerun (second-round plan)"

_SINCERE_WHY = ("one temperature and learning rate were shared by SINCERE and SupCon, where the "
                "paper tunes each loss (App. J)")
_LAYER_WHY = ("it read the backbone's features; the projector's output is now the claims' "
              "primary layer (fixed before the rerun), on runs of one recorded checkout")
_RETRAIN_WHY = ("its SimCLR and DySTreSS records name no checkout (a seed trained again moved "
                "200-NN by about 1 point); retrained with one recorded checkout")
_NO_CIFAR2 = f"the first round ({FIRST_ROUND_COMMIT}) ran no CIFAR-2 study"

#: Claim id -> (the first round's result, why it was superseded); a claim new in the second
#: round: (None, why the first round has no result for it).
SUPERSEDED: dict[str, tuple[str | None, str]] = {
    "sincere-margin": ("+0.017 [+0.012, +0.023], reproduced", _SINCERE_WHY),
    "sincere-loss": ("+0.685 [+0.623, +0.747], reproduced", _SINCERE_WHY),
    "sincere-knn1": ("+10.3 [+7.4, +13.2] points, tested as 'not worse' and called reproduced, "
                     "where the paper finds the two indistinguishable", _SINCERE_WHY),
    "sincere-knn5": ("+8.9 [+5.6, +12.2] points, tested as 'not worse' and called reproduced, "
                     "where the paper finds the two indistinguishable", _SINCERE_WHY),
    "cifar2-margin": (None, _NO_CIFAR2),
    "cifar2-loss": (None, _NO_CIFAR2),
    "cifar2-knn1": (None, _NO_CIFAR2),
    "cifar2-knn5": (None, _NO_CIFAR2),
    "t-uniformity": ("backbone -0.325 [-0.404, -0.246], the opposite direction; a side check on "
                     "the projector's output (seed 0 retrained) +0.671 [+0.641, +0.700], not a "
                     "verdict", _LAYER_WHY),
    "t-tolerance": ("backbone -0.072 [-0.090, -0.055], the opposite direction; projector side "
                    "check +0.080 [+0.068, +0.092], not a verdict", _LAYER_WHY),
    "t-local-separation": ("backbone +0.033 [+0.028, +0.039], reproduced; projector side check "
                           "+0.096 [+0.073, +0.120], not a verdict", _LAYER_WHY),
    "t-uniformity-backbone": ("-0.325 [-0.404, -0.246], the opposite direction (called not "
                              "reproduced)", _LAYER_WHY),
    "t-tolerance-backbone": ("-0.072 [-0.090, -0.055], the opposite direction (called not "
                             "reproduced)", _LAYER_WHY),
    "t-local-separation-backbone": ("+0.033 [+0.028, +0.039], reproduced", _LAYER_WHY),
    "dys-knn": ("-0.14 [-3.27, +2.99] points (computed from its records: that round's claim was "
                "against the best fixed temperature)", _RETRAIN_WHY),
    "dys-knn-best": ("-2.70 [-4.80, -0.60] points, 0/3 seeds positive: below 0, shown then as "
                     "not testable (paper effect below the MDE)", _RETRAIN_WHY),
    "dys-unif": ("+0.057 [+0.013, +0.101], reproduced", _RETRAIN_WHY),
    "dys-interclass": ("-0.001 [-0.017, +0.015], not testable (paper effect below the MDE)",
                       _RETRAIN_WHY),
    "dys-align": ("+0.0097 [-0.0067, +0.026], not reproduced (now not comparable, see its note)",
                  _RETRAIN_WHY),
}


def pending_verdict(claim_id: str) -> str:
    """``pending rerun (second-round plan); first round (b27d5e1): RESULT; superseded: WHY``
    (a claim new in the second round: ``...; new in the second round: WHY``).

    Raises:
        KeyError: for a claim of the second round without a first-round entry (a test keeps
            every such claim listed).
    """
    result, why = SUPERSEDED[claim_id]
    if result is None:
        return f"{PENDING}; new in the second round: {why}"
    return f"{PENDING}; first round ({FIRST_ROUND_COMMIT}): {result}; superseded: {why}"
