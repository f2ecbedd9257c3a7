"""Run a function in 2 (or more) CPU processes joined by a gloo process group.

Shared by the distributed tests: ``run_ranks(body, world, out_dir)`` starts ``world``
processes on loopback, each calls ``body(rank)`` inside an initialised process group and saves
the returned dict; the parent gets the list of dicts in rank order.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


@torch.no_grad()
def all_reduce_mean(tensor: torch.Tensor) -> torch.Tensor:
    """Mean of ``tensor`` over the processes (a detached copy when not distributed)."""
    out = tensor.detach().clone()
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out / dist.get_world_size()
    return out


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rk: int, body: Callable[[int], dict[str, Any]], port: int, world: int,
           out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rk,
                            world_size=world, timeout=timedelta(seconds=60))
    try:
        torch.save(body(rk), Path(out_dir) / f"rank{rk}.pt")
    finally:
        dist.destroy_process_group()


def run_ranks(body: Callable[[int], dict[str, Any]], world: int, out_dir: Path) -> list[dict]:
    """Run ``body(rank)`` in ``world`` gloo processes; skip the test if gloo is unavailable."""
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    # torch.optim imports torch._dynamo lazily on first use (seconds): do it once here so
    # that forked children inherit it instead of each importing it again.
    torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
    # fork (as DataLoader workers do) avoids re-importing torch in each child, which dominates
    # the runtime on a loaded 2-core machine.
    start = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    with pytest.MonkeyPatch.context() as mpatch:
        if sys.platform.startswith("linux") and "GLOO_SOCKET_IFNAME" not in os.environ:
            mpatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # loopback only, whatever the hostname
        mp.start_processes(_entry, args=(body, _free_port(), world, str(out_dir)),
                           nprocs=world, start_method=start)
    return [torch.load(Path(out_dir) / f"rank{r}.pt", weights_only=False) for r in range(world)]
