"""Part B's recipe (studies.repro.recipe): every config of configs/repro/gpu against the table of
the papers' settings, the evaluation protocols against the papers' (SCE D.1's probe, the
DySTreSS authors' 200-NN vote), and the table as the report prints it."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
import torch.nn.functional as F

from contrastkit.eval.linear import SCE_D1
from contrastkit.knn import knn_predict
from studies.repro import layout
from studies.repro.commands import EVALS
from studies.repro.recipe import RECIPE, effective, mismatches, recipe_lines, table_variant

REPO = Path(__file__).resolve().parents[2]


def test_every_part_b_config_follows_the_recipe():
    assert mismatches() == []
    runs = {run for _, settings in RECIPE for s in settings for run in s.expected}
    assert runs == {"sce", "moco", "ressl", "simclr", "dystress"}


def test_a_config_off_the_recipe_is_named(monkeypatch, tmp_path):
    shutil.copytree(REPO / "configs", tmp_path / "configs")
    config = tmp_path / "configs/repro/gpu/table3_dystress.yaml"
    config.write_text(config.read_text().replace("batch_size: 128", "batch_size: 256")
                      .replace("check_val_every_n_epoch: 10", "check_val_every_n_epoch: 5"))
    sce = tmp_path / "configs/repro/gpu/table6_sce.yaml"
    sce.write_text(sce.read_text().replace("      positive_target: zero_logit\n", ""))
    monkeypatch.setattr(layout, "REPO", tmp_path)
    found = mismatches()
    assert len(found) == 3
    assert any("table3_dystress.yaml: batch (batch_size) is 256" in m for m in found)
    assert any("table3_dystress.yaml: online 200-NN monitor" in m for m in found)
    assert any("table6_sce.yaml: SCE target's positive (positive_target) is 'masked'" in m
               for m in found)


def test_defaults_fill_what_a_config_leaves_out():
    sce = effective("configs/repro/gpu/table6_sce.yaml")
    assert sce["projector"] == (2, 512, 128, "hidden")  # the method's default head
    assert sce["warmup_epochs"] == 5.0 and sce["lr"] == (0.06, True, 0.9)  # OptimizerSpec's
    assert sce["monitor"] is None
    dystress = effective("configs/repro/gpu/table3_dystress.yaml")
    assert dystress["temperatures"] == ((0.07, 0.2), None, None)  # DySTreSS's (t_min, t_max)
    assert dystress["ema_queue"] is None  # no momentum branch
    # the best fixed t's run trains block 2's config (its t given by its block)
    assert table_variant("simclr_best").config == "configs/repro/gpu/table3_simclr.yaml"


def test_the_evaluation_protocols_are_the_papers():
    # SCE D.1: 100 epochs, SGD lr 30, momentum 0.9, no weight decay, x0.1 at 60 and 80
    assert (SCE_D1.epochs, SCE_D1.lr, SCE_D1.momentum, SCE_D1.weight_decay) == (100, 30.0,
                                                                                0.9, 0.0)
    assert (SCE_D1.schedule, tuple(SCE_D1.milestones), SCE_D1.gamma) == ("step", (60, 80),
                                                                        0.1)
    assert SCE_D1.batch_size == 256
    assert EVALS["linear_d1"] == ["eval", "linear", "--protocol", "sce_d1"]
    assert EVALS["knn200"] == ["eval", "knn", "--k", "200", "--temperature", "0.1"]


def _dystress_authors_vote(bank, bank_labels, queries, k=200, t=0.1, classes=10):
    """The DySTreSS authors' test() (sadimanna/DySTreSS, smallscale/main.py), restated: cosine
    similarities of the normalised features, the k most similar bank images, each voting
    exp(s / t) for its class, the prediction the class with the largest sum (ranked by
    argsort)."""
    sim = F.normalize(queries, dim=1) @ F.normalize(bank, dim=1).T
    weight, index = sim.topk(k=k, dim=-1)
    votes = torch.zeros(len(queries), k, classes).scatter(-1, bank_labels[index].unsqueeze(-1),
                                                           1.0)
    scores = (votes * (weight / t).exp().unsqueeze(-1)).sum(dim=1)
    return scores.argsort(dim=-1, descending=True)[:, 0]


def test_200nn_is_the_dystress_authors_vote():
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(10, 32, generator=g)
    bank_labels = torch.randint(0, 10, (600,), generator=g)
    query_labels = torch.randint(0, 10, (150,), generator=g)
    bank = centres[bank_labels] + 1.5 * torch.randn(600, 32, generator=g)
    queries = centres[query_labels] + 1.5 * torch.randn(150, 32, generator=g)
    pred, _ = knn_predict(bank, bank_labels, queries, k=200, temperature=0.1, backend="torch")
    expected = _dystress_authors_vote(bank, bank_labels, queries)
    assert torch.equal(pred, expected)
    assert 0.3 < (pred == query_labels).float().mean() < 1.0  # a real vote, not a trivial one


def test_the_report_prints_each_setting_with_the_configs_value():
    text = "\n".join(recipe_lines())
    assert "| SCE target's positive | eq. 5 masks it" in text
    assert "SCE: zero_logit" in text
    assert "all: val_split test, bank all, every 10 epochs, k 200, t 0.1" in text
    assert "all: 0.06 (not scaled), momentum 0.9" in text
    assert text.count("| batch |") == 2
