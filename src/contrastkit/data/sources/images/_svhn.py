"""SVHN (Street View House Numbers, cropped digits) reader for the official ``.mat`` files.

On-disk format (http://ufldl.stanford.edu/housenumbers/, "Format 2"): ``{split}_32x32.mat``
holds ``X`` of shape ``(32, 32, 3, N)`` uint8 (H, W, C, N) and ``y`` of shape ``(N, 1)`` with
labels 1..10, where 10 stands for the digit 0 (mapped to 0 here, so label == digit).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ._common import ArrayImages, check_split, files_fingerprint
from ._download import download as _download
from ._download import download_command

_BASE = "http://ufldl.stanford.edu/housenumbers/"
_MD5 = {
    "train": "e26dedcc434d2e4c54c9b2d4a06d8373",
    "test": "eb5a983be6a315427106f1b164d9cef3",
    "extra": "a93ce644f1a588dc4d68dda5feec44a7",
}


class SVHN(ArrayImages):
    """SVHN cropped digits: 73,257 train, 26,032 test (and 531,131 extra) 32x32 RGB images.

    Args:
        root: folder holding ``train_32x32.mat`` / ``test_32x32.mat`` / ``extra_32x32.mat``.
        split: ``"train"``, ``"test"`` or ``"extra"``.
        download: download the split's file (MD5-checked) into ``root`` when missing.
    """

    def __init__(self, root: str | os.PathLike[str], split: str = "train", download: bool = False):
        check_split(split, ("train", "test", "extra"), "SVHN")
        self.root = Path(root)
        self.split = split
        name = f"{split}_32x32.mat"
        self.path = self.root / name
        if not self.path.is_file():
            if not download:
                raise FileNotFoundError(
                    f"SVHN: missing {self.path}. Download {_BASE}{name} (MD5 {_MD5[split]}) "
                    f"into {self.root}, or run: "
                    f"{download_command('SVHN', self.root, split=split)}"
                )
            _download(_BASE + name, self.path, _MD5[split])
        images, labels = _load_mat(self.path)
        super().__init__(images, labels, [str(d) for d in range(10)])

    def fingerprint(self) -> str:
        """Identity of the source file (name, size, mtime) and split, for caches."""
        return f"SVHN:{self.split}:" + files_fingerprint([self.path], self.root)


def _load_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    from scipy.io import loadmat  # scipy comes with scikit-learn (the `data` extra)
    from scipy.io.matlab import MatReadError

    try:
        mat = loadmat(path)
    except (MatReadError, ValueError, OSError, TypeError) as err:
        raise ValueError(f"{path}: not a readable MATLAB .mat file ({err})") from err
    if "X" not in mat or "y" not in mat:
        raise ValueError(f"{path}: expected variables 'X' and 'y', found {sorted(mat)}")
    x, y = mat["X"], mat["y"]
    if x.ndim != 4 or x.shape[:3] != (32, 32, 3):
        raise ValueError(f"{path}: 'X' must have shape (32, 32, 3, N), got {x.shape}")
    y = np.asarray(y).reshape(-1).astype(np.int64)
    if len(y) != x.shape[3]:
        raise ValueError(f"{path}: 'y' has {len(y)} labels for {x.shape[3]} images")
    if len(y) and (y.min() < 1 or y.max() > 10):
        raise ValueError(f"{path}: labels in 'y' must be in 1..10")
    images = np.ascontiguousarray(x.transpose(3, 2, 0, 1), dtype=np.uint8)
    return images, y % 10
