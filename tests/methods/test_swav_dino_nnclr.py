"""SwAV, DINO and NNCLR compose encoder, heads, queue, centre and loss as their docstrings say
(one process; the two-process cases: test_distributed_swav_dino_nnclr.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from queue_inspect import staged_rows
from torch import nn

from contrastkit import losses
from contrastkit.gradients import GradientFreeze, drop_frozen_gradients
from contrastkit.methods import DINO, NNCLR, MoCo, SwAV
from contrastkit.models import DINOHead
from contrastkit.models.factory import BackboneSpec, DINOHeadSpec, HeadSpec
from contrastkit.schedules import EpochWarmupSchedule, ScheduleState

BACKBONE = BackboneSpec(name="small_convnet", width=4, out_dim=8)
PROJECTOR = HeadSpec(hidden_dim=8, out_dim=6, batch_norm="none")
HEAD = DINOHeadSpec(hidden_dim=8, bottleneck_dim=4, num_prototypes=7, num_layers=3)
STATE = ScheduleState(step=0, total_steps=10, epoch=0.0, total_epochs=2.0)


def _views(n: int = 6, k: int = 2, size: int = 8) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.rand(n, 3, size, size, generator=g, dtype=torch.float64) for _ in range(k)]


def _labels(n: int = 6) -> torch.Tensor:
    return torch.arange(n) % 3


def _at(epoch: float) -> ScheduleState:
    return ScheduleState(step=int(epoch * 5), total_steps=10, epoch=epoch, total_epochs=2.0)


# --- SwAV ---------------------------------------------------------------------------------
def _swav(**kw) -> SwAV:
    torch.manual_seed(0)
    return SwAV(backbone=BACKBONE, projector=PROJECTOR, num_prototypes=5, **kw).double().eval()


def test_swav_is_sinkhorn_codes_of_the_global_crops_predicted_by_every_other_crop():
    method = _swav(temperature=0.2, sinkhorn_epsilon=0.1, sinkhorn_iterations=4)
    views = _views(k=4)  # two global crops, two local crops
    out = method(views, _labels(), STATE)
    z = [F.normalize(method.encode(v)[1], dim=1) for v in views]
    scores = [method.prototypes(x) for x in z]
    codes = [losses.sinkhorn_knopp(s, epsilon=0.1, iterations=4) for s in scores[:2]]
    torch.testing.assert_close(out.loss, losses.swav(scores, codes, temperature=0.2))
    assert method.prototypes.bias is None and method.gradient_freezes == {
        "prototypes": GradientFreeze(313, "step")}


def test_swav_prototypes_are_unit_rows_at_the_start_and_after_every_step():
    method = _swav()
    norms = method.prototypes.weight.norm(dim=1)
    torch.testing.assert_close(norms, torch.ones_like(norms))
    with torch.no_grad():
        method.prototypes.weight.mul_(3.0).add_(0.1)  # what an optimiser step might leave
    method.after_optimizer_step(STATE)
    norms = method.prototypes.weight.norm(dim=1)
    torch.testing.assert_close(norms, torch.ones_like(norms))


def test_swav_queue_fills_from_its_start_epoch_and_joins_the_codes_once_full():
    method = _swav(queue_size=12, queue_start_epoch=1)
    views, earlier = _views(), [v.flip(0) * 0.5 for v in _views()]
    method(views, _labels(), _at(0.5))  # before the start epoch: nothing staged
    assert all(staged_rows(q) == 0 for q in method.queues)
    out = method(views, _labels(), _at(1.0))
    assert all(staged_rows(q) == 6 for q in method.queues)
    method.after_optimizer_step(_at(1.0))
    assert method.queues[0].num_valid == 6  # half full: not used yet
    torch.testing.assert_close(method(views, _labels(), _at(1.2)).loss, out.loss)
    method.queues[0].take_staged(), method.queues[1].take_staged()
    method(earlier, _labels(), _at(1.2))
    method.after_optimizer_step(_at(1.2))
    assert method.queues[0].num_valid == 12
    with_queue = method(views, _labels(), _at(1.4)).loss
    z = [F.normalize(method.encode(v)[1], dim=1) for v in views]
    scores = [method.prototypes(x) for x in z]
    codes = [losses.sinkhorn_knopp(torch.cat([method.queues[i].negatives(), z[i]])
                                   @ method.prototypes.weight.t())[-6:] for i in range(2)]
    torch.testing.assert_close(with_queue, losses.swav(scores, codes, temperature=0.1))
    assert not torch.isclose(with_queue, out.loss)


def test_swav_freeze_in_epochs_and_its_bad_values():
    method = _swav(freeze_prototypes=GradientFreeze(2, "epoch"))
    method(_views(), _labels(), STATE).loss.backward()
    drop_frozen_gradients(method, method.gradient_freezes, _at(1.0))
    assert method.prototypes.weight.grad is None
    assert method.projector.layers[0].weight.grad is not None
    with pytest.raises(ValueError, match="queue_size"):
        _swav(queue_size=-1)


# --- DINO ---------------------------------------------------------------------------------
def _dino(**kw) -> DINO:
    torch.manual_seed(0)
    return DINO(backbone=BACKBONE, projector=HEAD, momentum=0.9, **kw).double().eval()


def test_dino_head_is_mlp_gelu_bottleneck_normalised_weight_normalised_layer():
    head = DINOHead(8, hidden_dim=16, bottleneck_dim=4, num_prototypes=7, num_layers=3)
    kinds = [type(m).__name__ for m in head.mlp]
    assert kinds == ["Linear", "GELU", "Linear", "GELU", "Linear"]
    assert head.last_layer.gain is None  # norm_last_layer: row norms fixed to 1
    x = torch.randn(5, 8)
    v = head.last_layer.weight
    expected = F.normalize(head.mlp(x), dim=1) @ (v / v.norm(dim=1, keepdim=True)).t()
    torch.testing.assert_close(head(x), expected)
    free = DINOHead(8, 16, 4, 7, batch_norm=True, norm_last_layer=False)
    assert [type(m).__name__ for m in free.mlp][:3] == ["Linear", "BatchNorm1d", "GELU"]
    assert free.last_layer.gain.shape == (7, 1) and free.last_layer.gain.requires_grad
    wide = DINOHead(512, 2048, 256, 16)
    with torch.no_grad():
        assert float(wide.mlp[0].weight.std()) == pytest.approx(0.02, rel=0.05)  # trunc. normal
        assert float(wide.mlp[0].bias.abs().max()) == 0.0


def test_dino_is_its_loss_with_the_teacher_on_the_global_crops_and_the_old_centre():
    method = _dino(temperature=0.2, teacher_temperature=0.05)
    with torch.no_grad():
        method.center.add_(torch.linspace(-1, 1, 7, dtype=torch.float64))
    views = _views(k=3)
    seen = []
    original = method.encode_target
    method.encode_target = lambda x: seen.append(x) or original(x)  # type: ignore[method-assign]
    out = method(views, _labels(), STATE)
    assert len(seen) == 2 and seen[0] is views[0] and seen[1] is views[1]
    student = [method.encode(v)[1] for v in views]
    teacher = [original(v) for v in views[:2]]
    expected = losses.dino(student, teacher, method.center, student_temperature=0.2,
                           teacher_temperature=0.05)
    torch.testing.assert_close(out.loss, expected)
    assert method.gradient_freezes == {"projector.last_layer": GradientFreeze(1, "epoch")}


def test_dino_centre_moves_after_the_step_by_the_mean_of_every_staged_teacher_output():
    method = _dino(center_momentum=0.8)
    views = _views()
    teacher = torch.cat([method.encode_target(v) for v in views])
    method(views[:], _labels(), STATE)  # two micro-batches of the same images
    method(views[:], _labels(), STATE)
    torch.testing.assert_close(method.center, torch.zeros(1, 7, dtype=torch.float64))
    method.after_optimizer_step(STATE)
    torch.testing.assert_close(method.center, 0.2 * teacher.mean(0, keepdim=True),
                               rtol=0, atol=1e-6)  # the EMA moved the teacher a little


def test_dino_centre_stays_float32_under_bf16_autocast():
    torch.manual_seed(0)
    method = DINO(backbone=BACKBONE, projector=HEAD)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = method([v.float() for v in _views()], _labels(), STATE)
    method.after_optimizer_step(STATE)
    assert out.loss.dtype == torch.float32 and method.center.dtype == torch.float32
    assert float(method.center.abs().sum()) > 0


def test_dino_teacher_temperature_follows_its_schedule_and_the_last_layer_freeze_names_it():
    method = _dino(teacher_temperature=EpochWarmupSchedule(0.04, 0.07, 2))
    views = _views()
    assert method(views, _labels(), _at(0.5)).logs["teacher_temperature"] == pytest.approx(0.04)
    out = method(views, _labels(), _at(1.0))
    assert out.logs["teacher_temperature"] == pytest.approx(0.07)
    out.loss.backward()
    drop_frozen_gradients(method, method.gradient_freezes, _at(0.5))
    assert method.projector.last_layer.weight.grad is None
    assert method.projector.mlp[0].weight.grad is not None


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"predictor": HeadSpec(out_dim=4)}, "no predictor"),
    ({"momentum": None}, "needs a momentum"),
    ({"center_momentum": 1.5}, "center_momentum"),
    ({"teacher_temperature": 0.0}, "teacher_temperature"),
    ({"queue_size": 8}, "queue_size must be 0"),
])
def test_dino_refuses_what_it_does_not_take(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DINO(backbone=BACKBONE, projector=HEAD, **kwargs)


def test_constant_momentum_keeps_the_base_value():
    method = _dino(momentum_schedule="constant")
    assert method.after_optimizer_step(ScheduleState(step=8, total_steps=10))["momentum"] == 0.9
    cosine = MoCo(backbone=BACKBONE, projector=PROJECTOR, queue_size=8, momentum=0.9)
    assert cosine.after_optimizer_step(ScheduleState(step=5, total_steps=10))["momentum"] == \
        pytest.approx(0.95)
    with pytest.raises(ValueError, match="momentum_schedule"):
        _dino(momentum_schedule="linear")


# --- NNCLR --------------------------------------------------------------------------------
def _nnclr(**kw) -> NNCLR:
    torch.manual_seed(0)
    return NNCLR(backbone=BACKBONE, projector=HeadSpec(8, 6, 3, "none"),
                 predictor=HeadSpec(8, 6, 2, "none"), **kw).double().eval()


def test_nnclr_is_its_loss_on_the_neighbours_in_the_support_set():
    method = _nnclr(queue_size=10, temperature=0.3)
    views = _views()
    support = method.queue.negatives()
    out = method(views, _labels(), STATE)
    (_, z1, p1), (_, z2, p2) = method.encode_both(views[0]), method.encode_both(views[1])
    expected = losses.nnclr(losses.nearest_neighbours(z1, support),
                            losses.nearest_neighbours(z2, support), p1, p2, temperature=0.3)
    torch.testing.assert_close(out.loss, expected)
    assert torch.equal(p1, method.predictor(z1))
    # the support set takes the first view's projections after the step
    assert staged_rows(method.queue) == 6
    method.after_optimizer_step(STATE)
    rows = method.queue.negatives()
    torch.testing.assert_close(rows[:6], F.normalize(z1, dim=1).detach())


def test_nnclr_nt_xent_form_and_an_empty_support_set():
    views = _views()
    lightly = _nnclr(queue_size=10, form="nt_xent")
    out = lightly(views, _labels(), STATE)
    support = lightly.queue.negatives()
    (_, z1, p1), (_, z2, p2) = lightly.encode_both(views[0]), lightly.encode_both(views[1])
    expected = losses.nnclr(losses.nearest_neighbours(z1, support),
                            losses.nearest_neighbours(z2, support), p1, p2, form="nt_xent")
    torch.testing.assert_close(out.loss, expected)
    empty = _nnclr(queue_size=10, queue_init="empty")
    out = empty(views, _labels(), STATE)
    (_, z1, p1), (_, z2, p2) = empty.encode_both(views[0]), empty.encode_both(views[1])
    torch.testing.assert_close(out.loss, losses.nnclr(z1, z2, p1, p2))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"queue_size": 0}, "support set"), ({"form": "simclr"}, "form"),
    ({"momentum": 0.99}, "no momentum target branch")])
def test_nnclr_refuses_what_it_does_not_take(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NNCLR(backbone=BACKBONE, projector=PROJECTOR, **kwargs)


def test_nnclr_refuses_multicrop_and_swav_dino_take_it():
    with pytest.raises(ValueError, match="multi-crop is for"):
        _nnclr(queue_size=8)(_views(k=3), _labels(), STATE)
    assert SwAV.supports_multicrop and DINO.supports_multicrop
    assert not SwAV.captured_step and not DINO.captured_step
    assert isinstance(_swav().prototypes, nn.Linear)
    assert NNCLR.captured_step  # test_captured_step.py: bit for bit the eager steps


# --- the collapse value each states (the engine's collapse check watches for it) ----------
def test_swav_and_dino_state_the_loss_a_uniform_collapse_gives():
    """Scores (SwAV) or head outputs (DINO) equal for every image and output: the loss is log K,
    K the prototypes (SwAV) or the head's outputs (DINO)."""
    swav_method = _swav()
    scores = [torch.zeros(6, 5, dtype=torch.float64) for _ in range(2)]
    codes = [losses.sinkhorn_knopp(s) for s in scores]
    assert swav_method.collapse_loss() == pytest.approx(losses.swav(scores, codes).item())
    assert swav_method.collapse_loss() == pytest.approx(torch.log(torch.tensor(5.0)).item())
    torch.manual_seed(0)
    dino_method = DINO(backbone=BACKBONE, projector=HEAD, momentum=0.9).double()
    outputs = [torch.zeros(6, 7, dtype=torch.float64) for _ in range(2)]
    center = torch.zeros(1, 7, dtype=torch.float64)
    assert dino_method.collapse_loss() == pytest.approx(
        losses.dino(outputs, outputs, center).item())
    assert dino_method.collapse_loss() == pytest.approx(torch.log(torch.tensor(7.0)).item())


