"""Experiment trackers as loggers of the config (W&B offline, MLflow on a local file store):
the tracker's run id lands in every checkpoint and a resumed run continues that tracker run,
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
from pretrain_args import TINY, StopAfterEpochs, method_args

from contrastkit.cli.pretrain import build, pretrain
from contrastkit.train.trackers import TRACKER_RUNS

DRIVER = Path(__file__).with_name("fault_driver.py")
CSV = {"class_path": "contrastkit.train.logging.ResumableCSVLogger",
       "init_args": {"save_dir": "runs/pretrain", "name": "", "version": ""}}


def _args(out: Path, logger: dict, epochs: int) -> list[str]:
    return [*TINY, *method_args("SimCLR"), "--trainer.max_epochs", str(epochs),
            "--trainer.logger", json.dumps([CSV, logger]), "--output", str(out)]


def _wandb_runs(out: Path) -> list[str]:
    """The run ids of the W&B offline runs in the run folder (``offline-run-<time>-<id>``)."""
    return sorted(p.name.rsplit("-", 1)[1] for p in (out / "wandb").glob("offline-run-*"))


@pytest.mark.slow
def test_a_wandb_offline_run_killed_and_resumed_continues_the_same_run(tmp_path):
    pytest.importorskip("wandb")
    out = tmp_path / "run"
    logger = {"class_path": "lightning.pytorch.loggers.WandbLogger",
              "init_args": {"offline": True, "project": "contrastkit-test"}}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_SILENT": "true", "WANDB_MODE": "offline",
           "KILL_IN_WRITE": "2"}  # killed during epoch 2's checkpoint, epoch 1's kept
    killed = subprocess.run([sys.executable, str(DRIVER), *_args(out, logger, 3)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    state = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["global_step"] == 4
    (first,) = _wandb_runs(out)
    assert state[TRACKER_RUNS] == {"wandb": first}
    env.pop("KILL_IN_WRITE")
    resumed = subprocess.run([sys.executable, str(DRIVER), *_args(out, logger, 3), "--resume",
                              "last"], env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _wandb_runs(out) == [first, first]  # a second offline segment of the same run
    final = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert final["global_step"] == 12 and final[TRACKER_RUNS] == {"wandb": first}


def test_an_mlflow_run_is_continued_on_resume(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    store = f"file:{tmp_path / 'mlruns'}"
    logger = {"class_path": "lightning.pytorch.loggers.MLFlowLogger",
              "init_args": {"experiment_name": "contrastkit-test", "tracking_uri": store}}
    out = tmp_path / "run"
    cli, _ = build(_args(out, logger, 2))
    cli.trainer.callbacks.append(StopAfterEpochs(1))
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    run_id = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)[TRACKER_RUNS][
        "mlflow"]
    pretrain([*_args(out, logger, 2), "--resume", "last"])
    final = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert final[TRACKER_RUNS] == {"mlflow": run_id}
    client = MlflowClient(tracking_uri=store)
    runs = client.search_runs([client.get_experiment_by_name("contrastkit-test").experiment_id])
    assert [r.info.run_id for r in runs] == [run_id]  # one run, continued
    steps = sorted({m.step for m in client.get_metric_history(run_id, "train/loss")})
    assert steps == list(range(8))  # both epochs' steps in the one run


def test_a_config_without_tracker_records_no_run_ids(tmp_path):
    out = tmp_path / "run"
    pretrain([*TINY, *method_args("SimCLR"), "--trainer.max_epochs", "1", "--output", str(out)])
    assert TRACKER_RUNS not in torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
