"""The reproduction study's definitions: each study's runs (configs), evaluations and claims.

A :class:`Study` is a set of runs (:class:`Variant`: one YAML under ``configs/repro/<part>``,
evaluated with some of the protocols of :data:`contrastkit.repro.commands.EVALS`) and the
papers' claims it tests (:class:`Claim`: the quantity measured from those runs, the paper's own
numbers and the kind of verdict, see :mod:`contrastkit.repro.verdicts`). Part A (``cpu``) tests
directions at CPU scale; Part B (``gpu``) the absolute numbers at full scale.

The claims' ``source`` strings, printed in the report, name the papers by their methods:

* SCE: Denize et al. 2023, *Similarity Contrastive Estimation for Image and Video Soft
  Contrastive Self-Supervised Learning* (Tables 2, 3, 6, 25), with its MoCo v2 (Chen et al.
  2020) and ReSSL (Zheng et al. 2021) baselines;
* Wang & Liu: Wang & Liu 2021, *Understanding the Behaviour of Contrastive Loss*, supplement
  Tables 1-2 and Figs. 1-7 (the main paper's uniformity and tolerance are not among the
  supplied texts, so those claims carry no number);
* DySTreSS: Manna et al. 2023, *Dynamically Scaled Temperature in Self-Supervised Contrastive
  Learning* (Tables 3, 13, 15; Fig. 7);
* SINCERE: Feeney & Hughes 2023, *SINCERE: Supervised Information Noise-Contrastive Estimation
  REvisited* (Tables 1, 4, 6; Fig. 2; App. M).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Variant:
    """One run of a study: a config (its stem names the run folder) and how it is evaluated."""

    name: str
    label: str
    config: str
    evals: tuple[str, ...]
    data: str = "cifar10"
    analyze_args: tuple[str, ...] = ()

    @property
    def stem(self) -> str:
        return Path(self.config).stem


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
    """A study of Part A (``part="cpu"``) or B (``"gpu"``): its runs, default seeds and claims;
    ``pairs`` are extra accuracy comparisons beyond those the claims make."""

    name: str
    part: str
    title: str
    seeds: tuple[int, ...]
    variants: tuple[Variant, ...]
    claims: tuple[Claim, ...] = ()
    pairs: tuple[tuple[str, str, str], ...] = field(default=())
    note: str = ""  # printed under the study's title

    def variant(self, name: str) -> Variant:
        """The run called ``name``."""
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"study {self.name} has no run {name!r}")

    def all_pairs(self) -> list[tuple[str, str, str]]:
        """Every ``(run A, run B, protocol)`` that ``contrastkit compare`` runs, once each."""
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
    # Feeney & Hughes 2023, Table 4: (initial, final) training loss of SINCERE and of SupCon
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
#: Wang & Liu 2021, supplement: CIFAR-10 rows of Table 1 (ordinary) and Table 2 (hard), linear
#: top-1.
WANG_LIU = {"contrastive": {"0.05": 76.10, "0.1": 81.82, "0.2": 83.78, "0.5": 82.54,
                            "1.0": 82.21},
            "hard": {"0.05": 76.22, "0.1": 80.44, "0.2": 83.28, "0.5": 84.31, "1.0": 84.19}}


def _temperature_study() -> Study:
    variants = tuple(
        Variant(f"{kind}_t{t}", f"{'hard' if kind == 'hard' else 'ordinary'} t={t}",
                _cpu(f"temperature_{kind}_t{t}"), ("knn200", "linear", "analyze"),
                analyze_args=("--temperatures", t))
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
    lam = tuple(Variant(f"lambda{c}", f"lambda={c}", _cpu(f"sce_lambda{c}"), ev)
                for c in ("0.0", "0.5", "1.0"))
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
                        _cpu("sce_lambda0.5" if t == "0.05" else f"sce_taum{t}"), ev)
                for t in taus)

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
