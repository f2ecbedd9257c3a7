"""The short ``contrastkit pretrain --help``: the tool's own options, the method's settings and
the common data, model and trainer keys with their defaults (``--help-all``: Lightning's
full list of every trainer option). It loads no Lightning, so that the help comes in a few
seconds: the ``contrastkit`` dispatcher prints it without importing :mod:`.pretrain`."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import yaml

from contrastkit import methods
from contrastkit.config_file import read_config_file
from contrastkit.data.specs import ViewsSpec
from contrastkit.train.specs import OnlineEvalSpec, OptimizerSpec

METHODS = ("SCE", "MoCo", "ReSSL", "SimCLR", "SupervisedContrastive", "BYOL", "MoCoV3", "WMSE",
           "SwAV", "DINO", "NNCLR", "BarlowTwins", "VICReg")

#: The trainer options a pretraining run usually sets (``--help-all`` lists every one).
TRAINER_KEYS = (
    ("max_epochs", "100", "epochs of the run (the learning-rate schedule follows it)"),
    ("accelerator", "auto", "cpu, gpu, ..."),
    ("devices", "auto", "devices per node"),
    ("precision", "null", "bf16-mixed, 16-mixed, ..."),
    ("accumulate_grad_batches", "1", "batches per optimiser step"),
    ("enable_progress_bar", "true", "false: one summary line per epoch"),
    ("log_every_n_steps", "10", "steps between logged losses"),
)

#: The data keys shown, with :class:`~contrastkit.train.datamodule.PretrainDataModule`'s
#: defaults as a config writes them (the rest: ``--help-all``). Written here, not read from its
#: signature, because that module loads Lightning; a test holds the two equal.
DATA_DEFAULTS = (("dataset", "digits"), ("root", "null"), ("batch_size", "256"),
                 ("num_workers", "0"), ("test_fraction", "null"), ("load_size", "null"),
                 ("skip_corrupt", "false"), ("val_split", "test"), ("subset", "null"),
                 ("seed", "0"))

#: ``contrastkit pretrain``'s own options (the rest goes to LightningCLI).
RUN_OPTIONS_HELP = """run folder (contrastkit pretrain's own options):
  --output DIR          run folder: checkpoints/, config.yaml, metrics.csv, tensorboard/,
                        loss_curve.png, summary.png (default: runs/pretrain); it must be
                        empty or new
  --resume PATH|last    continue exactly from a checkpoint (last: DIR/checkpoints/last.ckpt,
                        or the newest complete checkpoint there when it is missing or damaged)
                        the same run: other data, seed or method settings are refused;
                        other workers, devices or precision are recorded in
                        DIR/resumes.jsonl; config.yaml stays as the run started
  --extend-to EPOCHS    train the finished (or stopped) run in --output longer: it becomes
                        a run of EPOCHS epochs, whose schedules it follows from where it
                        is (warm-up kept; recorded in DIR/resumes.jsonl; docs/configs.md)
  --overwrite           replace the earlier run in --output (removes only its files)
  --threads N|auto      CPU threads per operator (default: auto, OMP_NUM_THREADS when set,
                        else the cores this process may use); waiting threads sleep
"""


def wants_short_help(argv: list[str]) -> bool:
    """Whether ``contrastkit pretrain argv`` asks for this help (``--help-all`` and
    ``--version`` go to the full parser)."""
    asks = "-h" in argv or "--help" in argv
    return asks and "--help-all" not in argv and "--version" not in argv


def constructor_defaults(cls: type) -> list[tuple[str, str]]:
    """``(name, default)`` of the constructor arguments of ``cls`` and its bases (through
    ``**kwargs``), as in a config."""
    rows: list[tuple[str, str]] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        params = list(inspect.signature(klass.__init__).parameters.values())
        for p in params:
            if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if p.name not in (r[0] for r in rows):
                default = "(required)" if p.default is p.empty else _yaml(p.default)
                rows.append((p.name, default))
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return rows


def _yaml(value: object) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return text.removesuffix("\n...").removesuffix(" ...") if text != "..." else "null"


def chosen_method(argv: list[str]) -> str | None:
    """The method that ``--model.method`` or the ``--config`` file names (class name).

    Raises:
        ValueError: for a ``--config`` file that is not UTF-8 or not valid YAML.
    """
    for i, arg in enumerate(argv[:-1]):
        if arg == "--model.method":
            return argv[i + 1].rpartition(".")[2]
    for i, arg in enumerate(argv[:-1]):
        if arg == "--config" and Path(argv[i + 1]).is_file():
            config = read_config_file(argv[i + 1])
            model = config.get("model") if isinstance(config, dict) else None
            method = model.get("method") if isinstance(model, dict) else None
            path = method.get("class_path", "") if isinstance(method, dict) else str(method or "")
            return str(path).rpartition(".")[2] or None
    return None


def _rows(prefix: str, rows: list[tuple[str, str]], width: int = 34) -> list[str]:
    pad = max(1, width - len(prefix))
    return [f"  --{prefix}{name:<{pad}} {default}" for name, default in rows]


def short_help(argv: list[str]) -> str:
    """The text of ``contrastkit pretrain --help`` for the method that ``argv`` names."""
    name = chosen_method(argv) or "SCE"
    cls = getattr(methods, name, None)
    lines = ["usage: contrastkit pretrain [--config FILE] [--KEY VALUE ...] [--output DIR] "
             "[--resume PATH|last] [--overwrite]", "",
             "Pretrain a contrastive method. Keys are those of a YAML config "
             "(configs/README.md, docs/configs.md).", "", RUN_OPTIONS_HELP.rstrip(), "",
             "configuration:",
             "  --config FILE                      YAML config (later options override it)",
             "  --print_config                     print the resolved configuration and exit",
             "  --help-all                         every option, Lightning's trainer included",
             "  --version                          contrastkit's version", "",
             f"method: --model.method {{{', '.join(METHODS)}}} (default: none, required)"]
    if cls is None:
        lines.append(f"  (unknown method {name!r})")
    else:
        lines.append(f"settings of {name} (--model.method.KEY; --model.method NAME --help "
                     "for another method):")
        lines += _rows("model.method.", constructor_defaults(cls))
    for label, spec in (("views", ViewsSpec), ("optimizer", OptimizerSpec),
                        ("online_eval", OnlineEvalSpec)):
        lines += ["", f"model.{label}:"]
        lines += _rows(f"model.{label}.", [(f.name, _yaml(f.default if f.default is not
                                                           dataclasses.MISSING else None))
                                           for f in dataclasses.fields(spec)])
    lines += ["", "data (--data.KEY; the rest: --help-all):"]
    lines += _rows("data.", list(DATA_DEFAULTS))
    lines += ["", "trainer (--trainer.KEY; the rest: --help-all):"]
    lines += [f"  --trainer.{k:<24} {d:<8} {what}" for k, d, what in TRAINER_KEYS]
    return "\n".join(lines) + "\n"
