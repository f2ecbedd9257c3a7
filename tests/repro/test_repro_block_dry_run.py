"""The device call of a Part B block, run on the CPU at a tiny size: the very command
``python -m studies.repro gpu`` prints (``source .carry/env.sh && python3 -m studies.repro
block ...``), in a copy of the checkout whose ``.carry/`` holds a tiny CIFAR-like archive and an
``env.sh`` that puts this environment's Python first; only size options are added (one epoch,
width 8, batch 32, CPU, short probes). Its ``$OUT`` must come back through the device tool
(at most 8 files of 16 MiB) and record in a second copy (the session's checkout) as any run."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from studies.repro import layout
from studies.repro.block_records import (
    BLOCK_LOG,
    BLOCK_SUMMARY,
    MAX_FILE_BYTES,
    MAX_FILES,
    RECORDS_ARCHIVE,
)
from studies.repro.blocks import device_command, plan
from studies.repro.device_block import run_block

REPO = Path(__file__).resolve().parents[2]
COMMIT = "c0ffee" * 6 + "beef"
#: The size options a dry run adds to the block's command (the rest is the planned command).
TINY_OPTIONS = ("--epochs", "1", "--device", "cpu", "--probe-epochs", "2")
TINY_PRETRAIN = ("--model.method.init_args.backbone.width", "8", "--data.batch_size", "32",
                 "--data.num_workers", "0", "--trainer.log_every_n_steps", "1",
                 "--trainer.check_val_every_n_epoch", "1")


def _checkout(root: Path) -> Path:
    """A copy of the checkout as the device tool sends it: code, configs, no git."""
    for part in ("src", "studies", "configs"):
        shutil.copytree(REPO / part, root / part,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def _carry(root: Path) -> None:
    """``.carry/``: an env.sh that puts this Python first and the copy's ``src`` on the path
    (the real one installs the carried wheels), and a tiny archive in CIFAR-10's layout
    (``train|test/<class>/*.jpg``, 10 classes of 32x32 JPEGs: 240 training images, enough
    for a 200-NN bank, and 60 test images)."""
    carry = root / ".carry"
    carry.mkdir()
    (carry / "env.sh").write_text(
        f'export PATH="{Path(sys.executable).parent}:$PATH" PYTHONPATH="$PWD/src" '
        "PYTHONUNBUFFERED=1\n")
    rng = np.random.default_rng(0)
    with tarfile.open(carry / "cifar10-jpg.tar.gz", "w:gz") as tar:
        for split, per_class in (("train", 24), ("test", 6)):
            for c in range(10):
                for i in range(per_class):
                    pixels = (rng.random((32, 32, 3)) * 60 + 19 * c).astype(np.uint8)
                    buf = io.BytesIO()
                    Image.fromarray(pixels).save(buf, "JPEG")
                    info = tarfile.TarInfo(f"{split}/class{c}/{i:04d}.jpg")
                    info.size = buf.tell()
                    buf.seek(0)
                    tar.addfile(info, buf)


@pytest.mark.slow
@pytest.mark.parametrize("run", ["sce", "dystress"])
def test_the_planned_device_command_runs_a_tiny_block(run, tmp_path):
    device = _checkout(tmp_path / "device")
    _carry(device)
    (block,) = [b for b in plan({}) if b.step.run == run]
    assert block.state in ("next", "pending")
    command = device_command(block, COMMIT, options=TINY_OPTIONS, pretrain=TINY_PRETRAIN)
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_")}
    env.update(OUT=str(out), OMP_NUM_THREADS="1")
    done = subprocess.run(["bash", "-c", command], cwd=device, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "block status: done" in done.stdout
    # what comes back: 3 files, each far below the tool's limit
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted([BLOCK_LOG, BLOCK_SUMMARY, RECORDS_ARCHIVE])
    assert len(files) <= MAX_FILES
    assert all((out / f).stat().st_size < MAX_FILE_BYTES for f in files)
    summary = json.loads((out / BLOCK_SUMMARY).read_text())
    assert summary["status"] == "done" and summary["tag"] == "gpu-e1"
    assert summary["commit"] == COMMIT and summary["device"] == "cpu"
    assert summary["torch"] and summary["lightning"] and summary["gpu"] is None
    assert summary["gpu_minutes"] > 0 and len(summary["invocations"]) == 1
    variant = block.variant
    assert {f"{p}/top1" for p in variant.evals if p != "analyze"} <= set(summary["metrics"])
    with tarfile.open(out / RECORDS_ARCHIVE) as tar:
        names = set(tar.getnames())
    assert {"pretrain/finished.json", "pretrain/config.yaml", "pretrain/metrics.csv",
            "cost.jsonl", "provenance.jsonl", BLOCK_SUMMARY} <= names
    assert {f"eval/{p}/results.json" for p in variant.evals if p != "analyze"} <= names
    assert not [n for n in names if n.endswith(".ckpt")]
    provenance = [json.loads(line) for line in tar_text(out, "provenance.jsonl").splitlines()]
    assert {p["commit"] for p in provenance} == {COMMIT}
    if run == "dystress":  # the online monitor's curve: the best epoch
        assert "analyze/results.json" in names
        assert summary["metrics"]["best_epoch"] == 1
    # the session's checkout records it as any run
    session = _checkout(tmp_path / "session")
    record = subprocess.run([sys.executable, "-m", "studies.repro", "gpu", "--record",
                             str(out)], cwd=session, env=env, capture_output=True, text=True,
                            timeout=300)
    assert record.returncode == 0, record.stdout + record.stderr
    recorded = session / "docs/reproduction/runs/gpu-e1" / variant.stem / "seed0"
    assert (recorded / "pretrain" / "finished.json").is_file()
    assert json.loads((recorded / BLOCK_SUMMARY).read_text())["status"] == "done"


def tar_text(out: Path, name: str) -> str:
    with tarfile.open(out / RECORDS_ARCHIVE) as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read().decode()


def test_a_block_out_of_time_says_continue_and_is_not_recorded(monkeypatch, tmp_path):
    """With no time left the block starts nothing, packs what it has with status
    ``continue`` (the same call again resumes) and ``gpu --record`` refuses it."""
    monkeypatch.setattr(layout, "REPO", _checkout(tmp_path / "device"))
    for name in ("REPRO_COMMIT", "REPRO_DIRTY"):  # the block sets them: restored afterwards
        monkeypatch.setenv(name, "")
    out = tmp_path / "out"
    lines: list[str] = []
    status = run_block("sce", out, archive=".carry/cifar10-jpg.tar.gz", commit=COMMIT,
                       limit_s=0, device="cpu", epochs=1, log=lines.append)
    assert status == "continue"
    assert any("step budget spent" in line for line in lines)
    assert not any(line.startswith("$ ") for line in lines)  # no command started
    summary = json.loads((out / BLOCK_SUMMARY).read_text())
    assert summary["status"] == "continue" and summary["metrics"] == {}
    from studies.repro.cli import main

    assert main(["gpu", "--record", str(out)]) == 2  # one line: not done, nothing recorded
    assert not (layout.REPO / "docs").exists()
