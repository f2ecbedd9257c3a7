"""SwAV, DINO and NNCLR against outside references (issue 53).

lightly 1.6 (imported; ``make test-timm``'s venv has it, ``.venv`` does not and skips those
tests): ``lightly.loss.swav_loss.sinkhorn`` and ``SwaVLoss``, ``DINOLoss`` (its centre update
too), ``NNMemoryBankModule`` and ``NTXentLoss``.

The official codes and solo-learn, re-stated below in this file's own words as small functions
(read at the commits named; not copied), run in both venvs:

* SwAV, facebookresearch/swav @ 06b1b7c ``main_swav.py`` (``distributed_sinkhorn`` on one
  process; the swapped-prediction loop of ``train``);
* DINO, facebookresearch/dino @ 7c446df ``main_dino.py`` (``DINOLoss.forward`` and
  ``update_center``, the teacher-temperature schedule of ``DINOLoss.__init__``);
* solo-learn, vturrisi/solo-learn @ 9187ea3 ``solo/losses/swav.py`` (``swav_loss_func``),
  ``solo/utils/sinkhorn_knopp.py``, ``solo/losses/nnclr.py`` (``nnclr_loss_func``) and
  ``solo/methods/nnclr.py`` (``find_nn``).

Known differences, shown by the tests: lightly's Sinkhorn leaves out the division of the rows by
K (the column scaling that follows removes it: the same codes); lightly's NNCLR loss is NT-Xent
(the same side's neighbours among the negatives), contrastkit's ``form="nt_xent"``, while the
paper's and solo-learn's is ``form="info_nce"``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from contrastkit.losses import dino, nearest_neighbours, nnclr, sinkhorn_knopp, swav
from contrastkit.methods import DINO
from contrastkit.models.factory import BackboneSpec, DINOHeadSpec
from contrastkit.schedules import EpochWarmupSchedule, ScheduleState

F32 = torch.float32


def _lightly(module: str):
    return pytest.importorskip(module, reason="lightly is not installed: run make test-timm")


def _scores(n: int, k: int, views: int, seed: int) -> list[torch.Tensor]:
    """Prototype scores of unit projections against unit prototypes (cosines), float32."""
    g = torch.Generator().manual_seed(seed)
    protos = F.normalize(torch.randn(k, 16, generator=g), dim=1)
    return [(F.normalize(torch.randn(n, 16, generator=g), dim=1) @ protos.t()).requires_grad_()
            for _ in range(views)]


def _grads(loss, inputs):
    return torch.autograd.grad(loss, inputs, allow_unused=True)


def _same(ours, theirs, inputs, tol=1e-5):
    torch.testing.assert_close(ours.reshape(()), theirs.reshape(()).to(ours.dtype), rtol=tol,
                               atol=tol)
    for g_ours, g_theirs in zip(_grads(ours, inputs), _grads(theirs, inputs), strict=True):
        assert (g_ours is None) == (g_theirs is None)
        if g_ours is not None:
            torch.testing.assert_close(g_ours, g_theirs, rtol=tol, atol=tol)


# --- the official codes and solo-learn, re-stated ---------------------------------------------
def _official_sinkhorn(out: torch.Tensor, epsilon: float, iterations: int) -> torch.Tensor:
    """main_swav.py distributed_sinkhorn with one process: exp(out / eps)^T scaled to sum 1, rows
    to 1/K and columns to 1/B per iteration, columns times B, transposed back."""
    q = torch.exp(out / epsilon).t()
    b, k = q.shape[1], q.shape[0]
    q = q / q.sum()
    for _ in range(iterations):
        q = q / q.sum(dim=1, keepdim=True) / k
        q = q / q.sum(dim=0, keepdim=True) / b
    return (q * b).t()


def _official_swav_loss(outputs, codes, temperature):
    """main_swav.py train: for each crop with codes, the mean cross-entropy of every other crop's
    softmax against them, divided by the other crops' number; then by the crops with codes."""
    loss = 0
    for i, q in enumerate(codes):
        sub = 0
        for v in np.delete(np.arange(len(outputs)), i):
            sub = sub - torch.mean(torch.sum(q * F.log_softmax(outputs[v] / temperature, dim=1),
                                             dim=1))
        loss = loss + sub / (len(outputs) - 1)
    return loss / len(codes)


def _solo_swav_loss(preds, assignments, temperature):
    """solo-learn swav_loss_func: the mean over every (assignment, other view) pair."""
    losses = [-torch.mean(torch.sum(a * torch.log_softmax(preds[v] / temperature, dim=1), dim=1))
              for i, a in enumerate(assignments) for v in range(len(preds)) if v != i]
    return sum(losses) / len(losses)


