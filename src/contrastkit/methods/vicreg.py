"""VICReg (Bardes, Ponce & LeCun 2022): invariance between the two views' embeddings, a hinge
on each dimension's spread and a penalty on its covariances (:func:`contrastkit.losses.vicreg`).

Symmetric: both views through the same encoder and expander (the projector); no predictor,
no momentum branch, no stop-gradient.
"""

from __future__ import annotations

import math

from torch import Tensor

from contrastkit.checks import check_non_negative_float
from contrastkit.distributed import gather_with_grad
from contrastkit.losses import vicreg_terms
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import ScheduleState

#: The official expander (facebookresearch/vicreg ``main_vicreg.py``, ``--mlp
#: 8192-8192-8192``): (Linear, BN, ReLU) x 2, then a Linear without bias. Its hidden linear
#: layers have a bias, which the BN after them cancels (contrastkit's hidden layers have none).
OFFICIAL_EXPANDER = HeadSpec(hidden_dim=8192, out_dim=8192, num_layers=3, last_bias=False)


class VICReg(ContrastiveMethod):
    """VICReg (Bardes et al. 2022).

    Args:
        backbone: backbone description.
        projector: the expander; default: the official one (3 layers of 8192).
        sim_coeff, std_coeff, cov_coeff: the weights of the invariance, variance and
            covariance terms (25, 25, 1: the paper's and the official code's).
        halve_variance: average the two views' variance terms as the official code does
            (True) or sum them as the paper's eq. 6 and solo-learn do (False).

    Distributed: as the official code, the invariance is computed on each process's own rows
    and the variance and covariance on the embeddings gathered with gradient from every
    process; DDP's average of the gradients is the one-process gradient on the whole batch
    (each process's loss is its own invariance plus the global terms: their mean over the
    processes is the one-process loss).
    """

    default_views = ("strong_alpha", "strong_beta")

    def __init__(self, backbone: BackboneSpec | None = None, projector: HeadSpec | None = None,
                 sim_coeff: float = 25.0, std_coeff: float = 25.0, cov_coeff: float = 1.0,
                 halve_variance: bool = True) -> None:
        for name, value in (("sim_coeff", sim_coeff), ("std_coeff", std_coeff),
                            ("cov_coeff", cov_coeff)):
            check_non_negative_float(name, value)
        super().__init__(backbone=backbone, projector=projector or OFFICIAL_EXPANDER)
        self.coeffs = {"invariance": sim_coeff, "variance": std_coeff, "covariance": cov_coeff}
        self.halve_variance = halve_variance

    def collapse_loss(self) -> float:
        """A constant embedding: every hinge is ``1 - sqrt(1e-4)``, twice without halving."""
        return self.coeffs["variance"] * (1 - math.sqrt(1e-4)) * (1 if self.halve_variance else 2)

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        f1, z1 = self.encode(views[0])
        _, z2 = self.encode(views[1])
        terms = vicreg_terms(z1, z2, global_views=(gather_with_grad(z1), gather_with_grad(z2)),
                             halve_variance=self.halve_variance)
        loss = sum(self.coeffs[name] * value for name, value in terms.items())
        logs = {**{name: value.detach() for name, value in terms.items()},
                "positive_similarity": lambda: cosine_of_pairs(z1, z2).mean()}
        return StepOutput(loss=loss, features=f1.detach(), logs=logs, embedding=z1)
