"""The kernel-launch budget of one SCE table6 step (``benchmarks/launch_count.py``), a CPU proxy
for the host time of a GPU step: generous ceilings that keep the count from creeping back up
(estimated launches 883 at commit a509260, 731 after issue 21; counts, not timings)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _launch_count():
    spec = importlib.util.spec_from_file_location(
        "launch_count", ROOT / "benchmarks" / "launch_count.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_sce_table6_step_stays_within_its_launch_budget(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)  # the config path is relative to the checkout
    launch_count = _launch_count()
    result = launch_count.count_step(launch_count.DEFAULT_ARGS)
    launches = result["launches"]
    assert result["total_launches"] <= 780, launch_count.markdown(result)
    assert launches["ema_queue"] <= 20, result["names"]["ema_queue"]  # foreach by dtype
    assert launches["loss"] <= 60, result["names"]["loss"]
    assert launches["augmentation"] <= 150, result["names"]["augmentation"]
    assert all(launches[p] > 0 for p in ("augmentation", "forward", "loss", "backward",
                                         "optimizer", "ema_queue"))
