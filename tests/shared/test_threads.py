"""``--threads N|auto`` (issue 18 item 11) of every computing command and of ``make demo``, and
sleeping OpenMP threads from every entry point (issue 37 items 5 and 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from contrastkit import threads
from contrastkit.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_pop_threads_takes_both_spellings():
    argv = ["--config", "c.yaml", "--threads", "3", "--x"]
    assert threads.pop_threads(argv) == "3" and argv == ["--config", "c.yaml", "--x"]
    argv = ["--threads=1"]
    assert threads.pop_threads(argv) == "1" and argv == []
    assert threads.pop_threads(["--config", "c.yaml"]) is None


def test_using_threads_sets_torch_and_the_environment_then_restores_them(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    before = torch.get_num_threads()
    with threads.using_threads("1") as count:
        assert count == 1 and torch.get_num_threads() == 1
        assert os.environ["OMP_NUM_THREADS"] == "1"  # for runtimes loaded meanwhile (t-SNE)
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert torch.get_num_threads() == before and os.environ["OMP_NUM_THREADS"] == "2"


def test_auto_follows_omp_num_threads_then_the_cores(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.auto_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    assert threads.auto_threads() == 8


@pytest.mark.parametrize("value", ["0", "many", "-2"])
def test_a_bad_value_is_one_line(capsys, value):
    before = torch.get_num_threads()
    assert main(["eval", "knn", "--checkpoint", "c.ckpt", "--data", "digits", "--threads",
                 value]) == 2
    assert capsys.readouterr().err == (f"contrastkit eval: error: --threads must be a number >= 1"
                                       f" or auto, got {value!r}\n")
    assert torch.get_num_threads() == before


_POLICY_WHEN_TORCH_LOADS = """
import os, sys

class Probe:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            print(os.environ.get("OMP_WAIT_POLICY"), flush=True)
            os._exit(0)

sys.meta_path.insert(0, Probe())
"""


@pytest.mark.parametrize("entry", [
    "import examples.demos.pretrain",  # make demo
    "from contrastkit.cli import main; main(['embed', '--help'])",
    "from contrastkit.cli import main; main(['eval', 'knn', '--help'])",
])
def test_waiting_threads_sleep_before_torch_loads_openmp(entry):
    """The policy is read once, when torch loads its OpenMP runtime: every entry point sets it
    before (``make demo`` and ``embed`` did not, and spun under load: benchmarks/README.md)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "src")])
    run = subprocess.run([sys.executable, "-c", _POLICY_WHEN_TORCH_LOADS + entry], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.stdout.strip() == "PASSIVE", run.stderr
