"""One temperature setting per method: a number, a per-pair function or a schedule.

Each case builds the method with ``temperature=...`` and compares its loss with the loss function
called on the value the setting stands for at that step (written out here, not taken from the
method), so a setting that is ignored, read at the wrong step or overridden fails.
"""

from __future__ import annotations

import math

import pytest
import torch

from contrastkit import losses
from contrastkit.losses import (
    DySTreSSTemperature,
    KuklevaCosineTemperature,
    MACLTemperature,
    PairTemperature,
    resolve_temperature,
)
from contrastkit.methods import SCE, MoCo, ReSSL, SimCLR, SupervisedContrastive
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import LinearSchedule, ScheduleState, WarmupSchedule

TINY = {"backbone": BackboneSpec(name="small_convnet", width=4, out_dim=8),
        "projector": HeadSpec(hidden_dim=8, out_dim=6, batch_norm="none")}


def _views(n: int = 6) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.rand(n, 3, 8, 8, generator=g, dtype=torch.float64) for _ in range(2)]


def _labels(n: int = 6) -> torch.Tensor:
    return torch.arange(n) % 3


def test_simclr_schedule_is_evaluated_at_the_step():
    kukleva = KuklevaCosineTemperature(t_min=0.1, t_max=1.0, period=4.0, unit="step")
    method = SimCLR(temperature=kukleva, **TINY).double()
    v = _views()
    for step in (0, 1, 2):
        out = method(v, _labels(), ScheduleState(step=step, total_steps=10))
        tau = 0.1 + 0.9 * 0.5 * (1.0 + math.cos(2.0 * math.pi * step / 4.0))
        z1, z2 = method.encode(v[0])[1], method.encode(v[1])[1]
        torch.testing.assert_close(out.loss, losses.nt_xent(z1, z2, temperature=tau))
        assert out.logs["temperature"] == pytest.approx(tau)


def test_moco_takes_a_per_pair_temperature():
    dyn = DySTreSSTemperature(t_min=0.07, t_max=0.2)
    method = MoCo(temperature=dyn, queue_size=16, momentum=0.9, **TINY).double()
    v = _views()
    negatives = method.queue.negatives().double()
    out = method(v, _labels(), ScheduleState(step=0, total_steps=10))
    q, k = method.encode(v[0])[1], method.encode_target(v[1])
    torch.testing.assert_close(out.loss, losses.info_nce(q, k, negatives, temperature=dyn))
    assert "temperature" not in out.logs  # a function of each pair: no single value to log


def test_sce_target_temperature_schedule_is_evaluated_at_the_step():
    warmup = WarmupSchedule(start=0.04, end=0.1, warmup_steps=4)
    method = SCE(temperature=0.2, target_temperature=warmup, queue_size=16, momentum=0.9,
                 **TINY).double()
    v = _views()
    negatives = method.queue.negatives().double()
    out = method(v, _labels(), ScheduleState(step=2, total_steps=10))
    q, k = method.encode(v[0])[1], method.encode_target(v[1])
    expected = losses.sce(q, k, negatives, temperature=0.2, target_temperature=0.07)
    torch.testing.assert_close(out.loss, expected)
    assert out.logs["target_temperature"] == pytest.approx(0.07)


def test_ressl_and_supervised_take_a_schedule():
    state = ScheduleState(step=5, total_steps=10)
    v = _views()
    ressl = ReSSL(temperature=LinearSchedule(0.1, 0.3), target_temperature=0.05,
                  queue_size=16, momentum=0.9, **TINY).double()
    negatives = ressl.queue.negatives().double()
    out = ressl(v, _labels(), state)
    q, k = ressl.encode(v[0])[1], ressl.encode_target(v[1])
    torch.testing.assert_close(
        out.loss, losses.ressl(q, k, negatives, temperature=0.2, target_temperature=0.05))
    sup = SupervisedContrastive(temperature=LinearSchedule(0.1, 0.3), **TINY).double()
    out = sup(v, _labels(), state)
    z = torch.stack([sup.encode(v[0])[1], sup.encode(v[1])[1]], dim=1)
    torch.testing.assert_close(out.loss, losses.sincere(z, _labels(), temperature=0.2))


@pytest.mark.parametrize("per_pair", [DySTreSSTemperature(), PairTemperature(0.1, 0.2)])
@pytest.mark.parametrize("make", [
    lambda t: SCE(temperature=t, queue_size=8, **TINY),
    lambda t: ReSSL(temperature=t, queue_size=8, **TINY),
    lambda t: SupervisedContrastive(temperature=t, **TINY),
    lambda t: SCE(target_temperature=t, queue_size=8, **TINY),
], ids=["sce", "ressl", "supervised", "sce_target"])
def test_methods_with_one_temperature_per_step_refuse_a_per_pair_one(make, per_pair):
    with pytest.raises(ValueError, match=r"^(SCE|ReSSL|SupervisedContrastive): (target_)?"
                                         r"temperature is a per-pair temperature"):
        make(per_pair)


@pytest.mark.parametrize("bad", [0.0, -0.1, float("nan")])
def test_a_non_positive_temperature_is_refused_at_construction(bad):
    with pytest.raises(ValueError, match="SimCLR: temperature must be finite and > 0"):
        SimCLR(temperature=bad, **TINY)


def test_resolve_temperature():
    state = ScheduleState(step=3, total_steps=10)
    dyn = DySTreSSTemperature()
    assert resolve_temperature(0.3, state) == 0.3
    assert resolve_temperature(dyn, state) is dyn
    assert resolve_temperature(LinearSchedule(0.0, 1.0), state) == pytest.approx(0.3)
    positive = torch.tensor([0.2, 0.6], requires_grad=True)
    tau = resolve_temperature(MACLTemperature(t0=0.1, alpha=0.5), state, positive)
    assert isinstance(tau, torch.Tensor) and not tau.requires_grad
    assert float(tau) == pytest.approx(0.1 * (1.0 + 0.5 * 0.4))


def test_a_loss_refuses_a_schedule_it_cannot_evaluate():
    q, k = torch.randn(4, 3), torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"temperature is a schedule \(KuklevaCosineTemperature\)"):
        losses.info_nce(q, k, temperature=KuklevaCosineTemperature())
