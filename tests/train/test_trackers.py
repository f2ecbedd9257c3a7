"""Experiment trackers as loggers of the config (W&B offline, MLflow on a local file store):
the trackers' run ids land in every checkpoint and a resumed run continues those tracker runs,
after a kill too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pretrain_args import TINY, method_args

from contrastkit.cli.pretrain import pretrain
from contrastkit.train.trackers import TRACKER_RUNS

pytestmark = pytest.mark.usefixtures("one_thread")

DRIVER = Path(__file__).with_name("fault_driver.py")
CSV = {"class_path": "contrastkit.train.logging.ResumableCSVLogger",
       "init_args": {"save_dir": "runs/pretrain", "name": "", "version": ""}}
TRACKER_ENV = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONSOLE": "off",
               "MLFLOW_ALLOW_FILE_STORE": "true"}


def _wandb_runs(out: Path) -> list[str]:
    """The run ids of the W&B offline runs in the run folder (``offline-run-<time>-<id>``)."""
    return sorted(p.name.rsplit("-", 1)[1] for p in (out / "wandb").glob("offline-run-*"))


@pytest.mark.slow
def test_wandb_and_mlflow_runs_killed_and_resumed_continue_the_same_runs(tmp_path,
                                                                         monkeypatch):
    """One run with both trackers, SIGKILLed in a child process while writing its second
    (last) epoch's checkpoint, then resumed here: each tracker continues its run."""
    wandb = pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    store = f"file:{tmp_path / 'mlruns'}"
    loggers = [CSV,
               {"class_path": "lightning.pytorch.loggers.WandbLogger",
                "init_args": {"offline": True, "project": "contrastkit-test"}},
               {"class_path": "lightning.pytorch.loggers.MLFlowLogger",
                "init_args": {"experiment_name": "contrastkit-test", "tracking_uri": store}}]
    out = tmp_path / "run"
    args = [*TINY, *method_args("SimCLR"), "--trainer.max_epochs", "2",
            "--trainer.logger", json.dumps(loggers), "--output", str(out)]
    env = {**os.environ, **TRACKER_ENV, "OMP_NUM_THREADS": "1",
           "KILL_IN_WRITE": "2"}  # killed during epoch 2's checkpoint, epoch 1's kept
    killed = subprocess.run([sys.executable, str(DRIVER), *args], env=env,
                            capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    state = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["global_step"] == 4
    (first,) = _wandb_runs(out)
    runs = state[TRACKER_RUNS]
    assert set(runs) == {"wandb", "mlflow"} and runs["wandb"] == first

    for key, value in TRACKER_ENV.items():
        monkeypatch.setenv(key, value)
    try:
        pretrain([*args, "--resume", "last"])
    finally:
        wandb.finish()
        wandb.teardown()
    final = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert final["global_step"] == 8 and final[TRACKER_RUNS] == runs
    assert _wandb_runs(out) == [first, first]  # a second offline segment of the same run
    client = MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name("contrastkit-test").experiment_id
    assert [r.info.run_id for r in client.search_runs([experiment])] == [runs["mlflow"]]
    steps = sorted({m.step for m in client.get_metric_history(runs["mlflow"], "train/loss")})
    assert steps == list(range(8))  # both epochs' steps in the one run


def test_a_config_without_tracker_records_no_run_ids(tiny_checkpoint):
    assert TRACKER_RUNS not in torch.load(tiny_checkpoint, weights_only=True)
