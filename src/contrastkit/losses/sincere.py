"""Supervised contrastive losses of the SINCERE paper: SupCon, SINCERE and ε-SupInfoNCE.

All three are written from Feeney & Hughes 2023, *SINCERE: Supervised Information
Noise-Contrastive Estimation REvisited*, and share its notation and pair masks below, hence one
file (SupCon is the loss that paper revisits, ε-SupInfoNCE its margin variant):

* SupCon, eq. 3 (equal to Khosla et al. 2020, eq. 2 / ``L_out``, as shown in App. I),
* SINCERE, eq. 12,
* ε-SupInfoNCE of Barbano et al. 2023, eq. 15.

Notation. The batch holds ``M`` embeddings ``z_i`` (unit vectors after L2 normalisation) with
labels ``y_i``; ``s_ij = z_i · z_j`` is the cosine similarity and ``τ`` the temperature. For an
anchor ``S``: ``P(S) = {p ≠ S : y_p = y_S}`` (same-class partners) and
``N(S) = {n : y_n ≠ y_S}`` (noise). The pair losses are

.. code-block:: text

    SupCon       ℓ(S, p) = -log  exp(s_Sp/τ) / Σ_{a ≠ S} exp(s_Sa/τ)
    SINCERE      ℓ(S, p) = -log  exp(s_Sp/τ) / (exp(s_Sp/τ)     + Σ_{n ∈ N(S)} exp(s_Sn/τ))
    ε-SupInfoNCE ℓ(S, p) = -log  exp(s_Sp/τ) / (exp(s_Sp/τ - ε) + Σ_{n ∈ N(S)} exp(s_Sn/τ))

and the batch loss is ``mean_{S : P(S) ≠ ∅} (1/|P(S)|) Σ_{p ∈ P(S)} ℓ(S, p)``.

Choices made where the paper leaves room (each is tested in ``tests/losses/test_sincere.py``):

* **Which embedding is the centre of the softmax.** Eqs. 3, 12 and 15 are written with the
  partner ``z_p`` as the centre (``exp(z_n · z_p / τ)``), Khosla et al. with the anchor. Because
  ``N(S) = N(p)`` and ``|P(S)| = |P(p)|`` for a same-class pair, swapping the roles of ``S`` and
  ``p`` maps the set of weighted pair terms onto itself (the argument of App. I), so both forms
  give the same batch loss. The code uses anchor rows (one row of the similarity matrix per
  anchor); the tests compare it with loops written in the paper's ``z_p``-centred form.
* **Eq. 15.** The extracted text reads ``e^{zS·zp/τ−ϵ}``: ε is subtracted from the
  *temperature-scaled* logit of the positive inside the exponential, in the denominator only.
  This is the only reading that keeps the denominator positive for every ε ≥ 0 (``exp(·) - ε``
  could be negative) and it reduces to SINCERE at ε = 0 as the paper states. In cosine units the
  margin is ``ε·τ``. With ε > 0 the loss can be negative (its infimum is ``-ε``).
* **No noise sample.** When every label in the batch is the same, ``N(S)`` is empty for every
  anchor and each pair term reduces to ``-log exp(s_Sp/τ) / exp(s_Sp/τ - ε) = -ε`` (0 for
  SINCERE): a constant without gradient. The formula's value is returned, with a warning.
* **Normalisation.** Eq. 12 divides by the batch size ``N``; anchors without a same-class partner
  (``P(S) = ∅``, where ``1/|P|`` is undefined) are left out of the mean here instead of producing
  ``0/0 = NaN``. When no anchor has a partner the loss is an exact zero that is still connected to
  the autograd graph (zero gradients), and a warning says why.
* **Multi-view input.** ``features`` of shape ``(B, V, D)`` with ``labels`` of shape ``(B,)`` is
  flattened to ``B·V`` anchors; every view of sample ``b`` carries ``labels[b]``, so the other
  views of the same sample are partners (as in Khosla et al. and eq. 12's two-view batches).

Numerics: one ``M × M`` similarity product, log-sum-exp everywhere, masks filled with the most
negative finite value of the computation dtype (never ``-inf`` or ``-1e9``). Float16/bfloat16
*inputs* are cast to float32 first (the loss is returned in float32), and the similarity matmul
runs with autocast off, so inside an autocast region it is float32 too, like everything else.
SINCERE needs, for each pair ``(S, p)``, a log-sum-exp over ``{p} ∪ N(S)``: the noise part is
reduced once per anchor and combined with each positive by ``logaddexp``, so memory stays
``O(M²)``.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.checks import check_embeddings, check_non_negative_float
from contrastkit.hot_path import in_hot_path
from contrastkit.losses._normalize import autocast_off
from contrastkit.losses.temperature import check_temperature
from contrastkit.precision import at_least_float32

__all__ = [
    "EpsSupInfoNCELoss",
    "SINCERELoss",
    "SupConLoss",
    "eps_supinfonce",
    "sincere",
    "supcon",
]


def _check_labels(features: Tensor, labels: Tensor) -> None:
    """Raise ``ValueError`` unless ``labels`` is a 1-D integer tensor matching ``features``."""
    if not isinstance(labels, Tensor):
        raise ValueError(f"labels must be a torch.Tensor, got {type(labels).__name__}")
    if labels.dim() != 1:
        raise ValueError(f"labels must be 1-D, got shape {tuple(labels.shape)}")
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise ValueError(f"labels must be an integer tensor, got dtype {labels.dtype}")
    if labels.shape[0] != features.shape[0]:
        what = "M" if features.dim() == 2 else "B"
        raise ValueError(
            f"labels must have one entry per sample of features ({what} = {features.shape[0]} "
            f"for features of shape {tuple(features.shape)}), got {labels.shape[0]}"
        )


def _flatten_views(features: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Validate inputs and return ``(z, y)``: unit embeddings ``(M, D)`` and labels ``(M,)``."""
    check_embeddings("features", features, ndim=(2, 3))
    _check_labels(features, labels)
    labels = labels.to(features.device)
    if features.dim() == 3:
        n_views = features.shape[1]
        features = features.reshape(-1, features.shape[-1])
        labels = labels.repeat_interleave(n_views)
    if features.shape[0] < 2:
        raise ValueError(
            f"features holds {features.shape[0]} sample(s): a supervised contrastive loss "
            "needs at least 2"
        )
    features = at_least_float32(features)  # float16/bfloat16: an exact cast
    return F.normalize(features, dim=-1), labels