def _official_dino_loss(student, teacher, center, ts, tt):
    """main_dino.py DINOLoss.forward: student outputs concatenated and chunked per crop, the
    teacher's centred softmax at tt, every (teacher crop, other student crop) pair's mean
    cross-entropy, averaged over the pairs."""
    s = torch.cat(student) / ts
    s = s.chunk(len(student))
    t = F.softmax((torch.cat(teacher) - center) / tt, dim=-1).detach().chunk(len(teacher))
    total, terms = 0, 0
    for iq, q in enumerate(t):
        for v in range(len(s)):
            if v == iq:
                continue
            total = total + torch.sum(-q * F.log_softmax(s[v], dim=-1), dim=-1).mean()
            terms += 1
    return total / terms


def _official_center_update(center, teacher, momentum):
    """main_dino.py update_center on one process: the batch mean of every teacher output."""
    batch = torch.cat(teacher).sum(0, keepdim=True) / len(torch.cat(teacher))
    return center * momentum + batch * (1 - momentum)


def _solo_find_nn(z, queue):
    """solo-learn NNCLR.find_nn: the queue row (unit rows) of highest dot product with z (unit)."""
    return queue[(z @ queue.t()).max(dim=1)[1]]


def _solo_nnclr_loss(nn, p, temperature):
    """solo-learn nnclr_loss_func on one process: cross-entropy of nn @ p^T / t, diagonal labels,
    on L2-normalised rows."""
    logits = F.normalize(nn, dim=-1) @ F.normalize(p, dim=-1).t() / temperature
    return F.cross_entropy(logits, torch.arange(nn.shape[0]))


# --- SwAV ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("epsilon", "iterations"), [(0.05, 3), (0.1, 1), (0.03, 10)])
def test_sinkhorn_matches_the_official_code_and_solo_learn(epsilon, iterations):
    (scores,) = _scores(24, 10, 1, seed=int(epsilon * 100) + iterations)
    ours = sinkhorn_knopp(scores, epsilon=epsilon, iterations=iterations)
    torch.testing.assert_close(ours, _official_sinkhorn(scores.detach(), epsilon, iterations),
                               rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("epsilon", "iterations"), [(0.05, 3), (0.1, 1)])
def test_sinkhorn_matches_lightly(epsilon, iterations):
    lightly_swav = _lightly("lightly.loss.swav_loss")
    (scores,) = _scores(24, 10, 1, seed=7)
    theirs = lightly_swav.sinkhorn(scores.detach(), iterations=iterations, epsilon=epsilon)
    torch.testing.assert_close(sinkhorn_knopp(scores, epsilon=epsilon, iterations=iterations),
                               theirs, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("views", [2, 5])
def test_swav_matches_the_official_loop_and_solo_learn(views):
    scores = _scores(12, 8, views, seed=views)
    codes = [sinkhorn_knopp(s) for s in scores[:2]]
    _same(swav(scores, codes, temperature=0.1), _official_swav_loss(scores, codes, 0.1), scores)
    _same(swav(scores, codes, temperature=0.1), _solo_swav_loss(scores, codes, 0.1), scores)


@pytest.mark.parametrize(("local", "queue"), [(0, 0), (3, 0), (2, 16)])
def test_swav_matches_lightly_with_local_crops_and_a_queue(local, queue):
    swav_loss = _lightly("lightly.loss.swav_loss")
    scores = _scores(12, 8, 2 + local, seed=10 + local + queue)
    queued = [s.detach() for s in _scores(queue, 8, 2, seed=99)] if queue else None
    theirs = swav_loss.SwaVLoss(temperature=0.1)(scores[:2], scores[2:], queued)
    codes = [sinkhorn_knopp(torch.cat([queued[i], scores[i]]) if queued else scores[i])[-12:]
             for i in range(2)]
    _same(swav(scores, codes, temperature=0.1), theirs, scores)


# --- DINO ---------------------------------------------------------------------------------------
def _outputs(n: int, k: int, views: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, k, generator=g).requires_grad_() for _ in range(views)]


@pytest.mark.parametrize("views", [2, 4])
def test_dino_matches_the_official_loss(views):
    student, teacher = _outputs(6, 32, views, seed=1), [t.detach() for t in _outputs(6, 32, 2, 2)]
    center = 0.1 * torch.randn(1, 32, generator=torch.Generator().manual_seed(3))
    ours = dino(student, teacher, center, student_temperature=0.1, teacher_temperature=0.05)
    _same(ours, _official_dino_loss(student, teacher, center, 0.1, 0.05), student)


