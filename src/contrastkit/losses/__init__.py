"""Contrastive losses of SCE, Understanding the Behaviour of Contrastive Loss, DySTreSS and SINCERE,
and the non-contrastive baselines Barlow Twins and VICReg.

Every loss is a pure function on embeddings with an ``nn.Module`` wrapper taking the same
keyword arguments; the contrastive ones L2-normalise inside and return the mean over anchors,
the two baselines standardise or regularise each dimension over the batch. One file per paper:

* ``sce.py``: :func:`ressl`, :func:`sce`, :func:`sce_terms` (Denize et al. 2023) and
  :func:`sce_reference`, eqs. 8-10 as the paper writes them;
* ``hard_contrastive.py``: :func:`hard_contrastive` (Wang & Liu 2021);
* ``dystress.py``: temperatures as functions of the cosine similarity (Manna et al. 2023);
* ``temperature.py``: every value a ``temperature`` may take (:data:`Temperature`), its check
  and :func:`resolve_temperature`; the temperature schedules of Kukleva et al. 2023 and MACL
  (Huang et al. 2023) live in :mod:`contrastkit.schedules` and are re-exported here;
* ``sincere.py``: :func:`supcon`, :func:`sincere`, :func:`eps_supinfonce` (Feeney & Hughes 2023);
* ``infonce.py``: the baselines :func:`info_nce`, :func:`nt_xent`, :func:`dcl`, and
  :func:`simcse` (Gao et al. 2021: InfoNCE on two dropout encodings of each sentence);
* ``barlow_twins.py``: :func:`barlow_twins` (Zbontar et al. 2021);
* ``vicreg.py``: :func:`vicreg` and :func:`vicreg_terms` (Bardes et al. 2022).

Private numerics: ``_normalize.py`` (L2 normalisation), ``_logsumexp.py`` (fused log-sum-exp over
the negatives), ``_hard_negatives.py`` (hard-negative selection), ``_pairs.py`` (query/key
pairs), ``_matrix.py`` (the off-diagonal entries of a square matrix). Argument validation:
:mod:`contrastkit.checks`.
"""

from contrastkit.losses.barlow_twins import BarlowTwinsLoss, barlow_twins
from contrastkit.losses.dystress import (
    DySTreSSTemperature,
    ExponentialTemperature,
    LinearTemperature,
    MonotonicCosineTemperature,
)
from contrastkit.losses.hard_contrastive import HardContrastiveLoss, hard_contrastive
from contrastkit.losses.infonce import (
    DCLLoss,
    InfoNCELoss,
    NTXentLoss,
    dcl,
    info_nce,
    nt_xent,
    simcse,
)
from contrastkit.losses.sce import RESSLLoss, SCELoss, ressl, sce, sce_reference, sce_terms
from contrastkit.losses.sincere import (
    EpsSupInfoNCELoss,
    SINCERELoss,
    SupConLoss,
    eps_supinfonce,
    sincere,
    supcon,
)
from contrastkit.losses.temperature import (
    PairTemperature,
    SimilarityTemperature,
    Temperature,
    resolve_temperature,
)
from contrastkit.losses.vicreg import VICRegLoss, vicreg, vicreg_terms
from contrastkit.schedules import KuklevaCosineTemperature, MACLTemperature

__all__ = [
    "BarlowTwinsLoss",
    "DCLLoss",
    "DySTreSSTemperature",
    "EpsSupInfoNCELoss",
    "ExponentialTemperature",
    "HardContrastiveLoss",
    "InfoNCELoss",
    "KuklevaCosineTemperature",
    "LinearTemperature",
    "MACLTemperature",
    "MonotonicCosineTemperature",
    "NTXentLoss",
    "PairTemperature",
    "RESSLLoss",
    "SCELoss",
    "SINCERELoss",
    "SimilarityTemperature",
    "SupConLoss",
    "Temperature",
    "VICRegLoss",
    "barlow_twins",
    "dcl",
    "eps_supinfonce",
    "hard_contrastive",
    "info_nce",
    "nt_xent",
    "resolve_temperature",
    "ressl",
    "sce",
    "sce_reference",
    "sce_terms",
    "simcse",
    "sincere",
    "supcon",
    "vicreg",
    "vicreg_terms",
]
