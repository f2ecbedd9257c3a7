"""Median time of a call on a device, shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def median_ms(fn: Callable[[], object], device: torch.device, iters: int,
              warmup: int = 1) -> float:
    """Median milliseconds of ``fn`` over ``iters`` calls after ``warmup`` untimed ones.

    On a CUDA device each call is timed with CUDA events recorded around it (the device's own
    clock, synchronised once per call); elsewhere with the wall clock.
    """
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        if device.type == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop))
        else:
            begin = time.perf_counter()
            fn()
            samples.append(1e3 * (time.perf_counter() - begin))
    return statistics.median(samples)
