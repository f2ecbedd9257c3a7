"""Sentence encoders from ``transformers`` (the optional extra ``contrastkit[text]``).

A :class:`TextEncoder` wraps any ``AutoModel`` checkpoint, named on the Hugging Face hub or
given as a local folder (``save_pretrained`` layout, with its tokenizer), and pools its last
hidden states into one vector per sentence, as SimCSE (Gao et al. 2021, section 3 and
appendix A) defines the two poolings used here:

* ``cls``: the [CLS] token's last hidden state, :math:`h_{[CLS]}`; unsupervised SimCSE trains
  with an MLP over it (the method's projector,
  :class:`~contrastkit.methods.simcse.SimCSE`) and evaluates without that MLP, i.e. on this
  vector (SimCSE's ``cls_before_pooler``);
* ``mean``: the mean of the last hidden states over the sentence's tokens (padding excluded by
  the attention mask; SimCSE's ``avg``).

The model's own pooler (BERT's dense + tanh over [CLS], trained for next-sentence prediction)
is dropped: neither pooling uses it, and parameters without gradient would break DDP.
Tokenisation pads to the longest sentence of the batch and truncates at ``max_length`` tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor, nn

__all__ = ["TextEncoder", "TextEncoderSpec", "build_text_encoder", "embed_sentences"]

#: Tokenised sentences: ``input_ids``, ``attention_mask`` (and ``token_type_ids`` where the
#: model has them), each (N, L).
Tokens = dict[str, Tensor]


@dataclass(frozen=True)
class TextEncoderSpec:
    """Which sentence encoder to build.

    Attributes:
        name: a Hugging Face model name (e.g. ``bert-base-uncased``, found in the local cache
            when offline) or the folder of a saved model and tokenizer.
        pooling: ``cls`` ([CLS] token) or ``mean`` (mean over tokens), as in SimCSE.
        max_length: tokens kept per sentence (longer sentences are truncated; SimCSE: 32).
    """

    name: str = "bert-base-uncased"
    pooling: Literal["cls", "mean"] = "cls"
    max_length: int = 32


def _transformers():
    try:
        import transformers
    except ImportError as err:
        raise ImportError("text encoders need the transformers package: "
                          "pip install 'contrastkit[text]'") from err
    return transformers


def _load(spec: TextEncoderSpec) -> tuple[nn.Module, object]:
    """The pretrained model and tokenizer that ``spec.name`` names."""
    transformers = _transformers()
    folder = Path(spec.name).expanduser()
    looks_like_path = spec.name.startswith((".", "/", "~")) or folder.exists()
    if looks_like_path and not folder.is_dir():
        raise FileNotFoundError(f"encoder.name: no model folder at {folder}")
    source = str(folder) if looks_like_path else spec.name
    try:
        model = transformers.AutoModel.from_pretrained(source)
        tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    except OSError:
        raise ValueError(
            f"encoder.name {spec.name!r}: neither a model folder nor a model in the local "
            "Hugging Face cache (without network, give the folder of a saved model and "
            "tokenizer; HF_HUB_OFFLINE=1 skips the Hub's retries)") from None
    return model, tokenizer


class TextEncoder(nn.Module):
    """A ``transformers`` model and its tokenizer, pooled into one vector per sentence.

    Args:
        model: the ``transformers`` model (its ``last_hidden_state`` is pooled).
        tokenizer: its tokenizer.
        spec: the pooling and maximum length (and the name, kept for checkpoints).

    Attributes:
        out_dim: size of the sentence vectors (the model's hidden size).
    """

    def __init__(self, model: nn.Module, tokenizer: object, spec: TextEncoderSpec) -> None:
        super().__init__()
        if spec.pooling not in ("cls", "mean"):
            raise ValueError(f"encoder.pooling must be 'cls' or 'mean', got {spec.pooling!r}")
        if spec.max_length < 2:
            raise ValueError(f"encoder.max_length must be >= 2 ([CLS] and [SEP]), "
                             f"got {spec.max_length}")
        if getattr(model, "pooler", None) is not None:
            model.pooler = None
        # from_pretrained returns the model in eval mode; a module starts in training mode
        # (dropout on: SimCSE's positive pairs), and Lightning keeps the mode it finds.
        self.model = model.train()
        self.tokenizer = tokenizer
        self.spec = spec
        self.out_dim = int(model.config.hidden_size)

    def tokenize(self, sentences: Sequence[str]) -> Tokens:
        """Token ids and masks of ``sentences`` (CPU tensors), padded to the longest one and
        truncated at ``spec.max_length``."""
        batch = self.tokenizer(list(sentences), padding=True, truncation=True,
                               max_length=self.spec.max_length, return_tensors="pt")
        return dict(batch)

    def forward(self, tokens: Tokens) -> Tensor:
        """(N, out_dim) sentence vectors of tokenised sentences (see the module docstring)."""
        hidden = self.model(**tokens).last_hidden_state
        if self.spec.pooling == "cls":
            return hidden[:, 0]
        mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)


def build_text_encoder(spec: TextEncoderSpec) -> TextEncoder:
    """The pretrained encoder ``spec`` names.

    Raises:
        ImportError: without ``transformers``.
        FileNotFoundError: for a path that is not a folder.
        ValueError: for a name that is neither a folder nor in the local cache (one line), or
            a bad pooling or maximum length.
    """
    model, tokenizer = _load(spec)
    return TextEncoder(model, tokenizer, spec)


@torch.no_grad()
def embed_sentences(encoder: TextEncoder, sentences: Sequence[str], batch_size: int = 128,
                    device: torch.device | str = "cpu") -> Tensor:
    """(N, out_dim) float32 vectors of ``sentences`` on the CPU, the encoder in eval mode
    (no dropout), ``batch_size`` sentences at a time."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    was_training = encoder.training
    encoder.eval()
    try:
        chunks = []
        for start in range(0, len(sentences), batch_size):
            tokens = encoder.tokenize(sentences[start:start + batch_size])
            tokens = {k: v.to(device) for k, v in tokens.items()}
            chunks.append(encoder(tokens).float().cpu())
    finally:
        encoder.train(was_training)
    if not chunks:
        return torch.zeros(0, encoder.out_dim)
    return torch.cat(chunks)
