"""Semantic textual similarity (STS) sets in SentEval's distributed layout.

SentEval (Conneau & Kiela 2018) ships the sets that SimCSE (Gao et al. 2021) and DySTreSS
(Manna et al. 2023, Table 12) evaluate on under its ``data/downstream`` folder, the ``root``
here:

* ``STS/STS12-en-test`` ... ``STS/STS16-en-test``: per sub-set ``STS.input.NAME.txt`` (two
  tab-separated sentences a line) and ``STS.gs.NAME.txt`` (the gold score of each line, 0-5;
  a blank gold line means the pair has no score and is left out, as SentEval does);
* ``STS/STSBenchmark/sts-test.csv``: tab-separated, the score in column 5 and the sentences in
  columns 6 and 7 (genre, file, year, id, score, sentence 1, sentence 2);
* ``SICK/SICK_test_annotated.txt``: a header line, then pair id, sentence A, sentence B,
  relatedness score (1-5), entailment label, tab-separated.

Each task is read into :class:`STSTask`: its sub-sets of sentence pairs with gold scores.
:func:`read_pairs_file` reads a plain ``sentence 1 <TAB> sentence 2 <TAB> score`` file as a
one-set task.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["STS_SUBSETS", "TASKS", "STSSet", "STSTask", "read_pairs_file", "read_task"]

#: Sub-sets of each year's test data, as SentEval distributes them (STS13 without SMT, which
#: its licence kept out of the distribution).
STS_SUBSETS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
#: The seven tasks of SimCSE's and DySTreSS's STS tables, in their column order.
TASKS = (*STS_SUBSETS, "STSBenchmark", "SICKRelatedness")


@dataclass(frozen=True)
class STSSet:
    """Sentence pairs with gold similarity scores.

    Attributes:
        name: the sub-set's name (e.g. ``MSRpar``; the task's name for one-set tasks).
        first: first sentence of each pair.
        second: second sentence of each pair.
        scores: (N,) float64 gold scores.
    """

    name: str
    first: list[str]
    second: list[str]
    scores: np.ndarray


@dataclass(frozen=True)
class STSTask:
    """One column of the STS table: a task and its sub-sets."""

    name: str
    sets: list[STSSet]


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"STS file {path} does not exist")
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()


def _score(text: str, path: Path, line: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{path}:{line}: gold score {text!r} is not a number") from None


def _columns(line: str, path: Path, number: int, needed: int, what: str) -> list[str]:
    fields = line.split("\t")
    if len(fields) < needed:
        raise ValueError(f"{path}:{number}: {len(fields)} tab-separated column(s), expected "
                         f"{what}")
    return fields


def _year(folder: Path, task: str) -> STSTask:
    sets = []
    for name in STS_SUBSETS[task]:
        inputs = folder / f"STS.input.{name}.txt"
        gold = folder / f"STS.gs.{name}.txt"
        pairs, scores = _lines(inputs), _lines(gold)
        if len(pairs) != len(scores):
            raise ValueError(f"{inputs} has {len(pairs)} lines but {gold} has {len(scores)}")
        first, second, kept = [], [], []
        for number, (pair, score) in enumerate(zip(pairs, scores, strict=True), 1):
            if not score.strip():
                continue
            fields = _columns(pair, inputs, number, 2, "2 (sentence 1, sentence 2)")
            first.append(fields[0].strip())
            second.append(fields[1].strip())
            kept.append(_score(score.strip(), gold, number))
        sets.append(STSSet(name, first, second, np.asarray(kept, dtype=np.float64)))
    return STSTask(task, sets)


def _table(path: Path, task: str, columns: tuple[int, int, int], header: bool,
           what: str) -> STSTask:
    first, second, scores = [], [], []
    score_col, a_col, b_col = columns
    lines = _lines(path)
    for number, line in enumerate(lines[1:] if header else lines, 2 if header else 1):
        if not line.strip():
            continue
        fields = _columns(line, path, number, max(columns) + 1, what)
        first.append(fields[a_col].strip())
        second.append(fields[b_col].strip())
        scores.append(_score(fields[score_col].strip(), path, number))
    if not scores:
        raise ValueError(f"STS file {path} holds no sentence pair")
    return STSTask(task, [STSSet(task, first, second, np.asarray(scores, dtype=np.float64))])


def read_task(root: str | os.PathLike, task: str) -> STSTask:
    """The test data of ``task`` (one of :data:`TASKS`) under SentEval's ``data/downstream``.

    Raises:
        ValueError: for an unknown task, or a malformed file (naming the file and line).
        FileNotFoundError: for a missing file (naming it).
    """
    base = Path(root).expanduser()
    if task in STS_SUBSETS:
        return _year(base / "STS" / f"{task}-en-test", task)
    if task == "STSBenchmark":
        return _table(base / "STS" / "STSBenchmark" / "sts-test.csv", task, (4, 5, 6), False,
                      "7 (genre, file, year, id, score, sentence 1, sentence 2)")
    if task == "SICKRelatedness":
        return _table(base / "SICK" / "SICK_test_annotated.txt", task, (3, 1, 2), True,
                      "4 or more (pair id, sentence A, sentence B, relatedness score, ...)")
    raise ValueError(f"unknown STS task {task!r}; one of {', '.join(TASKS)}")


def read_pairs_file(path: str | os.PathLike) -> STSTask:
    """A ``sentence 1 <TAB> sentence 2 <TAB> score`` file (no header) as a one-set task named
    after the file."""
    file = Path(path).expanduser()
    return _table(file, file.stem, (2, 0, 1), False, "3 (sentence 1, sentence 2, score)")
