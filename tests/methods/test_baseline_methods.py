"""BYOL, MoCo v3, W-MSE and SimCLR's DCLW compose encoder, target branch and loss as their
official codes do (single process; under DDP: test_distributed_methods.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from contrastkit import losses
from contrastkit.losses.wmse import draw_sub_batches
from contrastkit.methods import BYOL, WMSE, MoCo, MoCoV3, SimCLR
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.models.momentum import cosine_momentum
from contrastkit.schedules import ScheduleState

BACKBONE = BackboneSpec(name="small_convnet", width=4, out_dim=8)
HEAD = HeadSpec(hidden_dim=8, out_dim=6, batch_norm="none")
STATE = ScheduleState(step=3, total_steps=10)


def _views(n: int = 8) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.rand(n, 3, 8, 8, generator=g, dtype=torch.float64) for _ in range(2)]


def _labels(n: int = 8) -> torch.Tensor:
    return torch.arange(n) % 3


def _byol(**kwargs) -> BYOL:
    return BYOL(backbone=BACKBONE, projector=HEAD, predictor=HEAD, **kwargs).double()


def test_byol_sums_both_directions_of_prediction_against_target():
    method = _byol(momentum=0.9)
    v = _views()
    out = method(v, _labels(), STATE)
    (_, p1), (_, p2) = method.encode(v[0]), method.encode(v[1])
    z1, z2 = method.encode_target(v[0]), method.encode_target(v[1])
    torch.testing.assert_close(out.loss, losses.byol(p1, z2) + losses.byol(p2, z1))
    # symmetrised: swapping the views changes nothing
    torch.testing.assert_close(method([v[1], v[0]], _labels(), STATE).loss, out.loss)
    assert method.predictor is not None and out.features.shape == (8, 8)


def test_byol_trains_the_online_branch_only():
    method = _byol(momentum=0.9)
    method(_views(), _labels(), STATE).loss.backward()
    assert all(p.grad is None for p in method.target.parameters())
    assert all(p.grad is not None for p in method.predictor.parameters())
    assert all(p.grad is not None for p in method.backbone.parameters())


@pytest.mark.parametrize("schedule", ["cosine", "constant"])
def test_momentum_schedule_cosine_or_constant(schedule):
    method = _byol(momentum=0.9, momentum_schedule=schedule)
    with torch.no_grad():
        for p in method.backbone.parameters():
            p.add_(1.0)
    target = next(method.target.target.parameters()).clone()
    online = next(method.backbone.parameters()).clone()
    m = method.after_optimizer_step(STATE)["momentum"]
    want = 0.9 if schedule == "constant" else cosine_momentum(3, 10, 0.9)
    assert m == pytest.approx(want) and (schedule == "constant") == (m == 0.9)
    torch.testing.assert_close(next(method.target.target.parameters()),
                               m * target + (1 - m) * online)
    assert method.momentum_at(10, 10) == (0.9 if schedule == "constant" else 1.0)


def test_bad_momentum_schedule_is_named():
    with pytest.raises(ValueError, match="momentum_schedule must be 'cosine' or 'constant'"):
        MoCo(backbone=BACKBONE, projector=HEAD, momentum_schedule="linear")


def test_moco_v3_sums_both_directions_with_the_two_tau_factor():
    method = MoCoV3(backbone=BACKBONE, projector=HEAD, predictor=HEAD, temperature=0.2).double()
    v = _views()
    out = method(v, _labels(), STATE)
    (_, q1), (_, q2) = method.encode(v[0]), method.encode(v[1])
    k1, k2 = method.encode_target(v[0]), method.encode_target(v[1])
    want = 0.4 * (losses.info_nce(q1, k2, temperature=0.2)
                  + losses.info_nce(q2, k1, temperature=0.2))
    torch.testing.assert_close(out.loss, want)
    out.loss.backward()
    assert all(p.grad is None for p in method.target.parameters())
    assert out.logs["temperature"] == 0.2


def _moco_v3_mlp(num_layers: int, input_dim: int, mlp_dim: int, output_dim: int,
                 last_bn: bool = True) -> list[tuple]:
    """The layers of moco-v3's ``MoCo._build_mlp`` (facebookresearch/moco-v3 @ c349e6e,
    ``moco/builder.py``), described: every linear layer without bias; BN and ReLU after each
    hidden one; after the last, a BN without affine parameters if ``last_bn``."""
    layers: list[tuple] = []
    for i in range(num_layers):
        dim1 = input_dim if i == 0 else mlp_dim
        dim2 = output_dim if i == num_layers - 1 else mlp_dim
        layers.append(("Linear", dim1, dim2, False))
        if i < num_layers - 1:
            layers += [("BatchNorm1d", dim2, True), ("ReLU",)]
        elif last_bn:
            layers.append(("BatchNorm1d", dim2, False))
    return layers


def _described(head: nn.Module) -> list[tuple]:
    out: list[tuple] = []
    for m in head.layers:
        if isinstance(m, nn.Linear):
            out.append(("Linear", m.in_features, m.out_features, m.bias is not None))
        elif isinstance(m, nn.BatchNorm1d):
            out.append(("BatchNorm1d", m.num_features, m.affine))
        else:
            out.append((type(m).__name__,))
    return out


def test_moco_v3_default_heads_are_moco_resnet_heads():
    """``MoCo_ResNet._build_projector_and_predictor_mlps`` with its defaults (dim 256, mlp_dim
    4096): the projector ``_build_mlp(2, backbone features, 4096, 256)``, the predictor
    ``_build_mlp(2, 256, 4096, 256, False)``, layer by layer; tau 1, m 0.99."""
    method = MoCoV3(backbone=BACKBONE)
    assert _described(method.projector) == _moco_v3_mlp(2, BACKBONE.out_dim, 4096, 256)
    assert _described(method.predictor) == _moco_v3_mlp(2, 256, 4096, 256, last_bn=False)
    assert (method.temperature, method.base_momentum) == (1.0, 0.99)


def test_wmse_whitens_the_online_projections_over_the_drawn_sub_batches():
    method = WMSE(backbone=BACKBONE, projector=HeadSpec(8, 3, batch_norm="none"),
                  w_size=4, w_iter=2).double()
    v = _views()
    torch.manual_seed(7)
    out = method(v, _labels(), STATE)
    torch.manual_seed(7)  # the same draw
    rows = draw_sub_batches(8, 4, 2)
    z1, z2 = method.encode(v[0])[1], method.encode(v[1])[1]
    torch.testing.assert_close(out.loss, losses.wmse(z1, z2, w_size=4, w_iter=2,
                                                     sub_batches=rows))
    assert method.target is None


def test_wmse_detach_second_reaches_the_loss():
    """Same value; without the second view's gradient, the backbone's gradient changes."""
    grads, values = [], []
    for detach in (False, True):
        torch.manual_seed(0)
        method = WMSE(backbone=BACKBONE, projector=HeadSpec(8, 3, batch_norm="none"),
                      w_size=8, detach_second=detach).double()
        out = method(_views(), _labels(), STATE)
        out.loss.backward()
        values.append(out.loss.detach())
        grads.append(next(method.backbone.parameters()).grad.clone())
    torch.testing.assert_close(values[0], values[1])
    assert float((grads[0] - grads[1]).abs().max()) > 1e-6


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"w_size": 3}, "w_size must be an int above projector.out_dim \\(3\\)"),
    ({"w_iter": 0}, "w_iter must be a positive int"),
    ({"eps": -0.1}, "eps must lie in"),
])
def test_wmse_bad_settings_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        WMSE(backbone=BACKBONE, projector=HeadSpec(8, 3), **kwargs)


def test_wmse_w_size_must_divide_the_batch():
    method = WMSE(backbone=BACKBONE, projector=HeadSpec(8, 3, batch_norm="none"), w_size=5)
    with pytest.raises(ValueError, match="w_size 5 must divide the global batch of 8"):
        method([v.float() for v in _views()], _labels(), STATE)


def test_simclr_dclw_uses_its_loss_and_sigma():
    method = SimCLR(loss="dclw", temperature=0.2, sigma=0.3, backbone=BACKBONE,
                    projector=HEAD).double()
    v = _views()
    out = method(v, _labels(), STATE)
    z1, z2 = method.encode(v[0])[1], method.encode(v[1])[1]
    torch.testing.assert_close(out.loss, losses.dclw(z1, z2, temperature=0.2, sigma=0.3))
    assert not torch.isclose(out.loss, losses.dclw(z1, z2, temperature=0.2, sigma=0.5))


@pytest.mark.parametrize("cls", [BYOL, MoCoV3])
def test_the_default_predictor_takes_the_projectors_sizes(cls):
    method = cls(backbone=BACKBONE, projector=HeadSpec(hidden_dim=12, out_dim=5))
    linears = [m for m in method.predictor.layers if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(5, 12), (12, 5)]


@pytest.mark.parametrize("make", [
    lambda: _byol(momentum=0.9),
    lambda: MoCoV3(backbone=BACKBONE, projector=HEAD, predictor=HEAD, momentum=0.9).double(),
    lambda: WMSE(backbone=BACKBONE, projector=HEAD, w_size=8).double(),
], ids=["byol", "mocov3", "wmse"])
def test_each_hands_the_engine_its_online_embedding_for_the_collapse_check(make):
    """The online branch's output of the first view (the prediction where there is one): what
    ``train/z_std`` reads; None would leave a collapse unwatched."""
    method = make()
    v = _views()
    out = method(v, _labels(), STATE)
    assert out.embedding is not None
    torch.testing.assert_close(out.embedding, method.encode(v[0])[1])
