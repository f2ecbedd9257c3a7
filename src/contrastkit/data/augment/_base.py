"""The base of the batched augmentations: :class:`BatchOp` (parameters drawn per sample on the
batch's device, then applied) and what every op shares (the parameter dtype, the generator check,
one-call uniform draws, cached constants).

Internal to :mod:`contrastkit.data.augment`; the geometric ops are in :mod:`._geometry`,
the colour ops in :mod:`._color`, their composition in :mod:`._pipeline`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ._traced_draw import sample_params, uniform

Params = dict[str, Tensor]


def param_dtype(device: torch.device) -> torch.dtype:
    """float64 for parameter arithmetic, float32 where the device has no float64 (MPS)."""
    return torch.float32 if device.type == "mps" else torch.float64


def check_generator(generator: torch.Generator | None, device: torch.device) -> None:
    """Raise ``ValueError`` when ``generator`` lives on another device than the batch."""
    if generator is None:
        return
    gdev = generator.device
    if gdev.type != device.type or (gdev.index is not None and device.index is not None
                                    and gdev.index != device.index):
        raise ValueError(
            f"the augmentation generator is on {gdev} but the batch is on {device}: give a "
            f"torch.Generator(device='{device}') (parameters are drawn on the batch's device)"
        )


def draw(
    batch: int, columns: int, device: torch.device, generator: torch.Generator | None
) -> Tensor:
    """``(batch, columns)`` uniforms in [0, 1), drawn on ``device`` in one call (inside
    ``torch.compile`` through :func:`._traced_draw.uniform_`: the same numbers)."""
    if generator is not None and torch.compiler.is_compiling():
        return uniform(batch, columns, generator, param_dtype(device))
    return torch.rand(batch, columns, generator=generator, device=device,
                      dtype=param_dtype(device))


class BatchOp(nn.Module, ABC):
    """A batched op split in two: ``sample`` draws per-sample parameters, ``apply`` uses them.

    ``sample(batch, height, width, device=..., generator=...)`` returns tensors on ``device``
    whose first dimension is the batch, so a pipeline can draw the whole batch's parameters once
    and apply them chunk by chunk (the result does not depend on the chunking). ``forward`` does
    both with the op's own ``generator`` (None: the device's default generator) and keeps
    ``last_params``.
    """

    def __init__(self, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.generator = generator
        self.last_params: Params = {}

    def sample(
        self, batch: int, height: int, width: int, *, device: torch.device | str = "cpu",
        generator: torch.Generator | None = None,
    ) -> Params:
        """Per-sample parameters on ``device`` (none for deterministic ops)."""
        return {}

    @abstractmethod
    def apply(self, x: Tensor, params: Params) -> Tensor:
        """Apply the op to ``x`` with parameters drawn by :meth:`sample`."""

    def output_hw(self, height: int, width: int) -> tuple[int, int]:
        return height, width

    def forward(self, x: Tensor) -> Tensor:
        check_generator(self.generator, x.device)
        self.last_params = sample_params(self, x.shape[0], x.shape[-2], x.shape[-1], x.device,
                                         self.generator)
        return self.apply(x, self.last_params)


def f64(values: object) -> Tensor:
    """A float64 CPU tensor of ``values`` (constants are built exactly, then cast once)."""
    return torch.tensor(values, dtype=torch.float64)


class ConstantCache:
    """Small constant tensors built once per (name, device, dtype) and reused by every call."""

    def __init__(self) -> None:
        self._store: dict[tuple, Tensor] = {}

    def get(self, key: tuple, like: Tensor, build: Callable[[], Tensor],
            dtype: torch.dtype | None = None) -> Tensor:
        """The constant ``build()`` on ``like``'s device, in ``dtype`` (default: ``like``'s)."""
        dtype = like.dtype if dtype is None else dtype
        full = (*key, like.device, dtype)
        found = self._store.get(full)
        if found is None:
            found = self._store[full] = build().to(device=like.device, dtype=dtype)
        return found


CONSTANTS = ConstantCache()
