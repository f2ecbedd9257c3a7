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
    assert "Higher than random init, as kNN found in the verdict" in agree
    # ... and, where the margin alone would say otherwise, it says why the verdict stands
    differ = margin_reading(margins["random init"] - 0.1, margins["random init"], 2, verdict)
    assert "Not higher than random init although kNN beat it in the verdict" in differ
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
    assert ("-1.0 to +3.0 points vs raw pixels (significantly better at 1, worse at 0 of 2 "
            "settings)") in line
    with pytest.raises(ValueError, match="at least one protocol"):
        weigh([])