def test_each_hands_the_engine_its_online_embedding_for_the_collapse_check():
    """SwAV's normalised projection, DINO's head output, NNCLR's projection of the first view:
    what ``train/z_std`` reads."""
    views = _views()
    swav_method, dino_method, nnclr_method = _swav(), _dino(), _nnclr()
    out = swav_method(views, _labels(), STATE)
    torch.testing.assert_close(out.embedding, F.normalize(swav_method.encode(views[0])[1], dim=1))
    out = dino_method(views, _labels(), STATE)
    torch.testing.assert_close(out.embedding, dino_method.encode(views[0])[1])
    out = nnclr_method(views, _labels(), STATE)
    torch.testing.assert_close(out.embedding, nnclr_method.encode_both(views[0])[1])


def test_swav_and_dino_log_the_cosine_of_the_two_global_crops():
    """``train/positive_similarity`` (what the reproduction study's collapse rule reads): the
    cosine of SwAV's projections and of DINO's student outputs of the two global crops, mean
    over the batch."""
    views = _views(k=3)  # two global crops and a local one (not a positive pair)
    for method in (_swav(), _dino()):
        out = method(views, _labels(), STATE)
        first, second = (method.encode(v)[1] for v in views[:2])
        expected = F.cosine_similarity(first, second, dim=1).mean()
        logged = out.logs["positive_similarity"]
        logged = logged() if callable(logged) else logged
        torch.testing.assert_close(logged.double(), expected, rtol=1e-6, atol=1e-6)
