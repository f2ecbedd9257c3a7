"""The collapse warning (:mod:`contrastkit.train.collapse_check`): a collapsed embedding, or a
loss held at the value a method states for a collapse, warns once, naming the step and the
value; a healthy embedding, or a dip shorter than ``collapse_steps``, never does."""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path

import pytest
import torch
from pretrain_args import TINY, method_args

from contrastkit.cli.pretrain import build
from contrastkit.train.collapse_check import CollapseCheck, embedding_spread

D = 64


def _healthy(seed: int) -> torch.Tensor:
    return torch.randn(128, D, generator=torch.Generator().manual_seed(seed))


def _collapsed(seed: int) -> torch.Tensor:
    """Every row the same vector but for a noise 1e-4 of its size."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, D, generator=g) + 1e-4 * torch.randn(128, D, generator=g)


def test_the_spread_is_the_std_of_the_normalised_embedding_over_the_batch():
    z = _healthy(0)
    unit = z / z.norm(dim=1, keepdim=True)
    want = torch.stack([unit[:, j].std() for j in range(D)]).mean()
    torch.testing.assert_close(embedding_spread(z), want)
    assert abs(float(embedding_spread(_healthy(1))) * math.sqrt(D) - 1.0) < 0.05
    assert float(embedding_spread(_collapsed(0))) * math.sqrt(D) < 1e-3


def _observe(check: CollapseCheck, embeddings, losses, every: int = 10) -> list[tuple]:
    """Feed logging steps 0, every, 2 every, ...; the (step, warning) pairs that warned."""
    found = []
    for k, (z, loss) in enumerate(zip(embeddings, losses, strict=True)):
        spread = None if z is None else embedding_spread(z)
        warning = check.observe(k * every, torch.tensor(loss), spread, D)
        if warning is not None:
            found.append((k * every, warning))
    return found


def test_a_collapsed_embedding_warns_once_naming_the_step_and_the_value():
    check = CollapseCheck(spread=0.02, loss_tolerance=1e-3, steps=30, collapse_loss=None)
    embeddings = [_healthy(k) for k in range(3)] + [_collapsed(k) for k in range(10)]
    found = _observe(check, embeddings, [1.0] * len(embeddings))
    assert [step for step, _ in found] == [60]  # below from step 30, held 30 steps at 60
    message = found[0][1]
    assert "train/z_std" in message and "since step 30" in message and "at step 60" in message
    assert f"{0.02 / math.sqrt(D):.3g}" in message and "\n" not in message
    value = float(embedding_spread(embeddings[6]))
    assert f"{value:.3g} at step 60" in message
    assert check.warned and not check.watches


def test_a_healthy_embedding_and_a_short_dip_never_warn():
    check = CollapseCheck(spread=0.02, loss_tolerance=1e-3, steps=30, collapse_loss=8.0)
    embeddings = [_healthy(k) for k in range(20)]
    embeddings[5:8] = [_collapsed(k) for k in range(3)]  # below at steps 50-70: 20 < 30 steps
    embeddings[12:14] = [_collapsed(k) for k in range(2)]
    assert _observe(check, embeddings, [7.5] * 20) == []
    assert not check.warned


def test_a_loss_held_at_the_collapse_value_warns_once():
    """SwAV's log K, say: the base-swav helper states it with collapse_loss()."""
    target = math.log(3000)
    check = CollapseCheck(spread=0.02, loss_tolerance=1e-3, steps=20, collapse_loss=target)
    losses = [9.0, target + 0.02, target - 0.005, target + 0.004, target, target + 0.001]
    found = _observe(check, [None] * len(losses), losses)
    assert [step for step, _ in found] == [40]  # within 0.008 from step 20 (0.02 is not)
    assert "since step 20" in found[0][1] and f"{target:.6g}" in found[0][1]
    off = CollapseCheck(spread=0.02, loss_tolerance=0.0, steps=20, collapse_loss=target)
    assert _observe(off, [None] * len(losses), losses) == [] and off.collapse_loss is None


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"spread": -0.1}, "online_eval.collapse_spread must be >= 0"),
    ({"steps": 0}, "online_eval.collapse_steps must be an int >= 1"),
])
def test_bad_settings_are_named(kwargs, match):
    settings = {"spread": 0.02, "loss_tolerance": 1e-3, "steps": 10, "collapse_loss": None}
    with pytest.raises(ValueError, match=match):
        CollapseCheck(**{**settings, **kwargs})


def _run(tmp_path: Path, name: str, collapse: bool) -> tuple[list[str], Path]:
    """A tiny Barlow Twins run of 4 steps, logging every step, warning after 2 steps held;
    ``collapse``: the method hands a constant embedding to the check."""
    cli, _ = build([*TINY, *method_args("BarlowTwins"), "--data.subset", "128",
                    "--trainer.max_epochs", "1", "--model.online_eval.knn", "false",
                    "--model.online_eval.collapse_steps", "2", "--output", str(tmp_path / name)])
    method = cli.model.method
    assert cli.model.collapse_check.collapse_loss == method.collapse_loss() == 8.0  # d
    if collapse:
        objective = method.objective

        def constant(views, labels, state):
            out = objective(views, labels, state)
            out.embedding = torch.ones_like(out.embedding)
            return out

        method.objective = constant
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    # reading the loss for the check must not warn about its gradient
    assert [str(w.message) for w in caught if "requires_grad" in str(w.message)] == []
    found = [str(w.message) for w in caught if "collapsed" in str(w.message)]
    return found, Path(cli.trainer.logger.log_dir) / "metrics.csv"


def test_the_engine_warns_once_and_logs_the_step(tmp_path):
    found, metrics = _run(tmp_path, "collapsed", collapse=True)
    assert len(found) == 1 and "since step 0" in found[0] and "0 at step 2" in found[0]
    rows = list(csv.DictReader(metrics.open()))
    logged = [(row["step"], row["train/collapse_step"]) for row in rows
              if row.get("train/collapse_step")]
    assert logged[0] == ("2", "2.0") and {v for _, v in logged} == {"2.0"}
    assert all(float(row["train/z_std"]) == 0.0 for row in rows if row.get("train/z_std"))


def test_a_healthy_run_does_not_warn(tmp_path):
    found, metrics = _run(tmp_path, "healthy", collapse=False)
    assert found == []
    spreads = [float(r["train/z_std"]) for r in csv.DictReader(metrics.open())
               if r.get("train/z_std")]
    assert len(spreads) == 4 and min(spreads) > 0.02 / math.sqrt(8)
