"""The training streams of pinned Part A runs: a change that alters the first steps of a
pinned run (data order, augmentation draws, initialisation, loss, optimiser, the momentum
branch and its queue) fails here, so the study's records and the code that would train them
again stay the same runs. Pinned: ``configs/repro/cpu/simclr_t0.1.yaml`` (the second round's
pinned stream) and ``sce``, ``moco`` and ``ressl`` (the first round's records that study 5
reads), each at seed 0.

Float results also depend on the torch build, the CPU's kernels and the number of threads, and
the stream amplifies a rounding difference within a few steps. Measured with torch 2.13.0+cpu:
on an AMD EPYC, one and two threads give the same step-0 loss and step-1 losses 5e-7 apart
(step 2: 7e-4); on an Intel Xeon (AVX-512), the same at steps 0 and 1 (step 2: 4e-3); between
the two machines, one thread each, steps 0, 1 and 2 are a relative 7e-8, 5e-4 and 3e-2 apart;
an AMD EPYC with AVX-512 (2026-12-01) agrees with the first AMD EPYC (AVX2) at step 0 only.
So the losses are pinned per environment (torch build, CPU model and, where recorded, torch's
CPU capability; one thread) and compared exactly in a pinned one. Elsewhere only step 0 is
compared, to a relative 1e-5: the data order, augmentation draws, initialisation and loss; an
optimiser change first shows at step 1, which only a pinned environment checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from float_environment import pinned_environment
from stream_probe import StopAfter

REPO = Path(__file__).resolve().parents[2]
ARCHIVE = REPO / ".." / "shared" / "data" / "cifar10-jpg.tar.gz"
PINNED = json.loads(Path(__file__).with_name("pinned_stream.json").read_text())["runs"]

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not ARCHIVE.is_file(), reason=f"{ARCHIVE} not available")]


def test_the_pinned_environments_agree_on_the_first_step():
    """Step 0 (no optimiser step yet) is the same run in every environment that pinned it, to
    rounding: what the check outside them compares with."""
    several = [run for run in PINNED if len(run["environments"]) >= 2]
    assert several
    for run in several:
        first = [env["losses"][0] for env in run["environments"]]
        torch.testing.assert_close(torch.tensor(first, dtype=torch.float64),
                                   torch.full((len(first),), first[0], dtype=torch.float64),
                                   rtol=1e-6, atol=0)


@pytest.mark.parametrize("pinned", PINNED, ids=lambda run: Path(run["config"]).stem)
def test_the_pinned_run_trains_the_same_first_steps(pinned, tmp_path, monkeypatch):
    from contrastkit.cli.pretrain import pretrain

    steps = len(pinned["environments"][0]["losses"])
    monkeypatch.chdir(REPO)  # the config's data paths are relative to the checkout
    pretrain(["--config", pinned["config"], "--seed_everything", str(pinned["seed"]),
              "--output", str(tmp_path / "run"), "--trainer.enable_progress_bar", "false",
              "--trainer.callbacks+=stream_probe.StopAfter",
              "--trainer.callbacks.steps", str(steps)])
    losses = StopAfter.losses
    assert len(losses) == steps
    env = pinned_environment(pinned["environments"])
    if env is not None:
        assert losses == env["losses"], (
            f"the first steps of {pinned['config']} (seed {pinned['seed']}) changed in an "
            f"environment that pinned them ({env['cpu']}): {losses} vs {env['losses']}")
    else:
        torch.testing.assert_close(torch.tensor(losses[0], dtype=torch.float64),
                                   torch.tensor(pinned["environments"][0]["losses"][0],
                                                dtype=torch.float64), rtol=1e-5, atol=0)
