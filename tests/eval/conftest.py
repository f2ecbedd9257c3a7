"""Shared settings of the evaluation tests: every test runs with one thread."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield
