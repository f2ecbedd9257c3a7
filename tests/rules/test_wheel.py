"""The package is the library only: built as a wheel and installed into a fresh virtual
environment outside the checkout (offline: the dependencies are the test environment's own),
``contrastkit --help``, ``contrastkit pretrain`` on digits and ``contrastkit eval knn`` of its
checkpoint work, with nothing of the source checkout in reach."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--data.dataset", "digits", "--data.batch_size", "32", "--data.subset", "64",
        "--data.monitor_bank_size", "64", "--model.views.size", "8",
        "--trainer.accelerator", "cpu", "--trainer.devices", "1", "--trainer.max_epochs", "1",
        "--trainer.enable_progress_bar", "false",
        "--model.method", "contrastkit.methods.SimCLR",
        "--model.method.backbone", '{"name": "small_convnet", "width": 4, "out_dim": 8}',
        "--model.method.projector", '{"hidden_dim": 8, "out_dim": 4}']


def _run(command: list[str], cwd: Path, env: dict) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"{command[:3]}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.slow
def test_a_wheel_installed_outside_the_checkout_pretrains_and_evaluates(tmp_path):
    source = _mkdir(tmp_path / "source")  # a copy, so the build leaves the checkout as it is
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "--no-index", "-w", str(tmp_path / "dist"), str(source)], tmp_path, env)
    (wheel,) = (tmp_path / "dist").glob("contrastkit-*.whl")
    fresh = tmp_path / "venv"
    venv.create(fresh, with_pip=False)
    python = fresh / "bin" / "python"
    site = Path(_run([str(python), "-c",
                      "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp_path, env).strip())
    # the dependencies: the test environment's site-packages as a plain path (its .pth files,
    # the editable contrastkit among them, are not read from there)
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
          "--no-index", str(wheel)], tmp_path, env)
    work = _mkdir(tmp_path / "elsewhere")  # no configs/, docs/ or src/ around
    where = _run([str(python), "-c", "import contrastkit; print(contrastkit.__file__)"], work,
                 env)
    assert where.startswith(str(site)), where
    contrastkit = str(fresh / "bin" / "contrastkit")
    usage = _run([contrastkit, "--help"], work, env)
    assert "pretrain" in usage and "eval" in usage and "repro" not in usage
    _run([contrastkit, "pretrain", *TINY, "--output", "run"], work, env)
    _run([contrastkit, "eval", "knn", "--checkpoint", "run/checkpoints/last.ckpt", "--data",
          "digits", "--k", "5", "--no-cache", "--quiet", "--output", "knn"], work, env)
    results = json.loads((work / "knn" / "results.json").read_text())
    assert 0.0 <= results["metrics"]["top1"] <= 1.0 and results["num_test"] > 0


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
