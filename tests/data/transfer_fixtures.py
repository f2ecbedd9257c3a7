"""Small copies of the DySTreSS transfer sets in their distributed layouts (tests only)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

COLOURS = [(220, 40, 40), (40, 220, 40), (40, 40, 220), (220, 220, 40)]


def jpeg(path: Path, label: int, index: int) -> None:
    from PIL import Image

    rng = np.random.default_rng(index)
    h, w = (20, 26) if index % 2 else (24, 20)
    pixels = np.clip(np.array(COLOURS[label]) + rng.normal(0, 12, (h, w, 3)), 0, 255)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels.astype(np.uint8)).save(path)


def flowers102(root: Path, classes: int = 3, per_split: int = 2) -> Path:
    """``jpg/``, ``imagelabels.mat``, ``setid.mat``: ``per_split`` images of each class in each
    of trn / val / tst."""
    from scipy.io import savemat

    labels, sets = [], {"trnid": [], "valid": [], "tstid": []}
    for key in sets:
        for c in range(classes):
            for _ in range(per_split):
                labels.append(c + 1)
                sets[key].append(len(labels))
                jpeg(root / "jpg" / f"image_{len(labels):05d}.jpg", c, len(labels))
    savemat(root / "imagelabels.mat", {"labels": np.array([labels], dtype=np.uint8)})
    savemat(root / "setid.mat", {k: np.array([v], dtype=np.uint16) for k, v in sets.items()})
    return root


def mura(root: Path, studies: int = 4) -> Path:
    """``MURA-v1.1/{train,valid}_{image_paths,labeled_studies}.csv`` and PNG-named images."""
    base = root / "MURA-v1.1"
    for split in ("train", "valid"):
        paths, labelled = [], []
        for s in range(studies):
            label = s % 2
            study = f"MURA-v1.1/{split}/XR_WRIST/patient{s:05d}/study1_" + \
                ("positive" if label else "negative")
            labelled.append(f"{study}/,{label}")
            for i in (1, 2):
                paths.append(f"{study}/image{i}.png")
                jpeg(root / study / f"image{i}.png", label, s * 2 + i)
        base.mkdir(parents=True, exist_ok=True)
        (base / f"{split}_image_paths.csv").write_text("\n".join(paths) + "\n")
        (base / f"{split}_labeled_studies.csv").write_text("\n".join(labelled) + "\n")
    return root


def isic2016(root: Path, n: int = 6) -> Path:
    for part, names in (("Training", ("benign", "malignant")), ("Test", ("0.0", "1.0"))):
        rows = []
        for i in range(n):
            image_id = f"ISIC_{i:07d}"
            rows.append(f"{image_id},{names[i % 2]}")
            jpeg(root / f"ISBI2016_ISIC_Part3_{part}_Data" / f"{image_id}.jpg", i % 2, i)
        (root / f"ISBI2016_ISIC_Part3_{part}_GroundTruth.csv").write_text("\n".join(rows) + "\n")
    return root


def mhist(root: Path, n: int = 6) -> Path:
    rows = ["Image Name,Majority Vote Label,Number of Annotators who Selected SSA (Out of 7),"
            "Partition"]
    for split in ("train", "test"):
        for i in range(n):
            name = f"MHIST_{split}{i:03d}.png"
            label = ("HP", "SSA")[i % 2]
            rows.append(f"{name},{label},{3 * (i % 2)},{split}")
            jpeg(root / "images" / name, i % 2, i)
    (root / "annotations.csv").write_text("\n".join(rows) + "\n")
    return root


def chaoyang(root: Path, per_class: int = 2) -> Path:
    for split in ("train", "test"):
        entries = []
        for c in range(4):
            for i in range(per_class):
                name = f"{split}/{c}_{i}.jpg"
                entries.append({"name": name, "label": c})
                jpeg(root / name, c, c * per_class + i)
        (root / f"{split}.json").write_text(json.dumps(entries))
    return root
