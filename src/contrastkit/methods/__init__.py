"""Pretraining methods: small compositions of encoder, target branch, queue and loss.

One file per method: ``simclr.py`` (SimCLR and its in-batch variants: DCL, DCLW, the hard
contrastive loss of Wang & Liu 2021, DySTreSS of Manna et al. 2023), ``moco.py``, ``ressl.py``
and ``sce.py`` (Denize et al. 2023) over the momentum base of ``momentum_contrast.py``,
``supervised.py`` (SupCon, SINCERE, epsilon-SupInfoNCE of Feeney & Hughes 2023), and the
baselines ``byol.py`` (BYOL), ``moco_v3.py`` (MoCo v3), ``wmse.py`` (W-MSE), ``swav.py``
(SwAV), ``dino.py`` (DINO), ``nnclr.py`` (NNCLR), ``barlow_twins.py`` (Barlow Twins) and
``vicreg.py`` (VICReg). ``base.py`` holds what every method shares, ``queue.py`` the memory
queue and ``shuffle_bn.py`` MoCo's shuffling BN.
"""

from contrastkit.methods.barlow_twins import BarlowTwins
from contrastkit.methods.base import ContrastiveMethod, StepOutput
from contrastkit.methods.byol import BYOL
from contrastkit.methods.dino import DINO
from contrastkit.methods.moco import MoCo
from contrastkit.methods.moco_v3 import MoCoV3
from contrastkit.methods.momentum_contrast import MomentumContrast
from contrastkit.methods.nnclr import NNCLR
from contrastkit.methods.queue import MemoryQueue
from contrastkit.methods.ressl import ReSSL
from contrastkit.methods.sce import SCE
from contrastkit.methods.simclr import SimCLR
from contrastkit.methods.supervised import SupervisedContrastive
from contrastkit.methods.swav import SwAV
from contrastkit.methods.vicreg import VICReg
from contrastkit.methods.wmse import WMSE

__all__ = [
    "BYOL",
    "DINO",
    "NNCLR",
    "SCE",
    "WMSE",
    "BarlowTwins",
    "ContrastiveMethod",
    "MemoryQueue",
    "MoCo",
    "MoCoV3",
    "MomentumContrast",
    "ReSSL",
    "SimCLR",
    "StepOutput",
    "SupervisedContrastive",
    "SwAV",
    "VICReg",
]
