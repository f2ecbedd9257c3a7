"""``contrastkit data pack`` in a child process for the fault tests: with ``KILL_AFTER=N`` the
process SIGKILLs itself once N files (images of a store, or shards) are written, a kill
midway at a known moment."""

from __future__ import annotations

import os
import signal
import sys

from contrastkit.cli import main
from contrastkit.data.loading import pack

_KILL_AFTER = int(os.environ.get("KILL_AFTER", "0"))
_written = 0


def _counted(write):
    def wrapper(path, *args, **kwargs):
        global _written
        result = write(path, *args, **kwargs)
        if path.name.endswith((".png", ".jpg", ".tar")):
            _written += 1
            if _written >= _KILL_AFTER:
                os.kill(os.getpid(), signal.SIGKILL)
        return result
    return wrapper


if _KILL_AFTER:
    pack.write_bytes_atomic = _counted(pack.write_bytes_atomic)
    pack._write_shard = _counted(pack._write_shard)

if __name__ == "__main__":
    sys.exit(main(["data", "pack", *sys.argv[1:]]))
