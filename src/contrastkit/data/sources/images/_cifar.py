"""CIFAR-10 and CIFAR-100 readers for the official "python version" files (Krizhevsky, 2009).

On-disk format (https://www.cs.toronto.edu/~kriz/cifar.html): each batch file is a Python-2
pickle of a dict with ``data`` (``N x 3072`` uint8, row-major, the 1024 red values first, then
green, then blue, each a 32x32 image row by row) and the labels (``labels`` for CIFAR-10,
``fine_labels``/``coarse_labels`` for CIFAR-100). Keys are ``str`` or ``bytes`` depending on how
the file is unpickled; both are accepted.

No code runs from a data set: the batch files are read by :class:`_BatchUnpickler`, which
builds numpy arrays and plain values and refuses any other callable a pickle names (the way a
malicious file runs code), as checkpoints are read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._common import ArrayImages, check_split, files_fingerprint
from ._download import download as _download
from ._download import download_command, extract_tar

_CIFAR10 = {
    "folder": "cifar-10-batches-py",
    "archive": "cifar-10-python.tar.gz",
    "url": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    "md5": "c58f30108f718f92721af3b95e74349a",
    "train": [f"data_batch_{i}" for i in range(1, 6)],
    "test": ["test_batch"],
    "meta": "batches.meta",
}
_CIFAR100 = {
    "folder": "cifar-100-python",
    "archive": "cifar-100-python.tar.gz",
    "url": "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
    "md5": "eb9058c3a382ffc7106e4002c42a8d85",
    "train": ["train"],
    "test": ["test"],
    "meta": "meta",
}


def _str_keys(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a pickled dict, got {type(obj).__name__}")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}


def _names(values: Sequence[Any]) -> list[str]:
    return [v.decode("latin1") if isinstance(v, bytes) else str(v) for v in values]


class _Source:
    """Reads named members from the extracted folder or directly from the .tar.gz archive."""

    def __init__(self, root: Path, spec: dict[str, Any], download: bool, dataset: str):
        self.spec = spec
        folder = root / spec["folder"]
        if not folder.is_dir() and root.name == spec["folder"]:
            folder = root
        archive = root / spec["archive"]
        if not folder.is_dir() and not archive.is_file() and download:
            _download(spec["url"], archive, spec["md5"])
            with tempfile.TemporaryDirectory(dir=root) as tmp:
                extract_tar(archive, tmp)
                shutil.move(os.path.join(tmp, spec["folder"]), folder)
        if folder.is_dir():
            self.folder: Path | None = folder
            self.archive: Path | None = None
        elif archive.is_file():
            self.folder, self.archive = None, archive
        else:
            members = ", ".join(spec["train"] + spec["test"] + [spec["meta"]])
            raise FileNotFoundError(
                f"{dataset}: found neither {folder} nor {archive}. Download {spec['url']} "
                f"(MD5 {spec['md5']}) and place it in {root} (it is read directly, or extract it "
                f"there to get {spec['folder']}/ with {members}), or run: "
                f"{download_command(dataset, root)}"
            )

    def paths(self) -> list[Path]:
        """Files the data comes from (for fingerprints)."""
        if self.archive is not None:
            return [self.archive]
        assert self.folder is not None
        names = self.spec["train"] + self.spec["test"] + [self.spec["meta"]]
        return [self.folder / n for n in names if (self.folder / n).exists()]

    def load(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Unpickle the named members; errors name the file and what was expected."""
        out: dict[str, dict[str, Any]] = {}
        if self.folder is not None:
            for name in names:
                path = self.folder / name
                if not path.is_file():
                    raise FileNotFoundError(f"missing CIFAR file {path}")
                out[name] = _unpickle(path.read_bytes(), str(path))
            return out
        assert self.archive is not None
        wanted = {f"{self.spec['folder']}/{n}": n for n in names}
        try:
            with tarfile.open(self.archive, "r:*") as tar:
                for member in tar:
                    if member.name in wanted and member.isfile():
                        f = tar.extractfile(member)
                        assert f is not None
                        where = f"{self.archive}:{member.name}"
                        out[wanted[member.name]] = _unpickle(f.read(), where)
        except (tarfile.TarError, EOFError, OSError) as err:
            raise ValueError(f"{self.archive}: unreadable or truncated archive ({err})") from err
        missing = [m for m, n in wanted.items() if n not in out]
        if missing:
            raise FileNotFoundError(f"{self.archive}: archive lacks members {missing}")
        return out


#: The only callables a CIFAR batch file's pickle may name: numpy's array and dtype
#: reconstruction (``numpy.core`` before numpy 2, ``numpy._core`` since) and the codec that
#: Python 3 pickles of ``bytes`` at protocol 2 use. Each builds data and runs nothing else.
_ALLOWED_GLOBALS = frozenset({
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
})


