"""CPU threads of the ``contrastkit`` commands: ``--threads N|auto``.

torch runs each CPU operator on one OpenMP thread per core, and an OpenMP thread that waits for
work spins for a while before it sleeps. On a shared machine this turns other processes' load
into a collapse rather than a slow-down: a parallel operator ends when its slowest thread ends,
a thread the scheduler has set aside makes the others wait, and the waiting ones spin, taking
CPU from it. Every entry point (the ``contrastkit`` command, ``make demo``) therefore makes
waiting threads sleep (:func:`sleep_while_waiting`, ``OMP_WAIT_POLICY=PASSIVE`` unless the
environment sets a policy itself) before torch loads OpenMP: the policy is read once, when the
runtime loads. ``--threads`` sets the number of threads of torch and of the OpenMP runtimes of
faiss and scikit-learn (t-SNE); :func:`auto_threads` is the default (``benchmarks/README.md``
has the measurements).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


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


def sleep_while_waiting() -> None:
    """Make waiting OpenMP threads sleep (``OMP_WAIT_POLICY=PASSIVE``) unless the environment
    chooses a policy. Effective only for the OpenMP runtimes loaded afterwards: call it before
    importing torch."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pop_threads(argv: list[str]) -> str | None:
    """Remove ``--threads VALUE`` / ``--threads=VALUE`` from ``argv``; return VALUE (None when
    absent)."""
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
    return None


def thread_count(value: str) -> int:
    """The thread count of ``--threads VALUE``.

    Raises:
        ValueError: for a value that is neither ``auto`` nor an integer >= 1.
    """
    if value == "auto":
        return auto_threads()
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"--threads must be a number >= 1 or auto, got {value!r}")
    return count


@contextmanager
def using_threads(value: str) -> Iterator[int]:
    """Run the body with ``--threads VALUE``: torch's intra-op threads, faiss's OpenMP threads
    (when faiss is loaded) and ``OMP_NUM_THREADS`` for the runtimes loaded meanwhile
    (scikit-learn's); all restored afterwards. Yields the count.

    Raises:
        ValueError: for a bad value (:func:`thread_count`), before anything changes.
    """
    count = thread_count(value)
    sleep_while_waiting()
    import torch

    previous, environ = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    faiss = sys.modules.get("faiss")
    faiss_previous = faiss.omp_get_max_threads() if faiss is not None else None
    torch.set_num_threads(count)
    os.environ["OMP_NUM_THREADS"] = str(count)
    if faiss is not None:
        faiss.omp_set_num_threads(count)
    try:
        yield count
    finally:
        torch.set_num_threads(previous)
        if environ is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = environ
        if faiss is not None:
            faiss.omp_set_num_threads(faiss_previous)
