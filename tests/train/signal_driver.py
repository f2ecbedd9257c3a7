"""Run by ``torchrun`` in each process of the DDP SIGTERM test (``test_ddp_signals.py``):
``signal_driver.py FOLDER TRIALS ARGS...``.

It trains ``ARGS`` uninterrupted into ``FOLDER/straight``, then runs ``contrastkit pretrain
ARGS --output FOLDER/run`` ``TRIALS`` times, each after the first with ``--resume last``; the
test stops each run with SIGTERM. Before trial ``k`` it writes ``start-k-r<rank>`` (its
process id) in ``FOLDER``, after it ``trial-k-r<rank>.json``: the exit status and the last
line the command printed on stderr. It exits with the last trial's status (or at the first
trial that was not stopped by a signal). Outside the runs it ignores SIGTERM.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
from pathlib import Path

from contrastkit.cli import main
from contrastkit.outputs import write_bytes_atomic


def pretrain(args: list[str]) -> tuple[int, str]:
    """``contrastkit pretrain ARGS``: its exit status and the last line of its stderr."""
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured):
        status = main(["pretrain", *args])
    text = captured.getvalue()
    sys.stderr.write(text)
    lines = text.strip().splitlines()
    return status, lines[-1] if lines else ""


if __name__ == "__main__":
    # Between the runs a SIGTERM does nothing, as to a process that has ended: one sent to
    # both processes may reach one after its run stopped on the other's (the same stop).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    folder, trials, args = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    rank = os.environ["RANK"]
    status, line = pretrain([*args, "--output", str(folder / "straight")])
    if status != 0:
        sys.exit(status)
    for trial in range(trials):
        # whole files (temporary, then renamed): the test reads one as soon as it exists
        write_bytes_atomic(folder / f"start-{trial}-r{rank}", str(os.getpid()).encode())
        resume = ["--resume", "last"] if trial else []
        status, line = pretrain([*args, "--output", str(folder / "run"), *resume])
        write_bytes_atomic(folder / f"trial-{trial}-r{rank}.json",
                           json.dumps({"status": status, "line": line}).encode())
        if status < 128:
            break
    sys.exit(status)
