"""Test-suite root: its folder is on sys.path, so helpers such as ``gloo_harness`` import."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_thread():
    """Run a test with one torch (and faiss) thread, restored afterwards.

    Small tensors on a shared 2-core CPU: one thread avoids OpenMP spin contention. Opt in with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        import faiss
    except ImportError:
        faiss = None
    faiss_threads = faiss.omp_get_max_threads() if faiss is not None else None
    if faiss is not None:
        faiss.omp_set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    if faiss is not None:
        faiss.omp_set_num_threads(faiss_threads)
