"""Unsupervised SimCSE (Gao et al. 2021): sentence embeddings from dropout noise.

Each sentence of a batch goes through the same encoder twice in training mode, so two
independent dropout masks give two encodings of it, the positive pair; the other sentences
of the (multi-process) batch are the negatives (:func:`contrastkit.losses.simcse`).
The two passes are made as one forward of the batch stacked on itself, as SimCSE's code does:
every row draws its own dropout mask, so the two copies of a sentence are encoded with
independent masks.

Encoder: a :class:`~contrastkit.models.text.TextEncoder` (the method's ``backbone``, what
evaluation uses) and, with ``cls`` pooling, SimCSE's MLP over [CLS] during training only (a
linear layer of the hidden size and tanh: the ``projector``); with ``mean`` pooling no MLP,
as in SimCSE. DySTreSS (Manna et al. 2023, section 5.6 and Table 12) keeps all of this and
sets ``temperature`` to a :class:`~contrastkit.losses.DySTreSSTemperature`.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from contrastkit.distributed import gather_with_grad
from contrastkit.gradients import GradientFreeze
from contrastkit.losses import Temperature, resolve_temperature, simcse
from contrastkit.losses.temperature import check_temperature
from contrastkit.methods.base import StepOutput, cosine_of_pairs, loggable
from contrastkit.models.text import TextEncoder, TextEncoderSpec, Tokens, build_text_encoder
from contrastkit.schedules import ScheduleState

__all__ = ["SimCSE"]


class SimCSE(nn.Module):
    """Unsupervised SimCSE over a ``transformers`` encoder.

    Args:
        encoder: which pretrained model, pooling and maximum length
            (:class:`~contrastkit.models.text.TextEncoderSpec`).
        temperature: a float (SimCSE: 0.05), a per-pair function of the cosine similarity
            such as :class:`~contrastkit.losses.DySTreSSTemperature` (Alg. 1, or Alg. 2 with
            ``shift`` and ``scale``), a :class:`~contrastkit.losses.PairTemperature`, or a
            schedule (:class:`~contrastkit.losses.KuklevaCosineTemperature`,
            :class:`~contrastkit.losses.MACLTemperature`, ...), evaluated at each step.

    Attributes the training engine reads: ``backbone`` (the encoder), ``backbone_spec`` (its
    spec, stored in checkpoints), ``projector``, ``needs_labels`` and ``supports_multicrop``
    (False), ``default_views`` (the image view presets the engine builds for every method;
    text has no image views and never calls them).
    """

    needs_labels: ClassVar[bool] = False
    supports_multicrop: ClassVar[bool] = False
    default_views: ClassVar[tuple[str, str]] = ("eval", "eval")

    def __init__(self, encoder: TextEncoderSpec | None = None,
                 temperature: Temperature = 0.05) -> None:
        super().__init__()
        try:
            check_temperature("temperature", temperature, schedule=True, per_pair=True)
        except ValueError as err:
            raise ValueError(f"SimCSE: {err}") from None
        self.temperature = temperature
        self.backbone_spec = encoder or TextEncoderSpec()
        self.backbone: TextEncoder = build_text_encoder(self.backbone_spec)
        width = self.backbone.out_dim
        self.projector: nn.Module = (
            nn.Sequential(nn.Linear(width, width), nn.Tanh())
            if self.backbone_spec.pooling == "cls" else nn.Identity())
        #: no layer frozen at the start (the engine's gradient freezes, contrastkit.gradients)
        self.gradient_freezes: dict[str, GradientFreeze] = {}

    def tokenize(self, sentences: list[str]) -> Tokens:
        """Token ids and masks of ``sentences`` (CPU tensors)."""
        return self.backbone.tokenize(sentences)

    def forward(self, tokens: Tokens, state: ScheduleState) -> StepOutput:
        """The SimCSE loss of one batch of tokenised sentences.

        Raises:
            ValueError: for a batch of fewer than 2 sentences per process.
        """
        n = tokens["input_ids"].shape[0]
        if n < 2:
            raise ValueError(f"batch of {n} sentence per process: SimCSE needs at least 2")
        features = self.backbone({k: torch.cat([v, v]) for k, v in tokens.items()})
        z = self.projector(features)
        z1, z2 = gather_with_grad(z[:n]), gather_with_grad(z[n:])
        positive = cosine_of_pairs(z1, z2)
        t = resolve_temperature(self.temperature, state, positive)
        loss = simcse(z1, z2, temperature=t)
        logs = loggable(temperature=t, positive_similarity=positive.mean())
        return StepOutput(loss=loss, features=features[:n].detach(), logs=logs)

    def collapse_loss(self) -> None:
        """No fixed value: a collapsed encoder's InfoNCE is log of the global batch, which the
        engine's spread check (``train/z_std``) watches instead."""
        return None

    def after_optimizer_step(self, state: ScheduleState) -> dict[str, float]:
        """Nothing to update after a step (no target branch, no queue)."""
        del state
        return {}
