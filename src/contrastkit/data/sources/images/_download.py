"""Download a file with MD5 verification, written atomically."""

from __future__ import annotations

import hashlib
import os
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

from contrastkit.outputs import temp_file_beside


def md5_of(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex MD5 digest of a file, read in chunks."""
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def download_command(dataset: str, root: str | os.PathLike[str], **kwargs: str) -> str:
    """A shell command that downloads ``dataset`` (a class of
    ``contrastkit.data.sources.images.datasets``) into ``root``, for error messages:
    ``python -c '...CIFAR10("data", download=True)'``."""
    extra = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    call = f'{dataset}("{root}"{extra}, download=True)'
    return f"python -c 'from contrastkit.data.sources.images.datasets import {dataset}; {call}'"


def download(
    url: str, dest: str | os.PathLike[str], md5: str | None, timeout: float = 60.0
) -> Path:
    """Download ``url`` to ``dest`` and check its MD5; keep an existing file that matches.

    The data is streamed to a temporary file in the destination folder and moved into place
    with ``os.replace`` only after the checksum matched, so an interrupted or corrupt download
    never leaves a half-written ``dest``.

    Args:
        url: source address (``https://``, ``http://`` or ``file://``).
        dest: destination file path.
        md5: expected hex MD5 digest, or ``None`` to skip verification.
        timeout: socket timeout in seconds.

    Returns:
        ``dest`` as a ``Path``.

    Raises:
        ConnectionError: the URL could not be fetched (offline, host down).
        ValueError: the downloaded data does not have the expected MD5.
    """
    dest = Path(dest)
    if dest.is_file() and (md5 is None or md5_of(dest) == md5):
        return dest
    fd, tmp = temp_file_beside(dest, suffix=".part")
    h = hashlib.md5(usedforsecurity=False)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    while block := resp.read(1 << 20):
                        h.update(block)
                        out.write(block)
            except (urllib.error.URLError, OSError) as err:
                raise ConnectionError(
                    f"could not download {url} to {dest}: {err}. Without network access, "
                    f"fetch the file elsewhere and place it at {dest}"
                ) from err
        if md5 is not None and h.hexdigest() != md5:
            raise ValueError(
                f"downloaded {url} has MD5 {h.hexdigest()}, expected {md5}; file not kept"
            )
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return dest


def extract_tar(archive: str | os.PathLike[str], dest: str | os.PathLike[str]) -> None:
    """Extract a (gzipped) tar archive into ``dest``, refusing members outside it."""
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
