"""Datasets of image files: a generic file list, the class-per-folder layout, flat folders of
unlabelled images, and a stratified held-out split of any of them."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch.utils.data import Dataset

from contrastkit.data.decode.images import (
    FORMATS,
    IMAGE_EXTENSIONS,
    MixedImageSizesError,
    UnreadableImageError,
    decode_at_least,
    decode_image,
    decode_scaled,
    is_image_file,
    pillow,
    quiet_bomb_warning,
    upright_size,
)
from contrastkit.outputs import escape_line

from ._common import UNLABELLED, files_fingerprint, is_hidden


class ImageFiles(Dataset):
    """Images decoded lazily from files, one ``(path, label)`` per sample.

    Args:
        samples: ``(path, label)`` pairs, in dataset order.
        classes: class names; labels index into it.
        root: folder the paths live under (for messages and fingerprints).
        skip_corrupt: when ``False`` (default) an unreadable file raises
            :class:`UnreadableImageError` naming it when the sample is read. When ``True``,
            every file is fully decoded once **up front** (in this constructor, with
            ``workers`` threads), unreadable ones are removed from ``samples`` and listed in
            ``skipped``, and a single ``UserWarning`` says how many were skipped and names the
            first few (once per process for the same files). A file that becomes unreadable
            after that check still raises when read.
        workers: threads for the up-front check.

    ``ds[i]`` returns ``(uint8 tensor (3, H, W), int)``; ``ds.skipped`` lists the paths of the
    unreadable files left out (empty without ``skip_corrupt``); ``ds.not_images`` the files of
    the folders read that are not read as images (set by :func:`scan_folder` and
    :func:`open_image_folder`: another extension, or a file beside the class folders).
    """

    def __init__(
        self,
        samples: Sequence[tuple[str, int]],
        classes: Sequence[str],
        root: str | os.PathLike[str],
        skip_corrupt: bool = False,
        workers: int = 2,
    ):
        self.root = Path(root)
        self.classes = list(classes)
        samples = [(str(p), int(y)) for p, y in samples]
        self.skipped: list[str] = []
        self.not_images: list[str] = []
        if skip_corrupt:
            samples, self.skipped = _drop_unreadable(samples, self.root, workers)
        self.samples = samples
        self.targets: list[int] = [y for _, y in samples]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        return torch.from_numpy(decode_image(path)), label

    def read_at_least(self, index: int, side: int) -> tuple[torch.Tensor, int]:
        """Item ``index`` decoded reduced as far as its shorter side stays at least ``side``
        (:func:`~contrastkit.data.decode.images.decode_at_least`: JPEGs at a DCT scale, other
        formats reduced right after decoding), for a resize to a ``side`` square: a large
        image is not held at full size."""
        path, label = self.samples[index]
        return torch.from_numpy(decode_at_least(path, side)), label

    def fingerprint(self) -> str:
        """Identity of the sample files (relative names, sizes, mtimes) and labels."""
        labels = ",".join(map(str, self.targets))
        tag = files_fingerprint([p for p, _ in self.samples], self.root)
        return f"{type(self).__name__}:{'|'.join(self.classes)}:{hash_text(labels)}:{tag}"


def hash_text(text: str) -> str:
    """Short SHA-256 of a string."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: Verdicts of :func:`_readable` by ``(path, size, mtime)``: a folder opened twice in one process
#: (the train and test parts of a held-out split) is decoded once.
_VERDICTS: dict[tuple[str, int, int], bool] = {}


def _readable(path: str) -> bool:
    try:
        stat = os.stat(path)
    except OSError:
        return False
    key = (path, stat.st_size, stat.st_mtime_ns)
    if key not in _VERDICTS:
        try:  # all the data are decoded (truncation is found), at 1/8 of the size for a JPEG
            decode_scaled(path, None, lambda h, w: 8)
            _VERDICTS[key] = True
        except (UnreadableImageError, OSError):
            _VERDICTS[key] = False
    return _VERDICTS[key]


#: ``(root, unreadable files)`` already warned about: a folder opened twice in one process (the
#: train and test parts of a held-out split, an evaluation's two splits) warns once.
_WARNED: set[tuple[str, tuple[str, ...]]] = set()


