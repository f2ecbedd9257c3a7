"""Pretraining methods: small compositions of encoder, target branch, queue and loss."""

from contrastkit.methods.base import ContrastiveMethod, StepOutput
from contrastkit.methods.momentum_contrast import SCE, MoCo, MomentumContrast, ReSSL
from contrastkit.methods.queue import MemoryQueue
from contrastkit.methods.simclr import SimCLR
from contrastkit.methods.supervised import SupervisedContrastive

__all__ = [
    "SCE",
    "ContrastiveMethod",
    "MemoryQueue",
    "MoCo",
    "MomentumContrast",
    "ReSSL",
    "SimCLR",
    "StepOutput",
    "SupervisedContrastive",
]
