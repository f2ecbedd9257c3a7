"""The augmentation's exact-float32 guard leaves the user's float32 precision settings exactly
as they were and never mixes the legacy ``allow_tf32`` flags with the ``fp32_precision`` API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from contrastkit.data.augment._pipeline import exact_float32
from contrastkit.data.augment.views import make_views

#: Every per-backend precision setting torch keeps (the guard touches four of them).
SETTINGS = {
    "generic": torch.backends,
    "cuda.matmul": torch.backends.cuda.matmul,
    "cudnn": torch.backends.cudnn,
    "cudnn.conv": torch.backends.cudnn.conv,
    "cudnn.rnn": torch.backends.cudnn.rnn,
    "mkldnn": torch.backends.mkldnn,
    "mkldnn.matmul": torch.backends.mkldnn.matmul,
    "mkldnn.conv": torch.backends.mkldnn.conv,
    "mkldnn.rnn": torch.backends.mkldnn.rnn,
}


def snapshot() -> dict[str, object]:
    """Every precision setting, read through the new API, and the global matmul precision
    (whose getter raises when the legacy and new APIs were mixed)."""
    state: dict[str, object] = {k: s.fp32_precision for k, s in SETTINGS.items()}
    state["matmul_precision"] = torch.get_float32_matmul_precision()
    return state


@pytest.fixture(autouse=True)
def restore_precision() -> Iterator[None]:
    saved = {k: s.fp32_precision for k, s in SETTINGS.items()}
    yield
    for key, value in saved.items():  # the generic one first: it is the others' default
        SETTINGS[key].fp32_precision = value
    torch.set_float32_matmul_precision("highest")


@pytest.mark.parametrize("precision", ["medium", "high", "highest"])
def test_user_precision_is_restored_exactly(precision: str) -> None:
    torch.set_float32_matmul_precision(precision)
    before = snapshot()
    with exact_float32():
        inside = {k: SETTINGS[k].fp32_precision for k in
                  ("cuda.matmul", "cudnn.conv", "mkldnn.matmul", "mkldnn.conv")}
    assert inside == dict.fromkeys(inside, "ieee")
    assert snapshot() == before
    assert torch.get_float32_matmul_precision() == precision


@pytest.mark.parametrize("precision", ["medium", "high", "highest"])
def test_views_leave_the_matmul_precision_readable(precision: str) -> None:
    torch.set_float32_matmul_precision(precision)
    before = snapshot()
    make_views("sce", 8)(torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8))
    assert snapshot() == before


def test_legacy_flags_set_by_the_user_are_restored() -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = False
    with exact_float32():
        pass
    assert torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.backends.cudnn.allow_tf32 is False
    torch.get_float32_matmul_precision()  # raises if the guard mixed the two APIs
