"""``contrastkit pretrain``: LightningCLI over :class:`PretrainModule` and
:class:`PretrainDataModule`.

Configuration is YAML validated by jsonargparse against the classes' signatures: an unknown
key or a wrong type is an error that lists what is allowed. ``--resume PATH`` (or
``--resume last``) continues a run exactly from a checkpoint.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path

from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.cli import LightningCLI

from contrastkit.train.callbacks import (
    AtomicCheckpointIO,
    BestCheckpoint,
    LossCurveCallback,
    PreflightCallback,
    RNGStateCallback,
    latest_checkpoint,
)
from contrastkit.train.datamodule import PretrainDataModule
from contrastkit.train.module import PretrainModule


class PretrainCLI(LightningCLI):
    """LightningCLI with the data module's class count linked into the model, and errors
    about a class's unknown option that list the options it accepts."""

    def init_parser(self, **kwargs):
        parser = super().init_parser(**kwargs)
        original = parser.error

        def error(message: str, *args, **kw):
            return original(explain_unknown_option(message), *args, **kw)

        parser.error = error  # type: ignore[method-assign]
        return parser

    def add_arguments_to_parser(self, parser) -> None:
        parser.link_arguments("data", "model.num_classes", compute_fn=_num_classes,
                              apply_on="instantiate")


_UNKNOWN = re.compile(r"class_path '([\w.]+)'.*?Option '(\w+)' is not accepted", re.S)


def accepted_options(cls: type) -> list[str]:
    """Constructor arguments of ``cls``, following ``**kwargs`` up its base classes."""
    names: list[str] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        params = inspect.signature(klass.__init__).parameters.values()
        names += [p.name for p in params if p.name != "self" and p.kind not in
                  (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in names]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names


def explain_unknown_option(message: str) -> str:
    """Append the accepted options to jsonargparse's "Option 'x' is not accepted" errors."""
    match = _UNKNOWN.search(message)
    if not match:
        return message
    module, _, name = match.group(1).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return message
    allowed = ", ".join(accepted_options(cls))
    return f"{message}\n  {name} accepts: {allowed}"


def _num_classes(data: PretrainDataModule) -> int:
    return data.num_classes if data.val_split is not None else 0


def trainer_defaults(output_dir: str = "runs/pretrain") -> dict:
    """Trainer settings every pretraining run gets unless the config overrides them."""
    loggers = [{"class_path": "contrastkit.train.logging.ResumableCSVLogger",
                "init_args": {"save_dir": output_dir, "name": "", "version": ""}}]
    if importlib.util.find_spec("tensorboard") is not None:
        loggers.append({"class_path": "lightning.pytorch.loggers.TensorBoardLogger",
                        "init_args": {"save_dir": output_dir, "name": "tensorboard",
                                      "version": ""}})
    return {
        "default_root_dir": output_dir,
        "logger": loggers,
        "use_distributed_sampler": False,
        "plugins": [AtomicCheckpointIO()],
        "callbacks": [
            latest_checkpoint(str(Path(output_dir) / "checkpoints")),
            BestCheckpoint(str(Path(output_dir) / "checkpoints")),
            RNGStateCallback(),
            PreflightCallback(),
            LossCurveCallback(),
            LearningRateMonitor(logging_interval="step"),
        ],
        "max_epochs": 100,
        "log_every_n_steps": 10,
        # A sanity validation pass at start-up would consume RNG draws that a resumed run
        # makes and an uninterrupted one does not; exact resume needs it off.
        "num_sanity_val_steps": 0,
    }


def _pop_option(argv: list[str], name: str) -> str | None:
    """Remove ``--name VALUE`` or ``--name=VALUE`` from ``argv`` and return VALUE."""
    for i, arg in enumerate(argv):
        if arg == name:
            if i + 1 >= len(argv):
                raise SystemExit(f"{name} needs a value")
            value = argv[i + 1]
            del argv[i : i + 2]
            return value
        if arg.startswith(name + "="):
            del argv[i]
            return arg.split("=", 1)[1]
    return None


def resolve_resume(resume: str | None, output_dir: str) -> str | None:
    """``last`` -> the run's ``checkpoints/last.ckpt``; a path must exist."""
    if resume is None:
        return None
    path = Path(output_dir) / "checkpoints" / "last.ckpt" if resume == "last" else Path(resume)
    if not path.is_file():
        raise SystemExit(f"--resume: no checkpoint at {path}")
    return str(path)


def build(argv: list[str] | None = None) -> tuple[PretrainCLI, str | None]:
    """Parse ``contrastkit pretrain`` arguments and build the trainer, model and data.

    Returns:
        ``(cli, ckpt_path)``: ``cli.trainer.fit(cli.model, datamodule=cli.datamodule,
        ckpt_path=ckpt_path)`` runs it.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    resume = _pop_option(argv, "--resume")
    output_dir = _pop_option(argv, "--output") or "runs/pretrain"
    overwrite = "--overwrite" in argv
    if overwrite:
        argv.remove("--overwrite")
    existing = Path(output_dir) / "checkpoints" / "last.ckpt"
    if resume is None and existing.is_file() and not overwrite:
        raise SystemExit(
            f"--output {output_dir} already holds a run ({existing}): pass --resume last to "
            "continue it, --overwrite to start afresh there, or choose another --output"
        )
    cli = PretrainCLI(
        PretrainModule,
        PretrainDataModule,
        args=argv,
        run=False,
        seed_everything_default=0,
        auto_configure_optimizers=False,
        trainer_defaults=trainer_defaults(output_dir),
        save_config_kwargs={"overwrite": True},
        parser_kwargs={"prog": "contrastkit pretrain", "default_env": False},
    )
    return cli, resolve_resume(resume, output_dir)


def pretrain(argv: list[str] | None = None) -> PretrainCLI:
    """Run ``contrastkit pretrain``; returns the CLI (its ``trainer`` and ``model``)."""
    cli, ckpt_path = build(argv)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
    return cli
