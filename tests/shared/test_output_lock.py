"""Issue 18 item 2: one process per output folder (``contrastkit.outputs.FolderLock``)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

from contrastkit.outputs import LOCK_FILE, FolderInUseError, FolderLock, check_output_folder


def _holder(folder) -> subprocess.Popen:
    """Another process holding the folder's lock the way contrastkit does (flock, its pid)."""
    code = ("import fcntl, os, sys, time\n"
            f"fd = os.open({str(folder / LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, str(os.getpid()).encode())\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_holder_fails_at_once_naming_the_first(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    proc = _holder(folder)
    try:
        with pytest.raises(FolderInUseError, match=rf"--output {folder} is in use by another "
                                                   rf"contrastkit process \(process id "
                                                   rf"{proc.pid}\)"):
            FolderLock(folder).acquire()
    finally:
        proc.kill()
        proc.wait()
    with FolderLock(folder):  # the holder died: its lock file is stale and taken over
        assert (folder / LOCK_FILE).read_text().strip() == str(os.getpid())
    assert not (folder / LOCK_FILE).exists()


def test_in_one_process_too_and_released_on_every_exit(tmp_path):
    folder = tmp_path / "out"
    first = FolderLock(folder).acquire()
    with pytest.raises(FolderInUseError):
        FolderLock(folder).acquire()
    first.release()
    with pytest.raises(RuntimeError), FolderLock(folder):
        raise RuntimeError("boom")
    FolderLock(folder).acquire().release()  # free again after the exception
    assert not folder.exists()  # it created the folder and left it empty: removed


def test_the_lock_file_is_not_a_run_file(tmp_path):
    folder = tmp_path / "out"
    with FolderLock(folder):
        assert check_output_folder(folder, overwrite=False, owned=lambda n: False) == []
        lock = os.open(folder / LOCK_FILE, os.O_RDONLY)
        with pytest.raises(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(lock)
