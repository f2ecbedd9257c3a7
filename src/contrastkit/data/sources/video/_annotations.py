"""Annotation readers of the video datasets: UCF101, HMDB51, Kinetics, class folders.

Each ``read_*`` function returns ``(samples, classes)`` with ``samples`` a list of
``(path, label)`` pairs (``label`` an index into ``classes``). They only parse files and list
folders: existence of the videos is checked by the datasets
(:class:`contrastkit.data.sources.video._datasets.ClipDataset`), except for Kinetics whose reader
also returns the rows whose file is absent (YouTube videos disappear; they are counted and reported,
not fatal).
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

__all__ = [
    "VIDEO_EXTENSIONS",
    "Samples",
    "read_hmdb51",
    "read_kinetics",
    "read_ucf101",
    "read_video_folder",
]

#: File name endings recognised as videos by folder scans.
VIDEO_EXTENSIONS = (".mp4", ".avi", ".webm", ".mkv", ".mov", ".m4v", ".mpg", ".mpeg")

Samples = list[tuple[Path, int]]


def _check_split(split: str, fold: int) -> None:
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if fold not in (1, 2, 3):
        raise ValueError(f"fold must be 1, 2 or 3, got {fold!r}")


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"annotation file not found: {path}")
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def read_ucf101(
    root: str | os.PathLike[str],
    annotations: str | os.PathLike[str],
    split: str = "train",
    fold: int = 1,
) -> tuple[Samples, list[str]]:
    """Parse UCF101's ``ucfTrainTestlist`` folder (Soomro et al., 2012).

    ``classInd.txt`` has lines ``"1 ApplyEyeMakeup"`` (1-based; label = index - 1);
    ``trainlist0{fold}.txt`` has ``"ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1"`` and
    ``testlist0{fold}.txt`` only the path, whose folder gives the class (matched case
    insensitively: the official lists spell ``HandstandPushups`` both ways). Videos are
    ``root/<Class>/<file>.avi``.

    Args:
        root: Folder with one sub-folder of videos per class.
        annotations: The ``ucfTrainTestlist`` folder.
        split: ``"train"`` or ``"test"``.
        fold: Official split 1, 2 or 3.

    Returns:
        ``(samples, classes)``.

    Raises:
        FileNotFoundError: If an annotation file is missing.
        ValueError: On a malformed line (the file and line are named) or bad split/fold.
    """
    _check_split(split, fold)
    root, annotations = Path(root), Path(annotations)
    class_file = annotations / "classInd.txt"
    classes: list[str] = []
    for number, line in enumerate(_lines(class_file), 1):
        parts = line.split()
        if len(parts) != 2 or not parts[0].isdigit() or int(parts[0]) != len(classes) + 1:
            raise ValueError(f"{class_file}:{number}: expected '<index> <ClassName>', got {line!r}")
        classes.append(parts[1])
    by_folder = {name.lower(): i for i, name in enumerate(classes)}
    list_file = annotations / f"{split}list0{fold}.txt"
    samples: Samples = []
    for number, line in enumerate(_lines(list_file), 1):
        parts = line.split()
        folder = parts[0].replace("\\", "/").split("/")[0].lower()
        if len(parts) == 2 and parts[1].isdigit():
            label = int(parts[1]) - 1
        elif len(parts) == 1 and folder in by_folder:
            label = by_folder[folder]
        else:
            raise ValueError(f"{list_file}:{number}: cannot parse {line!r}")
        if not 0 <= label < len(classes):
            raise ValueError(f"{list_file}:{number}: label {label + 1} not in {class_file}")
        samples.append((root / parts[0], label))
    return samples, classes


def read_hmdb51(
    root: str | os.PathLike[str],
    annotations: str | os.PathLike[str],
    split: str = "train",
    fold: int = 1,
) -> tuple[Samples, list[str]]:
    """Parse HMDB51's ``testTrainMulti_7030_splits`` folder (Kuehne et al., 2011).

    One file per class and fold, ``<class>_test_split{fold}.txt``, with lines
    ``"<video>.avi <id>"``: 1 = train, 2 = test, 0 = unused. Classes are the sorted class names;
    videos are ``root/<class>/<video>.avi``.

    Args:
        root: Folder with one sub-folder of videos per class.
        annotations: The ``testTrainMulti_7030_splits`` folder.
        split: ``"train"`` (id 1) or ``"test"`` (id 2).
        fold: Official split 1, 2 or 3.

    Returns:
        ``(samples, classes)``.

    Raises:
        FileNotFoundError: If the folder has no split file for ``fold``.
        ValueError: On a malformed line (the file and line are named) or bad split/fold.
    """
    _check_split(split, fold)
    root, annotations = Path(root), Path(annotations)
    suffix = f"_test_split{fold}.txt"
    files = sorted(annotations.glob(f"*{suffix}")) if annotations.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no '*{suffix}' split files in {annotations}")
    classes = [f.name[: -len(suffix)] for f in files]
    wanted = "1" if split == "train" else "2"
    samples: Samples = []
    for label, split_file in enumerate(files):
        for number, line in enumerate(_lines(split_file), 1):
            parts = line.split()
            if len(parts) != 2 or parts[1] not in ("0", "1", "2"):
                raise ValueError(f"{split_file}:{number}: expected '<video> <0|1|2>', got {line!r}")
            if parts[1] == wanted:
                samples.append((root / classes[label] / parts[0], label))
    return samples, classes


def _scan_videos(root: Path, max_depth: int = 3) -> dict[str, Path]:
    """Map file stem -> path for every video under ``root`` (up to ``max_depth`` levels)."""
    found: dict[str, Path] = {}
    base_depth = len(root.parts)
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        if len(Path(folder).parts) - base_depth >= max_depth - 1:
            dirs.clear()
        for name in sorted(files):
            stem, ext = os.path.splitext(name)
            if ext.lower() in VIDEO_EXTENSIONS:
                found.setdefault(stem, Path(folder) / name)
    return found


def read_kinetics(
    root: str | os.PathLike[str],
    csv_file: str | os.PathLike[str],
    split: str | None = None,
    classes: list[str] | None = None,
) -> tuple[Samples, list[str], list[Path]]:
    """Parse a Kinetics-400 / Mini-Kinetics-200 annotation CSV (Kay et al., 2017).

    Header ``label,youtube_id,time_start,time_end,split[,is_cc]``; the video of a row is named
    ``<youtube_id>_<time_start:06d>_<time_end:06d>.mp4`` (any video extension is accepted) and
    is looked up anywhere up to two folders under ``root``: flat ``root/<file>``,
    ``root/<label>/<file>``, ``root/<split>/<file>`` or ``root/<split>/<label>/<file>`` (one scan
    of ``root``, so label folders may use spaces or underscores).

    Args:
        root: Folder holding the videos.
        csv_file: Annotation CSV.
        split: Keep only rows whose ``split`` column equals this (``None``: all rows).
        classes: Class names in label order; default: sorted labels of the whole CSV, so the
            indices do not depend on which videos are present.

    Returns:
        ``(samples, classes, missing)`` where ``missing`` lists the expected paths
        (``root/<label>/<file>.mp4``) of rows whose video was not found.

    Raises:
        FileNotFoundError: If ``csv_file`` or ``root`` is missing.
        ValueError: On a missing column or an unknown label (file and line named).
    """
    root, csv_file = Path(root), Path(csv_file)
    if not csv_file.is_file():
        raise FileNotFoundError(f"Kinetics annotation CSV not found: {csv_file}")
    if not root.is_dir():
        raise FileNotFoundError(f"Kinetics video folder not found: {root}")
    with csv_file.open(newline="") as handle:
        reader = csv.DictReader(handle)
        needed = {"label", "youtube_id", "time_start", "time_end"}
        absent = needed - set(reader.fieldnames or [])
        if absent:
            raise ValueError(f"{csv_file}: missing column(s) {sorted(absent)}")
        rows = list(reader)
    if classes is None:
        classes = sorted({row["label"] for row in rows})
    index = {name: i for i, name in enumerate(classes)}
    videos = _scan_videos(root)
    samples: Samples = []
    missing: list[Path] = []
    for number, row in enumerate(rows, 2):
        if split is not None and row.get("split") != split:
            continue
        if row["label"] not in index:
            raise ValueError(f"{csv_file}:{number}: label {row['label']!r} not in classes")
        try:
            start, end = int(float(row["time_start"])), int(float(row["time_end"]))
        except ValueError as err:
            raise ValueError(f"{csv_file}:{number}: bad time_start/time_end") from err
        stem = f"{row['youtube_id']}_{start:06d}_{end:06d}"
        path = videos.get(stem)
        if path is None:
            missing.append(root / row["label"] / f"{stem}.mp4")
        else:
            samples.append((path, index[row["label"]]))
    return samples, classes, missing


_HIDDEN = re.compile(r"^[._]")


def read_video_folder(root: str | os.PathLike[str]) -> tuple[Samples, list[str]]:
    """List ``root/<class>/<video>`` files: classes are the sorted sub-folder names.

    Raises:
        FileNotFoundError: If ``root`` is not a folder.
        ValueError: If it holds no video.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"video folder not found: {root}")
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not _HIDDEN.match(d.name))
    samples: Samples = []
    for label, name in enumerate(classes):
        for path in sorted((root / name).rglob("*")):
            if path.suffix.lower() in VIDEO_EXTENSIONS and path.is_file():
                samples.append((path, label))
    if not samples:
        raise ValueError(f"no video ({', '.join(VIDEO_EXTENSIONS)}) under {root}/<class>/")
    return samples, classes
