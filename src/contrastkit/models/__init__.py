"""contrastkit.models: backbones, projector/predictor heads and the momentum (EMA) branch.

* :mod:`~contrastkit.models.resnet`: ResNet-18/34/50 with the SCE CIFAR stem option.
* :mod:`~contrastkit.models.torchvision_layout`: export/load in torchvision's key layout.
* :mod:`~contrastkit.models.convnet`: small CPU convnet for 8x8 to 32x32 inputs.
* :mod:`~contrastkit.models.resnet3d`: ResNet3D-18/50 slow pathway (SCE Table 23).
* :mod:`~contrastkit.models.heads`: MLP projector/predictor (SCE Tables 21 and 24).
* :mod:`~contrastkit.models.momentum`: EMA target branch and cosine momentum schedule.
* :mod:`~contrastkit.models.prototypes`: SwAV's prototypes, DINO's head (weight-normalised last
  layer).
"""

from contrastkit.models.convnet import SmallConvNet, small_convnet
from contrastkit.models.heads import MLPHead, predictor, projector
from contrastkit.models.momentum import MomentumBranch, cosine_momentum
from contrastkit.models.prototypes import DINOHead, WeightNormLinear, normalize_prototypes_
from contrastkit.models.resnet import BasicBlock, Bottleneck, ResNet, resnet18, resnet34, resnet50
from contrastkit.models.resnet3d import (
    BasicBlock3D,
    Bottleneck3D,
    ResNet3D,
    resnet3d_18,
    resnet3d_50,
)
from contrastkit.models.torchvision_layout import (
    load_torchvision_state_dict,
    to_torchvision_state_dict,
)

__all__ = [
    "BasicBlock",
    "BasicBlock3D",
    "Bottleneck",
    "Bottleneck3D",
    "DINOHead",
    "MLPHead",
    "MomentumBranch",
    "ResNet",
    "ResNet3D",
    "SmallConvNet",
    "WeightNormLinear",
    "cosine_momentum",
    "load_torchvision_state_dict",
    "normalize_prototypes_",
    "predictor",
    "projector",
    "resnet3d_18",
    "resnet3d_50",
    "resnet18",
    "resnet34",
    "resnet50",
    "small_convnet",
    "to_torchvision_state_dict",
]
