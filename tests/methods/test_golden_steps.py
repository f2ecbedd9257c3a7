"""Every method's loss and gradients equal those of the code before the GPU-speed rework.

``golden_steps.json`` holds two optimisation steps of each method on fixed float64 views, as the
code of commit 612f512 computed them (see ``golden_steps.py``). The current code must give the
same losses and gradient fingerprints to float rounding, both as user code calls a method and
inside the training step's hot path (host checks deferred): moving the random draws to the
device, skipping checks, fusing the EMA update and keeping the queue pointer on the host change
nothing that is computed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden_steps import CASES, run

from contrastkit.hot_path import hot_path

GOLDEN = json.loads((Path(__file__).parent / "golden_steps.json").read_text())


def assert_same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g["loss"] == pytest.approx(w["loss"], rel=1e-9, abs=1e-12)
        assert set(g["grad_sum"]) == set(w["grad_sum"])
        for name in w["grad_sum"]:
            assert g["grad_sum"][name] == pytest.approx(w["grad_sum"][name], rel=1e-7, abs=1e-12)
            assert g["grad_sq"][name] == pytest.approx(w["grad_sq"][name], rel=1e-7, abs=1e-18)


def test_golden_covers_every_case() -> None:
    assert set(GOLDEN) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_loss_and_gradients_as_before(name: str) -> None:
    assert_same(run(name), GOLDEN[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_loss_and_gradients_in_the_hot_path(name: str) -> None:
    with hot_path():
        assert_same(run(name), GOLDEN[name])
