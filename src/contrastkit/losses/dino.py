r"""DINO (Caron et al. 2021, "Emerging Properties in Self-Supervised Vision Transformers", ICCV):
the student's softmax over the K outputs of its head is trained to match the teacher's centred
and sharpened softmax of another view.

Notation (the paper's): :math:`g_s(x), g_t(x)` the K outputs of the student and the teacher
(EMA) for a view x, :math:`\tau_s, \tau_t` their temperatures, :math:`c` the centre.

* Student distribution: :math:`P_s(x)^{(i)} = \mathrm{softmax}_i(g_s(x) / \tau_s)`, and the
  teacher's after centring, :math:`P_t(x)^{(i)} = \mathrm{softmax}_i((g_t(x) - c) / \tau_t)`
  (the paper's first equation; :math:`\tau_t < \tau_s` sharpens).
* Loss of one pair: the cross-entropy :math:`H(P_t(x), P_s(x')) = -\sum_i P_t(x)^{(i)} \log
  P_s(x')^{(i)}`, minimised over the student only (the teacher's output is a constant).
* Multi-crop: summed over the global views x of the teacher and every other view x' of the
  student, :math:`\sum_{x \in \{x^g_1, x^g_2\}} \sum_{x' \in V, x' \ne x} H(P_t(x), P_s(x'))`
  (the paper's third equation); the official code divides the sum by its number of terms.
* Centre: :math:`c \leftarrow m c + (1 - m) \frac1B \sum_i g_t(x_i)` over the teacher outputs
  of the batch (all processes), :math:`m = 0.9` (the paper's fourth equation); the method
  updates it (:class:`contrastkit.methods.DINO`), the loss reads it.

(The paper numbers these (1)-(4) in the arXiv version by our reading; the numbering is not
checked against the text.)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from contrastkit.checks import check_embedding_layout, check_positive_float, check_same_shape
from contrastkit.losses._normalize import autocast_off
from contrastkit.precision import at_least_float32

__all__ = ["dino"]


def dino(student: Sequence[Tensor], teacher: Sequence[Tensor], center: Tensor, *,
         student_temperature: float = 0.1, teacher_temperature: float = 0.04) -> Tensor:
    r"""DINO's loss: cross-entropy of the student's softmax against the teacher's centred and
    sharpened softmax of another view, averaged over the pairs (Caron et al. 2021).

    .. math::
        L = \frac{1}{T} \sum_{t} \sum_{s \ne t} \frac1N \sum_{i=1}^N
            -\sum_k \mathrm{softmax}_k\Big(\frac{g_t(x_{t,i}) - c}{\tau_t}\Big)
            \log \mathrm{softmax}_k\Big(\frac{g_s(x_{s,i})}{\tau_s}\Big)

    over the teacher views t (the global crops, ``teacher[t]`` of the same crop as
    ``student[t]``) and the student views s other than t; T is the number of such pairs.
    This is ``DINOLoss.forward`` of facebookresearch/dino (``main_dino.py``), solo-learn's and
    lightly's ``DINOLoss``, without their centre update (the method's job). The teacher's
    outputs and the centre take no gradient.

    Args:
        student: V >= 2 tensors (N, K) of student outputs, one per view (global crops first).
        teacher: 1 to V tensors (N, K) of teacher outputs of the first views.
        center: (K,) or (1, K) centre :math:`c`.
        student_temperature: :math:`\tau_s` (0.1 in DINO).
        teacher_temperature: :math:`\tau_t` at this step (0.04 to 0.07 in DINO).

    Returns:
        Scalar tensor in float32 at least (the softmaxes computed with autocast off).

    Raises:
        ValueError: fewer than 2 student views, no teacher view or more than student views,
            shapes that differ, a centre of another size, or a bad temperature.
    """
    check_positive_float("student_temperature", student_temperature)
    check_positive_float("teacher_temperature", teacher_temperature)
    if len(student) < 2:
        raise ValueError(f"student must hold at least 2 views, got {len(student)}")
    if not 1 <= len(teacher) <= len(student):
        raise ValueError(f"teacher must hold 1 to {len(student)} views, got {len(teacher)}")
    for name, views in (("student", student), ("teacher", teacher)):
        for i, g in enumerate(views):
            check_embedding_layout(f"{name}[{i}]", g)
            check_same_shape("student[0]", student[0], f"{name}[{i}]", g)
    width = student[0].shape[1]
    if not isinstance(center, Tensor) or center.numel() != width or center.dim() > 2:
        shape = tuple(center.shape) if isinstance(center, Tensor) else type(center).__name__
        raise ValueError(f"center must have shape ({width},) or (1, {width}), got {shape}")
    with autocast_off(student[0]):
        c = at_least_float32(center.detach()).reshape(1, width)
        targets = [torch.softmax((at_least_float32(g.detach()) - c) / teacher_temperature, dim=1)
                   for g in teacher]
        log_p = [torch.log_softmax(at_least_float32(g) / student_temperature, dim=1)
                 for g in student]
        terms = [-(q * log_p[s]).sum(dim=1).mean()
                 for t, q in enumerate(targets) for s in range(len(student)) if s != t]
    return torch.stack(terms).mean()
