"""Output files and folders: atomic writes with the usual file mode, one run per folder.

* :func:`temp_file_beside` makes the temporary file of an atomic write (temp file in the target's
  folder, then ``os.replace``) with the mode an ordinary ``open(path, "w")`` would give, 0o666
  minus the umask, instead of ``tempfile.mkstemp``'s 0o600, so that others on a shared machine
  read the results as they read any other file of the user.
* :func:`check_output_folder` and :func:`clear_outputs` keep each output folder to one run's
  consistent files: a non-empty folder is refused unless ``--overwrite`` is given, and
  ``--overwrite`` removes the earlier run's files and nothing else (a folder holding other files
  is refused even then, naming them).
* :class:`FolderLock` holds an exclusive lock on an output folder for a run's (or an
  evaluation's) life, so a second one on the same folder fails at once naming the holder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: File listing the unreadable input files a run or an evaluation skipped, one path per line.
SKIPPED_FILES = "skipped_files.txt"


@functools.cache
def file_mode() -> int:
    """Mode of a new file under the process's umask (0o644 with the usual umask 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def temp_file_beside(path: str | os.PathLike, suffix: str = ".tmp") -> tuple[int, str]:
    """``(fd, name)`` of a new temporary file in ``path``'s folder (created if missing), named
    ``.<name>.<random><suffix>``, with mode :func:`file_mode` (``os.replace`` keeps it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.fchmod(fd, file_mode())
    return fd, tmp


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file beside it and ``os.replace``: a
    reader sees the old file or the whole new one, never a part (the temporary file is removed
    on any error)."""
    path = Path(path)
    fd, tmp = temp_file_beside(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def escape_line(text: str) -> str:
    """``text`` on one line: backslash, newline and carriage return written ``\\\\``, ``\\n``,
    ``\\r`` (a file name may hold any of them)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def write_skipped_files(folder: Path, skipped: list[str]) -> None:
    """Write ``folder/skipped_files.txt`` (one path per line, escaped by :func:`escape_line`)
    when ``skipped`` is not empty."""
    if skipped:
        path = folder / SKIPPED_FILES
        fd, tmp = temp_file_beside(path)
        with os.fdopen(fd, "w", errors="surrogateescape") as handle:
            handle.write("".join(f"{escape_line(p)}\n" for p in skipped))
        os.replace(tmp, path)


def record_skipped(log: str | os.PathLike | None, name: str) -> None:
    """Append ``name`` (escaped, one line) to the file ``log`` (nothing when ``log`` is None).

    The channel of files skipped where the main process does not see it (a ``DataLoader``
    worker finding a corrupt video): one short append per file, so processes writing to one
    log do not mix their lines; :func:`merge_skipped` reads it back.
    """
    if log is None:
        return
    with open(log, "a", errors="surrogateescape") as handle:
        handle.write(f"{escape_line(name)}\n")


def merge_skipped(folder: Path, log: str | os.PathLike) -> list[str]:
    """Add the names of the file ``log`` (:func:`record_skipped`) that ``folder``'s
    ``skipped_files.txt`` does not list yet to it (atomically); returns them (escaped)."""
    def lines(path: Path) -> list[str]:
        if not path.is_file():
            return []
        return path.read_text(errors="surrogateescape").splitlines()

    path = folder / SKIPPED_FILES
    listed = lines(path)
    known = set(listed)
    new = list(dict.fromkeys(n for n in lines(Path(log)) if n and n not in known))
    if new:
        fd, tmp = temp_file_beside(path)
        with os.fdopen(fd, "w", errors="surrogateescape") as handle:
            handle.write("".join(f"{n}\n" for n in listed + new))
        os.replace(tmp, path)
    return new


def evaluations_folder(run: str | os.PathLike) -> Path:
    """``RUN-eval``, the folder beside the run folder ``run`` where the evaluations a finished
    pretraining suggests write (``contrastkit eval knn ... --output RUN-eval/knn``), and where
    a Hub-format export looks for them."""
    return Path(f"{run}-eval")


#: Lock file of an output folder, held (``flock``) by the run writing there; its text is the
#: holder's process id. Not a run's output: ``--overwrite`` and the emptiness check ignore it.
LOCK_FILE = ".contrastkit.lock"


class FolderInUseError(OSError):
    """Another process holds the lock of an output folder."""


class FolderLock:
    """An exclusive ``flock`` on ``folder/.contrastkit.lock`` for one run's life.

    The kernel releases the lock when its holder exits, however it exits (SIGKILL included), so
    a lock file left behind by a dead process is stale by construction and simply taken over.
    :meth:`release` removes the lock file (and the folder when it created it and it is empty).
    On a file system without ``flock`` the run goes on unlocked, with a warning.

    Args:
        folder: the output folder (created if missing).
        option: the option naming the folder, for messages.
    """

    def __init__(self, folder: str | os.PathLike, option: str = "--output") -> None:
        self.folder, self.option = Path(folder), option
        self._fd: int | None = None
        self._created = False

    def acquire(self) -> FolderLock:
        """Take the lock.

        Raises:
            FolderInUseError: when another process holds it (the message names its id).
        """
        self._created = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / LOCK_FILE
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, file_mode())
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    warnings.warn(f"{self.option} {self.folder} cannot be locked "
                                  f"({err.strerror}): nothing stops a second run there",
                                  stacklevel=2)
                    return self
                self._remove_created_folder()
                raise FolderInUseError(
                    f"{self.option} {self.folder} is in use by another contrastkit process "
                    f"(process id {holder}): wait for it to end, or choose another "
                    f"{self.option}") from None
            try:  # the holder before us may have removed the file while we opened it
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        """Remove the lock file and release the lock (does nothing when not held)."""
        if self._fd is None:
            return
        (self.folder / LOCK_FILE).unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None
        self._remove_created_folder()

    def _remove_created_folder(self) -> None:
        if self._created:
            with contextlib.suppress(OSError):
                self.folder.rmdir()  # only when empty: a failed start leaves nothing behind

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def check_output_path(path: str | os.PathLike, option: str = "--output",
                      folder: bool = True) -> Path:
    """Fail unless ``path`` is, or can become, a folder (``folder=False``: a file) because no
    file is in the way.

    Raises:
        NotADirectoryError: when ``path`` (a folder) or one of its parents is a file.
    """
    path = Path(path)
    for place in (path, *path.parents) if folder else path.parents:
        if place.exists():
            if not place.is_dir():
                where = "is a file" if place == path else f"is inside {place}, which is a file"
                raise NotADirectoryError(f"{option} {path} {where}: choose another {option}")
            break
    return path


def check_output_folder(path: str | os.PathLike, *, overwrite: bool,
                        owned: Callable[[str], bool], option: str = "--output",
                        what: str = "run") -> list[Path]:
    """Check that ``path`` may receive a new run; return what ``--overwrite`` must remove.

    Args:
        path: the output folder (it may not exist yet).
        overwrite: whether the user asked to replace an earlier run there.
        owned: whether an entry name (file or folder) is one that this kind of run writes.
        option: the command-line option naming the folder, for messages.
        what: what the folder holds (``run``, ``evaluation``), for messages.

    Returns:
        The entries of an earlier run to remove (empty when the folder is empty or new).

    Raises:
        NotADirectoryError: when ``path`` is a file or lies under one.
        FileExistsError: when the folder is not empty and ``overwrite`` is false, or when it
            holds entries that such a run does not write (never removed).
    """
    path = check_output_path(path, option)
    entries = sorted(e for e in path.iterdir() if e.name != LOCK_FILE) if path.is_dir() else []
    if not entries:
        return []
    names = ", ".join(e.name for e in entries[:5]) + (" ..." if len(entries) > 5 else "")
    if not overwrite:
        raise FileExistsError(f"{option} {path} is not empty ({names}): pass --overwrite to "
                              f"replace the {what} there, or choose another {option}")
    foreign = [e.name for e in entries if not owned(e.name)]
    if foreign:
        raise FileExistsError(
            f"{option} {path} holds files that a contrastkit {what} does not write "
            f"({', '.join(foreign[:5])}): --overwrite removes only an earlier {what}'s files; "
            f"move them away or choose another {option}")
    return entries


def clear_outputs(entries: list[Path]) -> None:
    """Remove the files and folders of an earlier run (from :func:`check_output_folder`)."""
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink(missing_ok=True)


def remove_stale_stages(path: Path) -> list[Path]:
    """Remove the staging folders beside ``path`` (``.NAME.<8 random characters>.tmp``, as
    :func:`tempfile.mkdtemp` names them) that a command killed before it moved its files into
    ``path`` left; returns them. Called with ``path`` locked: every command staging for
    ``path`` holds that lock, so no live one owns them."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp")
    stale = [e for e in path.parent.iterdir() if pattern.fullmatch(e.name) and e.is_dir()
             and not e.is_symlink()] if path.parent.is_dir() else []
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True)
    return stale


@contextmanager
def staged_folder(path: Path | None, replace: list[Path]) -> Iterator[Path | None]:
    """Yield a temporary folder beside ``path`` to write a run's files into; on success remove
    ``replace`` (the earlier run's files) and move the new files into ``path``. On failure
    the temporary folder is removed and ``path`` is left as it was. ``None``: nothing staged.
    ``path`` is locked (:class:`FolderLock`) meanwhile: a second writer fails at once.
    """
    if path is None:
        yield None
        return
    with FolderLock(path):
        remove_stale_stages(path)
        stage = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        try:
            yield stage
            clear_outputs(replace)
            for item in sorted(stage.iterdir()):
                os.replace(item, path / item.name)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
