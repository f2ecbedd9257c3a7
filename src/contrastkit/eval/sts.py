r"""Semantic textual similarity evaluation of sentence embeddings (SimCSE, Gao et al. 2021,
section 4 and appendix B; DySTreSS, Manna et al. 2023, Table 12).

Each pair is scored by the cosine similarity of its two sentence vectors, with no training,
and compared with the gold scores by Spearman's rank correlation. Per task:

* one Spearman correlation per sub-set;
* ``all``: one Spearman correlation over the concatenation of all the task's sub-sets (the
  "all" setting SimCSE's appendix B argues for and DySTreSS reports); ``mean`` and ``wmean``
  (weighted by sub-set size), SentEval's two other aggregations, are given beside it.
  For the one-set tasks (STS-B, SICK-R: their test split) the three equal the set's value.

Alignment and uniformity (:func:`contrastkit.eval.metrics.alignment`, ``uniformity``, eqs. 17
and 16 of DySTreSS; SimCSE section 5 computes them on STS-B) are given per task: alignment over
the pairs whose gold score is at least ``positive_score`` (SimCSE: STS-B pairs scored above 4
of 5; here >= 4 on every task, whose scales all end at 5), uniformity over all the task's
sentences (each distinct sentence once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from contrastkit.data.sources.sts import STSTask
from contrastkit.eval.metrics import alignment, uniformity

__all__ = ["evaluate_tasks", "rank", "spearman"]

#: Sentences -> (N, D) vectors.
Embed = Callable[[Sequence[str]], Tensor]


def rank(values: np.ndarray) -> np.ndarray:
    """Ranks 1..N of ``values``, ties given the mean of the ranks they share."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = 0.5 * (start + end) + 1.0
        start = end + 1
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    r"""Spearman's rank correlation: Pearson's correlation of the ranks (ties averaged),
    :math:`\rho = \mathrm{cov}(r_x, r_y) / (\sigma_{r_x} \sigma_{r_y})`.

    Raises:
        ValueError: for fewer than 2 pairs, lengths that differ, or a constant input (the
            correlation is undefined).
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman needs two 1-D arrays of one length, got {x.shape}, {y.shape}")
    if len(x) < 2:
        raise ValueError(f"spearman needs at least 2 pairs, got {len(x)}")
    rx, ry = rank(x) - (len(x) + 1) / 2, rank(y) - (len(y) + 1) / 2
    norm = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    if norm == 0:
        raise ValueError("spearman is undefined for a constant input (all scores tie)")
    return float((rx * ry).sum() / norm)


def _cosines(a: Tensor, b: Tensor) -> np.ndarray:
    return F.cosine_similarity(a.double(), b.double(), dim=1).numpy()


def _geometry(first: Tensor, second: Tensor, scores: np.ndarray, sentences: Tensor,
              positive_score: float) -> dict:
    close = torch.as_tensor(scores >= positive_score)
    out: dict = {"num_aligned_pairs": int(close.sum())}
    if int(close.sum()):
        out["alignment"] = float(alignment(first[close], second[close]))
    if sentences.shape[0] >= 2:
        out["uniformity"] = float(uniformity(sentences))
    return out


def evaluate_tasks(embed: Embed, tasks: Sequence[STSTask], positive_score: float = 4.0) -> dict:
    """Spearman correlations (x 100, as the tables print them) and geometry of each task.

    Args:
        embed: maps sentences to vectors (e.g. :func:`contrastkit.models.text.embed_sentences`
            of an encoder).
        tasks: the tasks (:func:`contrastkit.data.sources.sts.read_task`).
        positive_score: gold score from which a pair counts as positive for alignment.

    Returns:
        ``{task: {"sets": {name: {"spearman", "num_pairs"}}, "all", "mean", "wmean",
        "num_pairs", "alignment", "uniformity", "num_aligned_pairs"}, "avg": mean of the
        tasks' "all"}``.
    """
    results: dict = {}
    for task in tasks:
        unique = sorted({s for subset in task.sets for s in (*subset.first, *subset.second)})
        vectors = embed(unique)  # each distinct sentence encoded once
        row = {sentence: i for i, sentence in enumerate(unique)}
        sets, predicted, gold, firsts, seconds = {}, [], [], [], []
        for subset in task.sets:
            first = vectors[[row[s] for s in subset.first]]
            second = vectors[[row[s] for s in subset.second]]
            cosine = _cosines(first, second)
            sets[subset.name] = {"spearman": 100 * spearman(cosine, subset.scores),
                                 "num_pairs": len(cosine)}
            predicted.append(cosine)
            gold.append(subset.scores)
            firsts.append(first)
            seconds.append(second)
        sizes = np.array([s["num_pairs"] for s in sets.values()], dtype=np.float64)
        values = np.array([s["spearman"] for s in sets.values()])
        results[task.name] = {
            "sets": sets,
            "all": 100 * spearman(np.concatenate(predicted), np.concatenate(gold)),
            "mean": float(values.mean()),
            "wmean": float((values * sizes).sum() / sizes.sum()),
            "num_pairs": int(sizes.sum()),
            **_geometry(torch.cat(firsts), torch.cat(seconds), np.concatenate(gold), vectors,
                        positive_score),
        }
    if results:
        results["avg"] = float(np.mean([r["all"] for r in results.values()]))
    return results
