"""One answer to "did pretraining help?" (issue 37, item 3): the protocols' comparisons with the
baselines weighed into one verdict that names the question each answers, and analyze's reading
of the margin agreeing with it or saying why not."""

from __future__ import annotations

import pytest
import torch

from contrastkit.eval import LinearProtocol, knn_predict, linear_probe, target_noise_margin
from contrastkit.eval.analyze import margin_reading
from contrastkit.eval.verdict import (
    QUESTIONS,
    Comparison,
    Evidence,
    compare_with_baselines,
    evidence_from_record,
    weigh,
)

BASELINES = ("raw pixels", "random init")


def xor_features(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two classes, each two tight clusters on opposite corners of a square (class 0 at (1, 1)
    and (-1, -1), class 1 at (1, -1) and (-1, 1)), plus 6 small noise dimensions: every
    image's neighbours share its class, but no hyperplane separates the classes."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    sx = 2 * torch.randint(0, 2, (n,), generator=g) - 1
    corners = torch.stack([sx, sx * (1 - 2 * y)], dim=1).float()
    x = corners + 0.15 * torch.randn(n, 2, generator=g)
    return torch.cat([x, 0.1 * torch.randn(n, 6, generator=g)], dim=1), y


def noise_features(labels: torch.Tensor, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(labels.shape[0], 8, generator=g)


def disagreeing_case() -> tuple[dict, torch.Tensor]:
    """Features of the pretrained model (XOR clusters) and of two baselines (noise): kNN and
    the linear probe disagree on whether pretraining helped."""
    xtr, ytr = xor_features(400, seed=0)
    xte, yte = xor_features(300, seed=1)
    features = {"pretrained": (xtr, xte)}
    for i, name in enumerate(BASELINES):
        features[name] = (noise_features(ytr, 10 + i), noise_features(yte, 20 + i))
    return {"features": features, "ytr": ytr}, yte


def evidence_of(case: dict, yte: torch.Tensor) -> list[Evidence]:
    """kNN and the validated linear probe on each representation, compared as ``eval
    --baselines`` compares them (:func:`compare_with_baselines`)."""
    ytr = case["ytr"]
    knn, linear = {}, {}
    for name, (xtr, xte) in case["features"].items():
        knn[name] = knn_predict(xtr, ytr, xte, k=20, temperature=0.1)[0]
        probe = linear_probe(xtr, ytr, xte, yte, LinearProtocol(epochs=20), validation=0.1)
        linear[name] = probe["classifier"](xte).argmax(dim=1)
    return [
        Evidence("knn", "k 20, t 0.1", compare_with_baselines(
            knn["pretrained"], {b: knn[b] for b in BASELINES}, yte, seed=0)),
        Evidence("linear", "20 epochs", compare_with_baselines(
            linear["pretrained"], {b: linear[b] for b in BASELINES}, yte, seed=0)),
    ]


def test_knn_and_linear_disagree_and_the_verdict_gives_one_reading():
    case, yte = disagreeing_case()
    knn, linear = evidence_of(case, yte)
    assert [c.sign for c in knn.comparisons] == [1, 1]  # neighbours share the class
    assert [c.sign for c in linear.comparisons] == [0, 0]  # no hyperplane: chance, as noise
    verdict = weigh([knn, linear])
    assert verdict.answer == "partly"
    assert verdict.headline == (
        "**Partly**: under kNN pretraining beat raw pixels and random init; under the linear "
        "probe pretraining did not significantly differ from raw pixels and random init (95% "
        "paired bootstrap intervals).")
    # which question each protocol answers, and what that makes the features useful for
    text = verdict.markdown()
    assert f"kNN (k 20, t 0.1) - {QUESTIONS['knn']} Helped: " in text
    assert f"Linear probe (20 epochs) - {QUESTIONS['linear']} Not shown: " in text
    assert verdict.use == (
        "Are the features useful? As they are, without training on the labels (search, "
        "clustering, labelling by example): yes; to a classifier trained on your labels: "
        "pretraining did not significantly differ from raw pixels and random init.")
    # analyze reads the same neighbourhoods through the margin: it agrees with the verdict
    ytr = case["ytr"]
    margins = {name: target_noise_margin(xtr, ytr, xte, yte)[0]
               for name, (xtr, xte) in case["features"].items()}
    agree = margin_reading(margins["pretrained"], margins["random init"], 2, verdict)
    assert margins["pretrained"] > margins["random init"]
    assert "Higher than random init's, as kNN found in the verdict" in agree
    # ... and, where the margin alone would say otherwise, it says why the verdict stands
    differ = margin_reading(margins["random init"] - 0.1, margins["random init"], 2, verdict)
    assert "Lower than random init's although kNN beat it in the verdict" in differ
    assert "keep kNN's reading" in differ
    # the verdict travels in results.json and comes back the same (compare pools it)
    again = weigh([evidence_from_record(e) for e in verdict.record()["evidence"]])
    assert again == verdict


@pytest.mark.parametrize(("signs", "answer"), [
    ({"knn": (1, 1), "linear": (1, 1)}, "yes"),
    ({"knn": (1, 0), "linear": (0, 0)}, "partly"),
    ({"knn": (0, 0), "linear": (0, 0)}, "not shown"),
    ({"knn": (-1, 0), "linear": (0, 0)}, "no"),
    ({"knn": (1, 1), "linear": (-1, 0)}, "mixed"),
    ({"knn": (1, -1)}, "mixed"),
])
def test_the_verdict_weighs_every_protocol(signs, answer):
    def comparison(baseline: str, sign: int) -> Comparison:
        return Comparison(baseline, 0.05 * sign, 0.05 * sign - 0.02 * (sign == 0) - 0.01,
                          0.05 * sign + 0.02 * (sign == 0) + 0.01)

    evidence = [Evidence(p, "", tuple(comparison(b, s) for b, s in zip(BASELINES, v,
                                                                          strict=True)))
                for p, v in signs.items()]
    assert [[c.sign for c in e.comparisons] for e in evidence] == [list(v) for v in
                                                                   signs.values()]
    assert weigh(evidence).answer == answer


def test_low_shot_comparisons_are_summarised_per_baseline():
    comparisons = (Comparison("raw pixels", 0.03, 0.01, 0.05, "16 shots"),
                   Comparison("raw pixels", -0.01, -0.04, 0.02, "all labels"))
    line = Evidence("lowshot", "16/all images per class", comparisons).line()
    assert "at 16 shots" not in line  # one summary per baseline, the table has the rows
    assert "Partly: beat raw pixels at 1 of 2 settings (-1.0 to +3.0 points)." in line
    with pytest.raises(ValueError, match="at least one protocol"):
        weigh([])


def test_an_overfitting_probe_is_flagged_in_its_line():
    """The issue's probe: train 70%, test 21% on 40 images per class of 20 classes."""
    from contrastkit.eval.answer import protocol_evidence

    config = {"epochs": 100, "validation": 0.1,
              "early_stopping": {"best_epoch": 12, "num_validation": 80, "num_fit": 720}}
    baselines = {b: {"metrics": {}, "difference": 0.065, "ci_low": -0.005, "ci_high": 0.13}
                 for b in BASELINES}
    metrics = {"train_top1": 0.70, "validation_top1": 0.22}
    line = protocol_evidence("linear", config, metrics, 20, baselines).line()
    assert "(100 epochs, epoch 12 kept by a 10% validation split)" in line
    assert line.endswith("The probe fits its 720 training images (about 36 per class) far "
                         "better than held-out ones (train 70.0%, validation 22.0%): with so "
                         "few labels this reading is weak either way.")
    fitting = protocol_evidence("linear", config, {"train_top1": 0.5, "validation_top1": 0.4},
                                20, baselines)
    assert fitting.note == ""


def _setting_comparisons(signs: dict[str, tuple[int, ...]]) -> tuple[Comparison, ...]:
    """One comparison per baseline and shot count with the given signs (+1 significantly
    better, -1 worse, 0 an interval across 0)."""
    shots = ("16 shots", "32 shots", "64 shots", "all labels")
    return tuple(Comparison(b, 0.04 * s, 0.04 * s - 0.03 + 0.02 * abs(s),
                            0.04 * s + 0.03 - 0.02 * abs(s), shot)
                 for b, values in signs.items() for s, shot in zip(values, shots, strict=False))


def test_the_low_shot_headline_says_what_its_line_says():
    """Issue 52, item 10: the headline said "beat raw pixels and random init" where the
    low-shot line said "Partly" (better than raw pixels at some shot counts only)."""
    comparisons = _setting_comparisons({"raw pixels": (1, 1, 0, 1),
                                        "random init": (1, 1, 1, 1)})
    lowshot = Evidence("lowshot", "16/32/64/all images per class", comparisons)
    assert lowshot.outcome == "partly"
    verdict = weigh([lowshot])
    assert verdict.answer == "partly"
    assert verdict.headline == (
        "**Partly**: under the low-shot linear probes pretraining beat random init, beat raw "
        "pixels at 3 of 4 settings (95% paired bootstrap intervals).")
    line = lowshot.line()
    assert "Partly: beat raw pixels at 3 of 4 settings (0 to +4.0 points); beat random init "\
        "(+4.0 points)." in line
    assert verdict.use == ("Are the features useful? To a classifier trained on a few labels "
                           "per class: pretraining beat random init, beat raw pixels at 3 of 4 "
                           "settings.")


@pytest.mark.parametrize("settings", [1, 2, 3])
def test_every_outcome_and_its_words_come_from_one_standing(settings):
    """Every sign pattern of two baselines over 1-3 settings: the headline's words for a
    protocol appear in its line, say "beat" a baseline unqualified only when every setting beat
    it, and the outcome is "helped" exactly when they say "beat" both."""
    import itertools

    patterns = list(itertools.product((-1, 0, 1), repeat=settings))
    for raw, rand in itertools.product(patterns, repeat=2):
        e = Evidence("lowshot", "", _setting_comparisons({"raw pixels": raw,
                                                          "random init": rand}))
        clause = weigh([e]).headline.split("pretraining ", 1)[1].split(" (95%")[0]
        for standing in e.standings():
            assert standing.phrase() in e.line()
            signs = raw if standing.baseline == "raw pixels" else rand
            unqualified = standing.phrase() == f"beat {standing.baseline}"
            assert unqualified == all(s == 1 for s in signs)
        assert (clause == "beat raw pixels and random init") == (e.outcome == "helped"), clause
        assert e.outcome == "helped" or "beat raw pixels and random init" not in clause


def test_an_interval_end_that_rounds_to_zero_keeps_its_sign(tmp_path):
    """Issue 52, item 10: a lower end of -0.000125 printed as "-0.0", which cannot be read
    either way. Every printed difference and interval end shows its sign; an exact 0 is 0."""
    from contrastkit.eval.baselines import baselines_markdown
    from contrastkit.eval.compare import compare_markdown
    from contrastkit.eval.report import format_signed

    assert [format_signed(v) for v in (-0.0125, 0.0, -0.0, 2.0, -0.04, 0.0004, -6e-7)] == \
        ["-0.01", "0", "0", "+2.0", "-0.04", "+0.0004", "-6e-07"]
    assert format_signed(-0.00004, 3) == "-0.00004"
    low = Comparison("raw pixels", 0.02, -0.000125, 0.04)
    assert low.text() == "+2.0 points vs raw pixels [-0.01, +4.0]"
    assert low.sign == 0
    assert Comparison("random init", 0.02, 0.0, 0.04).text().endswith("[0, +4.0]")
    # the low-shot line's range, the --baselines table and contrastkit compare's line
    line = Evidence("lowshot", "", (Comparison("raw pixels", -0.0004, -0.01, 0.01, "16 shots"),
                                    Comparison("raw pixels", 0.02, 0.01, 0.03, "all labels"))
                    ).line()
    assert "(-0.04 to +2.0 points)" in line
    entry = {"metrics": {"top1": 0.5}, "difference": 0.02, "ci_low": -0.000125,
             "ci_high": 0.04}
    table = baselines_markdown({"top1": 0.52}, {"raw pixels": entry})
    assert "+2.0 [-0.01, +4.0]" in table
    summary = {"a": {"folder": "a", "protocol": "knn", "checkpoint": None},
               "b": {"folder": "b", "protocol": "knn", "checkpoint": None},
               "accuracy_a": 0.5, "accuracy_b": 0.5, "metrics": {}, "difference": 0.0,
               "ci_low": -0.000125, "ci_high": 0.00004, "confidence": 0.95, "num_test": 1000,
               "n_resamples": 1000, "verdict": "not significant", "reading": ""}
    assert "A - B accuracy: 0 points, 95% bootstrap CI [-0.01, +0.004]" in \
        compare_markdown(summary)
