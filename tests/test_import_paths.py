"""Names that moved to a paper-named file are still importable from where they were.

``contrastkit.losses`` and ``contrastkit.methods`` re-export everything; the modules that held a
name before (and configs naming it there) resolve it to the same object.
"""

from __future__ import annotations

import importlib

import pytest

import contrastkit.losses as losses
import contrastkit.methods as methods

MOVED = [
    ("contrastkit.losses.supervised", "sincere", losses),
    ("contrastkit.losses.supervised", "supcon", losses),
    ("contrastkit.losses.supervised", "eps_supinfonce", losses),
    ("contrastkit.losses.supervised", "SINCERELoss", losses),
    ("contrastkit.methods.momentum_contrast", "SCE", methods),
    ("contrastkit.methods.momentum_contrast", "MoCo", methods),
    ("contrastkit.methods.momentum_contrast", "ReSSL", methods),
]


@pytest.mark.parametrize(("module", "name", "package"), MOVED,
                         ids=[f"{m}.{n}" for m, n, _ in MOVED])
def test_former_path_gives_the_same_object(module, name, package):
    assert getattr(importlib.import_module(module), name) is getattr(package, name)


def test_paper_files_hold_the_papers_code():
    assert losses.sincere.__module__ == "contrastkit.losses.sincere"
    assert losses.supcon.__module__ == "contrastkit.losses.sincere"
    assert losses.hard_contrastive.__module__ == "contrastkit.losses.hard_contrastive"
    assert losses.DySTreSSTemperature.__module__ == "contrastkit.losses.dystress"
    assert losses.KuklevaCosineTemperature.__module__ == "contrastkit.schedules"
    for name in ("MoCo", "ReSSL", "SCE"):
        assert getattr(methods, name).__module__ == f"contrastkit.methods.{name.lower()}"


def test_unknown_names_still_fail():
    with pytest.raises(AttributeError):
        importlib.import_module("contrastkit.methods.momentum_contrast").SimCLR  # noqa: B018