class _BatchUnpickler(pickle.Unpickler):
    """An unpickler for CIFAR batch files that resolves only :data:`_ALLOWED_GLOBALS`."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise _RefusedGlobal(f"{module}.{name}")
        return super().find_class(module, name)


class _RefusedGlobal(pickle.UnpicklingError):
    """A pickle named a callable outside :data:`_ALLOWED_GLOBALS`."""


def _unpickle(data: bytes, where: str) -> dict[str, Any]:
    try:
        obj = _BatchUnpickler(io.BytesIO(data), encoding="latin1").load()
    except _RefusedGlobal as err:
        raise ValueError(
            f"{where}: refused: not a CIFAR batch file, its pickle calls {err} (a data set may "
            "hold only arrays, labels and names; nothing in it is run)"
        ) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as err:
        raise ValueError(
            f"{where}: not a valid CIFAR pickle (truncated or corrupt: {err})"
        ) from err
    return _str_keys(obj, where)


def _images(batch: dict[str, Any], where: str) -> np.ndarray:
    data = batch.get("data")
    if not isinstance(data, np.ndarray) or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        shape = getattr(data, "shape", type(data).__name__)
        raise ValueError(f"{where}: 'data' must be an (N, 3072) uint8 array, got {shape}")
    return np.asarray(data, dtype=np.uint8).reshape(-1, 3, 32, 32)


def _labels(batch: dict[str, Any], key: str, n: int, n_classes: int, where: str) -> np.ndarray:
    if key not in batch:
        raise ValueError(f"{where}: missing key {key!r}")
    labels = np.asarray(batch[key], dtype=np.int64).reshape(-1)
    if len(labels) != n:
        raise ValueError(f"{where}: {len(labels)} labels in {key!r} for {n} images")
    if len(labels) and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(f"{where}: labels in {key!r} outside [0, {n_classes})")
    return labels


def _read(
    source: _Source, split: str, label_key: str, names_key: str
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    spec = source.spec
    files = spec[split]
    batches = source.load([*files, spec["meta"]])
    meta_where = f"{spec['folder']}/{spec['meta']}"
    if names_key not in batches[spec["meta"]]:
        raise ValueError(f"{meta_where}: missing key {names_key!r}")
    classes = _names(batches[spec["meta"]][names_key])
    images, labels = [], []
    for name in files:
        where = f"{spec['folder']}/{name}"
        imgs = _images(batches[name], where)
        images.append(imgs)
        labels.append(_labels(batches[name], label_key, len(imgs), len(classes), where))
    return np.concatenate(images), np.concatenate(labels), classes


class CIFAR10(ArrayImages):
    """CIFAR-10: 50,000 train / 10,000 test 32x32 RGB images in 10 classes.

    Args:
        root: folder holding ``cifar-10-batches-py/`` (``data_batch_1..5``, ``test_batch``,
            ``batches.meta``) or the archive ``cifar-10-python.tar.gz`` (read directly,
            without extracting). ``root`` may also be the ``cifar-10-batches-py`` folder itself.
        split: ``"train"`` or ``"test"``.
        download: when no data is found, download the official archive (MD5-checked) into
            ``root`` and extract it.
    """

    _spec = _CIFAR10

    def __init__(self, root: str | os.PathLike[str], split: str = "train", download: bool = False):
        check_split(split, ("train", "test"), type(self).__name__)
        self.root = Path(root)
        self.split = split
        self._source = _Source(self.root, self._spec, download, type(self).__name__)
        images, labels, classes = _read(self._source, split, "labels", "label_names")
        super().__init__(images, labels, classes)

    def fingerprint(self) -> str:
        """Identity of the source files (names, sizes, mtimes) and split, for caches."""
        paths = self._source.paths()
        return f"{type(self).__name__}:{self.split}:" + files_fingerprint(paths, self.root)


class CIFAR100(CIFAR10):
    """CIFAR-100: 50,000 train / 10,000 test 32x32 RGB images, 100 fine / 20 coarse classes.

    Args:
        root: folder holding ``cifar-100-python/`` (``train``, ``test``, ``meta``) or the
            archive ``cifar-100-python.tar.gz`` (read directly), or that folder itself.
        split: ``"train"`` or ``"test"``.
        label: ``"fine"`` (100 classes) or ``"coarse"`` (20 superclasses).
        download: download the official archive (MD5-checked) when no data is found.
    """

    _spec = _CIFAR100

    def __init__(
        self,
        root: str | os.PathLike[str],
        split: str = "train",
        label: str = "fine",
        download: bool = False,
    ):
        check_split(split, ("train", "test"), "CIFAR100")
        if label not in ("fine", "coarse"):
            raise ValueError(f"CIFAR100: label={label!r} is not 'fine' or 'coarse'")
        self.root = Path(root)
        self.split = split
        self.label = label
        self._source = _Source(self.root, self._spec, download, "CIFAR100")
        images, labels, classes = _read(
            self._source, split, f"{label}_labels", f"{label}_label_names"
        )
        ArrayImages.__init__(self, images, labels, classes)

    def fingerprint(self) -> str:
        """Identity of the source files, split and label granularity, for caches."""
        return f"{super().fingerprint()}:{self.label}"
