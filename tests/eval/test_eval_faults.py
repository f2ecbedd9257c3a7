"""Issue 36: faults around evaluation (docs/reliability.md counts them): a tampered export, a
folder whose images are all unreadable, the staging folder an ``eval linear`` killed midway
leaves beside ``--output``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from contrastkit.checkpoints import DIGEST_METADATA, load_backbone
from contrastkit.cli import main
from contrastkit.export_metadata import RUN_METADATA
from contrastkit.provenance import source_commit


def _one_line(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def test_a_tampered_export_is_refused_in_one_line_naming_it(tiny_checkpoint, tmp_path, capsys):
    """Only .ckpt files carried a digest: a flipped bit in an exported .safetensors was
    evaluated silently (top-1 0.5907 instead of 0.5934)."""
    from safetensors import safe_open

    exported = tmp_path / "backbone.safetensors"
    assert main(["export", "--checkpoint", str(tiny_checkpoint), "--output", str(exported)]) == 0
    with safe_open(str(exported), framework="pt") as handle:
        metadata = handle.metadata()
    run = json.loads(metadata[RUN_METADATA])
    assert run["method"] == "SimCLR" and run["backbone"]["name"] == "small_convnet"
    assert run["commit"] == source_commit() and run["checkpoint"] == "last.ckpt"
    assert len(metadata[DIGEST_METADATA]) == 64
    load_backbone(exported)  # intact: loads
    data = bytearray(exported.read_bytes())
    header = int.from_bytes(data[:8], "little")
    data[8 + header + 37] ^= 0x10  # one bit of a tensor
    exported.write_bytes(bytes(data))
    message = (f"checkpoint {exported} is corrupted: its weights do not match the SHA-256 "
               "stored in its metadata; export it again from its checkpoint")
    with pytest.raises(ValueError, match="is corrupted"):
        load_backbone(exported)
    err = _one_line(capsys, ["eval", "knn", "--checkpoint", str(exported), "--data", "digits",
                             "--no-cache"])
    assert err == f"contrastkit eval: error: {message}"


def test_a_pth_export_of_another_backbone_carries_the_digest_too(tiny_checkpoint, tmp_path):
    exported = tmp_path / "backbone.pth"
    assert main(["export", "--checkpoint", str(tiny_checkpoint), "--output", str(exported)]) == 0
    state = torch.load(exported, weights_only=True)
    assert json.loads(state["contrastkit"][RUN_METADATA])["method"] == "SimCLR"
    key = next(iter(state["backbone_state_dict"]))
    state["backbone_state_dict"][key] = state["backbone_state_dict"][key] + 1e-3
    torch.save(state, exported)
    with pytest.raises(ValueError, match=f"checkpoint {exported} is corrupted"):
        load_backbone(exported)


def test_a_folder_whose_images_are_all_unreadable_says_so(tiny_checkpoint, tmp_path, capsys):
    """It said "k=200 is larger than the bank (0 images ...): pass --k 0 or less"."""
    root = tmp_path / "photos"
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for i in range(3):
            (root / name / f"{name}{i}.jpg").write_bytes(b"\xff\xd8 not a JPEG")
    err = _one_line(capsys, ["eval", "knn", "--checkpoint", str(tiny_checkpoint), "--data",
                             "folder", "--root", str(root), "--test-fraction", "0.5",
                             "--skip-corrupt", "--no-cache"])
    assert err.startswith(f"contrastkit eval: error: no readable images in {root} (split "
                          "train): all 6 image files there are unreadable"), err


def _stages(out: Path) -> list[Path]:
    return [p for p in out.parent.glob(f".{out.name}.*.tmp") if p.is_dir()]


def test_the_staging_folder_of_a_killed_eval_is_removed_by_the_next_one(tiny_checkpoint,
                                                                        tmp_path):
    """``eval linear`` killed midway left ``.NAME.*.tmp`` beside ``--output`` for good."""
    out = tmp_path / "linear"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "contrastkit.cli", "eval", "linear", "--checkpoint",
         str(tiny_checkpoint), "--data", "digits", "--epochs", "500", "--no-cache", "--output",
         str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not _stages(out) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _stages(out), child.stderr.read() if child.poll() is not None else "timeout"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    [stale] = _stages(out)
    assert main(["eval", "knn", "--checkpoint", str(tiny_checkpoint), "--data", "digits", "--k",
                 "20", "--no-cache", "--output", str(out)]) == 0
    assert not stale.exists() and not _stages(out)
    assert (out / "results.json").is_file()
