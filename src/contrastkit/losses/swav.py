r"""SwAV (Caron et al. 2020, "Unsupervised Learning of Visual Features by Contrasting Cluster
Assignments", NeurIPS): the codes of one view, computed by Sinkhorn-Knopp, are predicted from
another view's prototype scores.

Notation: the projections :math:`z` are L2-normalised, the prototypes :math:`c_1..c_K` are unit
vectors (the columns of :math:`C`), the score of sample i for prototype k is
:math:`s_{ik} = z_i^\top c_k` (a cosine), and :math:`q_i` is the code of sample i, a
distribution over the K prototypes.

* :func:`sinkhorn_knopp` computes the codes of a batch: the solution of
  :math:`\max_{Q \in \mathcal{Q}} \mathrm{Tr}(Q^\top C^\top Z) + \varepsilon H(Q)` over the
  transportation polytope :math:`\mathcal{Q}` that splits the B samples equally among the K
  prototypes (eq. (3) of the arXiv version, where the swav README places ``--epsilon``, with
  the polytope after it), :math:`Q^* = \mathrm{Diag}(u) \exp(C^\top Z / \varepsilon)
  \mathrm{Diag}(v)`, the vectors u, v found by a few Sinkhorn-Knopp iterations.
* :func:`swav` is the swapped-prediction loss given the codes, the cross-entropy
  :math:`\ell(z_t, q_s) = -\sum_k q_s^{(k)} \log p_t^{(k)}`,
  :math:`p_t^{(k)} = \mathrm{softmax}_k(z_t^\top c_k / \tau)`, summed over each pair of views
  with swapped roles, and in the multi-crop form averaged over every other view of each view
  that has codes.

Both compute in float32 at least, with autocast off, whatever the inputs: with
:math:`\varepsilon = 0.05` and :math:`|s_{ik}| \le 1`, :math:`\exp(s / \varepsilon)` reaches
:math:`e^{20} \approx 4.9 \times 10^8`, beyond float16 (NaN reports of SwAV under 16-bit
precision: facebookresearch/swav issue 67, galilai-group/stable-pretraining PR 288).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from contrastkit.checks import (
    check_embedding_layout,
    check_embeddings,
    check_positive_float,
    check_same_shape,
)
from contrastkit.losses._normalize import autocast_off
from contrastkit.precision import at_least_float32

__all__ = ["sinkhorn_knopp", "swav"]


@torch.no_grad()
def sinkhorn_knopp(scores: Tensor, *, epsilon: float = 0.05, iterations: int = 3) -> Tensor:
    r"""SwAV's codes of a batch by the Sinkhorn-Knopp algorithm (Caron et al. 2020, eq. (3) and
    the solution :math:`Q^* = \mathrm{Diag}(u) \exp(C^\top Z/\varepsilon) \mathrm{Diag}(v)`).

    With :math:`Q = \exp(S^\top / \varepsilon)` (K x B) scaled to sum to 1, each iteration
    scales the rows to sum to 1/K (every prototype gets an equal share) and then the columns to
    sum to 1/B (every sample an equal weight); the codes are the columns times B, so each
    sample's code sums to 1. This is the official ``distributed_sinkhorn`` of
    facebookresearch/swav (``main_swav.py``) on one process. Each prototype's highest score is
    subtracted before the exponential: the first row scaling removes any factor of a row, so
    the codes are the same, and no exponential overflows (the official code's would above
    :math:`s / \varepsilon \approx 88` in float32).

    The codes take no gradient. Over several processes, call it on the global batch (the
    gathered scores, and a feature queue's), as :class:`contrastkit.methods.SwAV` does: the
    official code all-reduces the same sums.

    Args:
        scores: (B, K) prototype scores :math:`z_i^\top c_k` (B samples: the batch, and the
            queue's rows if any).
        epsilon: entropy weight :math:`\varepsilon` (0.05 in SwAV; 0.03 against collapse).
        iterations: Sinkhorn-Knopp iterations (3 in SwAV).

    Returns:
        (B, K) codes in float32 at least, each row summing to 1.

    Raises:
        ValueError: for scores that are not a finite (B, K) tensor, ``epsilon`` <= 0, or
            ``iterations`` < 1.
    """
    check_embeddings("scores", scores)
    check_positive_float("epsilon", epsilon)
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be an int >= 1, got {iterations!r}")
    scores = at_least_float32(scores.detach())
    batch, prototypes = scores.shape
    with autocast_off(scores):
        q = torch.exp((scores - scores.amax(dim=0)) / epsilon).t()  # (K, B), row maxima 1
        q /= q.sum()
        for _ in range(iterations):
            q /= q.sum(dim=1, keepdim=True)
            q /= prototypes
            q /= q.sum(dim=0, keepdim=True)
            q /= batch
        q *= batch
    return q.t()


def swav(scores: Sequence[Tensor], codes: Sequence[Tensor], *, temperature: float = 0.1) -> Tensor:
    r"""SwAV's swapped-prediction loss (Caron et al. 2020, eqs. (1)-(2) and the multi-crop form).

    View v's prototype scores :math:`s_v` (N, K) predict the codes :math:`q_a` of every other
    view a that has codes (the global crops, ``codes[a]`` for ``scores[a]``):

    .. math::
        L = \frac{1}{|A|} \sum_{a \in A} \frac{1}{V - 1} \sum_{v \ne a} \frac{1}{N} \sum_i
            -\sum_k q_{a,i}^{(k)} \log \mathrm{softmax}_k(s_{v,i} / \tau)

    With two views and codes for both, :math:`L = \frac12 [\ell(z_1, q_2) + \ell(z_2, q_1)]`,
    half of eq. (1) :math:`L(z_t, z_s) = \ell(z_t, q_s) + \ell(z_s, q_t)` averaged over the
    batch. This is the loss of the official ``main_swav.py``, solo-learn's ``swav_loss_func``
    (the same mean when every view with codes has the same number of other views) and
    lightly's ``SwaVLoss``. Uniform scores and codes give :math:`\log K`: the value at which a
    collapsed SwAV sits (swav README, "Common issues").

    Args:
        scores: V >= 2 tensors (N, K) of prototype scores, one per view (global crops first,
            then local crops), with gradient.
        codes: the (N, K) codes of the first ``len(codes)`` views (from
            :func:`sinkhorn_knopp`), detached here (stop-gradient).
        temperature: :math:`\tau` of the prediction softmax (0.1 in SwAV).

    Returns:
        Scalar tensor in float32 at least.

    Raises:
        ValueError: fewer than 2 views, no codes or more codes than views, shapes that differ,
            or a bad temperature.
    """
    check_positive_float("temperature", temperature)
    if len(scores) < 2:
        raise ValueError(f"scores must hold at least 2 views, got {len(scores)}")
    if not 1 <= len(codes) <= len(scores):
        raise ValueError(f"codes must hold 1 to {len(scores)} views (one per view with codes), "
                         f"got {len(codes)}")
    for i, s in enumerate(scores):
        check_embedding_layout(f"scores[{i}]", s)
        check_same_shape("scores[0]", scores[0], f"scores[{i}]", s)
    for i, q in enumerate(codes):
        check_embedding_layout(f"codes[{i}]", q)
        check_same_shape("scores[0]", scores[0], f"codes[{i}]", q)
    with autocast_off(scores[0]):
        log_p = [torch.log_softmax(at_least_float32(s) / temperature, dim=1) for s in scores]
        total = scores[0].new_zeros((), dtype=log_p[0].dtype)
        for a, q in enumerate(codes):
            q = at_least_float32(q.detach())
            subloss = sum(-(q * log_p[v]).sum(dim=1).mean() for v in range(len(scores)) if v != a)
            total = total + subloss / (len(scores) - 1)
    return total / len(codes)