@pytest.mark.parametrize("views", [2, 4])
def test_dino_loss_and_centre_update_match_lightly(views):
    dino_loss = _lightly("lightly.loss.dino_loss")
    student, teacher = _outputs(6, 32, views, seed=4), [t.detach() for t in _outputs(6, 32, 2, 5)]
    theirs = dino_loss.DINOLoss(output_dim=32, warmup_teacher_temp=0.04, teacher_temp=0.04,
                                student_temp=0.1, center_momentum=0.9)
    start = 0.1 * torch.randn(1, 32, generator=torch.Generator().manual_seed(6))
    theirs.center.copy_(start.reshape(1, 1, 32))
    ours = dino(student, teacher, start, student_temperature=0.1, teacher_temperature=0.04)
    _same(ours, theirs(teacher, student), student)
    torch.testing.assert_close(theirs.center.reshape(1, 32),
                               _official_center_update(start, teacher, 0.9))


def test_dino_methods_centre_moves_as_the_official_update():
    torch.manual_seed(0)
    method = DINO(backbone=BackboneSpec(name="small_convnet", width=4, out_dim=8),
                  projector=DINOHeadSpec(hidden_dim=8, bottleneck_dim=4, num_prototypes=16),
                  center_momentum=0.9).eval()
    g = torch.Generator().manual_seed(1)
    views = [torch.rand(6, 3, 8, 8, generator=g) for _ in range(3)]
    with torch.no_grad():
        method.center.copy_(0.1 * torch.randn(1, 16, generator=g))
    start = method.center.clone()
    teacher = [method.encode_target(v) for v in views[:2]]
    state = ScheduleState(step=0, total_steps=10)
    method(views, torch.zeros(6, dtype=torch.long), state)
    method.after_optimizer_step(state)
    torch.testing.assert_close(method.center, _official_center_update(start, teacher, 0.9))


def test_teacher_temperature_schedule_is_the_official_array_and_lightlys():
    official = np.concatenate([np.linspace(0.04, 0.07, 30), np.ones(70) * 0.07])
    ours = EpochWarmupSchedule(0.04, 0.07, 30)
    values = [ours(ScheduleState(epoch=float(e))) for e in range(100)]
    np.testing.assert_allclose(values, official, rtol=1e-12)
    dino_loss = pytest.importorskip("lightly.loss.dino_loss",
                                    reason="lightly is not installed: run make test-timm")
    schedule = dino_loss.DINOLoss(output_dim=8, warmup_teacher_temp=0.04, teacher_temp=0.07,
                                  warmup_teacher_temp_epochs=30).teacher_temp_schedule
    np.testing.assert_allclose(values[:30], schedule.numpy(), rtol=1e-6)


# --- NNCLR --------------------------------------------------------------------------------------
def _nnclr_inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    support = F.normalize(torch.randn(40, 16, generator=g), dim=1)
    z1, z2 = (torch.randn(10, 16, generator=g) for _ in range(2))
    p1, p2 = (torch.randn(10, 16, generator=g).requires_grad_() for _ in range(2))
    return support, z1, z2, p1, p2


def test_nnclr_matches_solo_learn():
    support, z1, z2, p1, p2 = _nnclr_inputs(1)
    nn1, nn2 = nearest_neighbours(z1, support), nearest_neighbours(z2, support)
    torch.testing.assert_close(nn1, _solo_find_nn(F.normalize(z1, dim=1), support))
    ours = nnclr(nn1, nn2, p1, p2, temperature=0.2, form="info_nce")
    theirs = 0.5 * _solo_nnclr_loss(nn1, p2, 0.2) + 0.5 * _solo_nnclr_loss(nn2, p1, 0.2)
    _same(ours, theirs, [p1, p2])


def test_nnclr_matches_lightlys_memory_bank_and_nt_xent():
    memory = _lightly("lightly.models.modules.nn_memory_bank")
    ntx = _lightly("lightly.loss")
    support, z1, z2, p1, p2 = _nnclr_inputs(2)
    bank = memory.NNMemoryBankModule(size=(40, 16))
    bank.bank.copy_(support)  # (num_features, dim), lightly 1.6's layout
    theirs_nn1, theirs_nn2 = bank(z1, update=False), bank(z2, update=False)
    nn1, nn2 = nearest_neighbours(z1, support), nearest_neighbours(z2, support)
    torch.testing.assert_close(nn1, theirs_nn1)
    torch.testing.assert_close(nn2, theirs_nn2)
    criterion = ntx.NTXentLoss(temperature=0.5)
    theirs = 0.5 * (criterion(theirs_nn1, p2) + criterion(theirs_nn2, p1))
    _same(nnclr(nn1, nn2, p1, p2, temperature=0.5, form="nt_xent"), theirs, [p1, p2])
    # the paper's and solo-learn's form differs from lightly's
    assert not torch.isclose(nnclr(nn1, nn2, p1, p2, temperature=0.5), theirs)
