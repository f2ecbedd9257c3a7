"""Contrastive losses of SCE, Understanding the Behaviour of Contrastive Loss, DySTreSS and SINCERE.

Every loss is a pure function on embeddings (L2-normalised inside) returning the mean over
anchors, with an ``nn.Module`` wrapper taking the same keyword arguments:

* :func:`info_nce`, :func:`nt_xent`, :func:`dcl`, :func:`hard_contrastive` (``infonce.py``);
* :func:`ressl`, :func:`sce`, :func:`sce_terms` (``sce.py``);
* :func:`supcon`, :func:`sincere`, :func:`eps_supinfonce` (``supervised.py``);
* temperatures as functions of the cosine similarity (DySTreSS, ``temperature.py``).
"""

from contrastkit.losses.infonce import (
    DCLLoss,
    HardContrastiveLoss,
    InfoNCELoss,
    NTXentLoss,
    dcl,
    hard_contrastive,
    info_nce,
    nt_xent,
)
from contrastkit.losses.sce import RESSLLoss, SCELoss, ressl, sce, sce_terms
from contrastkit.losses.supervised import (
    EpsSupInfoNCELoss,
    SINCERELoss,
    SupConLoss,
    eps_supinfonce,
    sincere,
    supcon,
)
from contrastkit.losses.temperature import (
    DySTreSSTemperature,
    ExponentialTemperature,
    LinearTemperature,
    MonotonicCosineTemperature,
    PairTemperature,
)

__all__ = [
    "DCLLoss",
    "DySTreSSTemperature",
    "EpsSupInfoNCELoss",
    "ExponentialTemperature",
    "HardContrastiveLoss",
    "InfoNCELoss",
    "LinearTemperature",
    "MonotonicCosineTemperature",
    "NTXentLoss",
    "PairTemperature",
    "RESSLLoss",
    "SCELoss",
    "SINCERELoss",
    "SupConLoss",
    "dcl",
    "eps_supinfonce",
    "hard_contrastive",
    "info_nce",
    "nt_xent",
    "ressl",
    "sce",
    "sce_terms",
    "sincere",
    "supcon",
]
