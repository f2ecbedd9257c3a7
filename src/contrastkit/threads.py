"""CPU threads of the ``contrastkit`` commands: ``--threads N|auto``.

torch runs each CPU operator on one OpenMP thread per core, and an OpenMP thread that waits for
work spins for a while before it sleeps. On a shared machine this turns other processes' load
into a collapse rather than a slow-down: a parallel operator ends when its slowest thread ends,
a thread the scheduler has set aside makes the others wait, and the waiting ones spin, taking
CPU from it. ``--threads`` sets the number of threads; every setting also makes waiting threads
sleep (``OMP_WAIT_POLICY=PASSIVE``) unless the environment sets a policy itself.
:func:`auto_threads` is the default (``benchmarks/README.md`` has the measurements).
"""

from __future__ import annotations

import os


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def auto_threads() -> int:
    """The default thread count: ``OMP_NUM_THREADS`` when the environment sets it, otherwise
    the available cores. (Fewer threads under load was measured slower than as many threads as
    cores that sleep while they wait: ``benchmarks/README.md``.)"""
    if os.environ.get("OMP_NUM_THREADS", "").isdigit() and int(os.environ["OMP_NUM_THREADS"]):
        return int(os.environ["OMP_NUM_THREADS"])
    return available_cores()


def pop_threads(argv: list[str]) -> str:
    """Remove ``--threads VALUE`` / ``--threads=VALUE`` from ``argv``; return VALUE (``auto``
    when absent)."""
    for i, arg in enumerate(argv):
        if arg == "--threads":
            if i + 1 >= len(argv):
                raise ValueError("--threads needs a value: a number >= 1, or auto")
            value = argv[i + 1]
            del argv[i : i + 2]
            return value
        if arg.startswith("--threads="):
            del argv[i]
            return arg.split("=", 1)[1]
    return "auto"


def configure_threads(value: str) -> int:
    """Apply ``--threads``: make waiting OpenMP threads sleep (before torch starts OpenMP, when
    the environment does not choose) and set torch's intra-op thread count.

    Returns:
        The thread count before (to restore it when the command is called in-process).

    Raises:
        ValueError: for a value that is neither ``auto`` nor an integer >= 1.
    """
    if value == "auto":
        count = auto_threads()
    else:
        try:
            count = int(value)
        except ValueError:
            count = 0
        if count < 1:
            raise ValueError(f"--threads must be a number >= 1 or auto, got {value!r}")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    return previous
