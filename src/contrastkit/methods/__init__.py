"""Pretraining methods: small compositions of encoder, target branch, queue and loss.

One file per method: ``simclr.py`` (SimCLR and its in-batch variants: DCL, the hard contrastive
loss of Wang & Liu 2021, DySTreSS of Manna et al. 2023), ``moco.py``, ``ressl.py`` and ``sce.py``
(Denize et al. 2023) over the momentum base of ``momentum_contrast.py``, and ``supervised.py``
(SupCon, SINCERE, epsilon-SupInfoNCE of Feeney & Hughes 2023), and the baselines ``swav.py``
(Caron et al. 2020), ``dino.py`` (Caron et al. 2021) and ``nnclr.py`` (Dwibedi et al. 2021).
``base.py`` holds what every method shares, ``queue.py`` the memory queue and ``shuffle_bn.py``
MoCo's shuffling BN.
"""

from contrastkit.methods.base import ContrastiveMethod, StepOutput
from contrastkit.methods.dino import DINO
from contrastkit.methods.moco import MoCo
from contrastkit.methods.momentum_contrast import MomentumContrast
from contrastkit.methods.nnclr import NNCLR
from contrastkit.methods.queue import MemoryQueue
from contrastkit.methods.ressl import ReSSL
from contrastkit.methods.sce import SCE
from contrastkit.methods.simclr import SimCLR
from contrastkit.methods.supervised import SupervisedContrastive
from contrastkit.methods.swav import SwAV

__all__ = [
    "DINO",
    "NNCLR",
    "SCE",
    "ContrastiveMethod",
    "MemoryQueue",
    "MoCo",
    "MomentumContrast",
    "ReSSL",
    "SimCLR",
    "StepOutput",
    "SupervisedContrastive",
    "SwAV",
]
