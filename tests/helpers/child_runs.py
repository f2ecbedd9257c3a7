"""Child processes that tests start side by side: a test's independent ``contrastkit`` runs
spend most of their time importing torch and Lightning (one core each), so starting them
together lets a 2-core machine overlap those start-ups."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch

Run = tuple[subprocess.Popen, Path]


def start(command: Sequence[str], env: dict[str, str], log: Path) -> Run:
    """Start ``command`` with its stdout and stderr in the file ``log``."""
    with open(log, "w") as handle:
        return subprocess.Popen(list(command), env=env, stdout=handle,
                                stderr=subprocess.STDOUT), log


def _kill(runs: Sequence[Run]) -> None:
    for proc, _ in runs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextmanager
def killed_on_error(*runs: Run) -> Iterator[None]:
    """Kill ``runs`` if the block raises (a failed test leaves no child behind)."""
    try:
        yield
    except BaseException:
        _kill(runs)
        raise


def finish(*runs: Run, timeout: float = 600) -> None:
    """Wait for ``runs`` and assert that each exited with 0 (its log's tail as the message);
    none is left running, whatever happens."""
    try:
        codes = [proc.wait(timeout=timeout) for proc, _ in runs]
    finally:
        _kill(runs)
    for code, (_, log) in zip(codes, runs, strict=True):
        assert code == 0, f"{log}:\n" + log.read_text()[-6000:]


def assert_same_weights(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    """Two runs' state dicts agree: floating-point entries to float32 rounding of a different
    reduction order (relative 1e-5, absolute 1e-6), the others (step counters) exactly."""
    for key, value in want.items():
        if value.is_floating_point():
            torch.testing.assert_close(got[key], value, rtol=1e-5, atol=1e-6,
                                       msg=lambda m, k=key: f"{k}: {m}")
        else:
            assert torch.equal(got[key], value), key
