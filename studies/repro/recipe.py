"""Part B's recipe, setting by setting, against the papers: what each run trains and evaluates.

:data:`RECIPE` holds one :class:`Setting` per row of the report's recipe table: the papers'
value and where they state it, and the value each run must have, read from its config with the
library's defaults filled in (:func:`effective`). ``tests/repro/test_repro_recipe.py`` holds
every config of ``configs/repro/gpu`` to it, so no block of GPU time is spent on a recipe that
differs from the table; :func:`recipe_lines` prints it (with the configs' values) in Part B.

Sources: SCE = Denize et al. 2023 (journal: Table 21, appendix D.1, Table 25; conference
supplement: Algorithm 1, appendix E), DySTreSS = Manna et al. 2023 (appendix A.1, Table 3,
section 5.3) and its authors' code (sadimanna/DySTreSS, ``smallscale/main.py``).
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import asdict, dataclass
from functools import cache

from studies.repro import layout
from studies.repro.commands import EVALS
from studies.repro.schema import Variant
from studies.repro.studies import STUDIES

#: The runs of each table, by name (``studies.repro.studies``'s Part B variants).
TABLE6 = ("sce", "moco", "ressl")
TABLE3 = ("simclr", "dystress")


@dataclass(frozen=True)
class Setting:
    """One row: ``paper`` (the value in words) and ``source``; ``expected`` maps each run to
    the value of ``key`` in :func:`effective` it must have; ``note``: where the run chooses
    (the papers are silent or disagree) and why."""

    name: str
    paper: str
    source: str
    key: str
    expected: dict[str, object]
    note: str = ""


def _all(runs: tuple[str, ...], value: object) -> dict[str, object]:
    return dict.fromkeys(runs, value)


RECIPE: tuple[tuple[str, tuple[Setting, ...]], ...] = (
    ("SCE Table 6 (SCE, MoCo v2, ReSSL; CIFAR-10 linear top-1 90.3, 87.6, 90.2)", (
        Setting("backbone", "ResNet-18, 3x3 stride-1 first conv, no max-pool",
                "SCE D.1 (architecture change)", "backbone",
                _all(TABLE6, ("resnet18", True, 64))),
        Setting("projector", "2 layers, 512 hidden, 128 out, BN after the hidden layer",
                "SCE Table 21", "projector", _all(TABLE6, (2, 512, 128, "hidden"))),
        Setting("batch", "256", "SCE Table 21", "batch_size", _all(TABLE6, 256)),
        Setting("learning rate", "0.06 x batch / 256 (linear scaling), SGD momentum 0.9",
                "SCE Table 21, D.1", "lr", _all(TABLE6, (0.06, True, 0.9))),
        Setting("weight decay", "5e-4", "SCE Table 21", "weight_decay",
                _all(TABLE6, (5e-4, False)),
                "every parameter decayed: D.1's SGD recipe names no exclusion"),
        Setting("warm-up, schedule", "5 epochs linear warm-up, then cosine without restart",
                "SCE D.1", "warmup_epochs", _all(TABLE6, 5.0)),
        Setting("epochs", "200", "SCE D.1", "max_epochs", _all(TABLE6, 200)),
        Setting("EMA, queue", "momentum 0.99 cosine to 1, queue 4,096",
                "SCE D.1, Table 21; conference supplement E", "ema_queue",
                _all(TABLE6, (0.99, 4096)),
                "Table 21 prints 0.900 for CIFAR; the conference supplement's 0.99 for small "
                "datasets is taken (0.900 read as a misprint)"),
        Setting("temperatures", "SCE: tau 0.2, tau_m 0.1, lambda 0.5 (Table 25's best, "
                "90.34); MoCo v2: tau 0.2; ReSSL: tau 0.1, tau_m 0.04 (its authors' best)",
                "SCE Table 25, sections 4.1.1-4.1.2", "temperatures",
                {"sce": (0.2, 0.1, 0.5), "moco": (0.2, None, None),
                 "ressl": (0.1, 0.04, None)}),
        Setting("SCE target's positive", "eq. 5 masks it (weight 0); Algorithm 1 and the "
                "authors' eztorch code give it a zero logit", "SCE eq. 5; conference "
                "supplement, Algorithm 1", "positive_target", {"sce": "zero_logit"},
                "the code's zero logit: Table 6 was measured with it (Part A runs eq. 5's "
                "mask); with 4,096 queued keys the two targets differ by a weight near 2e-4"),
        Setting("key batch norm", "not stated", "(the authors' code: shuffled, 8 virtual "
                "devices)", "shuffle_bn", _all(TABLE6, 8)),
        Setting("evaluation", "linear probe on the frozen backbone: 100 epochs, SGD lr 30, "
                "momentum 0.9, no weight decay, x0.1 at epochs 60 and 80; random crop "
                "(padding 4) and flip", "SCE D.1 (evaluation protocol)", "evals",
                _all(TABLE6, "linear_d1"),
                "batch 256 (MoCo v2's probe, which D.1 follows); the last epoch's test top-1 "
                "(the probe keeps no per-epoch test accuracy)"),
    )),
    ("DySTreSS Table 3 (SimCLR and DySTreSS; CIFAR-10 200-NN top-1 83.65, 85.68)", (
        Setting("backbone", "ResNet-18, 3x3 stride-1 first conv, no max-pool",
                "DySTreSS A.1", "backbone", _all(TABLE3, ("resnet18", True, 64))),
        Setting("projector", "2 layers, each linear layer followed by BN (SimCLR's)",
                "DySTreSS A.1", "projector", _all(TABLE3, (2, 512, 128, "all")),
                "512 hidden, 128 out: the authors' code"),
        Setting("batch", "128", "DySTreSS A.1", "batch_size", _all(TABLE3, 128)),
        Setting("learning rate", "0.06, SGD momentum 0.9", "DySTreSS A.1", "lr",
                _all(TABLE3, (0.06, False, 0.9)),
                "not scaled with the batch (A.1 names no rule); the authors' code defaults "
                "to lr 0.2 without momentum, A.1's values are followed"),
        Setting("weight decay", "5e-4", "DySTreSS A.1", "weight_decay",
                _all(TABLE3, (5e-4, False))),
        Setting("warm-up, schedule", "not stated; the authors' code: cosine, no warm-up",
                "DySTreSS code (CosineAnnealingLR)", "warmup_epochs", _all(TABLE3, 0.0)),
        Setting("epochs", "200", "DySTreSS A.1", "max_epochs", _all(TABLE3, 200)),
        Setting("temperature", "SimCLR: not stated (the code's constant mode, t_max = 0.2); "
                "DySTreSS: t_min 0.07, t_max 0.2", "DySTreSS section 5.3, Table 3",
                "temperatures", {"simclr": (0.2, None, None),
                                 "dystress": ((0.07, 0.2), None, None)}),
        Setting("evaluation", "200-NN, cosine-similarity weights; the code: normalised "
                "backbone features, weights exp(s / 0.1), the training images (no "
                "augmentation) as bank, every epoch, the best test epoch kept",
                "DySTreSS A.1; code test()", "evals", _all(TABLE3, "knn200"),
                "the last epoch (the checkpoint) and the best of the monitored epochs"),
        Setting("online 200-NN monitor", "every epoch (the code)", "DySTreSS code",
                "monitor", _all(TABLE3, ("test", None, 10, 200, 0.1)),
                "every 10 epochs, whole training split as bank: every epoch would cost about "
                "a third of a block"),
    )),
)


@cache
def _class(path: str) -> type:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _defaults(cls: type) -> dict[str, object]:
    """Keyword defaults of ``cls.__init__`` and of the classes it passes ``**kwargs`` to."""
    out: dict[str, object] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for p in inspect.signature(init).parameters.values():
            if p.default is not inspect.Parameter.empty:
                out.setdefault(p.name, p.default)
    return out


def _temperature(value: object) -> object:
    """A float, or a DySTreSS temperature's ``(t_min, t_max)``."""
    if isinstance(value, dict):
        args = value.get("init_args") or {}
        return (float(args["t_min"]), float(args["t_max"]))
    return None if value is None else float(value)


