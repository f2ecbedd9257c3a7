"""The optimiser step of a captured step (:class:`contrastkit.train.graph_optim.OptimizerUpdate`)
is the torch optimiser's, with the learning rate read on the device.

On the CPU the update runs the kernels torch's SGD runs there, so the parameters and momentum
buffers after several steps are those of ``optimizer.step()`` bit for bit: SGD with weight decay,
with Nesterov momentum, without momentum, and contrastkit's LARS (with ``clip_lr``, which reads
the step's learning rate, and either trust ratio); several parameter groups with
their own learning rates; a parameter without a gradient left alone (torch skips it).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from contrastkit.optim import LARS
from contrastkit.train.graph_optim import OptimizerUpdate, add_scaled_, at_step, step_table


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4), nn.Linear(4, 3))


def _optimizer(kind: str, model: nn.Module):
    groups = [{"params": [model[0].weight, model[2].weight], "weight_decay": 5e-4,
               "lars_adapt": True},
              {"params": [model[0].bias, model[1].weight, model[1].bias, model[2].bias],
               "weight_decay": 0.0, "lars_adapt": False, "lr": 0.3}]
    if kind == "lars":
        return LARS(groups, lr=0.1, momentum=0.9)
    if kind.startswith("lars_clip"):  # solo-learn's clip_lr, with each trust-ratio form
        return LARS(groups, lr=0.1, momentum=0.9, eta=0.05, clip_lr=True,  # clips 1 of 2
                    trust_ratio="update" if kind.endswith("update") else "paper")
    options = {"sgd": {"momentum": 0.9}, "nesterov": {"momentum": 0.9, "nesterov": True},
               "plain": {"momentum": 0.0}}[kind]
    return torch.optim.SGD(groups, lr=0.1, **options)


@pytest.mark.parametrize("kind", ["sgd", "nesterov", "plain", "lars", "lars_clip",
                                  "lars_clip_update"])
def test_the_update_is_the_optimisers_step_bit_for_bit(kind: str) -> None:
    eager, graph = _model(), _model()
    opt_eager, opt_graph = _optimizer(kind, eager), _optimizer(kind, graph)
    rates = [(lambda k, base=g["lr"]: base * (1.0 - k / 10)) for g in opt_graph.param_groups]
    update = OptimizerUpdate(opt_graph, rates, total_steps=10, device=torch.device("cpu"))
    step = torch.zeros((), dtype=torch.int64)
    x = torch.randn(16, 5)
    for k in range(4):
        for group, rate in zip(opt_eager.param_groups, rates, strict=True):
            group["lr"] = rate(k)  # what the LambdaLR scheduler sets
        loss = eager(x).square().mean()
        eager.zero_grad()
        loss.backward()
        eager[2].bias.grad = None  # a parameter without gradient: left alone
        opt_eager.step()
        grads = list(torch.autograd.grad(graph(x).square().mean(), update.params))
        grads[next(i for i, q in enumerate(update.params) if q is graph[2].bias)] = None
        update(grads, step)
        step.add_(1)
        for a, b in zip(eager.parameters(), graph.parameters(), strict=True):
            assert torch.equal(a, b), (kind, k)
    for p_eager, p_graph in zip(eager.parameters(), graph.parameters(), strict=True):
        buffers = opt_eager.state[p_eager].get("momentum_buffer"), opt_graph.state[
            p_graph].get("momentum_buffer")
        if buffers[0] is not None:
            assert torch.equal(*buffers)


def test_tables_are_read_at_the_device_step_and_hold_their_last_value() -> None:
    table = step_table(lambda k: 0.5 ** k, 4, torch.device("cpu"))
    assert table.dtype == torch.float64 and table.tolist() == [1.0, 0.5, 0.25, 0.125, 0.0625]
    for k, want in ((0, 1.0), (3, 0.125), (4, 0.0625), (9, 0.0625)):
        assert float(at_step(table, torch.tensor(k), torch.float64)) == want
    two = torch.stack([table, 2 * table])
    assert at_step(two, torch.tensor(2), torch.float32).tolist() == [0.25, 0.5]


def test_add_scaled_rounds_as_add_with_alpha() -> None:
    torch.manual_seed(1)
    targets = [torch.randn(1001), torch.randn(7, 3)]
    sources = [torch.randn(1001), torch.randn(7, 3)]
    want = [t.clone().add_(s, alpha=-0.0123456789) for t, s in zip(targets, sources, strict=True)]
    got = copy.deepcopy(targets)
    add_scaled_(got, sources, torch.tensor(-0.0123456789, dtype=torch.float64).float())
    assert all(torch.equal(a, b) for a, b in zip(want, got, strict=True))


def test_other_optimisers_are_refused() -> None:
    model = _model()
    with pytest.raises(ValueError, match="SGD and LARS steps, not AdamW"):
        OptimizerUpdate(torch.optim.AdamW(model.parameters()), [lambda k: 1.0], 5,
                        torch.device("cpu"))
    with pytest.raises(ValueError, match="without dampening"):
        OptimizerUpdate(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                                        dampening=0.1), [lambda k: 1.0], 5, torch.device("cpu"))
