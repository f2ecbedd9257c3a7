"""``contrastkit pretrain`` in a child process for the fault-injection tests: with
``KILL_IN_WRITE=N`` the process SIGKILLs itself after 4 KiB of its N-th checkpoint write (a kill
in the middle of writing a checkpoint, at a known moment)."""

from __future__ import annotations

import os
import signal
import sys

from contrastkit.cli import main
from contrastkit.train import callbacks

_KILL_IN_WRITE = int(os.environ.get("KILL_IN_WRITE", "0"))


class _KillingRecorder(callbacks._WriteErrorRecorder):
    started = 0

    def __init__(self, handle) -> None:
        super().__init__(handle)
        _KillingRecorder.started += 1
        self.written = 0

    def write(self, data) -> int:
        self.written += len(data)
        if _KillingRecorder.started == _KILL_IN_WRITE and self.written > 4096:
            self.handle.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return super().write(data)


if _KILL_IN_WRITE:
    callbacks._WriteErrorRecorder = _KillingRecorder  # type: ignore[misc]

if __name__ == "__main__":
    sys.exit(main(["pretrain", *sys.argv[1:]]))
