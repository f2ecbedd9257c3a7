"""Contrastive losses of SCE, Understanding the Behaviour of Contrastive Loss, DySTreSS and SINCERE,
and of the baselines in their comparison tables.

Every loss is a pure function on embeddings with, for most, an ``nn.Module`` wrapper taking the
same keyword arguments. The contrastive ones L2-normalise inside and return the mean over
anchors; SwAV's and DINO's take prototype scores and head outputs; Barlow Twins and VICReg
standardise or regularise each dimension over the batch. One file per paper:

* ``sce.py``: :func:`ressl`, :func:`sce`, :func:`sce_terms` (Denize et al. 2023) and
  :func:`sce_reference`, eqs. 8-10 as the paper writes them;
* ``hard_contrastive.py``: :func:`hard_contrastive` (Wang & Liu 2021);
* ``dystress.py``: temperatures as functions of the cosine similarity (Manna et al. 2023);
* ``temperature.py``: every value a ``temperature`` may take (:data:`Temperature`), its check
  and :func:`resolve_temperature`; the temperature schedules of Kukleva et al. 2023 and MACL
  (Huang et al. 2023) live in :mod:`contrastkit.schedules` and are re-exported here;
* ``sincere.py``: :func:`supcon`, :func:`sincere`, :func:`eps_supinfonce` (Feeney & Hughes 2023);
* ``infonce.py``: the baselines :func:`info_nce`, :func:`nt_xent`, :func:`dcl`, :func:`dclw`
  (Yeh et al. 2022), :func:`moco_v3` (Chen, Xie & He 2021), and :func:`simcse` (Gao et al.
  2021: InfoNCE on two dropout encodings of each sentence);
* ``byol.py``: :func:`byol` (Grill et al. 2020); ``wmse.py``: :func:`wmse` (Ermolov et al.
  2021, whitening by Cholesky factors of sub-batch covariances);
* ``swav.py``: :func:`sinkhorn_knopp` and :func:`swav` (Caron et al. 2020);
* ``dino.py``: :func:`dino` (Caron et al. 2021);
* ``nnclr.py``: :func:`nearest_neighbours` and :func:`nnclr` (Dwibedi et al. 2021).
* ``barlow_twins.py``: :func:`barlow_twins` (Zbontar et al. 2021);
* ``vicreg.py``: :func:`vicreg` and :func:`vicreg_terms` (Bardes et al. 2022).

Private numerics: ``_normalize.py`` (L2 normalisation), ``_logsumexp.py`` (fused log-sum-exp over
the negatives), ``_hard_negatives.py`` (hard-negative selection), ``_pairs.py`` (query/key
pairs), ``_matrix.py`` (the off-diagonal entries of a square matrix). Argument validation:
:mod:`contrastkit.checks`.
"""

from contrastkit.losses.barlow_twins import BarlowTwinsLoss, barlow_twins
from contrastkit.losses.byol import BYOLLoss, byol
from contrastkit.losses.dino import dino
from contrastkit.losses.dystress import (
    DySTreSSTemperature,
    ExponentialTemperature,
    LinearTemperature,
    MonotonicCosineTemperature,
)
from contrastkit.losses.hard_contrastive import HardContrastiveLoss, hard_contrastive
from contrastkit.losses.infonce import (
    DCLLoss,
    DCLWLoss,
    InfoNCELoss,
    MoCoV3Loss,
    NTXentLoss,
    dcl,
    dclw,
    info_nce,
    moco_v3,
    nt_xent,
    simcse,
)
from contrastkit.losses.nnclr import nearest_neighbours, nnclr
from contrastkit.losses.sce import RESSLLoss, SCELoss, ressl, sce, sce_reference, sce_terms
from contrastkit.losses.sincere import (
    EpsSupInfoNCELoss,
    SINCERELoss,
    SupConLoss,
    eps_supinfonce,
    sincere,
    supcon,
)
from contrastkit.losses.swav import sinkhorn_knopp, swav
from contrastkit.losses.temperature import (
    PairTemperature,
    SimilarityTemperature,
    Temperature,
    resolve_temperature,
)
from contrastkit.losses.vicreg import VICRegLoss, vicreg, vicreg_terms
from contrastkit.losses.wmse import WMSELoss, wmse
from contrastkit.schedules import KuklevaCosineTemperature, MACLTemperature

__all__ = [
    "BYOLLoss",
    "BarlowTwinsLoss",
    "DCLLoss",
    "DCLWLoss",
    "DySTreSSTemperature",
    "EpsSupInfoNCELoss",
    "ExponentialTemperature",
    "HardContrastiveLoss",
    "InfoNCELoss",
    "KuklevaCosineTemperature",
    "LinearTemperature",
    "MACLTemperature",
    "MoCoV3Loss",
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
    "WMSELoss",
    "barlow_twins",
    "byol",
    "dcl",
    "dclw",
    "dino",
    "eps_supinfonce",
    "hard_contrastive",
    "info_nce",
    "moco_v3",
    "nearest_neighbours",
    "nnclr",
    "nt_xent",
    "resolve_temperature",
    "ressl",
    "sce",
    "sce_reference",
    "sce_terms",
    "simcse",
    "sincere",
    "sinkhorn_knopp",
    "supcon",
    "swav",
    "vicreg",
    "vicreg_terms",
    "wmse",
]
