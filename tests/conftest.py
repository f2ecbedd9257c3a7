"""Test-suite root: the helpers of ``tests/helpers`` import by name (``from child_runs import
...``), and the fixtures that several folders share live here."""

from __future__ import annotations

import os
import sys

# No test needs the network: a model name that is not a folder fails at once from the local
# Hugging Face cache instead of after the Hub client's retries (huggingface_hub reads this
# when it is first imported, so before any test module imports it).
os.environ["HF_HUB_OFFLINE"] = "1"
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

from tiny_run import TINY_PRETRAIN


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The folder of a real two-epoch SimCLR run of a tiny convnet (16-d features, a 2-layer
    projector with batch norm to 8-d) on 128 digits, pretrained once per test process and
    shared by the evaluation tests: read it, never write into it."""
    from contrastkit.cli.pretrain import pretrain

    out = tmp_path_factory.mktemp("tiny_run") / "run"
    pretrain([*TINY_PRETRAIN, "--output", str(out)])
    assert (out / "checkpoints" / "last.ckpt").is_file()
    return out


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_run: Path) -> Path:
    """``last.ckpt`` of :func:`tiny_run`."""
    return tiny_run / "checkpoints" / "last.ckpt"


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
