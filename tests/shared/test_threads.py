"""Issue 18 item 11: ``--threads N|auto`` of pretrain / eval / analyze."""

from __future__ import annotations

import os

import pytest
import torch

from contrastkit import threads
from contrastkit.cli import main


def test_pop_threads_takes_both_spellings_and_defaults_to_auto():
    argv = ["--config", "c.yaml", "--threads", "3", "--x"]
    assert threads.pop_threads(argv) == "3" and argv == ["--config", "c.yaml", "--x"]
    argv = ["--threads=1"]
    assert threads.pop_threads(argv) == "1" and argv == []
    assert threads.pop_threads(["--config", "c.yaml"]) == "auto"


def test_configure_sets_the_count_and_returns_the_previous(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    before = torch.get_num_threads()
    try:
        assert threads.configure_threads("1") == before
        assert torch.get_num_threads() == 1
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    finally:
        torch.set_num_threads(before)


def test_auto_follows_omp_num_threads_then_the_cores(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.auto_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    assert threads.auto_threads() == 8


@pytest.mark.parametrize("value", ["0", "many", "-2"])
def test_a_bad_value_is_one_line(capsys, value):
    before = torch.get_num_threads()
    assert main(["eval", "knn", "--threads", value]) == 2
    assert capsys.readouterr().err == (f"contrastkit eval: error: --threads must be a number >= 1"
                                       f" or auto, got {value!r}\n")
    assert torch.get_num_threads() == before
