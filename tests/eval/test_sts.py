"""STS evaluation: SentEval's layouts, Spearman and the "all" aggregation against scipy."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats

from contrastkit.data.sources.sts import (
    STS_SUBSETS,
    TASKS,
    STSSet,
    STSTask,
    read_pairs_file,
    read_task,
)
from contrastkit.eval.sts import evaluate_tasks, spearman

tiny_bert = pytest.importorskip("tiny_bert")


@pytest.mark.parametrize(("x", "y"), [
    ([1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 20.0, 40.0]),
    ([0.1, 0.1, 0.5, 0.9, 0.9, 0.3], [2.0, 3.0, 3.0, 5.0, 1.0, 1.0]),  # ties on both sides
    ([5.0, 4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0, 5.0]),
])
def test_spearman_matches_scipy_with_ties(x, y):
    assert spearman(np.array(x), np.array(y)) == pytest.approx(stats.spearmanr(x, y)[0],
                                                               abs=1e-12)


def test_spearman_of_constant_scores_is_an_error():
    with pytest.raises(ValueError, match="constant"):
        spearman(np.ones(4), np.arange(4.0))


def _hand_made_task() -> tuple[STSTask, dict[str, torch.Tensor]]:
    """Two sub-sets; each sentence's vector is fixed so the cosine of each pair is known."""
    angles = {"s0": 0.0, "s1": 0.3, "s2": 1.2, "s3": 2.0, "s4": 0.7, "s5": 2.9, "s6": 0.7}
    vectors = {k: torch.tensor([np.cos(a), np.sin(a), 0.0]) for k, a in angles.items()}
    a = STSSet("a", ["s0", "s0", "s1", "s2"], ["s1", "s3", "s4", "s5"],
               np.array([4.5, 1.0, 4.0, 2.0]))
    b = STSSet("b", ["s3", "s6", "s0"], ["s5", "s2", "s6"], np.array([3.0, 3.0, 0.5]))
    return STSTask("STS-hand", [a, b]), vectors


def test_all_aggregation_is_spearman_of_the_concatenation():
    task, vectors = _hand_made_task()
    calls = []

    def embed(sentences):
        calls.append(list(sentences))
        return torch.stack([vectors[s] for s in sentences])

    results = evaluate_tasks(embed, [task])["STS-hand"]
    cos = {}
    for subset in task.sets:
        cos[subset.name] = [float(vectors[x] @ vectors[y]) for x, y in
                            zip(subset.first, subset.second, strict=True)]
    gold = np.concatenate([s.scores for s in task.sets])
    expected_all = stats.spearmanr(cos["a"] + cos["b"], gold)[0]
    assert results["all"] == pytest.approx(100 * expected_all, abs=1e-9)
    per_set = [100 * stats.spearmanr(cos[s.name], s.scores)[0] for s in task.sets]
    assert results["sets"]["a"]["spearman"] == pytest.approx(per_set[0], abs=1e-9)
    assert results["mean"] == pytest.approx(np.mean(per_set), abs=1e-9)
    assert results["wmean"] == pytest.approx((4 * per_set[0] + 3 * per_set[1]) / 7, abs=1e-9)
    assert results["all"] != pytest.approx(results["mean"])  # not the same aggregation
    assert results["num_aligned_pairs"] == 2  # gold >= 4: (s0, s1) and (s1, s4)
    pos = torch.stack([vectors["s0"], vectors["s1"]]), torch.stack([vectors["s1"], vectors["s4"]])
    assert results["alignment"] == pytest.approx(float((pos[0] - pos[1]).norm(dim=1).pow(2)
                                                       .mean()), rel=1e-6)
    assert len(calls) == 1 and len(calls[0]) == 7  # each distinct sentence encoded once


def test_senteval_layout_is_read(tmp_path):
    root = tiny_bert.make_senteval_root(tmp_path / "downstream", pairs_per_set=5)
    for task in TASKS:
        read = read_task(root, task)
        names = STS_SUBSETS.get(task, (task,))
        assert [s.name for s in read.sets] == list(names)
        for subset in read.sets:  # the blank gold line's pair is left out
            assert len(subset.first) == len(subset.second) == len(subset.scores) == 5
    sick = read_task(root, "SICKRelatedness").sets[0]
    assert sick.scores.min() >= 1.0 and sick.first[0] in tiny_bert.sentences(200)


def test_missing_column_names_the_file_and_line(tmp_path):
    root = tiny_bert.make_senteval_root(tmp_path / "downstream")
    path = root / "STS" / "STSBenchmark" / "sts-test.csv"
    lines = path.read_text().splitlines()
    lines[2] = "\t".join(lines[2].split("\t")[:6])  # second sentence missing
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"sts-test\.csv:3: 6 tab-separated column\(s\), "
                                         r"expected 7") as err:
        read_task(root, "STSBenchmark")
    assert "\n" not in str(err.value)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a cat\ta dog\t3.0\nno score here\tat all\n")
    with pytest.raises(ValueError, match=r"pairs\.tsv:2: 2 tab-separated column"):
        read_pairs_file(pairs)


def test_eval_sts_command_on_a_model_folder(tmp_path, capsys):
    from contrastkit.cli import main

    bert = tiny_bert.save_tiny_bert(tmp_path / "bert")
    root = tiny_bert.make_senteval_root(tmp_path / "downstream")
    out = tmp_path / "eval"
    assert main(["eval", "sts", "--model", str(bert), "--pooling", "mean", "--senteval-root",
                 str(root), "--tasks", "STS12", "SICKRelatedness", "--output", str(out)]) == 0
    metrics = json.loads((out / "results.json").read_text())["metrics"]
    assert set(metrics) == {"STS12", "SICKRelatedness", "avg"}
    assert metrics["avg"] == pytest.approx(
        (metrics["STS12"]["all"] + metrics["SICKRelatedness"]["all"]) / 2)
    assert "Spearman all" in capsys.readouterr().out
    assert main(["eval", "sts", "--model", "no-such-org/no-such-model", "--senteval-root",
                 str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("contrastkit eval sts: error: encoder.name 'no-such-org/no-such-model'")
    assert "\n" not in err
