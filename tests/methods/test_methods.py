"""Methods compose encoder, target branch, queue and loss as documented."""

from __future__ import annotations

import inspect
import re

import pytest
import torch
from queue_inspect import ordered, staged_rows

from contrastkit import losses, methods
from contrastkit.losses import MACLTemperature
from contrastkit.methods import SCE, MoCo, ReSSL, SimCLR, SupervisedContrastive
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import LinearSchedule, ScheduleState

TINY = {"backbone": BackboneSpec(name="small_convnet", width=4, out_dim=8),
        "projector": HeadSpec(hidden_dim=8, out_dim=6, batch_norm="none")}
STATE = ScheduleState(step=0, total_steps=10)


def _views(n: int = 6, k: int = 2, size: int = 8) -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.rand(n, 3, size, size) for _ in range(k)]


def _labels(n: int = 6) -> torch.Tensor:
    return torch.arange(n) % 3


def test_simclr_is_nt_xent_of_the_online_projections():
    method = SimCLR(temperature=0.3, **TINY).double()
    v = [x.double() for x in _views()]
    out = method(v, _labels(), STATE)
    z1, z2 = method.encode(v[0])[1], method.encode(v[1])[1]
    torch.testing.assert_close(out.loss, losses.nt_xent(z1, z2, temperature=0.3))
    assert out.features.shape == (6, 8) and not out.features.requires_grad


def test_simclr_dcl_and_dynamic_temperature():
    v = _views()
    dyn = losses.DySTreSSTemperature(t_min=0.1, t_max=0.2)
    method = SimCLR(loss="dcl", temperature=dyn, **TINY)
    out = method(v, _labels(), STATE)
    z1, z2 = method.encode(v[0])[1], method.encode(v[1])[1]
    torch.testing.assert_close(out.loss, losses.dcl(z1, z2, temperature=dyn))


def test_sce_asymmetric_uses_online_view0_and_target_view1():
    method = SCE(coeff=0.3, temperature=0.2, target_temperature=0.05, queue_size=16,
                 momentum=0.9, **TINY).double()
    v = [x.double() for x in _views()]
    negatives = method.queue.negatives().double()
    out = method(v, _labels(), STATE)
    q, k = method.encode(v[0])[1], method.encode_target(v[1])
    expected = losses.sce(q, k, negatives, temperature=0.2, target_temperature=0.05, coeff=0.3)
    torch.testing.assert_close(out.loss, expected)
    # keys are staged, not yet in the queue, until the optimiser step
    assert staged_rows(method.queue) == 6
    before = ordered(method.queue).clone()
    method.after_optimizer_step(STATE)
    after = ordered(method.queue)
    assert staged_rows(method.queue) == 0
    torch.testing.assert_close(after[-6:], torch.nn.functional.normalize(k.float(), dim=1).double())
    assert not torch.equal(before, after)


def test_sce_positive_target_option_reaches_the_loss():
    """``positive_target="zero_logit"``: the authors' code's target (the positive keeps a
    zero logit), passed to the loss; the default is eq. 5's mask."""
    v = [x.double() for x in _views()]
    losses_by_target = {}
    for target in ("masked", "zero_logit"):
        torch.manual_seed(1)
        method = SCE(coeff=0.5, target_temperature=1.0, queue_size=16, momentum=0.9,
                     positive_target=target, **TINY).double()
        negatives = method.queue.negatives().double()
        out = method(v, _labels(), STATE)
        q, k = method.encode(v[0])[1], method.encode_target(v[1])
        expected = losses.sce(q, k, negatives, target_temperature=1.0, positive_target=target)
        torch.testing.assert_close(out.loss, expected)
        losses_by_target[target] = out.loss
    assert not torch.isclose(losses_by_target["masked"], losses_by_target["zero_logit"])
    assert SCE(**TINY).positive_target == "masked"


def test_symmetric_sce_averages_both_directions_and_enqueues_both_keys():
    method = SCE(symmetric=True, queue_size=32, momentum=0.9, **TINY).double()
    v = [x.double() for x in _views()]
    negatives = method.queue.negatives().double()
    out = method(v, _labels(), STATE)
    q0, q1 = method.encode(v[0])[1], method.encode(v[1])[1]
    k0, k1 = method.encode_target(v[0]), method.encode_target(v[1])
    expected = 0.5 * (losses.sce(q0, k1, negatives) + losses.sce(q1, k0, negatives))
    torch.testing.assert_close(out.loss, expected)
    assert staged_rows(method.queue) == 12


