"""Issue 53 item 8: ``docs/methods.md`` gives each baseline's CPU result; the words it quotes
are study 6's (the report's record, ``docs/reproduction.json``), so a new record that changes
them fails here until the page says it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from studies.repro.baselines_section import cpu_result
from studies.repro.studies import BASELINE_METHODS, STUDIES

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "- **CPU result** (`docs/reproduction.md`, study 6, seed 0): "


def _section(page: str, title: str) -> str:
    [body] = re.findall(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", page, re.M | re.S)
    return body


def _bullet(section: str) -> str:
    """The CPU result bullet, its wrapped lines joined by one space."""
    lines = section.splitlines()
    [start] = [i for i, line in enumerate(lines) if line.startswith("- **CPU result**")]
    out = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        out.append(line.strip())
    return " ".join(out)


@pytest.mark.parametrize(("stem", "title"), BASELINE_METHODS)
def test_each_method_quotes_its_study_6_result(stem, title):
    page = (ROOT / "docs" / "methods.md").read_text()
    summary = json.loads((ROOT / "docs" / "reproduction.json").read_text())
    expected = cpu_result(STUDIES["baselines_cpu"], summary, stem)
    assert _bullet(_section(page, title)) == f"{PREFIX}{expected}."


def test_a_result_names_both_accuracies_and_both_verdicts():
    def run(stem: str, top1: float) -> dict:
        return {"tag": "cpu", "stem": stem, "pretrain_finished": True, "status": "done",
                "metrics": {"knn200/top1": top1, "pretrain/final_positive_similarity": 0.5,
                            "pretrain/initial_loss": 5.0, "pretrain/final_loss": 4.0}}

    summary = {"runs": {"cpu/byol/seed0": run("byol", 0.4321),
                        "cpu/random_init/seed0": run("random_init", 0.3155),
                        "cpu/random_init/seed1": run("random_init", 0.3300)}}
    text = cpu_result(STUDIES["baselines_cpu"], summary, "byol")
    assert text == ("200-NN top-1 43.21 % against 31.55 % for the random init; learned past "
                    "it: yes (+11.66 > 1.45); collapsed: no")
    summary["runs"]["cpu/byol/seed0"]["status"] = "running"
    assert cpu_result(STUDIES["baselines_cpu"], summary, "byol") == "not yet run"