def _scaled_similarities(z: Tensor, temperature: float) -> Tensor:
    """Return ``z zᵀ / τ`` in ``z``'s dtype (float32 or wider), also inside autocast."""
    with autocast_off(z):
        return (z @ z.T) / temperature


def _masked_logsumexp(logits: Tensor, mask: Tensor) -> Tensor:
    """Row-wise ``log Σ_{j : mask_ij} exp(logits_ij)`` with a finite fill for masked entries.

    An all-masked row gives about ``finfo.min`` (finite), which ``logaddexp`` then ignores.
    """
    fill = torch.finfo(logits.dtype).min
    return torch.logsumexp(logits.masked_fill(~mask, fill), dim=1)


def _reduce_pairs(pair_losses: Tensor, positives: Tensor, name: str, stacklevel: int = 3) -> Tensor:
    """Average pair losses over ``P(S)``, then over anchors that have at least one partner.

    Args:
        pair_losses: ``(M, M)`` matrix whose entry ``(S, p)`` is ``ℓ(S, p)``; only entries with
            ``positives[S, p]`` are used (others may hold anything finite).
        positives: boolean ``(M, M)`` mask of same-class pairs, diagonal excluded.
        name: loss name for the warning.
        stacklevel: ``warnings.warn`` stack level that points at the user's call.
    """
    n_pos = positives.sum(dim=1)
    has_pos = n_pos > 0
    per_anchor = torch.where(positives, pair_losses, 0.0).sum(dim=1)
    # Checked outside the training step only: the test reads a device value back.
    if not in_hot_path() and not bool(has_pos.any()):
        warnings.warn(
            f"{name}: no sample in the batch shares its label with another sample, so there is "
            "no positive pair; returning a zero loss (zero gradients)",
            UserWarning,
            stacklevel=stacklevel,
        )
    # Without any positive pair every per_anchor entry is 0 and the loss is 0 (with gradient).
    per_anchor = per_anchor / n_pos.clamp(min=1).to(per_anchor.dtype)
    return per_anchor.sum() / has_pos.sum().clamp(min=1).to(per_anchor.dtype)