def test_multicrop_local_views_are_queries_only():
    method = MoCo(queue_size=16, momentum=0.9, **TINY).double()
    v = [x.double() for x in _views(k=2)] + [x.double() for x in _views(k=2, size=4)]
    negatives = method.queue.negatives().double()
    out = method(v, _labels(), STATE)
    k1 = method.encode_target(v[1])
    pairs = [losses.info_nce(method.encode(v[i])[1], k1, negatives, temperature=0.2)
             for i in (0, 2, 3)]
    torch.testing.assert_close(out.loss, torch.stack(pairs).mean())
    assert staged_rows(method.queue) == 6  # only the global key


def test_ressl_uses_its_loss():
    method = ReSSL(queue_size=16, momentum=0.9, **TINY).double()
    v = [x.double() for x in _views()]
    negatives = method.queue.negatives().double()
    out = method(v, _labels(), STATE)
    q, k = method.encode(v[0])[1], method.encode_target(v[1])
    torch.testing.assert_close(out.loss, losses.ressl(q, k, negatives, temperature=0.1,
                                                      target_temperature=0.04))


def test_sce_free_coefficients_reproduce_sce_at_lambda_one_minus_lambda():
    v = [x.double() for x in _views()]
    torch.manual_seed(1)
    a = SCE(coeff=0.4, queue_size=16, momentum=0.9, **TINY).double()
    torch.manual_seed(1)
    b = SCE(free_coefficients=(0.4, 0.6, 0.6), queue_size=16, momentum=0.9, **TINY).double()
    torch.testing.assert_close(a(v, _labels(), STATE).loss, b(v, _labels(), STATE).loss)


def test_coeff_schedule_and_macl_temperature_are_used():
    sched = LinearSchedule(start=1.0, end=0.0)
    method = SCE(coeff_schedule=sched, queue_size=16, momentum=0.9,
                 temperature=MACLTemperature(t0=0.1, alpha=0.5), **TINY)
    out = method(_views(), _labels(), ScheduleState(step=5, total_steps=10))
    assert out.logs["coeff"] == pytest.approx(0.5)
    assert out.logs["temperature"] != pytest.approx(0.1)  # adapted to the alignment


def test_every_pair_logs_into_the_mean_of_its_values():
    """A per-pair temperature (MACL) of a symmetric SCE logs the mean over the two (query, key)
    pairs, as the loss is their mean, not the last pair's value."""
    method = SCE(symmetric=True, queue_size=16, momentum=0.9,
                 temperature=MACLTemperature(t0=0.1, alpha=0.5), **TINY).double()
    torch.manual_seed(2)
    with torch.no_grad():  # a target unlike the online encoder: the pairs' alignments differ
        for p in method.target.parameters():
            p.add_(0.1 * torch.randn_like(p))
    v = [x.double() for x in _views()]
    out = method(v, _labels(), STATE)
    q0, q1 = method.encode(v[0])[1], method.encode(v[1])[1]
    k0, k1 = method.encode_target(v[0]), method.encode_target(v[1])
    pairs = [float(method.temperature_at(STATE, (q0, k1))),
             float(method.temperature_at(STATE, (q1, k0)))]
    assert pairs[0] != pytest.approx(pairs[1], rel=1e-9)  # the two pairs differ
    logged = out.logs["temperature"]
    assert float(logged() if callable(logged) else logged) == pytest.approx(sum(pairs) / 2,
                                                                            rel=1e-6)
    assert out.logs["target_temperature"] == pytest.approx(0.07)  # numbers: their mean, at once


def test_supervised_uses_the_chosen_loss():
    v = [x.double() for x in _views()]
    y = _labels()
    for name, fn in (("sincere", losses.sincere), ("supcon", losses.supcon)):
        method = SupervisedContrastive(loss=name, temperature=0.2, **TINY).double()
        out = method(v, y, STATE)
        z = torch.stack([method.encode(v[0])[1], method.encode(v[1])[1]], dim=1)
        torch.testing.assert_close(out.loss, fn(z, y, temperature=0.2))
    with pytest.raises(ValueError, match="unlabelled"):
        method(v, torch.full((6,), -1), STATE)


def test_target_branch_follows_cosine_momentum():
    method = MoCo(queue_size=8, momentum=0.5, **TINY)
    with torch.no_grad():
        for p in method.backbone.parameters():
            p.add_(1.0)
    target = next(method.target.target.parameters()).clone()
    online = next(method.backbone.parameters()).clone()
    logs = method.after_optimizer_step(ScheduleState(step=0, total_steps=10))
    assert logs["momentum"] == pytest.approx(0.5)
    torch.testing.assert_close(next(method.target.target.parameters()), 0.5 * target + 0.5 * online)


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (SimCLR, {"queue_size": 16}, "queue_size must be 0"),
        (SimCLR, {"momentum": 0.99}, "no momentum target branch"),
        (SCE, {"momentum": None}, "needs a momentum target branch"),
        (SCE, {"coeff": 1.5}, "coeff"),
        (SCE, {"positive_target": "zero"}, "positive_target must be one of"),
        (SCE, {"positive_target": "zero_logit", "free_coefficients": (0.5, 0.5, 0.5)},
         "free_coefficients"),
        (SimCLR, {"loss": "triplet"}, "loss must be one of"),
        (SCE, {"predictor": HeadSpec(out_dim=5)}, "predictor.out_dim"),
    ],
)
def test_incompatible_choices_are_explained(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**TINY, **kwargs)


