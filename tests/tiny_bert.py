"""A tiny random BERT (2 layers, hidden size 32) and its word-level tokenizer, saved in the
``save_pretrained`` layout, so that the text tests go through the real loading code offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

#: The words of every sentence the text tests use (anything else is [UNK]).
WORDS = ("a the cat dog sat ran on mat fast slow red blue big small bird fish swam flew "
         "over under tree house man woman ate fruit read book car drove road sky").split()


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct short sentences from :data:`WORDS`."""
    import random

    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))
        if sentence not in out:
            out.append(sentence)
    return out


def save_tiny_bert(folder: Path, seed: int = 0) -> Path:
    """Write a random 2-layer BERT of hidden size 32 and its tokenizer into ``folder``."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    tokenizer = transformers.BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    tokenizer.save_pretrained(folder)
    config = transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(seed)
    transformers.BertModel(config).save_pretrained(folder)
    return folder
