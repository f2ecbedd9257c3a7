"""studies.repro.studies: every config of configs/repro belongs to a study, every claim reads
runs and protocols that its study has, and the Part A configs follow the study's design."""

from __future__ import annotations

from pathlib import Path

import yaml

from studies.repro.commands import EVALS
from studies.repro.stats import SEED_SD
from studies.repro.studies import CPU_SEEDS, NOT_WORSE_MARGIN, STUDIES
from studies.repro.verdicts import planned_mde

REPO = Path(__file__).resolve().parents[2]
CPU = [s for s in STUDIES.values() if s.part == "cpu"]


def _config(path):
    return yaml.safe_load((REPO / path).read_text())


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
            assert claim.kind in ("better", "not_worse", "sign", "absolute")
            assert claim.noise is None or claim.noise in SEED_SD
            if claim.value is None:  # not run: below the detectable effect
                assert not claim.needs and study.part == "cpu"
                continue
            for name, metric in claim.needs:
                assert name in names, (study.name, claim.id)
                protocol = metric.split("/")[0]
                if protocol != "pretrain":
                    assert protocol in study.variant(name).evals, (study.name, claim.id)
            if claim.kind in ("better", "not_worse"):
                assert claim.compare is not None and claim.compare[2] in EVALS


def test_part_a_design():
    """Paired seeds, a random-init baseline beside every study that runs, testable margins."""
    all_protocols = {p for study in CPU for v in study.variants if v.name != "random_init"
                     for p in v.evals}
    for study in CPU:
        assert study.seeds == CPU_SEEDS == (0, 1, 2)
        if study.variants:
            init = study.variant("random_init")
            # the baseline is evaluated with every protocol of every study's trained runs
            assert set(init.evals) == all_protocols
        for claim in study.claims:
            if claim.kind == "not_worse":
                assert NOT_WORSE_MARGIN >= planned_mde(claim, study)
    # a run shared by two studies is the same run (same config, evaluations, analyze options)
    dystress, temperature = STUDIES["dystress"], STUDIES["temperature"]
    for t in ("0.1", "0.2", "0.5"):
        assert dystress.variant(f"simclr_t{t}") == temperature.variant(f"simclr_t{t}")


def test_part_a_configs():
    for study in CPU:
        for v in study.variants:
            raw = _config(v.config)
            args = raw["model"]["method"]["init_args"]
            assert args["backbone"] == {"name": "resnet18", "cifar_stem": True, "width": 16}
            assert raw["data"]["subset"] == 10000 and raw["data"]["batch_size"] == 256
            assert "seed" not in raw["data"]  # data.seed 0: the same images for every seed
            method = raw["model"]["method"]["class_path"].rsplit(".", 1)[1]
            if v.name == "random_init":  # one step at learning rate 0
                assert raw["model"]["optimizer"]["base_lr"] == 0.0
                assert raw["trainer"]["max_epochs"] == 1
                assert raw["trainer"]["limit_train_batches"] == 1
                continue
            assert raw["trainer"]["max_epochs"] == 30
            if method in ("MoCo", "ReSSL", "SCE"):
                assert args["shuffle_bn"] == 8
            if method == "SupervisedContrastive":
                assert args["projector"]["batch_norm"] == "all"
