"""Former home of the supervised contrastive losses, now :mod:`contrastkit.losses.sincere`.

Kept so that ``from contrastkit.losses.supervised import sincere`` (and the other names) still
works; new code imports from :mod:`contrastkit.losses` or :mod:`contrastkit.losses.sincere`.
"""

from contrastkit.losses.sincere import (
    EpsSupInfoNCELoss,
    SINCERELoss,
    SupConLoss,
    eps_supinfonce,
    sincere,
    supcon,
)

__all__ = ["EpsSupInfoNCELoss", "SINCERELoss", "SupConLoss", "eps_supinfonce", "sincere", "supcon"]
