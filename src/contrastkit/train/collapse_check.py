"""The collapse warning: a run whose embedding has collapsed goes on training, and says so.

A collapsed embedding (every image mapped to nearly the same vector, the failure the
non-contrastive methods are built to avoid) trains on without a NaN: the loss may even look
settled. Two signs, read at the logging steps (``trainer.log_every_n_steps``; nothing is read
back on the other steps):

* the spread of the online embedding, logged as ``train/z_std``: the standard deviation over
  the batch of the L2-normalised embedding of the first view, averaged over its d dimensions
  (solo-learn's ``train_z_std``). The d variances of unit vectors sum to ``1 - ||mean||^2``, so
  vectors spread evenly over the sphere give about ``1 / sqrt(d)`` and identical ones 0; the
  sign is a spread below ``collapse_spread / sqrt(d)``;
* the loss at the value a method states for a collapse
  (:meth:`~contrastkit.methods.ContrastiveMethod.collapse_loss`: Barlow Twins' ``d``, VICReg's
  variance hinge at zero spread, SwAV's ``log K``): within ``collapse_loss_tolerance`` of it,
  relative to its size.

A sign that holds at every logging step for ``collapse_steps`` optimiser steps or more gives one
warning line on the main process, naming the step where it began and the value now, and the
step of the warning is logged as ``train/collapse_step``; the check then stays silent for the
rest of the run. The settings are the ``model.online_eval`` keys of
:class:`~contrastkit.train.specs.OnlineEvalSpec`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["CollapseCheck", "embedding_spread"]

#: What to look at, printed with the warning.
ADVICE = ("the run goes on, but a collapsed embedding no longer learns: check the learning rate "
          "(model.optimizer.base_lr), the views and the method's settings (docs/methods.md)")


@torch.no_grad()
def embedding_spread(embedding: Tensor) -> Tensor:
    """``train/z_std``: the standard deviation over the batch (unbiased, as ``Tensor.std``) of
    the L2-normalised rows of ``embedding`` (N, d), averaged over the d dimensions; a 0-d
    float32 tensor on the embedding's device."""
    unit = F.normalize(embedding.detach().float(), dim=1)
    return unit.std(dim=0).mean()


class CollapseCheck:
    """The two signs of a collapse, watched at the logging steps (module docstring).

    Args:
        spread: warn when ``train/z_std`` stays below ``spread / sqrt(d)`` (0: never).
        loss_tolerance: warn when the loss stays within ``loss_tolerance * max(1, |L|)`` of
            the method's collapse loss ``L`` (0, or a method without one: never).
        steps: optimiser steps a sign must hold, from the logging step where it began.
        collapse_loss: the method's :meth:`collapse_loss`, or None.

    Raises:
        ValueError: for a negative setting or ``steps`` < 1.
    """

    def __init__(self, spread: float, loss_tolerance: float, steps: int,
                 collapse_loss: float | None) -> None:
        for name, value in (("collapse_spread", spread),
                            ("collapse_loss_tolerance", loss_tolerance)):
            if not value >= 0:
                raise ValueError(f"online_eval.{name} must be >= 0, got {value}")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"online_eval.collapse_steps must be an int >= 1, got {steps!r}")
        self.spread, self.loss_tolerance, self.steps = spread, loss_tolerance, steps
        self.collapse_loss = collapse_loss if loss_tolerance > 0 else None
        self.warned = False
        self._since: dict[str, int] = {}

    @property
    def watches(self) -> bool:
        """Whether a sign is still watched (not warned yet, and at least one sign on)."""
        return not self.warned and (self.spread > 0 or self.collapse_loss is not None)

    def observe(self, step: int, loss: Tensor, spread: Tensor | None,
                dim: int) -> str | None:
        """At logging step ``step``: the warning line the first time a sign has held for
        ``steps`` steps, else None. ``loss`` and ``spread`` (``train/z_std``, None without an
        embedding) are read on the host here, ``dim`` is the embedding's d."""
        if not self.watches:
            return None
        if spread is not None and self.spread > 0:
            value, bound = float(spread), self.spread / math.sqrt(dim)
            since = self._held("spread", value < bound, step)
            if since is not None:
                return self._warn(
                    f"the embedding has collapsed: train/z_std, the spread of the L2-normalised "
                    f"embedding, has stayed below {bound:.3g} ({self.spread:g} / sqrt({dim}), a "
                    f"healthy spread being about {1 / math.sqrt(dim):.3g}) since step {since}: "
                    f"{value:.3g} at step {step}")
        if self.collapse_loss is not None:
            value, target = float(loss.detach()), self.collapse_loss
            near = abs(value - target) <= self.loss_tolerance * max(1.0, abs(target))
            since = self._held("loss", near, step)
            if since is not None:
                return self._warn(
                    f"the embedding has collapsed: the training loss has stayed at the value a "
                    f"collapse gives ({target:.6g}, within {self.loss_tolerance:g} relative) "
                    f"since step {since}: {value:.6g} at step {step}")
        return None

    def _held(self, sign: str, holds: bool, step: int) -> int | None:
        """The step where ``sign`` began holding if it has held ``steps`` steps, else None."""
        if not holds:
            self._since.pop(sign, None)
            return None
        since = self._since.setdefault(sign, step)
        return since if step - since >= self.steps else None

    def _warn(self, what: str) -> str:
        self.warned = True
        return f"{what}; {ADVICE}"
