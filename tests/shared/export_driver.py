"""``contrastkit export`` killed midway, for the fault tests: one process (one import of
contrastkit) forks a child per export; each child SIGKILLs itself once it has written N files
(closed N files it opened for writing with ``os.fdopen``), a kill at a known moment.

Usage: ``python export_driver.py JOBS`` with JOBS a JSON list of ``{"argv": [OPTION, ...],
"kill_after": N}`` (the options of ``contrastkit export``); prints a JSON list of the children's
wait statuses' signal numbers (0 for a child that was not killed)."""

from __future__ import annotations

import json
import os
import signal
import sys

from contrastkit.cli import main


class _KilledAfterClose:
    """A file opened for writing; the process kills itself when the ``limit``-th one closes."""

    def __init__(self, handle, closed: list[int], limit: int) -> None:
        self.handle, self.closed, self.limit = handle, closed, limit

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.handle.close()
        self.closed[0] += 1
        if self.closed[0] >= self.limit:
            os.kill(os.getpid(), signal.SIGKILL)


def _killed_export(argv: list[str], kill_after: int) -> int:
    """The signal that ended a child running ``contrastkit export ARGV`` (0: none)."""
    pid = os.fork()
    if pid == 0:
        try:
            closed, fdopen = [0], os.fdopen

            def counting(fd, mode="r", *args, **kwargs):
                handle = fdopen(fd, mode, *args, **kwargs)
                return _KilledAfterClose(handle, closed, kill_after) if "w" in mode else handle

            os.fdopen = counting
            main(["export", *argv])
        finally:
            os._exit(1)  # never back into the parent's code
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


if __name__ == "__main__":
    jobs = json.loads(sys.argv[1])
    print(json.dumps([_killed_export(job["argv"], job["kill_after"]) for job in jobs]))
