"""Pretraining methods: small compositions of encoder, target branch, queue and loss.

One file per method: ``simclr.py`` (SimCLR and its in-batch variants: DCL, the hard contrastive
loss of Wang & Liu 2021, DySTreSS of Manna et al. 2023), ``moco.py``, ``ressl.py`` and ``sce.py``
(Denize et al. 2023) over the momentum base of ``momentum_contrast.py``, and ``supervised.py``
(SupCon, SINCERE, epsilon-SupInfoNCE of Feeney & Hughes 2023); the non-contrastive baselines
``barlow_twins.py`` (Zbontar et al. 2021) and ``vicreg.py`` (Bardes et al. 2022). ``base.py``
holds what every method shares, ``queue.py`` the memory queue and ``shuffle_bn.py`` MoCo's
shuffling BN.
"""

from contrastkit.methods.barlow_twins import BarlowTwins
from contrastkit.methods.base import ContrastiveMethod, StepOutput
from contrastkit.methods.moco import MoCo
from contrastkit.methods.momentum_contrast import MomentumContrast
from contrastkit.methods.queue import MemoryQueue
from contrastkit.methods.ressl import ReSSL
from contrastkit.methods.sce import SCE
from contrastkit.methods.simclr import SimCLR
from contrastkit.methods.supervised import SupervisedContrastive
from contrastkit.methods.vicreg import VICReg

__all__ = [
    "SCE",
    "BarlowTwins",
    "ContrastiveMethod",
    "MemoryQueue",
    "MoCo",
    "MomentumContrast",
    "ReSSL",
    "SimCLR",
    "StepOutput",
    "SupervisedContrastive",
    "VICReg",
]
