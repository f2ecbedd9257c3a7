"""Sentence-embedding pretraining (unsupervised SimCSE) on the image engine.

``contrastkit pretrain`` takes this path when the config's ``data`` section names a
``text_file`` (:func:`is_text_config`): :class:`TextDataModule` serves batches of sentences of
a one-sentence-per-line file (:class:`~contrastkit.data.sources.text.LineFile`, shuffled by the same
:class:`~contrastkit.train.datamodule.EpochShuffleSampler` as images, so resuming and DDP
behave alike) and :class:`TextPretrainModule` is the :class:`PretrainModule` with a text
training step: tokenise, move to the device, the method's loss. Everything else is the image
engine's: optimiser and schedules, checkpoints (with the encoder's spec in their
``contrastkit`` entry), exact resume, logging, and the stop on a non-finite loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import lightning as L
from torch import Tensor
from torch.utils.data import DataLoader

from contrastkit.config_file import read_config_file
from contrastkit.data.sources.text import MAX_LINE_BYTES, DecodeErrors, LineFile, NotUTF8Error
from contrastkit.hot_path import hot_path
from contrastkit.methods.simcse import SimCSE
from contrastkit.train.datamodule import EpochShuffleSampler
from contrastkit.train.module import PretrainModule
from contrastkit.train.performance import compile_encoders
from contrastkit.train.specs import OnlineEvalSpec, OptimizerSpec, PerformanceSpec

__all__ = ["TextDataModule", "TextPretrainModule", "is_text_config"]


class TextDataModule(L.LightningDataModule):
    """Batches of sentences from a one-sentence-per-line text file (Wiki1M's format).

    Args:
        text_file: the text file (UTF-8, one sentence per line; blank lines are skipped).
        batch_size: sentences per process per step (>= 2; SimCSE: 64).
        num_workers: loader processes.
        seed: shuffling seed.
        max_line_bytes: bytes of a line read at most; longer lines are read up to it (one
            warning counts them).
        decode_errors: a line that is not UTF-8 stops the run naming the file and the line
            (``error``), is left out (``skip``: listed in the run folder's
            ``skipped_files.txt`` as ``FILE:LINE``) or read with U+FFFD for its bad bytes
            (``replace``).

    Attributes the engine reads: ``num_classes`` and ``val_split`` (no labels, no monitor),
    ``skipped`` (the lines left out), :meth:`evaluation_record`.
    """

    num_classes = 0
    val_split = None

    def __init__(self, text_file: str, batch_size: int = 64, num_workers: int = 0,
                 seed: int = 0, max_line_bytes: int = MAX_LINE_BYTES,
                 decode_errors: DecodeErrors = "error") -> None:
        super().__init__()
        if batch_size < 2:
            raise ValueError(f"data.batch_size is {batch_size}: SimCSE needs at least 2 "
                             "sentences per process")
        if num_workers < 0:
            raise ValueError(f"data.num_workers must be >= 0, got {num_workers}")
        self.text_file = str(Path(text_file).expanduser())
        if max_line_bytes < 1:
            raise ValueError(f"data.max_line_bytes must be >= 1, got {max_line_bytes}")
        self.batch_size, self.num_workers, self.seed = batch_size, num_workers, seed
        self.max_line_bytes, self.decode_errors = max_line_bytes, decode_errors
        self.skipped: list[str] = []
        self.train_set: LineFile | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        try:
            train = LineFile(self.text_file, option="data.text_file",
                             max_line_bytes=self.max_line_bytes,
                             decode_errors=self.decode_errors)
        except NotUTF8Error as err:
            raise NotUTF8Error(f"{err}; pass --data.decode_errors skip to leave such lines "
                               "out, or replace to read them with U+FFFD") from None
        self.skipped = list(train.skipped)
        if len(train) < self.batch_size:
            raise ValueError(f"data.text_file {self.text_file} has {len(train)} sentences, "
                             f"fewer than data.batch_size ({self.batch_size})")
        self.train_set = train

    def evaluation_record(self) -> dict:
        """The data entry of the checkpoints: the text file pretrained on."""
        return {"dataset": "text", "text_file": self.text_file, "classes": []}

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None
        sampler = EpochShuffleSampler.for_trainer(self.trainer, len(self.train_set), self.seed,
                                                  self.batch_size)
        return DataLoader(self.train_set, batch_size=self.batch_size, sampler=sampler,
                          num_workers=self.num_workers, drop_last=True,
                          persistent_workers=self.num_workers > 0, collate_fn=list)

    def val_dataloader(self) -> list[DataLoader]:
        return []


class TextPretrainModule(PretrainModule):
    """:class:`PretrainModule` for sentence batches (no image views, no online monitors).

    Args:
        method: the sentence-embedding method (:class:`~contrastkit.methods.simcse.SimCSE`).
        optimizer: optimiser and learning-rate schedule (SimCSE: AdamW-style, see the configs).
        num_classes: linked from the data module (0: unlabelled sentences).
        performance: compilation of the encoder (``channels_last`` does not apply).
    """

    def __init__(self, method: SimCSE, optimizer: OptimizerSpec | None = None,
                 num_classes: int = 0, performance: PerformanceSpec | None = None) -> None:
        if num_classes:
            raise ValueError(f"model.num_classes is {num_classes}: sentences are unlabelled")
        super().__init__(method, optimizer=optimizer,  # type: ignore[arg-type]
                         online_eval=OnlineEvalSpec(linear=False, knn=False), num_classes=0,
                         performance=performance)

    def training_step(self, batch: Sequence[str], batch_idx: int) -> Tensor:
        tokens = {k: v.to(self.device) for k, v in self.method.tokenize(list(batch)).items()}
        with hot_path():
            out = self.method(tokens, self.schedule_state())
        loss = out.loss
        if self.finite_guard.observe(loss, self.global_step, self.current_epoch, batch_idx):
            self.finite_guard.check(self._last_checkpoint())
        self.log("train/loss", loss.detach(), prog_bar=True, batch_size=len(batch))
        if self._logging_step():
            for name, value in out.logs.items():
                self.log(f"train/{name}", value, batch_size=len(batch))
        return loss

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint["contrastkit"]["views"] = {}  # sentences: no image views

    def configure_model(self) -> None:
        """Compilation only: ``channels_last`` is an image memory layout."""
        if self._configured:
            return
        self._configured = True
        if self.performance.channels_last:
            raise ValueError("model.performance.channels_last applies to images, not text")
        if self.performance.compile:
            compile_encoders(self.method, self.performance.compile_mode)


def is_text_config(argv: Sequence[str]) -> bool:
    """Whether ``contrastkit pretrain`` arguments describe a text run: a ``data`` section with
    a ``text_file``, in a ``--config`` file or as ``--data.text_file``.

    Raises:
        ValueError: for a ``--config`` file that is not UTF-8 or not valid YAML
            (:func:`~contrastkit.config_file.read_config_file`).
    """
    args = list(argv)
    if any(a == "--data.text_file" or a.startswith("--data.text_file=") for a in args):
        return True
    for i, arg in enumerate(args):
        path = args[i + 1] if arg == "--config" and i + 1 < len(args) else (
            arg.split("=", 1)[1] if arg.startswith("--config=") else None)
        if path is None or not Path(path).is_file():
            continue
        config = read_config_file(path)
        data = config.get("data") if isinstance(config, dict) else None
        if isinstance(data, dict) and "text_file" in data:
            return True
    return False
