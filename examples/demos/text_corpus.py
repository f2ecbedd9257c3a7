"""A small English text corpus made offline, for the sentence-embedding demo (docs/text.md).

Sentences come from the docstrings of the Python standard library installed with the running
interpreter (read with :mod:`ast`, nothing is imported or executed): every docstring is cut
into sentences, and those of 6 to 30 words made of ordinary prose (no code, no doctest lines)
are kept once each, shuffled with ``--seed``. The first ``--train`` go to ``train.txt`` (one
sentence per line, the format of Wiki1M); the next ``--held-out`` make ``heldout_pairs.tsv``,
a *synthetic* pair file for ``contrastkit eval sts --pairs``: each held-out sentence paired
with itself minus one word (score 5) and with another held-out sentence (score 0). It is not
an STS set: its Spearman only says how far the encoder ranks a sentence's near-copy above an
unrelated sentence; its alignment (over the score-5 pairs) and uniformity (over all its
sentences) are the metrics of Wang & Isola 2020 on held-out text.

Usage: ``python -m examples.demos.text_corpus OUT_DIR [--train 3000] [--held-out 500]``.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import re
import sysconfig
from collections.abc import Iterator, Sequence
from pathlib import Path

from contrastkit.outputs import temp_file_beside

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_PROSE = re.compile(r"^[A-Z][A-Za-z ,;:'()-]+[.!?]$")


def _docstrings(path: Path) -> Iterator[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc


def stdlib_sentences(seed: int = 0) -> list[str]:
    """Distinct prose sentences of the standard library's docstrings, shuffled by ``seed``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found: dict[str, None] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(p in ("test", "tests", "site-packages", "idlelib") for p in parts):
            continue
        for doc in _docstrings(path):
            for paragraph in doc.split("\n\n"):
                text = " ".join(paragraph.split())
                for sentence in _SENTENCE_END.split(text):
                    if _PROSE.match(sentence) and 6 <= len(sentence.split()) <= 30:
                        found.setdefault(sentence, None)
    sentences = list(found)
    random.Random(seed).shuffle(sentences)
    return sentences


def held_out_pairs(sentences: Sequence[str], seed: int = 0) -> list[tuple[str, str, float]]:
    """Each sentence with itself minus one word (5.0) and with another sentence (0.0)."""
    rng = random.Random(seed)
    pairs = []
    for i, sentence in enumerate(sentences):
        words = sentence.split()
        drop = rng.randrange(1, len(words))
        pairs.append((sentence, " ".join(words[:drop] + words[drop + 1:]), 5.0))
        other = sentences[(i + 1 + rng.randrange(len(sentences) - 1)) % len(sentences)]
        pairs.append((sentence, other, 0.0))
    return pairs


def _write(path: Path, text: str) -> None:
    fd, tmp = temp_file_beside(path)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    """Write ``train.txt`` and ``heldout_pairs.tsv`` into the output folder."""
    parser = argparse.ArgumentParser(prog="python -m examples.demos.text_corpus",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="folder for train.txt and heldout_pairs.tsv")
    parser.add_argument("--train", type=int, default=3000, help="training sentences")
    parser.add_argument("--held-out", type=int, default=500, help="held-out sentences")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.train < 2 or args.held_out < 2:
        parser.error("--train and --held-out must be >= 2")
    sentences = stdlib_sentences(args.seed)
    if len(sentences) < args.train + args.held_out:
        parser.error(f"the standard library gives {len(sentences)} sentences, fewer than "
                     f"--train + --held-out ({args.train + args.held_out})")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "train.txt", "\n".join(sentences[:args.train]) + "\n")
    held = sentences[args.train:args.train + args.held_out]
    _write(out / "heldout_pairs.tsv",
           "".join(f"{a}\t{b}\t{s}\n" for a, b, s in held_out_pairs(held, args.seed)))
    print(f"wrote {out / 'train.txt'} ({args.train} sentences) and "
          f"{out / 'heldout_pairs.tsv'} ({2 * len(held)} pairs) from {len(sentences)} sentences")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