def effective(config: str) -> dict[str, object]:
    """What ``config`` (relative to the checkout) trains with, the library's defaults filled in:
    the keys of :data:`RECIPE`'s settings."""
    from contrastkit.models.factory import BackboneSpec, HeadSpec
    from contrastkit.train.datamodule import PretrainDataModule
    from contrastkit.train.specs import OnlineEvalSpec, OptimizerSpec

    raw = layout.read_config(config)
    model, trainer = raw.get("model") or {}, raw.get("trainer") or {}
    method = model.get("method") or {}
    args = {**_defaults(_class(method["class_path"])), **(method.get("init_args") or {})}
    backbone = {**asdict(BackboneSpec()), **(args.get("backbone") or {})}
    head = {**asdict(HeadSpec()), **(args.get("projector") or {})}
    opt = {**asdict(OptimizerSpec()), **(model.get("optimizer") or {})}
    data = {**_defaults(PretrainDataModule), **(raw.get("data") or {})}
    online = {**asdict(OnlineEvalSpec()), **(model.get("online_eval") or {})}
    momentum_based = args.get("momentum") is not None
    return {
        "backbone": (backbone["name"], bool(backbone["cifar_stem"]), int(backbone["width"])),
        "projector": (int(head["num_layers"]), int(head["hidden_dim"]), int(head["out_dim"]),
                      head["batch_norm"]),
        "batch_size": int(data["batch_size"]),
        "lr": (float(opt["base_lr"]), bool(opt["scale_lr"]), float(opt["momentum"])),
        "weight_decay": (float(opt["weight_decay"]), bool(opt["exclude_bias_and_norm"])),
        "warmup_epochs": float(opt["warmup_epochs"]),
        "max_epochs": int(trainer["max_epochs"]),
        "ema_queue": ((float(args["momentum"]), int(args["queue_size"]))
                      if momentum_based else None),
        "temperatures": (_temperature(args.get("temperature")),
                         _temperature(args.get("target_temperature")),
                         float(args["coeff"]) if "coeff" in args else None),
        "positive_target": args.get("positive_target"),
        "shuffle_bn": args.get("shuffle_bn"),
        "monitor": ((data["val_split"], data["monitor_bank_size"],
                     int(trainer.get("check_val_every_n_epoch") or 1), int(online["knn_k"]),
                     float(online["knn_temperature"]))
                    if data.get("val_split") and online["knn"] else None),
    }


