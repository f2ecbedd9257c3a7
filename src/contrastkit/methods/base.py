"""What every pretraining method shares: an online encoder, and on request a momentum target
branch and a memory queue.

A method is a small ``nn.Module`` that states only what differs from the others: which loss,
whether it has a target branch and a queue, and which views go where (its ``objective``). The
engine (``contrastkit.train``) hands it a list of augmented views and the labels, and calls
:meth:`ContrastiveMethod.after_optimizer_step` after each optimiser step (EMA update, queue
commit).

Online encoder: ``backbone -> projector [-> predictor]``. Target branch (when ``momentum`` is
set): an EMA copy of ``backbone -> projector`` whose momentum follows the cosine schedule of
Denize et al. 2023 (SCE), appendix D.1, from ``momentum`` to 1 (BYOL's schedule, Grill et al.
2020), or stays at ``momentum`` (``momentum_schedule: constant``, lightly's CIFAR-10
benchmark).

Temperature: one setting, ``temperature``, a :data:`~contrastkit.losses.temperature.Temperature`
(a float, a per-pair function of the cosine similarity, or a schedule), checked here and
turned into what the loss gets at each step by :meth:`ContrastiveMethod.temperature_at`.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar, Literal

import torch
from torch import Tensor, nn

from contrastkit.gradients import GradientFreeze
from contrastkit.losses.temperature import (
    PairTemperature,
    SimilarityTemperature,
    Temperature,
    check_temperature,
    resolve_temperature,
)
from contrastkit.methods.queue import MemoryQueue
from contrastkit.models.autocast_weights import CastWeights
from contrastkit.models.factory import BackboneSpec, HeadSpec, build_backbone, build_head
from contrastkit.models.momentum import MomentumBranch, cosine_momentum
from contrastkit.schedules import Schedule, ScheduleState

#: A value to log: a number, a 0-d tensor, or a function computing one. The engine calls the
#: functions on logging steps only (``trainer.log_every_n_steps``), so a value that is only
#: logged costs nothing on the other steps.
Loggable = Tensor | float | Callable[[], Tensor]


@dataclass
class StepOutput:
    """What a method's objective returns for one batch.

    Attributes:
        loss: scalar training loss (gradient flows to the online encoder).
        features: detached backbone features of the first view, local to this process
            (for the online linear classifier).
        logs: values to log (e.g. the current temperature), see :data:`Loggable`.
        embedding: the online branch's output for the first view (the projection, or the
            prediction of a method with a predictor), of this process or of the gathered
            batch: what the engine's collapse check reads (:mod:`contrastkit.train.
            collapse_check`; the engine detaches it). None: no check.
    """

    loss: Tensor
    features: Tensor
    logs: dict[str, Loggable] = field(default_factory=dict)
    embedding: Tensor | None = None


class ContrastiveMethod(nn.Module, ABC):
    """Online encoder plus optional momentum target branch and memory queue.

    Subclasses set the class attributes and implement :meth:`objective`.

    Args:
        backbone: backbone description.
        projector: projector description (SCE Tables 21/24).
        predictor: optional predictor on top of the online projector (SCE Table 24).
        momentum: initial EMA momentum of the target branch (``None``: no target branch).
        momentum_schedule: ``cosine`` (``cosine_momentum`` from ``momentum`` to 1 over
            training) or ``constant`` (``momentum`` at every step).
        queue_size: rows of the memory queue of target keys (0: no queue, in-batch
            negatives).
        queue_init: ``random`` (MoCo's L2-normalised Gaussian start, the default) or
            ``empty`` (no negatives until filled; in-batch negatives are used meanwhile).
        temperature: the loss temperature: a float > 0; a schedule evaluated at each step
            (e.g. :class:`~contrastkit.losses.KuklevaCosineTemperature`, or the
            alignment-adaptive :class:`~contrastkit.losses.MACLTemperature`); or, for methods
            whose loss divides each pair by its own temperature (``per_pair_temperature``),
            a function of the cosine similarity such as
            :class:`~contrastkit.losses.DySTreSSTemperature`, or a
            :class:`~contrastkit.losses.PairTemperature`. Each method sets its own default.

    Attributes:
        gradient_freezes: layers kept fixed at the start of training, by parameter name
            prefix (:class:`~contrastkit.gradients.GradientFreeze`); the engine drops their
            gradients before each optimiser step while a freeze lasts. Empty by default.

    Class attributes (what a method states; the messages that refuse a setting name the
    methods that set them, :func:`methods_that`): ``requires_target`` (an EMA target branch:
    ``momentum`` must be set), ``supports_queue`` (the method takes ``queue_size``: a queue of
    target keys here, NNCLR's support set, SwAV's feature queues), ``supports_multicrop``
    (views beyond the first two), ``needs_labels``, ``per_pair_temperature``,
    ``default_views``, ``captured_step``.

    Raises:
        ValueError: for a combination the method does not support, with the reason.
    """

    requires_target: ClassVar[bool] = False
    supports_queue: ClassVar[bool] = False
    supports_multicrop: ClassVar[bool] = False
    needs_labels: ClassVar[bool] = False
    per_pair_temperature: ClassVar[bool] = False
    default_views: ClassVar[tuple[str, str]] = ("simclr", "simclr")
    #: Whether ``model.performance.step: captured`` can run the method: False for a method
    #: that updates state of its own after the step (the captured step replays only the EMA
    #: update and the write of ``queue``).
    captured_step: ClassVar[bool] = True

    def __init__(
        self,
        backbone: BackboneSpec | None = None,
        projector: HeadSpec | None = None,
        predictor: HeadSpec | None = None,
        momentum: float | None = None,
        queue_size: int = 0,
        queue_init: str = "random",
        temperature: Temperature = 0.1,
        momentum_schedule: Literal["cosine", "constant"] = "cosine",
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.temperature = self.checked_temperature(
            "temperature", temperature, per_pair=self.per_pair_temperature
        )
        backbone = backbone or BackboneSpec()
        projector = projector or HeadSpec()
        if self.requires_target and momentum is None:
            raise ValueError(f"{name} needs a momentum target branch: set momentum (e.g. 0.99)")
        if momentum is not None and not self.requires_target:
            raise ValueError(f"{name} has no momentum target branch: momentum must be null "
                             f"({methods_that('requires_target')} have one)")
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise ValueError(f"momentum must lie in [0, 1], got {momentum}")
        if momentum_schedule not in ("cosine", "constant"):
            raise ValueError(f"momentum_schedule must be 'cosine' or 'constant', got "
                             f"{momentum_schedule!r}")
        if queue_size < 0:
            raise ValueError(f"queue_size must be >= 0, got {queue_size}")
        if queue_size and not self.supports_queue:
            raise ValueError(f"{name} keeps no queue: queue_size must be 0 "
                             f"({methods_that('supports_queue')} keep one)")
        if queue_init not in ("random", "empty"):
            raise ValueError(f"queue_init must be 'random' or 'empty', got {queue_init!r}")
        self.backbone_spec = backbone
        self.backbone = build_backbone(backbone)
        self.projector = self.build_projector(projector, self.backbone.out_dim)
        self.predictor = build_head(predictor, projector.out_dim) if predictor else None
        if predictor is not None and predictor.out_dim != projector.out_dim:
            raise ValueError(
                f"predictor.out_dim ({predictor.out_dim}) must equal projector.out_dim "
                f"({projector.out_dim}): predictions are compared with target projections"
            )
        self.base_momentum = momentum
        self.momentum_schedule = momentum_schedule
        self.gradient_freezes: dict[str, GradientFreeze] = {}
        self.target = (
            MomentumBranch(nn.Sequential(self.backbone, self.projector))
            if momentum is not None
            else None
        )
        self.queue = (
            MemoryQueue(queue_size, self.projector.out_dim, init=queue_init, gather=True)  # type: ignore[arg-type]
            if queue_size
            else None
        )
        self.embed_dim = self.projector.out_dim
        # under autocast, each branch's weight casts as one multi-tensor copy per step
        self.online_casts = CastWeights(self.backbone, self.projector, self.predictor)
        self.target_casts = CastWeights(self.target.target if self.target else None)

    def build_projector(self, spec: HeadSpec, in_dim: int) -> nn.Module:
        """The projector ``spec`` describes, on ``in_dim`` backbone features: an MLP head
        (a method whose head is not one, DINO's, builds its own); it has an ``out_dim``."""
        return build_head(spec, in_dim)

    # --- encoders -----------------------------------------------------------------------------
    def encode(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Online branch: ``(backbone features, projection [-> prediction])``."""
        with self.online_casts.applied(x):
            features = self.backbone(x)
            z = self.projector(features)
            if self.predictor is not None:
                z = self.predictor(z)
        return features, z

    @torch.no_grad()
    def encode_target(self, x: Tensor) -> Tensor:
        """Target branch projection (no gradient); the online projector if no target."""
        if self.target is None:
            with self.online_casts.applied(x):
                return self.projector(self.backbone(x)).detach()
        with self.target_casts.applied(x):
            return self.target(x)

    # --- what subclasses state ----------------------------------------------------------------
    @abstractmethod
    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        """The method's loss on one batch of views; see the subclasses."""

    def forward(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        """Check the views, then compute :meth:`objective`."""
        if len(views) < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 views, got {len(views)}")
        if len(views) > 2 and not self.supports_multicrop:
            raise ValueError(f"{type(self).__name__} got {len(views)} views: multi-crop is for "
                             f"{methods_that('supports_multicrop')}")
        if views[0].shape[0] < 2:
            raise ValueError(
                f"batch of {views[0].shape[0]} per process: contrastive losses need at least 2"
            )
        # one step, weights unchanged: each weight is cast once however many views use it
        with ExitStack() as step:
            step.enter_context(self.online_casts.session())
            step.enter_context(self.target_casts.session())
            return self.objective(views, labels, state)

    def collapse_loss(self) -> float | None:
        """The loss a collapsed embedding gives with this method's settings (SwAV's
        ``log K``, say), which the engine's collapse check watches for
        (:mod:`contrastkit.train.collapse_check`); None, the default: no such value. A method
        that has one overrides this in one line."""
        return None

    # --- helpers for subclasses ---------------------------------------------------------------
    def checked_temperature(
        self, name: str, value: Temperature, *, per_pair: bool = False
    ) -> Temperature:
        """``value`` if it is a valid temperature setting, else ``ValueError`` naming the method
        and ``name``: a float > 0 or a schedule, and a per-pair temperature where ``per_pair``."""
        try:
            check_temperature(name, value, schedule=True, per_pair=per_pair)
        except ValueError as err:
            raise ValueError(f"{type(self).__name__}: {err}") from None
        return value

    def temperature_at(
        self, state: ScheduleState, pair: tuple[Tensor, Tensor] | None = None
    ) -> float | Tensor | SimilarityTemperature | PairTemperature:
        """What the loss gets as temperature at ``state``
        (:func:`~contrastkit.losses.temperature.resolve_temperature` of ``self.temperature``).

        ``pair``: the embeddings of the positive pairs (rows of two tensors), whose detached
        cosine similarities alignment-adaptive schedules (MACL) read; their value is then a 0-d
        tensor on the embeddings' device. The similarities are computed for a schedule only.
        """
        positive = None
        if pair is not None and isinstance(self.temperature, Schedule):
            positive = cosine_of_pairs(*pair)
        return resolve_temperature(self.temperature, state, positive)

    def queue_negatives(self) -> Tensor | None:
        """Queue rows to use as negatives, or ``None`` (in-batch) without a ready queue."""
        if self.queue is None or not self.queue.is_ready:
            return None
        return self.queue.negatives()

    # --- after the optimiser step -------------------------------------------------------------
    def momentum_at(self, step: int, total_steps: int) -> float:
        """The EMA momentum of the update after optimiser step ``step`` of ``total_steps``:
        ``cosine_momentum`` from ``momentum`` to 1, or ``momentum`` itself (``constant``)."""
        if self.base_momentum is None:
            raise ValueError(f"{type(self).__name__} has no momentum target branch")
        if self.momentum_schedule == "constant":
            return self.base_momentum
        return cosine_momentum(step, total_steps, self.base_momentum)

    @torch.no_grad()
    def after_optimizer_step(self, state: ScheduleState) -> dict[str, float]:
        """EMA update of the target branch and commit of the keys staged for the queue.

        Called once per optimiser step (after all accumulated micro-batches), so gradient
        accumulation behaves as the equivalent large batch.
        """
        logs: dict[str, float] = {}
        if self.target is not None and self.base_momentum is not None:
            m = self.momentum_at(state.step, state.total_steps)
            self.target.update(m)
            logs["momentum"] = m
        if self.queue is not None:
            self.queue.commit()
        return logs


def methods_that(attribute: str) -> str:
    """The methods of :mod:`contrastkit.methods` whose class sets ``attribute`` true, as one
    phrase ("A, B and C", sorted): read from the classes, so that a message refusing a setting
    names every method that has it, a new method included once it sets the attribute."""
    names: set[str] = set()
    stack = [ContrastiveMethod]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if (sub.__module__.startswith("contrastkit.methods.")
                    and not inspect.isabstract(sub) and getattr(sub, attribute)):
                names.add(sub.__name__)
    ordered = sorted(names)
    return f"{', '.join(ordered[:-1])} and {ordered[-1]}" if len(ordered) > 1 else "".join(ordered)


def loggable(**values: object) -> dict[str, Tensor | float]:
    """The entries of ``values`` that are numbers or tensors (a per-pair temperature is not)."""
    return {k: v for k, v in values.items() if isinstance(v, (int, float, Tensor))}


def mean_logs(per_pair: list[dict[str, Loggable]]) -> dict[str, Loggable]:
    """Each logged value's mean over the (query, key) pairs of a step, as the loss is their mean
    (a per-pair temperature logs its mean, not the last pair's): Python numbers at once, on the
    host; a tensor's only when logged."""
    if len(per_pair) == 1:
        return dict(per_pair[0])
    out: dict[str, Loggable] = {}
    for name in dict.fromkeys(n for logs in per_pair for n in logs):
        values = [logs[name] for logs in per_pair if name in logs]
        numbers = all(isinstance(v, (int, float)) for v in values)
        out[name] = sum(values) / len(values) if numbers else partial(_mean, values)
    return out


def _mean(values: list[Loggable]) -> Tensor:
    resolved = [v() if callable(v) else v for v in values]
    like = next(v for v in resolved if isinstance(v, Tensor))
    return torch.stack([torch.as_tensor(v, dtype=torch.float32, device=like.device).reshape(())
                        for v in resolved]).mean()


def cosine_of_pairs(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise cosine similarity, detached (for logging and adaptive temperatures)."""
    a = nn.functional.normalize(a.detach().float(), dim=-1)
    b = nn.functional.normalize(b.detach().float(), dim=-1)
    return (a * b).sum(-1)
