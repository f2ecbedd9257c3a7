"""The study's outside anchor (``studies/repro/lightly_anchor.py``, issue 54 item 5) on a tiny
budget: lightly's SimCLR trains, a run stopped after an epoch's checkpoint goes on to the same
weights as one run straight, and the whole command leaves a folder laid out as a recorded run
with the study's ``eval knn`` results (a smoke run: not recorded)."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("lightly", reason="lightly is not installed: run make test-timm")
from PIL import Image

from studies.repro import layout, lightly_anchor

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A checkout with the study's configs and a tiny CIFAR-like archive at
    ``../shared/data/cifar10-jpg.tar.gz``: 3 classes, 68 train images each (a bank of 204 for
    the 200-NN) and 4 test images each."""
    repo = tmp_path / "repo"
    (repo / "configs").mkdir(parents=True)
    shutil.copytree(layout.REPO / "configs" / "repro", repo / "configs" / "repro")
    archive = tmp_path / "shared" / "data" / "cifar10-jpg.tar.gz"
    archive.parent.mkdir(parents=True)
    rng = np.random.default_rng(0)
    staging = tmp_path / "staging"
    with tarfile.open(archive, "w:gz") as tar:
        for split, count in (("train", 68), ("test", 4)):
            for name in ("cat", "dog", "ship"):
                for i in range(count):
                    file = staging / split / name / f"{i:04d}.jpg"
                    file.parent.mkdir(parents=True, exist_ok=True)
                    Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(file)
                    tar.add(file, arcname=f"{split}/{name}/{i:04d}.jpg")
    monkeypatch.setattr(layout, "REPO", repo)
    return repo


def _tiny() -> dict:
    settings = lightly_anchor.budget(epochs=2, images=24, batch_size=8)
    return {**settings, "backbone": {**settings["backbone"], "width": 4}}


def test_a_stopped_run_goes_on_to_the_weights_of_a_straight_one(checkout, monkeypatch):
    straight = lightly_anchor.train(0, Path("runs/a"), _tiny())
    saves = []
    real_save = lightly_anchor._save

    def stop_after_first_epoch(path, state):
        real_save(path, state)
        saves.append(path.name)
        if path.name == "last.pt" and len(saves) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(lightly_anchor, "_save", stop_after_first_epoch)
    with pytest.raises(KeyboardInterrupt):  # stopped between the checkpoint and the log
        lightly_anchor.train(0, Path("runs/b"), _tiny())
    assert not (checkout / "runs/b/pretrain/epochs.jsonl").exists()
    resumed = lightly_anchor.train(0, Path("runs/b"), _tiny())
    a, b = torch.load(straight, weights_only=True), torch.load(resumed, weights_only=True)
    assert a.keys() == b.keys() and "conv1.weight" in a
    for key in a:
        assert torch.equal(a[key], b[key]), key
    log = [json.loads(line) for line in
           (checkout / "runs/b/pretrain/epochs.jsonl").read_text().splitlines()]
    assert [entry["epoch"] for entry in log] == [1, 2]  # the stopped epoch logged once
    assert all(np.isfinite(entry["loss"]) for entry in log)


@pytest.mark.slow
def test_a_smoke_run_leaves_a_run_folder_with_the_study_s_knn(checkout):
    out = lightly_anchor.run_anchor(1, epochs=1, images=24, batch_size=8)
    assert out == Path("runs/repro/smoke/lightly_simclr_t0.2/seed1")
    folder = checkout / out
    results = json.loads((folder / "eval/knn200/results.json").read_text())
    assert results["config"]["k"] == 200 and results["config"]["temperature"] == 0.1
    assert results["data"]["normalize"] == "cifar10"
    assert 0.0 <= results["metrics"]["top1"] <= 1.0
    assert json.loads((folder / "pretrain/finished.json").read_text()) == {"epochs": 1}
    def lines(name: str) -> list[dict]:
        return [json.loads(line) for line in (folder / name).read_text().splitlines()]

    assert [entry["step"] for entry in lines("cost.jsonl")] == ["pretrain", "knn200"]
    provenance = lines("provenance.jsonl")
    assert provenance[0]["lightly"] and provenance[0]["torchvision"]
    assert not (checkout / layout.RECORDS).exists()  # a smoke run is not recorded
