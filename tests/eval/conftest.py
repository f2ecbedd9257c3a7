"""Shared settings of the evaluation tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny problems on a shared 2-core CPU: one thread avoids OpenMP spin contention."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        import faiss

        faiss_threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
    except ImportError:
        faiss = None
    yield
    torch.set_num_threads(threads)
    if faiss is not None:
        faiss.omp_set_num_threads(faiss_threads)
