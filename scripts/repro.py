#!/usr/bin/env python
"""Reproduce the papers' claims with the public commands (docs/reproduction.md).

Sub-commands::

    python scripts/repro.py cpu [--study NAME ...] [--seeds 0 1 2] [--epochs N] [--dry-run]
    python scripts/repro.py gpu [--study NAME ...] [--seeds 0] [--chunk-time 00:00:08:30]
                                [--max-steps N] [--dry-run]
    python scripts/repro.py report [--summary FILE] [--no-collect]
    python scripts/repro.py list

``cpu`` (Part A) runs, for every study, run (one YAML under ``configs/repro/cpu``) and seed:
``contrastkit pretrain`` (``--resume last`` when a checkpoint exists; a finished run is
skipped), then the study's ``contrastkit eval`` protocols and ``contrastkit analyze`` (each skipped
when its ``results.json`` exists), then ``contrastkit compare`` for the study's pairs (paired
bootstrap of the accuracy difference), and collects every ``results.json`` / ``comparison.json``
into ``runs/repro/summary.json``. ``gpu`` (Part B) does the same with ``configs/repro/gpu``,
training in chunks resumed with ``--resume last`` (see :func:`chunk_arguments`); ``--max-steps N``
stops after N pretraining chunks or evaluations, so that one call fits a 10-minute window.
``report`` collects again and writes ``docs/reproduction.md`` and its figures
(``docs/figures/repro_*.png``): each claim next to the paper's table or figure and numbers, with
a verdict: ``reproduced``, ``not reproduced (measured ... vs paper ...)`` or ``not yet run``.

Run layout: ``runs/repro/<part>/<config stem>/seed<N>/{pretrain,eval/<protocol>,analyze}`` (two
studies that use the same config share its runs) and
``runs/repro/<part>/compare/<A>__vs__<B>/<protocol>/seed<N>``.

Verdict rules (also printed in the report):

* a claim "A is more accurate than B" is *reproduced* when, in every finished seed, the paired
  bootstrap 95% interval of A - B (``contrastkit compare``: 1,000 test-set resamples) lies
  above 0;
* "A and B are equally accurate" (SINCERE App. M) when every seed's interval contains 0;
* "A is not worse than B" when no seed's interval lies below 0;
* a claim on another number (margin, loss, uniformity, a difference of differences) when its
  value has the paper's sign in every finished seed and the seed mean exceeds 2 standard errors
  (sample std / sqrt(seeds)); with a single seed such a claim is *inconclusive*;
* an absolute number (Part B) when the seed mean is at least the paper's minus 1 point;
* *inconclusive* when a run the claim reads collapsed (:func:`collapsed`);
* *not yet run* while no seed has every number the claim needs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = "../shared/data/cifar10-jpg.tar.gz"
ARRAY_CACHE = ".cache/cifar10-jpg"
FEATURE_CACHE = ".cache/repro/features"
RUNS = Path("runs/repro")
SUMMARY = RUNS / "summary.json"
DOC = Path("docs/reproduction.md")
DOC_SUMMARY = Path("docs/reproduction.json")  # committed copy of the summary the report shows
FIGURES = Path("docs/figures")
CIFAR2_CLASSES = ("cat", "dog")
ABSOLUTE_TOLERANCE = 1.0  # points: Part B absolute numbers
SIGN_STANDARD_ERRORS = 2.0  # a sign claim's seed mean must exceed this many standard errors

#: How Part A was sized and run (machine, date, commands); the per-run times are in the tables.
BUDGET_NOTE = (
    "Sized on 2 idle AMD EPYC cores, 2026-11-21: one forward and backward pass of 512 CIFAR",
    "views takes 0.53 s for ResNet-18 at width 8 and 2.1 s at width 16 (2 threads); one epoch of",
    "10,000 images at width 8 took about 30 s (`contrastkit pretrain --config",
    "configs/repro/cpu/temperature_contrastive_t0.2.yaml --trainer.max_epochs 2`, width 8).",
    "All 27 seed-0 runs had to fit in about 1.5 hours of those 2 cores, so the unsupervised",
    "studies train ResNet-18 width 8 for 4 epochs (156 steps) and study 1 trains width 16 for 3",
    "epochs (117 steps: at width 8 both supervised losses stayed in the collapsed state).",
    "The seed-0 runs below were made as two lanes of one thread each:",
    "`OMP_NUM_THREADS=1 python scripts/repro.py cpu --seeds 0 --study sincere_cifar2",
    "sincere_cifar10 dystress baselines` beside `OMP_NUM_THREADS=1 python scripts/repro.py cpu",
    "--seeds 0 --study temperature sce_lambda sce_tau_m`; `make repro-cpu` runs every study's",
    "default seeds in one lane instead. Seed 1 followed the same way for the studies where",
    "differences were small (SINCERE on CIFAR-10, DySTreSS, SCE, baselines) and for five of",
    "the temperature configs (those the sign claims and the t = 0.2 / t = 1.0 comparisons",
    "read): 54 pretraining runs, 133 min of pretraining, 14:58-16:52 UTC in the two lanes.",
    "The *pretrain min* column is the measured wall time of each pretraining run (start-up",
    "included, one thread); evaluation adds 1-3 min per run.",
)

#: Why a part may have no runs yet, printed under its heading while it has none.
PART_PENDING = {
    "gpu": "It needs a GPU, and none was available to the sessions that built this study "
           "(up to 2026-11-21). On a GPU "
           "machine, `python scripts/repro.py gpu --max-steps 1` trains one chunk of at most "
           "10 minutes (or one evaluation) per call and resumes exactly from the last epoch; "
           "repeat it until every run is done, then `python scripts/repro.py report`.",
}

#: ``contrastkit`` arguments of each evaluation (``analyze`` gets per-run extra arguments).
EVALS: dict[str, list[str]] = {
    "knn200": ["eval", "knn", "--k", "200", "--temperature", "0.1"],
    "knn1": ["eval", "knn", "--k", "1"],
    "knn5": ["eval", "knn", "--k", "5"],
    "linear": ["eval", "linear"],
    "linear_d1": ["eval", "linear", "--protocol", "sce_d1"],
    "analyze": ["analyze"],
}


# --- studies ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """One run of a study: a config (its stem names the run folder) and how it is evaluated."""

    name: str
    label: str
    config: str
    evals: tuple[str, ...]
    data: str = "cifar10"
    analyze_args: tuple[str, ...] = ()
    params: tuple[tuple[str, float | str], ...] = ()

    @property
    def stem(self) -> str:
        return Path(self.config).stem

    def param(self, key: str) -> float | str | None:
        return dict(self.params).get(key)


@dataclass(frozen=True)
class Claim:
    """A paper's claim, how to measure it and the paper's own numbers.

    ``kind``: ``better`` / ``same`` / ``not_worse`` (accuracy of ``compare[0]`` vs ``compare[1]``
    on protocol ``compare[2]``, with bootstrap intervals), ``sign`` (``value`` > 0 in every
    seed) or ``absolute`` (seed mean of ``value`` >= ``paper_value`` - 1 point).
    ``value(get)`` computes the measured quantity of one seed from ``get(variant, metric)``; it is
    oriented so that the paper's claim says it is positive (``paper_value`` is the paper's).
    """

    id: str
    source: str
    statement: str
    paper: str
    kind: str
    needs: tuple[tuple[str, str], ...]
    value: Callable[[Callable[[str, str], float]], float]
    paper_value: float | None = None
    unit: str = ""
    compare: tuple[str, str, str] | None = None


@dataclass(frozen=True)
class Study:
    name: str
    part: str
    title: str
    seeds: tuple[int, ...]
    variants: tuple[Variant, ...]
    claims: tuple[Claim, ...] = ()
    pairs: tuple[tuple[str, str, str], ...] = field(default=())
    note: str = ""  # printed under the study's title

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"study {self.name} has no run {name!r}")

    def all_pairs(self) -> list[tuple[str, str, str]]:
        pairs = list(self.pairs) + [c.compare for c in self.claims if c.compare]
        return list(dict.fromkeys(pairs))


def _diff(a: str, b: str, metric: str, scale: float = 1.0) -> Callable:
    return lambda get: scale * (get(a, metric) - get(b, metric))


def _acc_claim(cid: str, source: str, statement: str, paper: str, a: str, b: str, protocol: str,
               paper_value: float, kind: str = "better") -> Claim:
    return Claim(cid, source, statement, paper, kind, ((a, f"{protocol}/top1"),
                                                       (b, f"{protocol}/top1")),
                 _diff(a, b, f"{protocol}/top1", 100.0), paper_value, " points",
                 (a, b, protocol))


def _loss_drop_gap(get: Callable[[str, str], float]) -> float:
    """(initial - final loss of SINCERE) - (initial - final loss of SupCon)."""
    def drop(name: str) -> float:
        return get(name, "pretrain/initial_loss") - get(name, "pretrain/final_loss")

    return drop("sincere") - drop("supcon")


def _cpu(name: str) -> str:
    return f"configs/repro/cpu/{name}.yaml"


def _sincere_study(dataset: str) -> Study:
    label = "CIFAR-2" if dataset == "cifar2" else "CIFAR-10"
    margins = {"cifar2": (0.972, 0.410), "cifar10": (0.854, 0.270)}[dataset]
    # SINCERE Table 4, (initial, final) training loss of SINCERE and of SupCon
    losses = {"cifar2": ((6.25, 0.99), (6.94, 6.28)),
              "cifar10": ((6.80, 0.29), (6.94, 4.69))}[dataset]
    (s0, s1), (u0, u1) = losses
    knn1 = {"cifar2": (92.75, 92.15), "cifar10": (95.88, 95.53)}[dataset]
    knn5 = {"cifar2": (92.55, 92.15), "cifar10": (95.91, 95.57)}[dataset]
    evals = ("knn1", "knn5", "analyze")
    variants = (
        Variant("sincere", "SINCERE", _cpu(f"sincere_{dataset}_sincere"), evals, dataset),
        Variant("supcon", "SupCon", _cpu(f"sincere_{dataset}_supcon"), evals, dataset),
    )
    m = "analyze/target_noise_margin"
    claims = (
        Claim(f"{dataset}-margin", "SINCERE Table 1, Fig. 2",
              f"SINCERE widens the target-noise margin of test-set nearest neighbours ({label})",
              f"margin SINCERE {margins[0]:.3f} vs SupCon {margins[1]:.3f}", "sign",
              (("sincere", m), ("supcon", m)), _diff("sincere", "supcon", m),
              round(margins[0] - margins[1], 3)),
        Claim(f"{dataset}-loss", "SINCERE Table 4",
              f"SINCERE's training loss falls much further than SupCon's ({label}; drop from "
              "the first to the last epoch: the two losses start from different values, "
              "log of their denominators' sizes, so the drops are compared, not the finals)",
              f"SINCERE {s0:.2f} -> {s1:.2f}, SupCon {u0:.2f} -> {u1:.2f}", "sign",
              tuple((n, f"pretrain/{k}") for n in ("sincere", "supcon")
                    for k in ("initial_loss", "final_loss")), _loss_drop_gap,
              round((s0 - s1) - (u0 - u1), 2)),
        _acc_claim(f"{dataset}-knn1", "SINCERE App. M, Table 6",
                   f"1-NN accuracy of SINCERE and SupCon does not differ significantly ({label})",
                   f"1-NN SINCERE {knn1[0]:.2f} vs SupCon {knn1[1]:.2f}", "sincere",
                   "supcon", "knn1",
                   round(knn1[0] - knn1[1], 2), kind="same"),
        _acc_claim(f"{dataset}-knn5", "SINCERE App. M, Table 6",
                   f"5-NN accuracy of SINCERE and SupCon does not differ significantly ({label})",
                   f"5-NN SINCERE {knn5[0]:.2f} vs SupCon {knn5[1]:.2f}", "sincere",
                   "supcon", "knn5",
                   round(knn5[0] - knn5[1], 2), kind="same"),
    )
    note = ("Both losses start in the collapsed state (every embedding nearly the same vector, the "
            "loss log(number of candidates in the denominator)): the paper's own first-epoch "
            "means in Table 4 are such values at its batch of 512 (CIFAR-2: SINCERE 6.25 ~ "
            "log 513, SupCon 6.94 ~ log 1023), and its runs leave that state within 800 epochs. "
            "A run that never leaves it here is marked collapsed and its claims inconclusive. "
            "Where both margins are close to 0, differences in the fourth decimal decide the "
            "margin's verdict: read the values, not only the verdict.")
    return Study(f"sincere_{dataset}", "cpu", f"1. SINCERE vs SupCon on {label}", (0, 1, 2),
                 variants, claims, note=note)


TEMPERATURES = ("0.05", "0.1", "0.2", "0.5", "1.0")
#: Wang & Liu supplement, CIFAR-10 rows of Table 1 (ordinary) and Table 2 (hard), linear top-1.
WANG_LIU = {"contrastive": {"0.05": 76.10, "0.1": 81.82, "0.2": 83.78, "0.5": 82.54,
                            "1.0": 82.21},
            "hard": {"0.05": 76.22, "0.1": 80.44, "0.2": 83.28, "0.5": 84.31, "1.0": 84.19}}


def _temperature_study() -> Study:
    variants = tuple(
        Variant(f"{kind}_t{t}", f"{'hard' if kind == 'hard' else 'ordinary'} t={t}",
                _cpu(f"temperature_{kind}_t{t}"), ("knn200", "linear", "analyze"),
                analyze_args=("--temperatures", t),
                params=(("loss", kind), ("t", float(t))))
        for kind in ("contrastive", "hard") for t in TEMPERATURES)
    o, h = WANG_LIU["contrastive"], WANG_LIU["hard"]
    lin = "linear/top1"

    def degrade(get: Callable[[str, str], float]) -> float:
        hard = get("hard_t1.0", lin) - get("hard_t0.2", lin)
        ordinary = get("contrastive_t1.0", lin) - get("contrastive_t0.2", lin)
        return 100.0 * (hard - ordinary)

    def separation(name: str) -> Callable[[Callable[[str, str], float]], float]:
        return lambda get: (get(name, "analyze/positive_similarity_mean")
                            - get(name, "analyze/nearest_negative_similarity_mean"))

    sep_lo, sep_hi = separation("contrastive_t0.05"), separation("contrastive_t1.0")
    claims = (
        _acc_claim("t-small", "Wang & Liu suppl. Table 1",
                   "ordinary loss: t = 0.2 beats t = 0.05 (too small a temperature hurts)",
                   f"linear top-1 {o['0.2']:.2f} (t=0.2) vs {o['0.05']:.2f} (t=0.05)",
                   "contrastive_t0.2", "contrastive_t0.05", "linear",
                   round(o["0.2"] - o["0.05"], 2)),
        Claim("t-hard-degrade", "Wang & Liu suppl. Tables 1-2",
              "from t = 0.2 to t = 1.0 the hard loss loses less accuracy than the ordinary loss",
              f"hard {h['0.2']:.2f} -> {h['1.0']:.2f}, ordinary {o['0.2']:.2f} -> "
              f"{o['1.0']:.2f}", "sign",
              tuple((f"{k}_t{t}", lin) for k in ("contrastive", "hard") for t in ("0.2", "1.0")),
              degrade, round((h["1.0"] - h["0.2"]) - (o["1.0"] - o["0.2"]), 2), " points"),
        _acc_claim("t-hard-large", "Wang & Liu suppl. Tables 1-2",
                   "at t = 1.0 the hard loss beats the ordinary loss",
                   f"linear top-1 hard {h['1.0']:.2f} vs ordinary {o['1.0']:.2f}",
                   "hard_t1.0", "contrastive_t1.0", "linear", round(h["1.0"] - o["1.0"], 2)),
        Claim("t-uniformity", "Wang & Liu (main paper; not among the supplied texts)",
              "ordinary loss: a smaller temperature gives a more uniform embedding "
              "(lower uniformity value at t = 0.05 than at t = 1.0)", "no number in the "
              "supplied texts", "sign",
              (("contrastive_t0.05", "analyze/uniformity"),
               ("contrastive_t1.0", "analyze/uniformity")),
              _diff("contrastive_t1.0", "contrastive_t0.05", "analyze/uniformity")),
        Claim("t-tolerance", "Wang & Liu (main paper; not among the supplied texts)",
              "ordinary loss: a larger temperature gives a higher tolerance (mean same-class "
              "similarity) at t = 1.0 than at t = 0.05", "no number in the supplied texts",
              "sign", (("contrastive_t0.05", "analyze/tolerance"),
                       ("contrastive_t1.0", "analyze/tolerance")),
              _diff("contrastive_t1.0", "contrastive_t0.05", "analyze/tolerance")),
        Claim("t-local-separation", "Wang & Liu suppl. Figs. 1, 4 (our reading)",
              "ordinary loss: the gap between the positive's similarity and the nearest "
              "negative's is wider at t = 0.05 than at t = 1.0 (local separation)",
              "figures only", "sign",
              tuple((f"contrastive_t{t}", f"analyze/{k}") for t in ("0.05", "1.0")
                    for k in ("positive_similarity_mean", "nearest_negative_similarity_mean")),
              lambda get: sep_lo(get) - sep_hi(get)),
    )
    return Study("temperature", "cpu", "2. Temperature: ordinary and hard contrastive loss",
                 (0, 1), variants, claims)


def _sce_studies() -> tuple[Study, Study]:
    ev = ("knn200", "linear")
    lam = tuple(Variant(f"lambda{c}", f"lambda={c}", _cpu(f"sce_lambda{c}"), ev,
                        params=(("coeff", float(c)),)) for c in ("0.0", "0.5", "1.0"))
    free = Variant("no_ceil", "lambda=mu=0.5, eta=0 (no Ceil)", _cpu("sce_free_no_ceil"), ev)
    lam_claims = (
        _acc_claim("sce-l0", "SCE Table 2", "lambda = 0.5 beats lambda = 0 (pure ReSSL target)",
                   "ImageNet-100 linear top-1 82.9 (0.5) vs 81.5 (0)", "lambda0.5", "lambda0.0",
                   "linear", 1.4),
        _acc_claim("sce-l1", "SCE Table 2", "lambda = 0.5 beats lambda = 1 (pure InfoNCE)",
                   "ImageNet-100 linear top-1 82.9 (0.5) vs 81.1 (1)", "lambda0.5", "lambda1.0",
                   "linear", 1.8),
        _acc_claim("sce-ceil", "SCE Table 3",
                   "the Ceil term helps: lambda = mu = eta = 0.5 beats lambda = mu = 0.5, eta = 0",
                   "ImageNet-100 linear top-1 82.94 vs 82.80 (tau_m 0.05)", "lambda0.5",
                   "no_ceil", "linear", 0.14),
    )
    taus = ("0.03", "0.05", "0.07", "0.1")
    tau = tuple(Variant(f"taum{t}", f"tau_m={t}",
                        _cpu("sce_lambda0.5" if t == "0.05" else f"sce_taum{t}"), ev,
                        params=(("tau_m", float(t)),)) for t in taus)

    def sharpest(get: Callable[[str, str], float]) -> float:
        best = max(get(f"taum{t}", "linear/top1") for t in ("0.03", "0.05", "0.07"))
        return 100.0 * (best - get("taum0.1", "linear/top1"))

    tau_claims = (
        _acc_claim("sce-taum", "SCE Table 25 (CIFAR-10, tau 0.1)",
                   "a sharper target helps: tau_m = 0.07 beats tau_m = 0.1 = tau",
                   "linear top-1 90.16 (0.07) vs 88.97 (0.1)", "taum0.07", "taum0.1", "linear",
                   1.19),
        Claim("sce-taum-best", "SCE Table 25 (CIFAR-10, tau 0.1)",
              "the best tau_m in {0.03, 0.05, 0.07} beats tau_m = 0.1",
              "linear top-1 best 90.16 (0.07) vs 88.97 (0.1)", "sign",
              tuple((f"taum{t}", "linear/top1") for t in taus), sharpest, 1.19, " points"),
    )
    return (Study("sce_lambda", "cpu", "3a. SCE: lambda and the Ceil term", (0, 1, 2),
                  (*lam, free), lam_claims),
            Study("sce_tau_m", "cpu", "3b. SCE: target temperature tau_m at tau = 0.1", (0, 1, 2),
                  tau, tau_claims))


def _dystress_study() -> Study:
    ev = ("knn200", "analyze")
    args = ("--dystress", "0.07", "0.2")
    variants = (
        Variant("simclr", "SimCLR t=0.2", _cpu("dystress_simclr"), ev, analyze_args=args),
        Variant("dystress", "DySTreSS (0.07, 0.2)", _cpu("dystress_vanilla"), ev,
                analyze_args=args),
        Variant("shifted", "DySTreSS shifted (-0.2, 0.6)", _cpu("dystress_shifted"), ev,
                analyze_args=("--dystress", "0.07", "0.2", "-0.2", "0.6")),
    )
    claims = (
        _acc_claim("dys-knn", "DySTreSS Table 3", "DySTreSS beats constant-temperature SimCLR",
                   "CIFAR-10 200-NN top-1 85.68 vs 83.65", "dystress", "simclr", "knn200", 2.03),
        Claim("dys-unif", "DySTreSS Table 13", "DySTreSS is more uniform (lower uniformity)",
              "uniformity -2.8430 vs -2.2135", "sign",
              (("dystress", "analyze/uniformity"), ("simclr", "analyze/uniformity")),
              _diff("simclr", "dystress", "analyze/uniformity"), 0.6295),
        Claim("dys-interclass", "DySTreSS Table 13",
              "DySTreSS separates class centroids more (lower inter-class uniformity)",
              "inter-class uniformity -0.5797 vs -0.5194", "sign",
              (("dystress", "analyze/interclass_uniformity"),
               ("simclr", "analyze/interclass_uniformity")),
              _diff("simclr", "dystress", "analyze/interclass_uniformity"), 0.0603),
        Claim("dys-align", "DySTreSS Table 13",
              "DySTreSS's alignment value is higher (positives slightly farther apart)",
              "alignment 1.6310 vs 1.5784", "sign",
              (("dystress", "analyze/alignment"), ("simclr", "analyze/alignment")),
              _diff("dystress", "simclr", "analyze/alignment"), 0.0526),
        _acc_claim("dys-shift", "DySTreSS App. A.3, Fig. 7 (Table 15: ImageNet-100)",
                   "on CIFAR-10 the vanilla profile is not worse than the shifted one "
                   "(shift -0.2, scale 0.6)",
                   "Fig. 7: no shifted profile beats vanilla on CIFAR; Table 15 (ImageNet-100, "
                   "20-NN) 71.66 vanilla vs 72.38 shifted", "dystress", "shifted", "knn200",
                   -0.72, kind="not_worse"),
    )
    return Study("dystress", "cpu", "4. DySTreSS vs constant-temperature SimCLR", (0, 1, 2),
                 variants, claims)


def _baselines_study() -> Study:
    ev = ("knn200", "linear")
    variants = tuple(Variant(n, lbl, _cpu(f"baselines_{n}"), ev)
                     for n, lbl in (("sce", "SCE"), ("moco", "MoCo v2"), ("ressl", "ReSSL")))
    claims = (
        _acc_claim("b-moco", "SCE Table 6", "SCE beats MoCo v2", "CIFAR-10 linear 90.3 vs 87.6",
                   "sce", "moco", "linear", 2.7),
        _acc_claim("b-ressl", "SCE Table 6", "SCE beats ReSSL", "CIFAR-10 linear 90.3 vs 90.2",
                   "sce", "ressl", "linear", 0.1),
        _acc_claim("b-ressl-moco", "SCE Table 6", "ReSSL beats MoCo v2",
                   "CIFAR-10 linear 90.2 vs 87.6", "ressl", "moco", "linear", 2.6),
    )
    return Study("baselines", "cpu", "5. SCE vs MoCo v2 vs ReSSL at the same budget", (0, 1, 2),
                 variants, claims)


def _absolute(cid: str, source: str, name: str, label: str, protocol: str,
              paper: float) -> Claim:
    what = {"linear_d1": "linear probe, SCE D.1 protocol", "knn200": "200-NN"}[protocol]
    return Claim(cid, source, f"{label} reaches {paper} top-1 ({what})", f"{paper}", "absolute",
                 ((name, f"{protocol}/top1"),), lambda get: 100.0 * get(name, f"{protocol}/top1"),
                 paper, " points")


def _gpu_studies() -> tuple[Study, Study]:
    ev6 = ("linear_d1", "linear", "knn200")
    t6 = tuple(Variant(n, lbl, f"configs/repro/gpu/table6_{n}.yaml", ev6)
               for n, lbl in (("sce", "SCE"), ("moco", "MoCo v2"), ("ressl", "ReSSL")))
    c6 = (
        _absolute("g-sce", "SCE Table 6", "sce", "SCE", "linear_d1", 90.3),
        _absolute("g-moco", "SCE Table 6", "moco", "MoCo v2", "linear_d1", 87.6),
        _absolute("g-ressl", "SCE Table 6", "ressl", "ReSSL", "linear_d1", 90.2),
        _acc_claim("g-sce-moco", "SCE Table 6", "SCE beats MoCo v2", "90.3 vs 87.6", "sce",
                   "moco", "linear_d1", 2.7),
        _acc_claim("g-sce-ressl", "SCE Table 6", "SCE beats ReSSL", "90.3 vs 90.2", "sce",
                   "ressl", "linear_d1", 0.1),
    )
    ev3 = ("knn200", "analyze")
    t3 = (Variant("simclr", "SimCLR t=0.2", "configs/repro/gpu/table3_simclr.yaml", ev3,
                  analyze_args=("--dystress", "0.07", "0.2")),
          Variant("dystress", "DySTreSS (0.07, 0.2)", "configs/repro/gpu/table3_dystress.yaml",
                  ev3, analyze_args=("--dystress", "0.07", "0.2")))
    c3 = (
        _absolute("g-simclr", "DySTreSS Table 3", "simclr", "SimCLR", "knn200", 83.65),
        _absolute("g-dystress", "DySTreSS Table 3", "dystress", "DySTreSS", "knn200", 85.68),
        _acc_claim("g-dys-simclr", "DySTreSS Table 3", "DySTreSS beats SimCLR",
                   "200-NN 85.68 vs 83.65", "dystress", "simclr", "knn200", 2.03),
        Claim("g-dys-unif", "DySTreSS Table 13", "DySTreSS is more uniform (lower uniformity)",
              "uniformity -2.8430 vs -2.2135", "sign",
              (("dystress", "analyze/uniformity"), ("simclr", "analyze/uniformity")),
              _diff("simclr", "dystress", "analyze/uniformity"), 0.6295),
    )
    return (Study("gpu_table6", "gpu", "B1. SCE, MoCo v2, ReSSL: R-18, 200 epochs, batch 256",
                  (0,), t6, c6),
            Study("gpu_table3", "gpu", "B2. SimCLR with and without DySTreSS: R-18, 200 epochs",
                  (0,), t3, c3))


def build_studies() -> dict[str, Study]:
    """Every study, in report order."""
    studies = [_sincere_study("cifar2"), _sincere_study("cifar10"), _temperature_study(),
               *_sce_studies(), _dystress_study(), _baselines_study(), *_gpu_studies()]
    return {s.name: s for s in studies}


STUDIES = build_studies()


# --- paths and commands -----------------------------------------------------------------------
def run_dir(part: str, stem: str, seed: int, epochs: int | None = None) -> Path:
    """``runs/repro/<part>[-e<epochs>]/<stem>/seed<seed>``."""
    tag = part if epochs is None else f"{part}-e{epochs}"
    return RUNS / tag / stem / f"seed{seed}"


def compare_dir(part: str, a: str, b: str, protocol: str, seed: int,
                epochs: int | None = None) -> Path:
    tag = part if epochs is None else f"{part}-e{epochs}"
    return RUNS / tag / "compare" / f"{a}__vs__{b}" / protocol / f"seed{seed}"


def data_args(variant: Variant) -> list[str]:
    """``--data/--root`` of the evaluations: the archive, its cat and dog images for CIFAR-2
    (``--classes cat dog``: cat = 0, dog = 1, the labels of ``data.classes: [cat, dog]`` in
    pretraining)."""
    args = ["--data", "image_archive", "--root", ARCHIVE, "--data-cache-dir", ARRAY_CACHE]
    if variant.data == "cifar2":
        args += ["--classes", *CIFAR2_CLASSES]
    return args


def pretrain_command(variant: Variant, seed: int, out: Path, *, resume: bool,
                     epochs: int | None = None, chunk: list[str] | None = None) -> list[str]:
    cmd = ["contrastkit", "pretrain", "--config", variant.config, "--output", str(out / "pretrain"),
           "--seed_everything", str(seed), "--trainer.enable_progress_bar", "false"]
    if epochs is not None:
        cmd += ["--trainer.max_epochs", str(epochs)]
    cmd += chunk or []
    # a fresh start replaces what an interrupted first chunk left before its first checkpoint
    cmd += ["--resume", "last"] if resume else ["--overwrite"]
    return cmd


def parse_duration(text: str) -> int:
    """``DD:HH:MM:SS`` (Lightning's ``max_time`` format) -> seconds."""
    parts = text.split(":")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        raise SystemExit(f"--chunk-time must be DD:HH:MM:SS, got {text!r}")
    days, hours, minutes, seconds = (int(p) for p in parts)
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def format_duration(seconds: float) -> str:
    total = int(seconds)
    return (f"{total // 86400:02d}:{total // 3600 % 24:02d}:{total // 60 % 60:02d}:"
            f"{total % 60:02d}")


def trained_seconds(ckpt: Path) -> float:
    """Training time recorded by Lightning's ``Timer`` in ``ckpt`` (0 without one)."""
    if not ckpt.is_file():
        return 0.0
    import torch

    try:
        state = torch.load(ckpt, map_location="cpu", weights_only=False)
    except Exception:  # an unreadable checkpoint: pretrain --resume will say why
        return 0.0
    timer = (state.get("callbacks") or {}).get("Timer") or {}
    return float((timer.get("time_elapsed") or {}).get("train", 0.0))


def chunk_arguments(chunk_seconds: int, trained: float) -> list[str]:
    """Trainer arguments that stop a pretraining chunk on an epoch boundary.

    Two properties of ``--trainer.max_time`` make it unfit for chunks with exact resume:
    Lightning's ``Timer`` stores its elapsed training time in the checkpoint and restores it on
    ``--resume`` (a second chunk with the same ``max_time`` stops at once), and it stops after
    any step, mid-epoch, where a resumed run restarts the epoch's data order (Lightning warns
    "resuming from a checkpoint that ended before the epoch ended"). So each chunk adds a
    ``Timer`` that checks only at epoch ends, with a duration of the time already trained
    plus ``chunk_seconds``: a chunk lasts ``chunk_seconds`` plus at most one epoch and the
    start-up.
    """
    return ["--trainer.callbacks+=lightning.pytorch.callbacks.Timer",
            "--trainer.callbacks.duration", format_duration(trained + chunk_seconds),
            "--trainer.callbacks.interval", "epoch"]


def eval_command(variant: Variant, protocol: str, seed: int, out: Path,
                 device: str = "cpu") -> list[str]:
    cmd = ["contrastkit", *EVALS[protocol], "--checkpoint",
           str(out / "pretrain" / "checkpoints" / "last.ckpt"), *data_args(variant),
           "--output", str(eval_dir(out, protocol)), "--cache-dir", FEATURE_CACHE,
           "--device", device, "--seed", str(seed), "--quiet",
           "--overwrite"]  # run only when results.json is missing: replace what is there
    if protocol == "analyze":
        cmd += list(variant.analyze_args)
    return cmd


def eval_dir(out: Path, protocol: str) -> Path:
    return out / "analyze" if protocol == "analyze" else out / "eval" / protocol


def compare_command(a: Path, b: Path, out: Path, seed: int) -> list[str]:
    return ["contrastkit", "compare", str(a), str(b), "--output", str(out), "--seed", str(seed)]


# --- run state ------------------------------------------------------------------------------
def config_epochs(config: str) -> int:
    import yaml

    raw = yaml.safe_load((REPO / config).read_text()) or {}
    return int((raw.get("trainer") or {}).get("max_epochs") or 0)


def pretrain_finished(ckpt: Path, max_epochs: int) -> bool:
    """Whether ``ckpt`` was written at the end of the last epoch (Lightning loop state)."""
    if not ckpt.is_file():
        return False
    import torch

    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    loop = (state.get("loops") or {}).get("fit_loop") or {}
    processed = (((loop.get("epoch_progress") or {}).get("current") or {}).get("processed", 0))
    last_batch = (loop.get("epoch_loop.batch_progress") or {}).get("is_last_batch", False)
    return int(processed) >= max_epochs and bool(last_batch)


def read_losses(metrics_csv: Path) -> dict[str, float]:
    """Mean ``train/loss`` of the first and of the last logged epoch (SINCERE Table 4), and the
    last epoch's mean ``train/positive_similarity`` when logged (see :func:`collapsed`)."""
    import csv

    by_epoch: dict[int, list[float]] = {}
    positive: dict[int, list[float]] = {}
    with open(metrics_csv, newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get("train/loss") and row.get("epoch"):
                epoch = int(float(row["epoch"]))
                by_epoch.setdefault(epoch, []).append(float(row["train/loss"]))
                if row.get("train/positive_similarity"):
                    positive.setdefault(epoch, []).append(float(row["train/positive_similarity"]))
    if not by_epoch:
        return {}
    first, last = min(by_epoch), max(by_epoch)
    out = {"initial_loss": sum(by_epoch[first]) / len(by_epoch[first]),
           "final_loss": sum(by_epoch[last]) / len(by_epoch[last]),
           "logged_epochs": last + 1}
    if positive.get(last):
        out["final_positive_similarity"] = sum(positive[last]) / len(positive[last])
    return out


#: A run counts as collapsed when, in its last epoch, the two views' mean cosine similarity is
#: at least this and the loss fell by less than COLLAPSE_MAX_DROP of its first epoch's value.
COLLAPSE_SIMILARITY = 0.95
COLLAPSE_MAX_DROP = 0.03


def collapsed(metrics: dict[str, float]) -> bool:
    """Whether a run's pretraining collapsed or nearly so: every embedding nearly the same
    vector, the loss stuck near its value for identical similarities (log of the number of
    candidates). Such a run carries no evidence about a claim. The thresholds were set after
    the Part A runs: every hard-loss run ends at 4.177 ~ log 65 (64 hard negatives + the
    positive) with view similarity 0.96-0.998, the CIFAR-2 runs at log 257 / log 511, and the
    SINCERE/SupCon CIFAR-10 runs at similarity 0.97 after a 2% fall; every other run has
    similarity <= 0.94 or a fall of 5% or more."""
    try:
        similarity = metrics["pretrain/final_positive_similarity"]
        first, final = metrics["pretrain/initial_loss"], metrics["pretrain/final_loss"]
    except KeyError:
        return False
    return similarity >= COLLAPSE_SIMILARITY and final >= (1.0 - COLLAPSE_MAX_DROP) * first


# --- execution --------------------------------------------------------------------------------
class Runner:
    """Runs (or, with ``dry_run``, prints) commands from the repository root."""

    def __init__(self, dry_run: bool = False, log: Callable[[str], None] = print,
                 max_steps: int | None = None) -> None:
        self.dry_run = dry_run
        self.log = log
        self.commands: list[list[str]] = []
        self.steps_left = max_steps  # pretraining chunks and evaluations still allowed

    def spend(self) -> bool:
        """Take one step of the budget; False when it is exhausted."""
        if self.steps_left is None:
            return True
        if self.steps_left <= 0:
            return False
        self.steps_left -= 1
        return True

    def __call__(self, cmd: list[str]) -> int:
        self.commands.append(cmd)
        self.log("$ " + shlex.join(cmd))
        if self.dry_run:
            return 0
        exe = shutil.which(cmd[0], path=str(Path(sys.executable).parent)) or cmd[0]
        return subprocess.run([exe, *cmd[1:]], cwd=REPO, check=False).returncode


def selected(names: Sequence[str] | None, part: str) -> list[Study]:
    chosen = [s for s in STUDIES.values() if s.part == part]
    if names:
        unknown = [n for n in names if n not in STUDIES or STUDIES[n].part != part]
        if unknown:
            known = ", ".join(s.name for s in chosen)
            raise SystemExit(f"--study: unknown {part} study {unknown}; choose from {known}")
        chosen = [STUDIES[n] for n in names]
    return chosen


def run_studies(part: str, studies: list[Study], seeds: Sequence[int] | None, run: Runner, *,
                epochs: int | None = None, chunk_seconds: int | None = None,
                device: str = "cpu") -> bool:
    """Pretrain, evaluate and compare every run of ``studies``; True when all finished."""
    all_done = True
    done_runs: set[tuple[str, int]] = set()
    for study in studies:
        for seed in (seeds if seeds else study.seeds):
            for variant in study.variants:
                if (variant.stem, seed) in done_runs:
                    continue
                finished = _train_and_eval(part, variant, seed, run, epochs=epochs,
                                           chunk_seconds=chunk_seconds, device=device)
                all_done &= finished
                if finished:
                    done_runs.add((variant.stem, seed))
            for a, b, protocol in study.all_pairs():
                va, vb = study.variant(a), study.variant(b)
                da = eval_dir(run_dir(part, va.stem, seed, epochs), protocol)
                db = eval_dir(run_dir(part, vb.stem, seed, epochs), protocol)
                out = compare_dir(part, va.stem, vb.stem, protocol, seed, epochs)
                ready = run.dry_run or ((REPO / da / "results.json").is_file()
                                        and (REPO / db / "results.json").is_file())
                if ready and not (REPO / out / "comparison.json").is_file():
                    run(compare_command(da, db, out, seed))
    if not run.dry_run:
        write_summary(collect(), REPO / SUMMARY)
    return all_done


def _train_and_eval(part: str, variant: Variant, seed: int, run: Runner, *, epochs: int | None,
                    chunk_seconds: int | None, device: str) -> bool:
    """Pretrain one run to its last epoch (in chunks with ``chunk_seconds``), then evaluate."""
    out = run_dir(part, variant.stem, seed, epochs)
    ckpt = REPO / out / "pretrain" / "checkpoints" / "last.ckpt"

    def chunk() -> list[str] | None:
        if chunk_seconds is None:
            return None
        return chunk_arguments(chunk_seconds, trained_seconds(ckpt))

    if run.dry_run:
        run(pretrain_command(variant, seed, out, resume=ckpt.is_file(), epochs=epochs,
                             chunk=chunk()))
        for protocol in variant.evals:
            run(eval_command(variant, protocol, seed, out, device))
        return True
    target_epochs = epochs or config_epochs(variant.config)
    while not pretrain_finished(ckpt, target_epochs):
        if not run.spend():
            run.log(f"# {out}: step budget spent; rerun to continue")
            return False
        code = run(pretrain_command(variant, seed, out, resume=ckpt.is_file(), epochs=epochs,
                                    chunk=chunk()))
        if code != 0:
            run.log(f"# {out}: pretraining failed with exit status {code}")
            return False
        if chunk_seconds is None and not pretrain_finished(ckpt, target_epochs):
            run.log(f"# {out}: pretraining ended before epoch {target_epochs}")
            return False
    for protocol in variant.evals:
        if not (REPO / eval_dir(out, protocol) / "results.json").is_file():
            if not run.spend():
                run.log(f"# {out}: step budget spent; rerun to continue")
                return False
            code = run(eval_command(variant, protocol, seed, out, device))
            if code != 0:
                run.log(f"# {out}: {protocol} failed with exit status {code}")
                return False
    return True


# --- collection ---------------------------------------------------------------------------------
def _flat(prefix: str, metrics: dict) -> dict[str, float]:
    """The numeric entries of ``metrics`` flattened to ``prefix + "a/b"`` keys, as floats."""
    from contrastkit.eval.report import flatten_metrics

    return {key: float(value) for key, value in flatten_metrics(metrics, prefix).items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)}


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def collect(root: Path = REPO) -> dict:
    """Scan ``runs/repro`` for every known run, evaluation and comparison."""
    runs: dict[str, dict] = {}
    comparisons: dict[str, dict] = {}
    for tag_dir in sorted((root / RUNS).glob("*")):
        if not tag_dir.is_dir():
            continue
        tag = tag_dir.name
        part, _, ep = tag.partition("-e")
        for study in STUDIES.values():
            if study.part != part:
                continue
            for variant in study.variants:
                for seed_dir in sorted((tag_dir / variant.stem).glob("seed*")):
                    key = f"{tag}/{variant.stem}/{seed_dir.name}"
                    if key not in runs:
                        runs[key] = _collect_run(seed_dir, variant, part, tag, ep, root)
            for a, b, protocol in study.all_pairs():
                sa, sb = study.variant(a).stem, study.variant(b).stem
                base = tag_dir / "compare" / f"{sa}__vs__{sb}" / protocol
                for seed_dir in sorted(base.glob("seed*")):
                    data = _read_json(seed_dir / "comparison.json")
                    if data:
                        comparisons[f"{tag}/{sa}__vs__{sb}/{protocol}/{seed_dir.name}"] = {
                            k: data.get(k) for k in ("difference", "ci_low", "ci_high",
                                                     "confidence", "verdict", "num_test",
                                                     "accuracy_a", "accuracy_b", "n_resamples")}
    return {"generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "runs": runs, "comparisons": comparisons}


def _accuracy_interval(folder: Path, results: dict, protocol: str) -> dict[str, float]:
    """95% percentile bootstrap interval of top-1 (1,000 test-set resamples, seed 0) from the
    evaluation's predictions (read with ``contrastkit.eval.report.load_run``); empty when it
    wrote none."""
    if not isinstance(results.get("predictions"), str):
        return {}
    from contrastkit.eval import bootstrap_accuracy
    from contrastkit.eval.report import load_run

    try:
        _, arrays = load_run(folder)
    except FileNotFoundError:
        return {}
    _, low, high = bootstrap_accuracy(arrays["pred"], arrays["labels"])
    return {f"{protocol}/top1_ci_low": low, f"{protocol}/top1_ci_high": high}


def pretrain_minutes(pretrain_dir: Path) -> float | None:
    """Wall-clock minutes of a pretraining run, start-up included: from the write of its
    ``config.yaml`` (LightningCLI saves it before the first step) to that of ``last.ckpt``.

    None when either file is missing. A resumed run rewrites ``config.yaml``, so the figure
    then covers the last invocation only.
    """
    config, ckpt = pretrain_dir / "config.yaml", pretrain_dir / "checkpoints" / "last.ckpt"
    if not (config.is_file() and ckpt.is_file()):
        return None
    return max(0.0, (ckpt.stat().st_mtime - config.stat().st_mtime) / 60.0)


def _collect_run(seed_dir: Path, variant: Variant, part: str, tag: str, ep: str,
                 root: Path) -> dict:
    epochs = int(ep) if ep else config_epochs(variant.config)
    pre = seed_dir / "pretrain"
    finished = pretrain_finished(pre / "checkpoints" / "last.ckpt", epochs)
    metrics: dict[str, float] = {}
    if (pre / "metrics.csv").is_file():
        metrics.update(_flat("pretrain/", read_losses(pre / "metrics.csv")))
    minutes = pretrain_minutes(pre)
    if minutes is not None:
        metrics["pretrain/wall_minutes"] = minutes
    figures: dict[str, str] = {}
    for protocol in variant.evals:
        data = _read_json(eval_dir(seed_dir, protocol) / "results.json")
        if data:
            metrics.update(_flat(f"{protocol}/", data.get("metrics") or {}))
            metrics.update(_accuracy_interval(eval_dir(seed_dir, protocol), data, protocol))
            for name in data.get("figures") or []:
                figures[f"{protocol}/{name}"] = str(
                    (eval_dir(seed_dir, protocol) / name).relative_to(root))
    evals_done = [p for p in variant.evals
                  if (eval_dir(seed_dir, p) / "results.json").is_file()]
    return {"part": part, "tag": tag, "config": variant.config, "stem": variant.stem,
            "seed": int(seed_dir.name.removeprefix("seed")), "epochs": epochs,
            "pretrain_finished": finished, "evals_done": evals_done,
            "status": "done" if finished and len(evals_done) == len(variant.evals) else "partial",
            "metrics": metrics, "figures": figures}


def write_summary(summary: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        json.dump(summary, handle, indent=2)
        handle.write("\n")
    os.replace(tmp, path)


# --- verdicts -----------------------------------------------------------------------------------
@dataclass
class Verdict:
    """What the report says about one claim."""

    verdict: str
    seeds: list[int]
    values: list[float]
    intervals: list[tuple[float, float]]
    tag: str | None = None

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None


def _tags(summary: dict, part: str) -> list[str]:
    """Run tags of ``part`` in the summary: the configs' own budget first, then overrides."""
    tags = {r["tag"] for r in summary.get("runs", {}).values() if r.get("part") == part}
    return sorted(tags, key=lambda t: (t != part, t))


def judge(claim: Claim, study: Study, summary: dict, tag: str | None = None) -> Verdict:
    """Verdict of ``claim`` from the collected ``summary`` (see the module docstring)."""
    runs, comparisons = summary.get("runs", {}), summary.get("comparisons", {})
    for candidate in ([tag] if tag else _tags(summary, study.part)):
        seeds = sorted({r["seed"] for r in runs.values() if r.get("tag") == candidate})
        values, intervals, used = [], [], []
        stuck: set[str] = set()  # labels of collapsed runs the claim reads
        for seed in seeds:
            def get(name: str, metric: str, seed: int = seed, tag: str = candidate,
                    stuck: set[str] = stuck) -> float:
                run = runs.get(f"{tag}/{study.variant(name).stem}/seed{seed}") or {}
                if not run.get("pretrain_finished"):
                    raise KeyError(metric)
                if collapsed(run["metrics"]):
                    stuck.add(study.variant(name).label)
                return run["metrics"][metric]

            try:
                value = claim.value(get)
            except KeyError:
                continue
            interval = None
            if claim.compare:
                a, b, protocol = claim.compare
                key = (f"{candidate}/{study.variant(a).stem}__vs__{study.variant(b).stem}/"
                       f"{protocol}/seed{seed}")
                comp = comparisons.get(key)
                if comp is None:
                    continue
                interval = (100.0 * comp["ci_low"], 100.0 * comp["ci_high"])
            values.append(value)
            used.append(seed)
            if interval is not None:
                intervals.append(interval)
        if values:
            if candidate != study.part:  # a shortened run: measured, but not evidence
                return Verdict(PIPELINE_CHECK, used, values, intervals, candidate)
            if stuck:
                return Verdict(f"inconclusive ({', '.join(sorted(stuck))} collapsed or nearly: "
                               "see the "
                               "run table)", used, values, intervals, candidate)
            return Verdict(_decide(claim, values, intervals), used, values, intervals, candidate)
    return Verdict("not yet run", [], [], [])


#: Verdict of a claim measured only on runs shortened with ``--epochs`` (pipeline checks).
PIPELINE_CHECK = "not yet run (only a shortened pipeline-check run so far)"


def _decide(claim: Claim, values: list[float], intervals: list[tuple[float, float]]) -> str:
    mean = sum(values) / len(values)
    if claim.kind == "better":
        ok = all(low > 0 for low, _ in intervals)
        why = "" if ok else "; the 95% interval is not above 0 in every seed"
    elif claim.kind == "same":
        ok = all(low <= 0 <= high for low, high in intervals)
        why = "" if ok else "; a seed's 95% interval excludes 0"
    elif claim.kind == "not_worse":
        ok = all(high >= 0 for _, high in intervals)
        why = "" if ok else "; a seed's 95% interval lies below 0"
    elif claim.kind == "sign":
        if len(values) < 2:
            side = "the paper's sign" if values[0] > 0 else "the opposite sign"
            return (f"inconclusive (one seed, measured {values[0]:+.3f}{claim.unit}: "
                    f"{side}, with no seed spread to judge its size by)")
        sem = (sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values)) ** 0.5
        ok = all(v > 0 for v in values) and mean > SIGN_STANDARD_ERRORS * sem
        why = "" if ok else (
            "; the sign differs from the paper's in some seed" if not all(v > 0 for v in values)
            else f"; the mean is within {SIGN_STANDARD_ERRORS:g} standard errors of 0 over "
                 f"{len(values)} seeds")
    elif claim.kind == "absolute":
        assert claim.paper_value is not None
        ok = mean >= claim.paper_value - ABSOLUTE_TOLERANCE
        why = f"; more than {ABSOLUTE_TOLERANCE:g} point below the paper" if not ok else ""
    else:
        raise ValueError(f"claim {claim.id}: unknown kind {claim.kind!r}")
    if ok:
        return "reproduced"
    if claim.paper_value is None:
        return f"not reproduced (measured {mean:+.3f}{claim.unit}{why})"
    gap = mean - claim.paper_value
    return (f"not reproduced (measured {mean:+.3f} vs paper {claim.paper_value:+g}{claim.unit}"
            f", gap {gap:+.3f}{why})")


# --- report -------------------------------------------------------------------------------------
def _seed_values(summary: dict, tag: str, stem: str, metric: str) -> list[float]:
    out = []
    for run in summary.get("runs", {}).values():
        if run.get("tag") == tag and run.get("stem") == stem and run.get("pretrain_finished") \
                and metric in run.get("metrics", {}):
            out.append(run["metrics"][metric])
    return out


def _mean_std(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
    if not values:
        return "not yet run"
    vals = [scale * v for v in values]
    mean = sum(vals) / len(vals)
    if len(vals) == 1:
        return f"{mean:.{digits}f} (1 seed)"
    var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
    return f"{mean:.{digits}f} ± {var ** 0.5:.{digits}f} ({len(vals)} seeds)"


def _signed(value: float) -> str:
    """``+1.234`` style, with 3 significant digits for values below 0.01 (never ``+0.000``)."""
    return f"{value:+.3f}" if value == 0 or abs(value) >= 0.01 else f"{value:+.3g}"


def _cell(summary: dict, tag: str, stem: str, metric: str, scale: float, digits: int) -> str:
    """Seed mean ± std; for one seed of an accuracy, its bootstrap interval instead."""
    values = _seed_values(summary, tag, stem, metric)
    low = _seed_values(summary, tag, stem, f"{metric}_ci_low")
    high = _seed_values(summary, tag, stem, f"{metric}_ci_high")
    if len(values) == 1 and len(low) == 1 and len(high) == 1:
        return (f"{scale * values[0]:.{digits}f} [{scale * low[0]:.{digits}f}, "
                f"{scale * high[0]:.{digits}f}] (1 seed)")
    return _mean_std(values, scale, digits)


#: Per-study table columns: (header, metric, scale, digits).
COLUMNS: dict[str, list[tuple[str, str, float, int]]] = {
    "sincere": [("target-noise margin", "analyze/target_noise_margin", 1, 3),
                ("initial loss", "pretrain/initial_loss", 1, 2),
                ("final loss", "pretrain/final_loss", 1, 2),
                ("1-NN top-1 %", "knn1/top1", 100, 2), ("5-NN top-1 %", "knn5/top1", 100, 2)],
    "temperature": [("200-NN top-1 %", "knn200/top1", 100, 2),
                    ("linear top-1 %", "linear/top1", 100, 2),
                    ("uniformity", "analyze/uniformity", 1, 3),
                    ("tolerance", "analyze/tolerance", 1, 3),
                    ("positive sim.", "analyze/positive_similarity_mean", 1, 3),
                    ("nearest negative sim.", "analyze/nearest_negative_similarity_mean", 1, 3)],
    "sce": [("200-NN top-1 %", "knn200/top1", 100, 2), ("linear top-1 %", "linear/top1", 100, 2)],
    "dystress": [("200-NN top-1 %", "knn200/top1", 100, 2),
                 ("uniformity", "analyze/uniformity", 1, 4),
                 ("alignment", "analyze/alignment", 1, 4),
                 ("inter-class uniformity", "analyze/interclass_uniformity", 1, 4)],
    "gpu_table6": [("linear (D.1) top-1 %", "linear_d1/top1", 100, 2),
                   ("linear (fast) top-1 %", "linear/top1", 100, 2),
                   ("200-NN top-1 %", "knn200/top1", 100, 2)],
}


#: Appended to every study's run table: the measured pretraining time (see ``pretrain_minutes``).
TIME_COLUMN = ("pretrain min", "pretrain/wall_minutes", 1, 1)


def _columns(study: Study) -> list[tuple[str, str, float, int]]:
    if study.name.startswith("sincere"):
        cols = COLUMNS["sincere"]
    elif study.name in ("sce_lambda", "sce_tau_m", "baselines"):
        cols = COLUMNS["sce"]
    elif study.name == "gpu_table3":
        cols = COLUMNS["dystress"]
    else:
        cols = COLUMNS.get(study.name, COLUMNS["sce"])
    return [*cols, TIME_COLUMN]


def render_report(summary: dict, figures_dir: Path | None = None,
                  doc_dir: Path | None = None) -> str:
    """Markdown of docs/reproduction.md; figures are written to ``figures_dir`` when given."""
    lines = [
        "# Reproduction of the papers' claims",
        "",
        "Generated by `python scripts/repro.py report` from `runs/repro/summary.json` (written by",
        "`python scripts/repro.py cpu` / `gpu`; its copy beside this page, `reproduction.json`,",
        "holds every number); do not edit by hand. Every number below was",
        "measured by the public commands (`contrastkit pretrain`, `eval`, `analyze`, `compare`)",
        "on the configs of `configs/repro/`; a claim whose runs do not exist yet says",
        "**not yet run**.",
        "",
        f"Summary generated: {summary.get('generated', '–')}.",
        "",
        "## How to rerun",
        "",
        "```bash",
        "make repro-cpu                                   # Part A end to end (resumable)",
        "python scripts/repro.py cpu --study sincere_cifar2 --seeds 0   # one study, one seed",
        "python scripts/repro.py cpu --dry-run            # the commands, without running them",
        "python scripts/repro.py gpu --max-steps 1        # Part B: one chunk (<= 10 min) per call",
        "python scripts/repro.py report                   # this page and docs/figures/repro_*",
        "```",
        "",
        "Part A (CPU): ResNet-18 with the CIFAR stem (width 8; width 16 in study 1), the first",
        "10,000 images of a fixed shuffle of the CIFAR-10 JPEG archive's train split (CIFAR-2:",
        "all 10,000 cat and dog images), batch 256, the epochs of each config (4; 3 in study 1);",
        "evaluation on the full train (bank) and test splits of the archive (CIFAR-2: their cat",
        "and dog images). Part B (one GPU): full width, the 50,000 training images, 200 epochs,",
        "bf16, GPU augmentation. The archive's",
        "JPEG re-encoding makes accuracies close to, not equal to, the official files'.",
        "",
        "## Budget (Part A)",
        "",
        *BUDGET_NOTE,
        "",
        "## Verdict rules",
        "",
        "* *A beats B* (accuracy): reproduced when, in every finished seed, the paired bootstrap",
        "  95% interval of A - B (`contrastkit compare`, 1,000 test-set resamples) lies above 0.",
        "* *A and B do not differ* (SINCERE App. M): reproduced when every seed's interval",
        "  contains 0. *A is not worse than B*: no seed's interval lies below 0.",
        "* Other quantities (margin, loss, uniformity, differences of differences): reproduced",
        "  when the measured value has the paper's sign in every finished seed and the seed mean",
        f"  exceeds {SIGN_STANDARD_ERRORS:g} standard errors (sample std / sqrt(seeds)); with a "
        "single seed they are",
        "  *inconclusive* (no test-set interval exists for them, and no seed spread to judge by).",
        f"* Absolute numbers (Part B): reproduced when the seed mean is at most "
        f"{ABSOLUTE_TOLERANCE:g} point below",
        "  the paper's.",
        "* *Inconclusive* when a run the claim reads collapsed, or nearly, in pretraining (last "
        "epoch: the",
        f"  views' mean cosine similarity >= {COLLAPSE_SIMILARITY}, the loss down by less than "
        f"{COLLAPSE_MAX_DROP:.0%}).",
        "* Otherwise *not reproduced*, with the measured value, the paper's and the gap",
        "  (measured - paper); *not yet run* while no seed has every number a claim needs.",
        "* Values are oriented so that the paper's claim says *positive*; accuracies in points.",
        "  At Part A's scale only directions can be compared, never absolute numbers.",
        "",
    ]
    lines += _at_a_glance(summary)
    for part, title in (("cpu", "Part A: CPU-scale study"), ("gpu", "Part B: GPU, full scale")):
        lines += [f"## {title}", ""]
        if not _tags(summary, part):
            lines += [f"No run of this part exists yet. {PART_PENDING.get(part, '')}".rstrip(),
                      ""]
        for study in (s for s in STUDIES.values() if s.part == part):
            lines += _study_section(study, summary, figures_dir, doc_dir)
    return "\n".join(lines).rstrip() + "\n"


def _at_a_glance(summary: dict) -> list[str]:
    """Count of verdicts per part (the first word of each claim's verdict)."""
    lines = ["## At a glance", "", "| part | claims | reproduced | not reproduced | inconclusive "
             "| not yet run |", "|---|---|---|---|---|---|"]
    for part, title in (("cpu", "A (CPU scale)"), ("gpu", "B (GPU, full scale)")):
        counts = {"reproduced": 0, "not reproduced": 0, "inconclusive": 0, "not yet run": 0}
        for study in (s for s in STUDIES.values() if s.part == part):
            for claim in study.claims:
                verdict = judge(claim, study, summary).verdict
                counts[next(k for k in ("not yet run", "not reproduced", "inconclusive",
                                        "reproduced") if verdict.startswith(k))] += 1
        lines.append(f"| {title} | {sum(counts.values())} | " + " | ".join(
            str(counts[k]) for k in ("reproduced", "not reproduced", "inconclusive",
                                     "not yet run")) + " |")
    return [*lines, ""]


def _study_section(study: Study, summary: dict, figures_dir: Path | None,
                   doc_dir: Path | None) -> list[str]:
    tags = [study.part, *(t for t in _tags(summary, study.part) if t != study.part)]
    lines = [f"### {study.title}", ""]
    if study.note:
        lines += [study.note, ""]
    lines.append(f"Study `{study.name}`; default seeds {list(study.seeds)}; configs: "
                 + ", ".join(f"`{v.config}`" for v in dict.fromkeys(study.variants)) + ".")
    lines.append("")
    lines += ["| claim | paper (source) | paper's numbers | measured (per seed) | verdict |",
              "|---|---|---|---|---|"]
    for claim in study.claims:
        v = judge(claim, study, summary)
        if v.values:
            cells = []
            for i, (seed, value) in enumerate(zip(v.seeds, v.values, strict=True)):
                cell = f"s{seed}: {_signed(value)}"
                if i < len(v.intervals):
                    cell += f" [{v.intervals[i][0]:+.2f}, {v.intervals[i][1]:+.2f}]"
                cells.append(cell)
            per_seed = ", ".join(cells)
            if v.tag != study.part:
                per_seed += (f" ({v.tag}: {v.tag.partition('-e')[2]} epochs instead of the "
                             "configs': a pipeline check, not evidence)")
        else:
            per_seed = "–"
        lines.append(f"| {claim.statement} | {claim.source} | {claim.paper} | {per_seed} | "
                     f"{v.verdict} |")
    lines.append("")
    cols = _columns(study)
    for tag in tags:
        header = ["run", "epochs", *[c[0] for c in cols]]
        rows = []
        for variant in study.variants:
            epochs = next((r["epochs"] for r in summary.get("runs", {}).values()
                           if r.get("tag") == tag and r.get("stem") == variant.stem), None)
            cells = [_cell(summary, tag, variant.stem, m, s, d) for _, m, s, d in cols]
            rows.append([variant.label, str(epochs) if epochs else "–", *cells])
        if all(all(c == "not yet run" for c in r[2:]) for r in rows) and tag != tags[0]:
            continue
        lines.append(f"Runs under `runs/repro/{tag}/` (mean ± sample std over seeds; for a "
                     "single seed, accuracies carry their 95% test-set bootstrap interval):")
        lines.append("")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
        stuck = sorted({v.label for v in study.variants for r in summary.get("runs", {}).values()
                        if r.get("tag") == tag and r.get("stem") == v.stem
                        and r.get("pretrain_finished") and collapsed(r.get("metrics", {}))})
        if stuck:
            lines += [f"Collapsed or nearly ({', '.join(stuck)}): in the last epoch the two views' "
                      "mean "
                      f"cosine similarity was >= {COLLAPSE_SIMILARITY} and the loss had fallen by "
                      f"less than {COLLAPSE_MAX_DROP:.0%}: every embedding is nearly the same "
                      "vector, so claims that read these runs are *inconclusive*.", ""]
    if figures_dir is not None:
        for name, caption in make_figures(study, summary, figures_dir):
            rel = os.path.relpath(figures_dir / name, doc_dir) if doc_dir else str(
                figures_dir / name)
            lines += [f"![{caption}]({rel})", "", f"*{caption}*", ""]
    return lines


# --- figures ------------------------------------------------------------------------------------
def make_figures(study: Study, summary: dict, figures_dir: Path) -> list[tuple[str, str]]:
    """Write the study's figures (only from measured runs) and return (file, caption) pairs."""
    tags = _tags(summary, study.part)
    if not tags:
        return []
    tag = tags[0]
    made: list[tuple[str, str]] = []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures_dir.mkdir(parents=True, exist_ok=True)

    def mean(stem: str, metric: str, scale: float = 1.0) -> float | None:
        vals = _seed_values(summary, tag, stem, metric)
        return scale * sum(vals) / len(vals) if vals else None

    def save(fig, name: str, caption: str) -> None:
        path = figures_dir / name
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".png", dir=figures_dir)
        os.close(fd)
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        plt.close(fig)
        os.replace(tmp, path)
        made.append((name, caption))

    if study.name == "temperature":
        panels = [("linear/top1", 100.0, "linear top-1 (%)"), ("knn200/top1", 100.0,
                                                                 "200-NN top-1 (%)"),
                  ("analyze/uniformity", 1.0, "uniformity (lower: more uniform)"),
                  ("analyze/tolerance", 1.0, "tolerance")]
        if any(mean(v.stem, m) is not None for v in study.variants for m, _, _ in panels):
            fig, axes = plt.subplots(1, 4, figsize=(17, 3.6), constrained_layout=True)
            for ax, (metric, scale, ylabel) in zip(axes, panels, strict=True):
                for kind, style in (("contrastive", "o-"), ("hard", "s--")):
                    xs, ys = [], []
                    for t in TEMPERATURES:
                        y = mean(study.variant(f"{kind}_t{t}").stem, metric, scale)
                        if y is not None:
                            xs.append(float(t))
                            ys.append(y)
                    if xs:
                        ax.plot(xs, ys, style, label="ordinary" if kind == "contrastive"
                                else "hard")
                if metric == "linear/top1":
                    for kind, style in (("contrastive", "o:"), ("hard", "s:")):
                        ax.plot([float(t) for t in TEMPERATURES],
                                [WANG_LIU[kind][t] for t in TEMPERATURES], style, alpha=0.4,
                                label=f"paper, {'ordinary' if kind == 'contrastive' else 'hard'}")
                ax.set_xscale("log")
                ax.set_xlabel("temperature")
                ax.set_ylabel(ylabel)
                ax.legend(fontsize=7)
            save(fig, "repro_temperature.png",
                 "Study 2: accuracy, uniformity and tolerance against the temperature "
                 f"(`runs/repro/{tag}`, seed mean; faint dotted: the paper's CIFAR-10 linear "
                 "numbers, supplement Tables 1-2, at full scale).")
        made += _copy_run_figures(study, summary, tag, figures_dir,
                                  [("contrastive_t0.05", "analyze/local_separation.png"),
                                   ("contrastive_t1.0", "analyze/local_separation.png"),
                                   ("hard_t0.05", "analyze/local_separation.png"),
                                   ("hard_t1.0", "analyze/local_separation.png")],
                                  "local separation (supplement Figs. 1, 4)")
    elif study.name.startswith("sincere"):
        from contrastkit.train.callbacks import read_metrics_csv

        curves = {}
        for v in study.variants:
            metrics_csv = REPO / RUNS / tag / v.stem / "seed0" / "pretrain" / "metrics.csv"
            if metrics_csv.is_file():
                curves[v.label] = read_metrics_csv(metrics_csv, "train/loss")
        if curves:
            fig, ax = plt.subplots(figsize=(5, 3.2))
            for label, (steps, losses) in curves.items():
                ax.plot(steps, losses, label=label)
            ax.set_xlabel("optimiser step")
            ax.set_ylabel("training loss")
            ax.legend()
            save(fig, f"repro_{study.name}_loss.png",
                 f"{study.title}: training loss (seed 0, `runs/repro/{tag}`; SINCERE Table 4 "
                 "compares the first and last epochs' values).")
        made += _copy_run_figures(study, summary, tag, figures_dir,
                                  [("supcon", "analyze/similarity_histograms.png"),
                                   ("sincere", "analyze/similarity_histograms.png")],
                                  "nearest target / noise similarity histograms (SINCERE Fig. 2)")
    elif study.name in ("sce_lambda", "sce_tau_m", "baselines", "dystress", "gpu_table6",
                        "gpu_table3"):
        metric = "knn200/top1" if study.name in ("dystress", "gpu_table3") else (
            "linear_d1/top1" if study.name == "gpu_table6" else "linear/top1")
        labels, values, errs = [], [], []
        for v in study.variants:
            vals = [100.0 * x for x in _seed_values(summary, tag, v.stem, metric)]
            if vals:
                m = sum(vals) / len(vals)
                sd = (sum((x - m) ** 2 for x in vals) / (len(vals) - 1)) ** 0.5 \
                    if len(vals) > 1 else 0.0
                labels.append(v.label)
                values.append(m)
                errs.append(sd)
        if values:
            fig, ax = plt.subplots(figsize=(1.6 * len(values) + 2, 3.2))
            ax.bar(range(len(values)), values, yerr=errs, capsize=4, color="#4c72b0")
            ax.set_xticks(range(len(values)), labels, rotation=20, ha="right", fontsize=8)
            lo = min(v - e for v, e in zip(values, errs, strict=True))
            hi = max(v + e for v, e in zip(values, errs, strict=True))
            ax.set_ylim(max(0.0, lo - 2.0), min(100.0, hi + 1.0))
            ax.set_ylabel(f"{metric.split('/')[0]} top-1 (%)")
            save(fig, f"repro_{study.name}.png",
                 f"Study {study.name}: {metric.split('/')[0]} top-1 (seed mean ± sample std, "
                 f"`runs/repro/{tag}`).")
    return made


def _copy_run_figures(study: Study, summary: dict, tag: str, figures_dir: Path,
                      wanted: list[tuple[str, str]], what: str) -> list[tuple[str, str]]:
    made = []
    for name, key in wanted:
        stem = study.variant(name).stem
        runs = sorted((r for r in summary.get("runs", {}).values()
                       if r.get("tag") == tag and r.get("stem") == stem
                       and key in r.get("figures", {})), key=lambda r: r["seed"])
        if not runs:
            continue
        source = REPO / runs[0]["figures"][key]
        if not source.is_file():
            continue
        target = f"repro_{study.name}_{name}_{Path(key).stem}.png"
        fd, tmp = tempfile.mkstemp(prefix=f".{target}.", dir=figures_dir)
        os.close(fd)
        shutil.copyfile(source, tmp)
        os.replace(tmp, figures_dir / target)
        made.append((target, f"{study.variant(name).label}: {what}; seed {runs[0]['seed']}, "
                             f"`runs/repro/{tag}`."))
    return made


def write_report(summary: dict, doc: Path, figures_dir: Path) -> Path:
    text = render_report(summary, figures_dir, doc.parent)
    doc.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{doc.name}.", dir=doc.parent)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, doc)
    return doc


# --- command line -------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python scripts/repro.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_text in (("cpu", "Part A: CPU studies"), ("gpu", "Part B: GPU runs")):
        s = sub.add_parser(name, help=help_text)
        s.add_argument("--study", nargs="+", default=None, help="studies to run (default: all)")
        s.add_argument("--seeds", type=int, nargs="+", default=None,
                       help="seeds (default: each study's own)")
        s.add_argument("--epochs", type=int, default=None,
                       help="override the configs' epochs (runs go to runs/repro/<part>-e<N>)")
        s.add_argument("--dry-run", action="store_true", help="print the commands only")
        if name == "gpu":
            s.add_argument("--chunk-time", default="00:00:08:30",
                           help="training time per pretraining chunk (DD:HH:MM:SS); a chunk "
                           "stops at the first epoch end after it")
            s.add_argument("--device", default="cuda", help="device of the evaluations")
        s.add_argument("--max-steps", type=int, default=None,
                       help="stop after this many pretraining runs/chunks and evaluations")
    r = sub.add_parser("report", help="collect the results and write docs/reproduction.md")
    r.add_argument("--summary", default=None,
                   help="render from this summary.json instead of scanning runs/repro")
    r.add_argument("--output", default=str(DOC), help="Markdown file to write")
    r.add_argument("--figures", default=str(FIGURES), help="folder of the PNG figures")
    sub.add_parser("list", help="list the studies, their runs and default seeds")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "list":
        for study in STUDIES.values():
            print(f"{study.name} ({study.part}, seeds {list(study.seeds)}): {study.title}")
            for v in study.variants:
                print(f"  {v.name}: {v.config} -> {', '.join(v.evals)}")
        return 0
    if args.command == "report":
        if args.summary:
            summary = json.loads(Path(args.summary).read_text())
        else:
            summary = collect()
            write_summary(summary, REPO / SUMMARY)
        if args.output == str(DOC):
            write_summary(summary, REPO / DOC_SUMMARY)
        doc = write_report(summary, REPO / args.output, REPO / args.figures)
        print(f"wrote {doc}")
        return 0
    runner = Runner(dry_run=args.dry_run, max_steps=args.max_steps)
    studies = selected(args.study, args.command)
    if args.command == "cpu":
        done = run_studies("cpu", studies, args.seeds, runner, epochs=args.epochs)
    else:
        done = run_studies("gpu", studies, args.seeds, runner, epochs=args.epochs,
                           chunk_seconds=parse_duration(args.chunk_time), device=args.device)
    return 0 if done or args.dry_run else 1


if __name__ == "__main__":
    sys.exit(main())
