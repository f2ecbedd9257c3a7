"""contrastkit.repro.studies: every config of configs/repro belongs to a study, and every claim
reads runs and protocols that its study has."""

from __future__ import annotations

from pathlib import Path

from contrastkit.repro.commands import EVALS
from contrastkit.repro.studies import STUDIES

REPO = Path(__file__).resolve().parents[2]


def test_every_repro_config_belongs_to_a_study_and_exists():
    used = {v.config for s in STUDIES.values() for v in s.variants}
    on_disk = {str(p.relative_to(REPO)) for p in (REPO / "configs" / "repro").rglob("*.yaml")}
    assert used == on_disk
    for study in STUDIES.values():
        expected = "configs/repro/cpu/" if study.part == "cpu" else "configs/repro/gpu/"
        assert all(v.config.startswith(expected) for v in study.variants), study.name


def test_claims_reference_known_runs_and_protocols():
    for study in STUDIES.values():
        names = {v.name for v in study.variants}
        for claim in study.claims:
            assert claim.kind in ("better", "same", "not_worse", "sign", "absolute")
            for name, metric in claim.needs:
                assert name in names, (study.name, claim.id)
                protocol = metric.split("/")[0]
                if protocol != "pretrain":
                    assert protocol in study.variant(name).evals, (study.name, claim.id)
            if claim.kind in ("better", "same", "not_worse"):
                assert claim.compare is not None and claim.compare[2] in EVALS
