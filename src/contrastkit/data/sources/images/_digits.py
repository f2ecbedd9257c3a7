"""A tiny real image dataset shipped with scikit-learn, for offline tests and demos."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ._common import ArrayImages, check_split

_TEST_FRACTION = 0.2
_SPLIT_SEED = 0


@lru_cache(maxsize=1)
def _load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 8x8 images (values 0..16) and labels, loaded once per process (read-only)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("Digits needs scikit-learn: pip install 'contrastkit[data]'") from err
    bunch = load_digits()
    images = np.asarray(bunch.images)
    labels = np.asarray(bunch.target, dtype=np.int64)
    images.flags.writeable = labels.flags.writeable = False
    return images, labels


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of the test samples: ``ceil(test_fraction * n_c)`` random ones per class.

    Deterministic for a given ``seed`` (``numpy.random.default_rng``), independent of the
    scikit-learn version.
    """
    rng = np.random.default_rng(seed)
    test = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        k = int(np.ceil(test_fraction * len(members)))
        test[rng.choice(members, size=k, replace=False)] = True
    return test


class Digits(ArrayImages):
    """The UCI handwritten digits of ``sklearn.datasets.load_digits``: 1,797 real 8x8 images.

    Pixel values 0..16 are scaled to 0..255 (``round(v * 255 / 16)``) and the gray channel is
    replicated to **3 channels**, so images are uint8 ``(3, 8, 8)`` like those of the RGB
    datasets and go through the same augmentation pipelines. Labels are the digits 0..9.

    Args:
        split: ``"train"`` (80 %), ``"test"`` (20 %: ``ceil(0.2 n_c)`` images of every class,
            chosen with ``numpy.random.default_rng(0)``) or ``"all"``. Both splits keep the
            original order; the split is the same on every call and machine.
    """

    def __init__(self, split: str = "train"):
        check_split(split, ("train", "test", "all"), "Digits")
        self.split = split
        gray, labels = _load_digits()
        scaled = np.rint(gray * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
        images = np.repeat(scaled[:, None], 3, axis=1)
        if split != "all":
            test = stratified_split(labels, _TEST_FRACTION, _SPLIT_SEED)
            keep = test if split == "test" else ~test
            images, labels = images[keep], labels[keep]
        super().__init__(np.ascontiguousarray(images), labels, [str(d) for d in range(10)])

    def fingerprint(self) -> str:
        """Identity of the data (fixed with scikit-learn) and split, for caches."""
        return f"Digits:{self.split}:{_TEST_FRACTION}:{_SPLIT_SEED}"