def _drop_unreadable(
    samples: list[tuple[str, int]], root: Path, workers: int
) -> tuple[list[tuple[str, int]], list[str]]:
    """The readable samples, and the paths of the unreadable ones (one warning for them, once
    per process)."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        ok = list(pool.map(_readable, [p for p, _ in samples], chunksize=64))
    bad = [p for (p, _), good in zip(samples, ok, strict=True) if not good]
    if bad and (str(root), tuple(bad)) not in _WARNED:
        _WARNED.add((str(root), tuple(bad)))
        shown = ", ".join(escape_line(os.path.relpath(p, root)) for p in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        warnings.warn(
            f"skipped {len(bad)} unreadable image file(s) of {len(samples)} under {root}: "
            f"{shown}{more}",
            UserWarning,
            stacklevel=3,
        )
    return [s for s, good in zip(samples, ok, strict=True) if good], bad


def list_class_dirs(root: Path) -> list[str]:
    """Sorted names of the non-hidden sub-folders of ``root``.

    Raises:
        NotADirectoryError: when ``root`` is a file.
        FileNotFoundError: when it does not exist.
    """
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"image folder {root} is a file, not a folder (of one "
                                 "sub-folder of images per class)")
    if not root.is_dir():
        raise FileNotFoundError(f"image folder {root} does not exist")
    return sorted(e.name for e in os.scandir(root) if e.is_dir() and not is_hidden(e.name))


def list_images(folder: Path, extensions: tuple[str, ...] = IMAGE_EXTENSIONS,
                exclude: frozenset[str] = frozenset(),
                seen_files: set[str] | None = None,
                others: list[str] | None = None) -> list[str]:
    """Sorted paths of the image files under ``folder`` (recursively).

    Hidden files and folders (names starting with ``.``: macOS's ``._name.jpg`` resource forks,
    thumbnail caches) are not read, as hidden class folders are not.
    Symbolic links to folders are followed, but each real folder is walked once and each real
    file listed once (under the first path that reaches it), so a link loop or two links to one
    folder cannot repeat images (and put copies on both sides of a train / test split).

    Args:
        folder: the folder to walk.
        extensions: accepted file extensions (case-insensitive).
        exclude: real paths of folders not to enter (the other classes' folders, the root).
        seen_files: real paths of files already listed (updated): shared across calls, a file
            is listed once in all of them.
        others: when given, the paths of the files found that are not images (another
            extension, or hidden) are appended to it, and those of the hidden folders.
    """
    found, seen_dirs = [], set(exclude)
    seen_files = set() if seen_files is None else seen_files
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen_dirs:
            dirnames[:] = []
            continue
        seen_dirs.add(real)
        hidden = sorted(d for d in dirnames if is_hidden(d))
        dirnames[:] = sorted(d for d in dirnames if not is_hidden(d))
        if others is not None:
            others.extend(os.path.join(dirpath, d) for d in hidden)
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            target = os.path.realpath(path) if os.path.islink(path) else os.path.join(real, name)
            if is_hidden(name) or not is_image_file(name, extensions):
                if others is not None:
                    others.append(path)
            elif target not in seen_files:
                seen_files.add(target)
                found.append(path)
    return found


def scan_folder(
    root: str | os.PathLike[str],
    classes: Sequence[str] | None = None,
    extensions: tuple[str, ...] = IMAGE_EXTENSIONS,
    others: list[str] | None = None,
) -> tuple[list[tuple[str, int]], list[str]]:
    """List ``root/<class>/**/<image>`` files with their labels.

    Links inside a class folder to the root or to another class's folder are not followed, and
    a file is listed once over all classes (see :func:`list_images`).

    Args:
        root: folder with one sub-folder per class.
        classes: optional subset of class folders, in label order; otherwise all sub-folders,
            sorted by name.
        extensions: accepted file extensions (case-insensitive); other files are not read.
        others: when given, the files not read are appended to it: those of the class folders
            with another extension, and the files directly in ``root`` (beside the classes).

    Returns:
        ``(samples, classes)`` with ``samples`` sorted by class, then path.

    Raises:
        FileNotFoundError: ``root`` is missing.
        ValueError: no class folder, a requested class is absent, or a class has no image.
    """
    root = Path(root)
    present = list_class_dirs(root)
    if classes is None:
        if not present:
            raise ValueError(f"image folder {root} has no class sub-folders")
        classes = present
    else:
        classes = list(classes)
        if len(set(classes)) != len(classes):
            raise ValueError(f"classes: duplicate names in {classes}")
        missing = sorted(set(classes) - set(present))
        if missing:
            raise ValueError(
                f"classes: {len(missing)} requested class folder(s) not in {root}: "
                f"{missing[:10]}{' ...' if len(missing) > 10 else ''}"
            )
    samples: list[tuple[str, int]] = []
    class_dirs = {os.path.realpath(root / name) for name in classes} | {os.path.realpath(root)}
    seen_files: set[str] = set()
    if others is not None:
        others.extend(sorted(e.path for e in os.scandir(root) if not e.is_dir()))
    for label, name in enumerate(classes):
        own = os.path.realpath(root / name)
        files = list_images(root / name, extensions, frozenset(class_dirs - {own}), seen_files,
                            others)
        if not files:
            raise ValueError(
                f"class folder {root / name} contains no image file ({', '.join(extensions)})"
            )
        samples.extend((f, label) for f in files)
    return samples, list(classes)


class ImageFolder(ImageFiles):
    """Images in ``root/<class_name>/**/*`` with an extension of
    :data:`~contrastkit.data.decode.images.IMAGE_EXTENSIONS` (case-insensitive).

    Classes are the sub-folder names sorted alphabetically (label = position), or the
    ``classes`` given, in that order. Images are decoded with Pillow to RGB uint8 ``(3, H, W)``.

    Args:
        root: the folder.
        classes: optional selection of class folders; naming an absent one is a ``ValueError``.
        skip_corrupt: see :class:`ImageFiles` (up-front full decode, one warning).
        extensions: accepted extensions.
        workers: threads for the ``skip_corrupt`` check.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        classes: Sequence[str] | None = None,
        skip_corrupt: bool = False,
        extensions: tuple[str, ...] = IMAGE_EXTENSIONS,
        workers: int = 2,
    ):
        others: list[str] = []
        samples, names = scan_folder(root, classes, extensions, others)
        super().__init__(samples, names, root, skip_corrupt=skip_corrupt, workers=workers)
        self.not_images = others


