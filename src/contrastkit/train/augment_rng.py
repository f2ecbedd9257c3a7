"""One augmentation generator per training process, on its device, saved in every checkpoint.

Lightning's ``seed_everything`` gives every process the same seed, so augmentations drawn from
the global generator would repeat across processes: with 8 GPUs a batch of 2,048 would hold only
256 distinct crops and colour jitters. :class:`AugmentationRNG` gives process ``r`` its own
``torch.Generator`` on the batch's device, seeded from ``(seed, r)`` (NumPy's ``SeedSequence``,
so the streams are independent), and installs it in every augmentation of the view generator.
Its state is gathered from all processes into each checkpoint and restored on resume, so a
resumed run draws exactly what an uninterrupted one would.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn

from contrastkit.data.augment import register_generator, register_ops

__all__ = ["AugmentationRNG", "install_generator", "process_seed"]


def process_seed(seed: int, rank: int) -> int:
    """A 63-bit seed for process ``rank`` of a run seeded with ``seed`` (independent streams)."""
    state = np.random.SeedSequence([int(seed) % 2**63, int(rank)]).generate_state(2, np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def install_generator(views: nn.Module, generator: torch.Generator | None) -> int:
    """Make every augmentation inside ``views`` draw from ``generator``; return how many.

    Every submodule with a ``generator`` attribute (augmentation pipelines, video clip views,
    RGB-difference draws) gets it. The generator and the ops are also registered for draws
    inside ``torch.compile`` (:func:`contrastkit.data.augment.register_generator`).
    """
    if generator is not None:
        register_generator(generator)
        register_ops(views)
    count = 0
    for module in views.modules():
        if hasattr(module, "generator"):
            module.generator = generator
            count += 1
    return count


class AugmentationRNG:
    """The per-process augmentation generator of a training run.

    Args:
        seed: the run's seed (``seed_everything``'s).
    """

    key = "augmentation_rng"

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self.generator: torch.Generator | None = None
        self._pending: torch.Tensor | None = None

    def start(self, views: nn.Module, device: torch.device, rank: int) -> None:
        """Create process ``rank``'s generator on ``device`` (or restore a loaded state) and
        install it in ``views``."""
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(process_seed(self.seed, rank))
        if self._pending is not None:
            try:
                self.generator.set_state(self._pending)
            except RuntimeError:  # e.g. a CUDA generator's state restored on a CPU run
                warnings.warn(
                    f"the checkpoint's augmentation generator does not fit a {device.type} "
                    "generator: augmentations restart from a fresh stream",
                    UserWarning,
                    stacklevel=2,
                )
            self._pending = None
        install_generator(views, self.generator)

    def state(self) -> torch.Tensor:
        """This process's generator state (a CPU uint8 tensor)."""
        if self.generator is None:
            raise RuntimeError("the augmentation generator is created when training starts")
        return self.generator.get_state()

    def dump(self, states: list[torch.Tensor]) -> dict:
        """The checkpoint entry for the states of all processes, in rank order."""
        # each state its own compact CPU tensor: a view into a gathered block would be saved
        # with the whole block and restored with an offset that Generator.set_state ignores
        return {"seed": self.seed, "states": [s.detach().cpu().clone() for s in states]}

    def load(self, entry: dict | None, rank: int, world_size: int) -> None:
        """Take process ``rank``'s state from a checkpoint entry (applied at :meth:`start`).

        A checkpoint from a run with another number of processes cannot be continued exactly:
        each process then starts a fresh stream (warned).
        """
        if entry is None:
            return
        states = entry.get("states", [])
        if len(states) != world_size:
            warnings.warn(
                f"the checkpoint holds augmentation generators of {len(states)} process(es), "
                f"this run has {world_size}: augmentations restart from fresh streams (the run "
                "continues, but not exactly as it would have)",
                UserWarning,
                stacklevel=2,
            )
            return
        self._pending = states[rank].detach().cpu().contiguous().clone()
