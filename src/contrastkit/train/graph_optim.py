"""The optimiser step and the schedules of a captured training step, on device tensors.

A CUDA graph replays the kernels it recorded with the values they were recorded with: a
learning rate or an EMA weight passed as a Python number would be frozen at its value of the
captured step. Here every value that changes from step to step is read on the device from a
table indexed by a step counter that lives on the device too (a 0-d int64 tensor the captured
step increments in place):

* :func:`step_table`: a schedule evaluated on the host, once, for every step of the run (the
  learning rate of each parameter group as ``LambdaLR`` computes it, the EMA rate of the
  momentum branch as the method's ``momentum_at`` gives it), stored in
  float64 exactly as the Python numbers of the eager step;
* :class:`OptimizerUpdate`: what ``torch.optim.SGD`` (momentum, Nesterov, weight decay) or
  :class:`contrastkit.optim.LARS` computes in ``step()``, with the learning rate a 0-d tensor.
  On the CPU each parameter is updated with the kernels torch's SGD runs there
  (``p + g * (-lr)`` by ``addcmul``, which rounds as ``add(alpha=-lr)`` does), so an eager run
  of the captured step gives the eager path's weights bit for bit
  (``tests/train/test_captured_step.py``); on CUDA the multi-tensor kernels run instead, whose
  last rounding may differ from the eager foreach step by one unit in the last place.

The optimiser's own state (``momentum_buffer`` of each parameter) is what is updated, so its
``state_dict``, and every checkpoint, is the one the eager path writes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch
from torch import Tensor
from torch.optim import Optimizer

from contrastkit.optim import LARS, lars_direction

__all__ = ["OptimizerUpdate", "add_scaled_", "at_step", "step_table"]


def step_table(value: Callable[[int], float], steps: int, device: torch.device) -> Tensor:
    """``[value(0), ..., value(steps)]`` as a float64 tensor on ``device`` (read at
    ``min(step, steps)``: past the end the last value holds)."""
    return torch.tensor([float(value(k)) for k in range(steps + 1)], dtype=torch.float64,
                        device=device)


def at_step(table: Tensor, step: Tensor, dtype: torch.dtype) -> Tensor:
    """``table[..., min(step, len - 1)]`` in ``dtype`` (no host read: ``table[step]`` would
    read a 0-d index tensor on the host, as Python indexing treats it as an int)."""
    index = step.clamp(max=table.shape[-1] - 1).reshape(1)
    return table.index_select(-1, index).squeeze(-1).to(dtype)


def add_scaled_(targets: list[Tensor], sources: list[Tensor], scale: Tensor) -> None:
    """``t += scale * s`` for every pair, ``scale`` a 0-d tensor: on the CPU as
    ``add_(s, alpha=scale)`` rounds (``addcmul``), elsewhere in multi-tensor kernels."""
    if not targets:
        return
    if targets[0].device.type == "cpu":
        torch._foreach_addcmul_(targets, sources, [scale] * len(targets))
    else:
        torch._foreach_add_(targets, torch._foreach_mul(sources, scale))


class OptimizerUpdate:
    """``optimizer.step()`` of SGD or LARS as device-only arithmetic (module docstring).

    Args:
        optimizer: a ``torch.optim.SGD`` (``dampening`` 0, not ``maximize``) or a
            :class:`~contrastkit.optim.LARS`, with the run's parameter groups.
        learning_rates: one callable per parameter group, ``step -> lr`` (the scheduler's).
        total_steps: steps of the run (the tables' length).
        device: where the tables live (the parameters' device).

    Raises:
        ValueError: for another optimiser or an SGD option this update does not compute.
    """

    def __init__(self, optimizer: Optimizer, learning_rates: Sequence[Callable[[int], float]],
                 total_steps: int, device: torch.device) -> None:
        kind = type(optimizer)
        if kind not in (torch.optim.SGD, LARS):
            raise ValueError(f"the captured step computes SGD and LARS steps, not "
                             f"{kind.__name__}: use model.performance.step eager")
        for group in optimizer.param_groups:
            if kind is torch.optim.SGD and (group.get("dampening", 0) or group.get("maximize")):
                raise ValueError("the captured step computes SGD without dampening or maximize")
        self.optimizer, self.lars = optimizer, kind is LARS
        self.groups = [g for g in optimizer.param_groups if g["params"]]
        self.lr = torch.stack([step_table(lr, total_steps, device)
                               for lr, g in zip(learning_rates, optimizer.param_groups,
                                                strict=True) if g["params"]])
        #: every trainable parameter, group by group: the gradients' order in ``__call__``
        self.params = [p for g in self.groups for p in g["params"] if p.requires_grad]
        first = [0]
        for group in self.groups:
            first.append(first[-1] + sum(p.requires_grad for p in group["params"]))
        self._spans = list(itertools.pairwise(first))
        for group in self.groups:  # the buffers the first eager step would create, as zeros
            if group["momentum"] != 0:
                for p in group["params"]:
                    state = self.optimizer.state[p]
                    if p.requires_grad and state.get("momentum_buffer") is None:
                        state["momentum_buffer"] = torch.zeros_like(
                            p, memory_format=torch.preserve_format)

    @torch.no_grad()
    def __call__(self, gradients: Sequence[Tensor | None], step: Tensor) -> None:
        """Update every parameter of :attr:`params` whose gradient (same order) is not None at
        optimiser step ``step`` (0-d int64 tensor); parameters without one are left alone, as
        torch's optimisers skip them."""
        if len(gradients) != len(self.params):
            raise ValueError(f"{len(gradients)} gradients for {len(self.params)} parameters")
        for index, (group, (start, end)) in enumerate(zip(self.groups, self._spans,
                                                          strict=True)):
            kept = [i for i in range(start, end) if gradients[i] is not None]
            if not kept:
                continue
            params = [self.params[i] for i in kept]
            grads = [gradients[i] for i in kept]
            lr = at_step(self.lr[index], step, params[0].dtype)
            if self.lars:
                steps = self._lars_direction(params, grads, group, lr)
            else:
                steps = self._sgd_direction(params, grads, group)
            add_scaled_(params, steps, -lr)

    def _sgd_direction(self, params: list[Tensor], grads: list[Tensor],
                       group: dict) -> list[Tensor]:
        """torch's SGD: ``d = g + wd p``; ``b = m b + d``; Nesterov ``d + m b``, else ``b``."""
        wd, momentum = group["weight_decay"], group["momentum"]
        d = torch._foreach_add(grads, params, alpha=wd) if wd != 0 else grads
        if momentum == 0:
            return list(d)
        bufs = [self.optimizer.state[p]["momentum_buffer"] for p in params]
        torch._foreach_mul_(bufs, momentum)
        torch._foreach_add_(bufs, d)
        return torch._foreach_add(d, bufs, alpha=momentum) if group["nesterov"] else bufs

    def _lars_direction(self, params: list[Tensor], grads: list[Tensor], group: dict,
                        lr: Tensor) -> list[Tensor]:
        """:class:`~contrastkit.optim.LARS`'s direction (its docstring), device-only; ``lr``
        the group's learning rate at this step (read by ``clip_lr``)."""
        momentum = group["momentum"]
        d = lars_direction(params, grads, group, lr)
        if momentum == 0:
            return d
        bufs = [self.optimizer.state[p]["momentum_buffer"] for p in params]
        torch._foreach_mul_(bufs, momentum)
        torch._foreach_add_(bufs, d)
        return bufs
