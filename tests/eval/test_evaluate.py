"""Evaluation from Python (``contrastkit.eval.evaluate``): the example of docs/evaluation.md runs
as written and gives the numbers ``contrastkit eval`` gives; no argparse is involved."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contrastkit.cli import main
from contrastkit.eval import EvalRequest, KnnEval, LinearEval, analyze, evaluate

pytest.importorskip("sklearn")

DOC = Path(__file__).resolve().parents[2] / "docs" / "evaluation.md"


def _example() -> str:
    """The Python block of the section "From Python"."""
    section = DOC.read_text().split("## From Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_example_runs_and_gives_the_commands_numbers(tiny_checkpoint, tmp_path,
                                                                      capsys):
    code = _example()
    assert 'checkpoint="runs/simclr/checkpoints/last.ckpt"' in code
    code = code.replace("runs/simclr/checkpoints/last.ckpt", str(tiny_checkpoint)).replace(
        'data="digits")', f'data="digits", cache_dir="{tmp_path / "cache"}")')
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # the doc's code, as a user runs it
    printed = capsys.readouterr().out
    knn, linear = namespace["knn"], namespace["linear"]
    assert printed == (f"kNN top-1 {knn.metrics['top1']:.3f}, "
                       f"linear top-1 {linear.metrics['top1']:.3f}\n")
    assert knn.results["protocol"] == "knn" and knn.results["config"]["k"] == 20
    assert knn.results["argv"] is None and "called from Python" in knn.results["command"]
    assert len(knn.pred) == len(knn.labels) == knn.results["num_test"]
    assert linear.results["config"]["epochs"] == 10
    for name, protocol, extra in (("knn", knn, ["--k", "20"]),
                                  ("linear", linear, ["--epochs", "10"])):
        out = tmp_path / name
        assert main(["eval", name, "--checkpoint", str(tiny_checkpoint), "--data", "digits",
                     "--cache-dir", str(tmp_path / "cache"), "--quiet", *extra,
                     "--output", str(out)]) == 0
        assert json.loads((out / "results.json").read_text())["metrics"] == protocol.metrics


def test_a_request_writes_the_commands_files_and_names_bad_input(tiny_checkpoint, tmp_path):
    request = EvalRequest(checkpoint=tiny_checkpoint, data="digits", no_cache=True, quiet=True,
                          output=tmp_path / "out")
    result = evaluate(request, KnnEval(k=5))
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    assert written["metrics"] == result.metrics and (tmp_path / "out" / "results.md").is_file()
    with pytest.raises(ValueError, match="k=5000 is larger than the bank"):
        evaluate(EvalRequest(checkpoint=tiny_checkpoint, data="digits", no_cache=True),
                 KnnEval(k=5000))
    with pytest.raises(ValueError, match="--data 'nope' is not a known dataset"):
        evaluate(EvalRequest(checkpoint=tiny_checkpoint, data="nope"), LinearEval())
    diagnostics = analyze(EvalRequest(checkpoint=tiny_checkpoint, data="digits", no_cache=True))
    assert set(diagnostics.metrics) >= {"alignment", "uniformity", "target_noise_margin"}
