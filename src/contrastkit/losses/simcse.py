r"""Unsupervised SimCSE loss (Gao et al. 2021, "SimCSE: Simple Contrastive Learning of Sentence
Embeddings", EMNLP 2021: the contrastive objective of its eq. 1 with, as section 3 states, the
two dropout encodings of a sentence as the positive pair), through the InfoNCE code of
:mod:`contrastkit.losses`.

Each sentence :math:`x_i` of a batch of N is encoded twice with independent dropout masks,
giving :math:`h_i` and :math:`h_i^+`; the other sentences' second encodings are the negatives:

.. math::
    \ell_i = -\log \frac{e^{\mathrm{sim}(h_i, h_i^+)/\tau}}
                        {\sum_{j=1}^N e^{\mathrm{sim}(h_i, h_j^+)/\tau}}

with :math:`\mathrm{sim}` the cosine similarity, averaged over the N anchors. It is
:func:`~contrastkit.losses.info_nce` with query :math:`h` and key :math:`h^+`, one direction
only (the anchors are the first encodings, as in SimCSE's code and equation). Any contrastkit
temperature applies: with a per-pair temperature (DySTreSS, Manna et al. 2023, Alg. 1/2) the
logit of each pair is divided by :math:`\tau(\mathrm{sim}(h_i, h_j^+))`, evaluated on the
detached similarity.
"""

from __future__ import annotations

from torch import Tensor

from contrastkit.losses import Temperature, info_nce

__all__ = ["simcse"]


def simcse(h: Tensor, h_positive: Tensor, *, temperature: Temperature = 0.05) -> Tensor:
    """The unsupervised SimCSE loss (module docstring); SimCSE's default temperature is 0.05.

    Args:
        h: (N, D) first encodings (dropout mask 1) of the N sentences.
        h_positive: (N, D) second encodings (dropout mask 2), row i the positive of ``h[i]``.
        temperature: float > 0, per-pair temperature function or ``PairTemperature``.

    Returns:
        Scalar tensor, the mean of the per-sentence losses over the N sentences.

    Raises:
        ValueError: bad shapes, NaN/Inf, N < 2, or a bad temperature.
    """
    return info_nce(h, h_positive, temperature=temperature)
