"""A tiny random BERT (2 layers, hidden size 32) and its word-level tokenizer, saved in the
``save_pretrained`` layout, so that the text tests go through the real loading code offline."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def save_tiny_bert(folder: Path, seed: int = 0, dropout: float = 0.1) -> Path:
    """Write a random 2-layer BERT of hidden size 32 and its tokenizer into ``folder``
    (``dropout``: its hidden and attention dropout probability)."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    tokenizer = transformers.BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    tokenizer.save_pretrained(folder)
    config = transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        initializer_range=1.0)  # BERT's 0.02 gives every sentence nearly the same vector
    torch.manual_seed(seed)
    transformers.BertModel(config).save_pretrained(folder)
    return folder


def make_senteval_root(root: Path, pairs_per_set: int = 6, seed: int = 0) -> Path:
    """SentEval's ``data/downstream`` layout with a few random pairs per file: STS12-16 (every
    sub-set, each with one pair whose gold line is blank), STS-B test, SICK test."""
    import random

    from contrastkit.data.sources.sts import STS_SUBSETS

    rng = random.Random(seed)
    pool = sentences(200, seed)

    def pairs() -> list[tuple[str, str, float]]:
        return [(rng.choice(pool), rng.choice(pool), round(rng.uniform(0, 5), 2))
                for _ in range(pairs_per_set)]

    for year, names in STS_SUBSETS.items():
        folder = root / "STS" / f"{year}-en-test"
        folder.mkdir(parents=True)
        for name in names:
            rows = pairs()
            (folder / f"STS.input.{name}.txt").write_text(
                "".join(f"{a}\t{b}\n" for a, b, _ in rows) + "a cat\ta dog\n")
            (folder / f"STS.gs.{name}.txt").write_text("".join(f"{s}\n" for *_, s in rows) + "\n")
    (root / "STS" / "STSBenchmark").mkdir(parents=True)
    (root / "STS" / "STSBenchmark" / "sts-test.csv").write_text("".join(
        f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s}\t{a}\t{b}\n"
        for i, (a, b, s) in enumerate(pairs())))
    (root / "SICK").mkdir()
    (root / "SICK" / "SICK_test_annotated.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n" + "".join(
            f"{i}\t{a}\t{b}\t{1 + s * 0.8:.1f}\tNEUTRAL\n" for i, (a, b, s) in enumerate(pairs())))
    return root
