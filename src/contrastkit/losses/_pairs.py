"""Query/key pairs of the self-supervised contrastive losses and their positive logits (private).

:func:`prepare_pairs` validates a query/key batch (and an optional queue of negatives),
normalises query and key (:mod:`._normalize`) and says which candidates are each anchor's
negatives; :func:`positive_logits` gives ``pos_i = q_i . k_i / tau``. The log-sum-exp over the
negatives is :func:`._logsumexp.negative_lse`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from contrastkit.checks import (
    check_batch_has_negatives,
    check_embedding_layout,
    check_same_dim,
    check_same_dtype,
    check_same_shape,
)
from contrastkit.losses._logsumexp import Candidates, call_temperature
from contrastkit.losses._normalize import checked_norms, normalize_checked, rowdot
from contrastkit.precision import at_least_float32


@dataclass(frozen=True)
class Pairs:
    """Normalised query/key and the negatives of each anchor.

    ``diagonals`` lists the diagonals of the (N, M) logit matrix that are not negatives
    (in-batch: the anchor's own key, offset 0).
    """

    query: Tensor
    key: Tensor
    negatives: Candidates
    diagonals: tuple[int, ...]


def prepare_pairs(query: Tensor, key: Tensor, negatives: Tensor | None) -> Pairs:
    """Validate query/key (and optional negatives); normalise query and key.

    In-batch (``negatives`` None) the negatives of anchor i are the keys j != i. float16/bfloat16
    inputs are cast to float32 (the loss computes in float32 or wider, :mod:`._normalize`).

    Raises:
        ValueError: on bad shapes, NaN/Inf, mixed dtypes, or a batch of one without
            ``negatives`` (in-batch negatives need at least two samples).
    """
    check_embedding_layout("query", query)
    check_embedding_layout("key", key)
    check_same_shape("query", query, "key", key)
    check_same_dtype("query", query, "key", key)
    if negatives is None:
        check_batch_has_negatives("query", query)
    else:
        check_embedding_layout("negatives", negatives)
        check_same_dim("query", query, "negatives", negatives)
        check_same_dtype("query", query, "negatives", negatives)
        negatives = at_least_float32(negatives)
    query, key = at_least_float32(query), at_least_float32(key)
    query_hat, _ = normalize_checked("query", query)
    key_hat, key_norms = normalize_checked("key", key)
    if negatives is None:
        return Pairs(query_hat, key_hat, Candidates(key, key_norms), (0,))
    cands = Candidates(negatives, checked_norms("negatives", negatives))
    return Pairs(query_hat, key_hat, cands, ())


def positive_logits(
    query: Tensor, key: Tensor, temperature: float | Tensor | Callable[[Tensor], Tensor]
) -> Tensor:
    """Row-wise ``(query_i . key_i) / tau`` for normalised inputs; ``tau`` a float (or 0-d
    tensor) or a function of the detached similarity. Shape (N,), in the inputs' dtype."""
    sim = rowdot(query, key)
    if callable(temperature):
        return sim / call_temperature(temperature, sim.detach())
    return sim / temperature
