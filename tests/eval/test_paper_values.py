"""The papers' reported values beside `contrastkit analyze`'s diagnostics (issue 19, item 4):
every number as printed in its paper, each cited, and a negative target-noise margin flagged."""

from __future__ import annotations

import pytest

from contrastkit.eval import paper_values as pv
from contrastkit.eval import report
from contrastkit.eval.analyze import margin_reading, paper_reading

pytest.importorskip("matplotlib")

METRICS = {"alignment": 1.9, "uniformity": -1.5, "tolerance": 0.4, "interclass_uniformity": -0.3,
           "target_noise_margin": 0.2, "target_similarity_median": 0.9,
           "noise_similarity_median": 0.7, "positive_similarity_mean": 0.8,
           "nearest_negative_similarity_mean": 0.6, "sincere_kl_bound": 1.0}


def test_table13_ranges_are_the_printed_extremes():
    # DySTreSS Table 13, read off the paper: lowest and highest of each column per data set
    assert pv.reference_range("uniformity", "CIFAR-10") == (-2.8430, -2.1929)
    assert pv.reference_range("alignment", "CIFAR-100") == (1.4444, 1.5723)
    assert pv.reference_range("interclass_uniformity", "ImageNet-1K") == (-1.0053, -0.8739)
    with pytest.raises(ValueError, match="dataset must be one of"):
        pv.reference_range("uniformity", "SVHN")
    with pytest.raises(ValueError, match="metric must be one of"):
        pv.reference_range("tolerance", "CIFAR-10")


def test_each_reference_cell_cites_a_numbered_source():
    cells, sources = pv.reference_notes(METRICS)
    assert "sincere_kl_bound" not in cells  # no paper reports it: no invented value
    assert cells["uniformity"] == ("CIFAR-10 -2.84 to -2.19, CIFAR-100 -2.83 to -2.22, "
                                   "ImageNet-1K -3.08 to -2.91 [1]")
    assert cells["target_noise_margin"].startswith("SupCon 0.410/0.270/0.438/0.026, SINCERE "
                                                   "0.972/0.854/0.454/0.154")
    assert cells["tolerance"] == "shown in plots only [2]"  # plotted, never stated
    assert sources[0].startswith("[1] DySTreSS (Manna et al. 2023) Table 13")
    assert sources[1].startswith("[2] Wang & Liu 2021 (tolerance: mean cosine similarity")
    assert sources[2].startswith("[3] SINCERE (Feeney & Hughes 2023) Table 1")
    assert len(sources) == len({c.rsplit("[", 1)[1] for c in cells.values()}) == 4
    table = report.metrics_markdown("t", METRICS, references=cells)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
            for line in table.splitlines() if line.startswith("| ")}
    assert rows["metric"] == ["metric", "value", "paper reference"]
    assert rows["sincere_kl_bound"] == ["sincere_kl_bound", "1.0000", "-"]
    assert rows["uniformity"] == ["uniformity", "-1.5000", cells["uniformity"]]


def test_paper_reading_places_uniformity_and_alignment_in_table13():
    lines = paper_reading(METRICS)
    assert any("-1.500 is above the -3.08 to -2.19 of DySTreSS Table 13" in line
               for line in lines)
    assert any("1.900 is above the 1.44 to 1.63" in line for line in lines)
    # the reading names where the features were measured (``--space``)
    assert any("(this backbone's features;" in line for line in lines)
    projector = paper_reading(METRICS, "projector")
    assert any("(the projector's output;" in line for line in projector)
    assert not any("backbone's features" in line for line in projector)


def test_a_negative_margin_is_read_against_random_init():
    negative = margin_reading(-0.05, -0.12, 20)
    assert negative.startswith("target_noise_margin -0.050 (random init -0.120)")
    assert "Negative: for most test images an image of another class is the nearest" in negative
    assert "usual with 20 classes" in negative and negative.endswith("Higher than random init's.")
    assert "Negative" not in margin_reading(0.2, 0.1, 10)