def open_image_folder(
    root: str | os.PathLike[str], skip_corrupt: bool = False, workers: int = 2
) -> ImageFiles:
    """An :class:`ImageFolder` when ``root`` has class sub-folders, else the images directly
    in ``root`` as an unlabelled dataset (label ``-1``, no ``classes``).

    Raises:
        FileNotFoundError: ``root`` is missing.
        ValueError: ``root`` has neither class sub-folders nor images.
    """
    root = Path(root)
    if list_class_dirs(root):
        return ImageFolder(root, skip_corrupt=skip_corrupt, workers=workers)
    others: list[str] = []
    files = list_images(root, others=others)
    if not files:
        raise ValueError(f"image folder {root} has neither class sub-folders nor image files "
                         f"({', '.join(IMAGE_EXTENSIONS)})")
    flat = ImageFiles([(f, UNLABELLED) for f in files], [], root, skip_corrupt=skip_corrupt,
                      workers=workers)
    flat.not_images = others
    return flat


def hold_out(files: ImageFiles, fraction: float, seed: int, part: str) -> ImageFiles:
    """One part of a stratified, seeded split of ``files`` into ``train`` and ``test``.

    Within each label (the unlabelled ``-1`` counts as one), the samples in dataset order are
    permuted by ``torch.randperm`` with a generator seeded ``seed`` (labels visited in
    increasing order); the first ``n_test = round(fraction * n)`` go to ``test``, clipped to
    ``[1, n - 1]`` so that a label with ``n >= 2`` samples is in both parts (a label with one
    sample stays in ``train``). The two parts are disjoint and together hold every sample; the
    same files, fraction and seed give the same split.

    Args:
        files: the images to split.
        fraction: share of each label held out for ``test``, ``0 < fraction < 1``.
        seed: seed of the permutation.
        part: ``"train"`` or ``"test"``.

    Returns:
        An :class:`ImageFiles` of that part (``split`` attribute = ``part``, ``skipped`` and
        ``not_images`` as in ``files``).

    Raises:
        ValueError: for a fraction outside (0, 1) or another part name.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"test fraction must be between 0 and 1 (exclusive), got {fraction}")
    if part not in ("train", "test"):
        raise ValueError(f"a held-out split has parts 'train' and 'test', not {part!r}")
    generator = torch.Generator().manual_seed(seed)
    test: set[int] = set()
    for label in sorted(set(files.targets)):
        members = [i for i, y in enumerate(files.targets) if y == label]
        order = torch.randperm(len(members), generator=generator).tolist()
        n_test = min(len(members) - 1, max(1, round(fraction * len(members))))
        test.update(members[j] for j in order[:n_test])
    keep = [s for i, s in enumerate(files.samples) if (i in test) == (part == "test")]
    subset = ImageFiles(keep, files.classes, files.root)
    subset.skipped, subset.not_images = list(files.skipped), list(files.not_images)
    subset.split = part  # type: ignore[attr-defined]
    return subset


def check_headers(files: ImageFiles, same_size: bool = True) -> None:
    """Read the header of every file of ``files`` (not its pixels: a few seconds for 100,000
    files) and fail before any training or evaluation starts when one is not an image, or,
    with ``same_size``, when two have different upright sizes (after their EXIF orientation). A
    file whose header is fine but whose data is truncated is still caught when it is decoded.

    Raises:
        UnreadableImageError: naming the first file that is not an image.
        MixedImageSizesError: naming two files of different sizes.
    """
    image_mod = pillow()
    first: tuple[str, tuple[int, int]] | None = None
    for path, _ in files.samples:
        try:
            with quiet_bomb_warning(image_mod), image_mod.open(path) as img:
                height, width = upright_size(img)
                size = (width, height)
        except (OSError, SyntaxError, ValueError, image_mod.DecompressionBombError) as err:
            raise UnreadableImageError(
                f"{path}: unreadable image (expected a decodable {FORMATS} file): {err}"
            ) from None
        if first is None:
            first = (path, size)
        elif same_size and size != first[1]:
            raise MixedImageSizesError(
                f"images of different sizes: {first[0]} is {first[1][0]}x{first[1][1]}, {path} "
                f"is {size[0]}x{size[1]} (width x height)")