def _pair_masks(labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Return boolean ``(M, M)`` masks ``(others, positives, negatives)``."""
    same = labels[:, None] == labels[None, :]
    others = ~torch.eye(labels.shape[0], dtype=torch.bool, device=labels.device)
    return others, same & others, ~same


def _noise_contrastive(
    features: Tensor, labels: Tensor, temperature: float, epsilon: float, name: str
) -> Tensor:
    """Shared body of SINCERE (ε = 0) and ε-SupInfoNCE."""
    z, y = _flatten_views(features, labels)
    logits = _scaled_similarities(z, temperature)
    _, positives, negatives = _pair_masks(y)
    if not in_hot_path() and not bool(negatives.any()):  # a host read: not in the train step
        warnings.warn(
            f"{name}: every sample in the batch has the same label, so there is no noise sample "
            f"(N(S) is empty): the loss is the constant -epsilon = {0.0 - epsilon:g} with zero "
            "gradients",
            UserWarning,
            stacklevel=3,
        )
    lse_noise = _masked_logsumexp(logits, negatives)  # (M,): log Σ_{n∈N(S)} exp(s_Sn/τ)
    log_denominator = torch.logaddexp(logits - epsilon, lse_noise[:, None])  # (M, M)
    return _reduce_pairs(log_denominator - logits, positives, name, stacklevel=4)


def supcon(features: Tensor, labels: Tensor, *, temperature: float = 0.1) -> Tensor:
    r"""SupCon loss (Khosla et al. 2020, ``L_out``; Feeney & Hughes 2023, eq. 3 and App. I).

    .. code-block:: text

        ℓ(S, p) = -log  exp(s_Sp/τ) / Σ_{a ≠ S} exp(s_Sa/τ)
        L = mean_{S : P(S) ≠ ∅}  (1/|P(S)|) Σ_{p ∈ P(S)} ℓ(S, p)

    The denominator holds every other sample, same-class partners included: this is what causes
    SupCon's intra-class repulsion (eq. 14).

    Args:
        features: ``(M, D)`` embeddings, or ``(B, V, D)`` with ``V`` views per sample. They are
            L2-normalised along the last dimension.
        labels: integer class labels, ``(M,)`` or ``(B,)`` (one per sample, shared by its views).
        temperature: ``τ > 0``.

    Returns:
        Scalar loss. Anchors without a same-class partner are left out of the mean; if no anchor
        has one the loss is zero (with a ``UserWarning``) and still differentiable.

    Raises:
        ValueError: on malformed ``features``, ``labels`` or ``temperature`` (the message names
            the argument).
    """
    check_temperature("temperature", temperature, per_pair=False)
    z, y = _flatten_views(features, labels)
    logits = _scaled_similarities(z, temperature)
    others, positives, _ = _pair_masks(y)
    lse_others = _masked_logsumexp(logits, others)  # (M,): log Σ_{a≠S} exp(s_Sa/τ)
    return _reduce_pairs(lse_others[:, None] - logits, positives, "supcon")


def sincere(features: Tensor, labels: Tensor, *, temperature: float = 0.1) -> Tensor:
    r"""SINCERE loss (Feeney & Hughes 2023, eq. 12).

    .. code-block:: text

        ℓ(S, p) = -log  exp(s_Sp/τ) / (exp(s_Sp/τ) + Σ_{n ∈ N(S)} exp(s_Sn/τ))
        L = mean_{S : P(S) ≠ ∅}  (1/|P(S)|) Σ_{p ∈ P(S)} ℓ(S, p)

    Only the positive of the numerator and the noise samples are in the denominator, so the
    gradient never pushes two samples of one class apart (eq. 13). Equal to
    :func:`eps_supinfonce` with ``epsilon=0``.

    Args:
        features: ``(M, D)`` embeddings, or ``(B, V, D)`` with ``V`` views per sample. They are
            L2-normalised along the last dimension.
        labels: integer class labels, ``(M,)`` or ``(B,)`` (one per sample, shared by its views).
        temperature: ``τ > 0``.

    Returns:
        Scalar loss. Anchors without a same-class partner are left out of the mean; if no anchor
        has one the loss is zero (with a ``UserWarning``) and still differentiable.

    Raises:
        ValueError: on malformed ``features``, ``labels`` or ``temperature`` (the message names
            the argument).
    """
    check_temperature("temperature", temperature, per_pair=False)
    return _noise_contrastive(features, labels, temperature, 0.0, "sincere")


def eps_supinfonce(
    features: Tensor, labels: Tensor, *, temperature: float = 0.1, epsilon: float = 0.25
) -> Tensor:
    r"""ε-SupInfoNCE loss (Barbano et al. 2023, as written in Feeney & Hughes 2023, eq. 15).

    .. code-block:: text

        ℓ(S, p) = -log  exp(s_Sp/τ) / (exp(s_Sp/τ - ε) + Σ_{n ∈ N(S)} exp(s_Sn/τ))
        L = mean_{S : P(S) ≠ ∅}  (1/|P(S)|) Σ_{p ∈ P(S)} ℓ(S, p)

    ε is subtracted from the temperature-scaled positive logit in the denominator only (the
    numerator keeps ``exp(s_Sp/τ)``); see the module docstring for this reading of eq. 15.
    ``epsilon=0`` gives :func:`sincere`.

    Args:
        features: ``(M, D)`` embeddings, or ``(B, V, D)`` with ``V`` views per sample. They are
            L2-normalised along the last dimension.
        labels: integer class labels, ``(M,)`` or ``(B,)`` (one per sample, shared by its views).
        temperature: ``τ > 0``.
        epsilon: margin ``ε ≥ 0`` in logit units (``ε·τ`` in cosine units).

    Returns:
        Scalar loss. Anchors without a same-class partner are left out of the mean; if no anchor
        has one the loss is zero (with a ``UserWarning``) and still differentiable.

    Raises:
        ValueError: on malformed ``features``, ``labels``, ``temperature`` or ``epsilon`` (the
            message names the argument).
    """
    check_temperature("temperature", temperature, per_pair=False)
    check_non_negative_float("epsilon", epsilon)
    return _noise_contrastive(features, labels, temperature, float(epsilon), "eps_supinfonce")


class _SupervisedLoss(nn.Module):
    """Module form of a supervised loss ``fn(features, labels, *, temperature)``."""

    fn = staticmethod(supcon)

    def __init__(self, temperature: float = 0.1) -> None:
        super().__init__()
        check_temperature("temperature", temperature, per_pair=False)
        self.temperature = float(temperature)

    def forward(self, features: Tensor, labels: Tensor) -> Tensor:
        """The loss of ``features`` (``(M, D)`` or ``(B, V, D)``) and ``labels``."""
        return self.fn(features, labels, temperature=self.temperature)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}"


class SupConLoss(_SupervisedLoss):
    """Module form of :func:`supcon`; ``temperature`` is validated here."""

    fn = staticmethod(supcon)


class SINCERELoss(_SupervisedLoss):
    """Module form of :func:`sincere`; ``temperature`` is validated here."""

    fn = staticmethod(sincere)


class EpsSupInfoNCELoss(nn.Module):
    """Module form of :func:`eps_supinfonce`; ``temperature`` and ``epsilon`` validated here."""

    def __init__(self, temperature: float = 0.1, epsilon: float = 0.25) -> None:
        super().__init__()
        check_temperature("temperature", temperature, per_pair=False)
        check_non_negative_float("epsilon", epsilon)
        self.temperature = float(temperature)
        self.epsilon = float(epsilon)

    def forward(self, features: Tensor, labels: Tensor) -> Tensor:
        """Return :func:`eps_supinfonce` of ``features`` and ``labels``."""
        return eps_supinfonce(features, labels, temperature=self.temperature, epsilon=self.epsilon)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, epsilon={self.epsilon}"