def table_variant(run: str) -> Variant:
    """The Part B run called ``run``."""
    study = next(s for s in STUDIES.values() if s.part == "gpu"
                 and run in {v.name for v in s.variants})
    return study.variant(run)


def mismatches() -> list[str]:
    """Every setting where a run's config differs from :data:`RECIPE` (empty: none), with
    the evaluation each table names among its runs' evaluations."""
    out = []
    for _, settings in RECIPE:
        for s in settings:
            for run, expected in s.expected.items():
                variant = table_variant(run)
                if s.key == "evals":
                    ok = expected in variant.evals
                    got: object = variant.evals
                else:
                    got = effective(variant.config)[s.key]
                    ok = got == expected
                if not ok:
                    out.append(f"{variant.config}: {s.name} ({s.key}) is {got!r}, the recipe "
                               f"says {expected!r}")
    return out


def _g(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


#: How the report shows each key of :func:`effective`.
SHOWN = {
    "backbone": lambda v: f"{v[0]}" + (", CIFAR stem" if v[1] else "") + f", width {v[2]}",
    "projector": lambda v: f"{v[0]} layers, {v[1]} / {v[2]}, BN {v[3]}",
    "lr": lambda v: f"{_g(v[0])}" + (" x batch / 256" if v[1] else " (not scaled)")
    + f", momentum {_g(v[2])}",
    "weight_decay": lambda v: _g(v[0]) + (", biases and BN excluded" if v[1] else
                                          ", every parameter"),
    "warmup_epochs": lambda v: f"{_g(v)} warm-up epochs, then cosine",
    "ema_queue": lambda v: f"EMA {_g(v[0])}, queue {v[1]:,}",
    "temperatures": lambda v: ", ".join(
        f"{name} {_g(x) if not isinstance(x, tuple) else '(' + ', '.join(map(_g, x)) + ')'}"
        for name, x in zip(("tau", "tau_m", "lambda"), v, strict=True) if x is not None),
    "monitor": lambda v: (f"val_split {v[0]}, bank {'all' if v[1] is None else v[1]}, every "
                          f"{v[2]} epochs, k {v[3]}, t {_g(v[4])}"),
}


def _shown(key: str, value: object) -> str:
    if value is None:
        return "–"
    return SHOWN[key](value) if key in SHOWN else _g(value)


def recipe_lines() -> list[str]:
    """The recipe tables of Part B: per table of the papers, each setting, the papers' value
    and source, and what each run's config gives (from :func:`effective`)."""
    lines = ["### The recipe, checked against the papers", "",
             "Each setting as the papers state it, and as the configs of `configs/repro/gpu` "
             "give it (read with the library's defaults; `tests/repro/test_repro_recipe.py` "
             "fails on any difference, so no block of GPU time runs another recipe). "
             f"Evaluations: `{' '.join(EVALS['linear_d1'])}` for Table 6, "
             f"`{' '.join(EVALS['knn200'])}` for Table 3.", ""]
    for title, settings in RECIPE:
        lines += [f"**{title}**", "", "| setting | papers | source | configs | note |",
                  "|---|---|---|---|---|"]
        for s in settings:
            values = {}
            for run in s.expected:
                variant = table_variant(run)
                values[variant.label] = (", ".join(variant.evals) if s.key == "evals"
                                         else _shown(s.key, effective(variant.config)[s.key]))
            if len(set(values.values())) == 1 and len(values) > 1:
                cell = f"all: {next(iter(values.values()))}"
            else:
                cell = "; ".join(f"{label}: {value}" for label, value in values.items())
            lines.append(f"| {s.name} | {s.paper} | {s.source} | {cell} | {s.note or '–'} |")
        lines.append("")
    return lines
