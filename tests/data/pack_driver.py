"""``contrastkit data pack`` killed midway, for the fault tests: one process (one import of
contrastkit) forks a child per pack; each child SIGKILLs itself once N files (images of a
store, or shards) are written, a kill at a known moment.

Usage: ``python pack_driver.py JOBS`` with JOBS a JSON list of ``{"argv": [SRC, DEST, ...],
"kill_after": N}``; prints a JSON list of the children's wait statuses' signal numbers (0 for a
child that was not killed)."""

from __future__ import annotations

import json
import os
import signal
import sys

from contrastkit.cli import main
from contrastkit.data.loading import pack


def _killing_after(limit: int, write):
    written = [0]

    def wrapper(path, *args, **kwargs):
        result = write(path, *args, **kwargs)
        if path.name.endswith((".png", ".jpg", ".tar")):
            written[0] += 1
            if written[0] >= limit:
                os.kill(os.getpid(), signal.SIGKILL)
        return result
    return wrapper


def _killed_pack(argv: list[str], kill_after: int) -> int:
    """The signal that ended a child running ``contrastkit data pack ARGV`` (0: none)."""
    pid = os.fork()
    if pid == 0:
        try:
            pack.write_bytes_atomic = _killing_after(kill_after, pack.write_bytes_atomic)
            pack._write_shard = _killing_after(kill_after, pack._write_shard)
            main(["data", "pack", *argv])
        finally:
            os._exit(1)  # never back into the parent's code
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


if __name__ == "__main__":
    jobs = json.loads(sys.argv[1])
    print(json.dumps([_killed_pack(job["argv"], job["kill_after"]) for job in jobs]))