def test_multicrop_without_target_and_tiny_batches_are_refused():
    method = SimCLR(**TINY)
    with pytest.raises(ValueError, match="multi-crop is for DINO, MoCo, ReSSL, SCE and SwAV"):
        method(_views(k=3), _labels(), STATE)
    with pytest.raises(ValueError, match="at least 2"):
        method(_views(n=1), _labels(1), STATE)


def test_simclr_info_nce_and_hard_share_candidates():
    """With num_hard >= N-1, the hard loss keeps every negative and equals info_nce."""
    v = [x.double() for x in _views()]
    torch.manual_seed(3)
    soft = SimCLR(loss="info_nce", temperature=0.2, **TINY).double()
    torch.manual_seed(3)
    hard = SimCLR(loss="hard_contrastive", num_hard=5, temperature=0.2, **TINY).double()
    a, b = soft(v, _labels(), STATE).loss, hard(v, _labels(), STATE).loss
    torch.testing.assert_close(a, b)
    z1, z2 = soft.encode(v[0])[1], soft.encode(v[1])[1]
    expected = 0.5 * (losses.info_nce(z1, z2, temperature=0.2)
                      + losses.info_nce(z2, z1, temperature=0.2))
    torch.testing.assert_close(a, expected)


def _having(attribute: str) -> set[str]:
    """The methods of contrastkit.methods whose class sets ``attribute``."""
    classes = [getattr(methods, name) for name in methods.__all__]
    return {c.__name__ for c in classes if isinstance(c, type)
            and issubclass(c, methods.ContrastiveMethod) and not inspect.isabstract(c)
            and getattr(c, attribute)}


def _named(message: str) -> set[str]:
    """The method names of the last parenthesis or tail "A, B and C" of ``message``."""
    phrase = re.search(r"(?:\(|is for )([A-Za-z0-9, ]+?)(?: have one\)| keep one\)|$)",
                       message).group(1)
    return set(re.split(r", | and ", phrase))


@pytest.mark.parametrize(("make", "attribute"), [
    (lambda: SimCLR(momentum=0.99, **TINY), "requires_target"),
    (lambda: methods.SwAV(momentum=0.99, **TINY), "requires_target"),
    (lambda: SimCLR(queue_size=16, **TINY), "supports_queue"),
    (lambda: methods.DINO(queue_size=16, backbone=TINY["backbone"]), "supports_queue"),
    (lambda: methods.BYOL(**TINY)(_views(k=3), _labels(), STATE), "supports_multicrop"),
    (lambda: methods.MoCoV3(**TINY)(_views(k=3), _labels(), STATE), "supports_multicrop"),
], ids=["momentum-simclr", "momentum-swav", "queue-simclr", "queue-dino", "multicrop-byol",
        "multicrop-mocov3"])
def test_a_refusal_names_every_method_that_has_what_it_refuses(make, attribute):
    """Each refusal names the methods whose class states what it refuses (BYOL and MoCo v3
    have a target branch but take two views; SwAV and NNCLR keep queues without one)."""
    with pytest.raises(ValueError) as refused:
        make()
    assert _named(str(refused.value)) == _having(attribute)
    assert {"BYOL", "DINO", "MoCoV3"} <= _having("requires_target")
    assert {"NNCLR", "SwAV"} <= _having("supports_queue") and not _having("supports_queue") & {
        "BYOL", "MoCoV3", "DINO"}
    assert "SwAV" in _having("supports_multicrop") and not _having("supports_multicrop") & {
        "BYOL", "MoCoV3", "NNCLR"}


def test_the_engine_refuses_multicrop_naming_the_methods_that_take_it():
    from contrastkit.data.specs import MultiCropSpec, ViewsSpec
    from contrastkit.train.module import PretrainModule

    with pytest.raises(ValueError, match=r"views\.multicrop is set but BYOL takes two views") as no:
        PretrainModule(methods.BYOL(**TINY), views=ViewsSpec(multicrop=MultiCropSpec()))
    assert _named(str(no.value)) == _having("supports_multicrop")
