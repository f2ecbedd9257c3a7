"""The float environment a test runs in. A CPU run repeats bit for bit only with the same torch
build, CPU kernels and thread count, so a test that pins a run's first numbers pins them per
environment, compares them exactly in a pinned one, and states what it checks elsewhere."""

from __future__ import annotations

import torch

from studies.repro.provenance import cpu_model


def pinned_environment(entries: list[dict]) -> dict | None:
    """The entry of ``entries`` that is this process's environment, or None: the same
    ``torch`` build, ``cpu`` model, ``threads`` (torch's thread count now) and, where the
    entry records it, ``cpu_capability`` (the kernels torch dispatches to, e.g. AVX512)."""
    capability = torch.backends.cpu.get_cpu_capability()
    return next((env for env in entries
                 if env["torch"] == torch.__version__ and env["cpu"] == cpu_model()
                 and env["threads"] == torch.get_num_threads()
                 and env.get("cpu_capability", capability) == capability), None)
