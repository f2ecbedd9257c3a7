"""``contrastkit pretrain``: LightningCLI over :class:`PretrainModule` and
:class:`PretrainDataModule`.

Configuration is YAML validated by jsonargparse against the classes' signatures: an unknown
key or a wrong type is an error that lists what is allowed; the rest of the configuration
(temperatures, data, a checkpoint to resume) is checked before anything is written. ``--output``
names the run folder, which must be empty or new (``--overwrite`` replaces an earlier run
there); ``--resume PATH`` (or ``--resume last``) continues a run exactly from a checkpoint,
dropping the metrics the interrupted run logged after it. A resume continues the same run: a
configuration whose data, seed or method differ from the checkpoint's is refused, a change of
how it is computed is recorded (:mod:`contrastkit.train.run_identity`). ``--extend-to EPOCHS``
trains a run longer with a stated new schedule (:mod:`contrastkit.train.extend`).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import signal
import sys
import warnings
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import LearningRateMonitor, ProgressBar
from lightning.pytorch.cli import LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities.exceptions import SIGTERMException

from contrastkit import __version__
from contrastkit.cli.config_errors import config_error_line
from contrastkit.cli.next_steps import finished_lines
from contrastkit.cli.short_help import RUN_OPTIONS_HELP, short_help, wants_short_help
from contrastkit.data.augment.views import loader_crop_specs
from contrastkit.data.decode.images import MixedImageSizesError, UnreadableImageError
from contrastkit.data.decode.video import VideoDecodeError
from contrastkit.errors import RunInterrupted, plain_warnings, run_command
from contrastkit.optim import resolve_warmup_epochs
from contrastkit.outputs import (
    SKIPPED_FILES,
    FolderLock,
    check_output_folder,
    check_output_path,
    clear_outputs,
    write_skipped_files,
)
from contrastkit.threads import pop_threads, using_threads
from contrastkit.train.callbacks import (
    BestCheckpoint,
    EpochSummaryCallback,
    LossCurveCallback,
    PreflightCallback,
    ReleaseAfterFit,
    RNGStateCallback,
    SignalStop,
    last_checkpoint,
)
from contrastkit.train.captured_step import check_capturable
from contrastkit.train.datamodule import PretrainDataModule, is_labelled
from contrastkit.train.extend import (
    LENGTH,
    ExtendedSchedule,
    epochs_done,
    extension_args,
    how_to_extend,
    is_finished,
    recorded_schedule,
)
from contrastkit.train.module import PretrainModule
from contrastkit.train.progress import ProgressBarWithTimeLeft
from contrastkit.train.resume import (
    check_resume_fits,
    interrupted_message,
    launched_as_rank_zero,
    lost_peer,
    newest_checkpoint,
    read_checkpoint,
    remove_partial_files,
    truncate_metrics,
)
from contrastkit.train.run_identity import (
    RESUMES,
    checked_identity,
    checked_listing,
    record_changes,
)
from contrastkit.train.skipped_files import SKIP_LOG, SkippedFilesCallback
from contrastkit.train.specs import OptimizerSpec
from contrastkit.train.summary_figure import SUMMARY_FIGURE, RunSummaryCallback
from contrastkit.train.text import TextDataModule, TextPretrainModule, is_text_config
from contrastkit.train.trackers import (
    TRACKER_RUNS,
    WANDB_FOLDER,
    TrackerRunIds,
    continue_tracker_runs,
)


class PretrainCLI(LightningCLI):
    """LightningCLI with the data module's class count linked into the model, errors about a
    class's unknown option that list the options it accepts, and the run folder of
    ``--output``.

    Args:
        output_dir: the run folder. It replaces the folder of the trainer and of the CSV and
            TensorBoard loggers that a config names (a run's saved ``config.yaml`` names its
            own folder; reused with ``--config`` for another ``--output`` it would otherwise
            send the logs there).
        purge_step: TensorBoard's ``purge_step`` when resuming (see :func:`trainer_defaults`).
        tracker_runs: the tracker run ids of the checkpoint resumed from, continued by the
            config's W&B / MLflow loggers (:mod:`contrastkit.train.trackers`).
        check_data: called with the parsed ``data`` section (a dict) before anything is
            instantiated (the data module opens its data to count the classes); what it
            returns is kept as ``checked_data``.
    """

    _FOLDER_LOGGERS = ("contrastkit.train.logging.ResumableCSVLogger",
                       "lightning.pytorch.loggers.CSVLogger",
                       "lightning.pytorch.loggers.TensorBoardLogger")

    def __init__(self, *args, output_dir: str | None = None, purge_step: int | None = None,
                 tracker_runs: dict | None = None,
                 check_data: Callable[[dict], Any] | None = None, **kwargs) -> None:
        self.output_dir, self.purge_step = output_dir, purge_step
        self.tracker_runs = tracker_runs
        self.check_data, self.checked_data = check_data, None
        self.schedule_notice: str | None = None
        super().__init__(*args, **kwargs)

    def parse_arguments(self, parser, args) -> None:
        """Parse; ``--print_config`` prints the configuration with the optimiser resolved
        (the warm-up the run will use, see :func:`resolve_optimizer`) and exits."""
        printing = [a for a in args if a.split("=", 1)[0] == "--print_config"]
        super().parse_arguments(parser, [a for a in args if a not in printing])
        self.schedule_notice = resolve_optimizer(self.config)
        if printing:
            if self.schedule_notice:
                print(self.schedule_notice, file=sys.stderr)
            flags = printing[0].partition("=")[2]
            print(parser.dump(self.config, skip_none="skip_null" in flags), end="")
            sys.exit(0)

    def before_instantiate_classes(self) -> None:
        if self.check_data is not None:
            self.checked_data = self.check_data(self.config.data.as_dict())
        if self.output_dir is None:
            return
        trainer = self.config.trainer
        trainer.default_root_dir = self.output_dir
        loggers = trainer.logger if isinstance(trainer.logger, list) else [trainer.logger]
        for logger in loggers:
            if getattr(logger, "class_path", None) in self._FOLDER_LOGGERS:
                logger.init_args.save_dir = self.output_dir
                if logger.class_path.endswith("TensorBoardLogger"):
                    logger.init_args.purge_step = self.purge_step
        continue_tracker_runs(loggers, self.tracker_runs, self.output_dir)

    def instantiate_trainer(self, **kwargs):
        """The trainer, with a progress bar refreshed on the logging steps only.

        Lightning's default bar refreshes at every step and reads the logged loss from the
        device each time (a host-device synchronisation per step on a GPU); a progress bar
        the config names itself is kept as it is.
        """
        config = self.config_init["trainer"]
        callbacks = list(config.get("callbacks") or [])
        shows_bar = config.get("enable_progress_bar") is not False
        if shows_bar and not any(isinstance(c, ProgressBar) for c in callbacks):
            every = max(1, int(config.get("log_every_n_steps") or 1))
            kwargs.setdefault("callbacks",
                              [*callbacks, ProgressBarWithTimeLeft(refresh_rate=every)])
        return super().instantiate_trainer(**kwargs)

    def init_parser(self, **kwargs):
        parser = super().init_parser(**kwargs)

        def error(message: str, *args, **kw):
            """One line naming the key, the value and the closest valid keys (no usage)."""
            options = getattr(parser, "_option_string_actions", {})
            print(f"contrastkit pretrain: error: {config_error_line(message, options)}",
                  file=sys.stderr)
            sys.exit(2)

        parser.error = error  # type: ignore[method-assign]
        return parser

    def add_arguments_to_parser(self, parser) -> None:
        parser.link_arguments("data", "model.num_classes", compute_fn=_num_classes,
                              apply_on="instantiate")


def resolve_optimizer(config) -> str | None:
    """Fill ``model.optimizer`` in the parsed ``config`` with every setting, the warm-up
    resolved for ``trainer.max_epochs`` (clipped, or from ``warmup_fraction``), so that
    ``config.yaml`` and ``--print_config`` show what runs; returns the one-line notice of a
    clipped warm-up (None otherwise)."""
    from jsonargparse import Namespace

    given = config.model.optimizer
    spec = OptimizerSpec(**(vars(given) if given is not None else {}))
    max_epochs = config.trainer.max_epochs
    if max_epochs is None or max_epochs < 1:
        config.model.optimizer = Namespace(**asdict(spec))
        return None
    warmup, notice = resolve_warmup_epochs(spec.warmup_epochs, spec.warmup_fraction, max_epochs)
    resolved = replace(spec, warmup_epochs=warmup, warmup_fraction=None)
    config.model.optimizer = Namespace(**asdict(resolved))
    return notice


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
        # checkpoints written by a background thread (background_checkpoints.py); set
        # trainer.plugins contrastkit.train.callbacks.AtomicCheckpointIO to write in the loop
        "plugins": [{"class_path":
                     "contrastkit.train.background_checkpoints.BackgroundCheckpointIO"}],
        "callbacks": [
            last_checkpoint(str(Path(output_dir) / "checkpoints")),
            BestCheckpoint(str(Path(output_dir) / "checkpoints")),
            RNGStateCallback(),
            PreflightCallback(),
            LossCurveCallback(),
            RunSummaryCallback(),
            EpochSummaryCallback(),
            SkippedFilesCallback(),
            LearningRateMonitor(logging_interval="step"),
        ],
        "max_epochs": 100,
        "log_every_n_steps": 10,
        # the layer table Lightning prints at the start (enable_model_summary: true shows it)
        "enable_model_summary": False,
        # A sanity validation pass at start-up would consume RNG draws that a resumed run
        # makes and an uninterrupted one does not; exact resume needs it off.
        "num_sanity_val_steps": 0,
    }


#: What a pretraining run writes into its folder (``--overwrite`` removes these, and only these).
RUN_OUTPUTS = frozenset({"checkpoints", "config.yaml", "metrics.csv", "hparams.yaml",
                         "tensorboard", "loss_curve.png", SUMMARY_FIGURE, SKIPPED_FILES,
                         SKIP_LOG, RESUMES, WANDB_FOLDER})

def _pop_option(argv: list[str], name: str) -> str | None:
    """Remove ``--name VALUE`` or ``--name=VALUE`` from ``argv`` and return VALUE."""
    for i, arg in enumerate(argv):
        if arg == name:
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                raise ValueError(f"{name} needs a value")
            value = argv[i + 1]
            del argv[i : i + 2]
            return value
        if arg.startswith(name + "="):
            del argv[i]
            return arg.split("=", 1)[1]
    return None


def _check_run_folder(output_dir: str, overwrite: bool) -> list[Path]:
    """Entries of an earlier run to remove before a fresh run in ``output_dir``."""
    found = sorted((Path(output_dir) / "checkpoints").glob("*.ckpt"),
                   key=lambda path: path.name != "last.ckpt")
    last = found[0] if found else None
    if last is not None and not overwrite:
        try:
            state = read_checkpoint(last)
            epochs = recorded_schedule(state)["max_epochs"] if is_finished(state) else None
        except ValueError:  # damaged: --resume last says which one it takes
            epochs = None
        go_on = (f"pass --extend-to N (e.g. {2 * epochs}) to train it longer" if epochs else
                 "pass --resume last to continue it")
        raise FileExistsError(
            f"--output {output_dir} already holds a {'finished ' if epochs else ''}run "
            f"({last}): {go_on}, --overwrite to start afresh there, or choose another "
            "--output")
    return check_output_folder(output_dir, overwrite=overwrite, owned=RUN_OUTPUTS.__contains__)


def validate_run(cli: PretrainCLI, resumed: dict | None, ckpt_path: str | None,
                 extending: bool = False) -> None:
    """Checks of the whole configuration that would otherwise fail after training started.

    Temperatures are checked by the methods when they are built (before this).

    Raises:
        ValueError: for a run of 0 epochs or steps, a method that needs labels on unlabelled
            images, a checkpoint to resume whose model differs from the configured one, or a
            finished run resumed without ``--extend-to`` (``extending``: the run's length may
            change).
    """
    trainer = cli.trainer
    for key, value in (("max_epochs", trainer.max_epochs), ("max_steps", trainer.max_steps)):
        if value == 0:
            raise ValueError(f"trainer.{key} is 0: the run would train nothing and write no "
                             "checkpoint; give 1 or more")
    method = cli.model.method
    data = cli.datamodule
    if getattr(data, "crops", "device") != "device":  # the views' crops, cut in the loader
        data.crop_specs = loader_crop_specs(cli.model.views_spec, method.default_views)
    data.setup("fit")
    if getattr(method, "needs_labels", False) and not is_labelled(data.train_set):
        raise ValueError(f"{type(method).__name__} needs labels, but data.root {data.root} has "
                         "no class sub-folders")
    if resumed is not None:
        check_resume_fits(cli.model, cli.trainer, resumed, ckpt_path,
                          allowed=(LENGTH,) if extending else ())
        if not extending and is_finished(resumed):
            epochs = recorded_schedule(resumed)["max_epochs"]
            run = Path(cli.trainer.default_root_dir)
            raise ValueError(f"--resume {ckpt_path}: the run has finished its {epochs} epochs, "
                             f"there is nothing to resume; to train it longer: "
                             f"{how_to_extend(run, epochs)} (docs/configs.md)")
    if not cli.model.automatic_optimization:
        check_capturable(cli.model, cli.trainer)


def build(argv: list[str] | None = None) -> tuple[PretrainCLI, str | None]:
    """Parse ``contrastkit pretrain`` arguments, validate them and build the trainer, model and
    data. Nothing is written to the run folder before everything is valid.

    Returns:
        ``(cli, ckpt_path)``: ``cli.trainer.fit(cli.model, datamodule=cli.datamodule,
        ckpt_path=ckpt_path)`` runs it.

    Raises:
        ValueError, OSError: for a bad option, folder or checkpoint (one-line messages);
            ``SystemExit`` for a config the parser rejects (it prints why).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    silence_known_warnings()
    plain_warnings()  # after Lightning's import, which installs its own format
    if "--version" in argv:
        print(f"contrastkit {__version__}")
        raise SystemExit(0)
    if "--help-all" in argv:
        argv = ["--help" if a == "--help-all" else a for a in argv]
        print(RUN_OPTIONS_HELP)
    elif wants_short_help(argv):
        print(short_help(argv), end="")
        raise SystemExit(0)
    resume = _pop_option(argv, "--resume")
    output_dir = _pop_option(argv, "--output") or "runs/pretrain"
    extend_to = _epochs_option(_pop_option(argv, "--extend-to"))
    overwrite = "--overwrite" in argv
    if overwrite:
        argv.remove("--overwrite")
    if overwrite and (resume is not None or extend_to is not None):
        option = "--resume" if resume is not None else "--extend-to"
        raise ValueError(f"--overwrite starts afresh and {option} continues: give one of them")
    if extend_to is not None and resume is None:
        resume = "last"
    check_output_path(output_dir)
    lock = FolderLock(output_dir)
    if launched_as_rank_zero():  # the other processes of a multi-process run share its lock
        lock.acquire()
        remove_partial_files(Path(output_dir))
    try:
        cli, ckpt_path = _build_locked(argv, output_dir, resume, overwrite, extend_to)
    except BaseException:
        lock.release()
        raise
    cli.folder_lock = lock
    cli.trainer.callbacks.extend([ReleaseAfterFit(lock), TrackerRunIds()])
    return cli, ckpt_path


def _check_last_is_a_file(folder: Path) -> None:
    """Refuse ``--resume last`` where ``last.ckpt`` is something other than a file: the run
    would resume from another checkpoint, train an epoch, and fail to write its own.

    Raises:
        ValueError: naming it, the way out and the checkpoint that is then resumed.
    """
    last = folder / "last.ckpt"
    if not last.exists() or last.is_file():
        return
    others = sorted(p.name for p in folder.glob("*.ckpt") if p.is_file())
    then = (f"; --resume last then continues from the intact one of {', '.join(others)} with "
            "the most steps" if others else "")
    raise ValueError(f"--resume last: {last} is a folder, not a checkpoint, and the run writes "
                     f"its last checkpoint there: move it away{then}")


def _epochs_option(value: str | None) -> int | None:
    """The number of ``--extend-to EPOCHS`` (None when absent)."""
    if value is None:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"--extend-to needs a number of epochs >= 1, got {value!r}")
    return int(value)


def _build_locked(argv: list[str], output_dir: str, resume: str | None,
                  overwrite: bool, extend_to: int | None = None) -> tuple[PretrainCLI, str | None]:
    """:func:`build`, once the run folder is locked."""
    earlier: list[Path] = []
    resumed = None
    if resume is None:
        ckpt_path = None
        earlier = _check_run_folder(output_dir, overwrite)
    elif resume == "last":
        _check_last_is_a_file(Path(output_dir) / "checkpoints")
        ckpt_path, resumed = newest_checkpoint(Path(output_dir) / "checkpoints")
    else:
        ckpt_path, resumed = resume, read_checkpoint(resume)
    if extend_to is not None:  # appended: they win over the config's values
        argv = [*argv, *extension_args(resumed, extend_to, ckpt_path)]
    classes = (TextPretrainModule, TextDataModule) if is_text_config(argv) else (
        PretrainModule, PretrainDataModule)
    # a resumed run keeps the config.yaml it was started with (changes go to resumes.jsonl);
    # an extended one takes its new length there
    keeps_config = (resumed is not None and extend_to is None
                    and (Path(output_dir) / "config.yaml").is_file())
    try:
        cli = PretrainCLI(
            *classes,
            args=argv,
            run=False,
            seed_everything_default=0,
            auto_configure_optimizers=False,
            trainer_defaults=trainer_defaults(output_dir),
            save_config_callback=None if keeps_config else SaveConfigCallback,
            save_config_kwargs={"overwrite": True},
            parser_kwargs={"prog": "contrastkit pretrain", "default_env": False,
                           "allow_abbrev": False},
            output_dir=output_dir,
            purge_step=None if resumed is None else int(resumed["global_step"]),
            tracker_runs=None if resumed is None else resumed.get(TRACKER_RUNS),
            check_data=lambda data: checked_listing(data, resumed, ckpt_path),
        )
    except ValueError as err:
        raise _unwrap_link_error(err) from None
    listing = cli.checked_data
    validate_run(cli, resumed, ckpt_path, extending=extend_to is not None)
    identity, changed = checked_identity(cli, resumed, ckpt_path, listing)
    if extend_to is not None:
        then = recorded_schedule(resumed)["max_epochs"]
        changed = {**changed, LENGTH: (then, extend_to)}
        cli.trainer.callbacks.append(ExtendedSchedule())
        print(f"extending the run from {then} to {extend_to} epochs: from epoch "
              f"{epochs_done(resumed) + 1} on, the schedules of a {extend_to}-epoch run "
              f"(recorded in {Path(output_dir) / RESUMES})", file=sys.stderr)
    cli.trainer.callbacks.append(identity)
    if cli.schedule_notice:
        print(cli.schedule_notice, file=sys.stderr)
    clear_outputs(earlier)
    if launched_as_rank_zero():  # the one process that writes in the run folder
        if resumed is not None:
            truncate_metrics(Path(output_dir) / "metrics.csv", int(resumed["global_step"]))
            record_changes(Path(output_dir), changed, str(ckpt_path),
                           int(resumed["global_step"]), epochs_done(resumed))
        write_skipped_files(Path(output_dir), cli.datamodule.skipped)
    return cli, ckpt_path


#: Messages that every run printed and that say nothing about it: LightningCLI's note about
#: ``args`` (``contrastkit pretrain`` passes its arguments that way by design), torch's
#: deprecation of ``isinstance(treespec, LeafSpec)`` used inside Lightning, the checkpoint
#: folder's "exists and is not empty" (a fresh run's folder is checked to be empty, so it only
#: appears when resuming, where it is expected), the empty list of validation loaders of a run
#: without monitor (``data.val_split: null``, unlabelled images), and the logging interval longer
#: than an epoch (the interval counts steps over the whole run, so the loss is logged anyway).
_NOISE = ("LightningCLI's args parameter is intended to run from within Python",
          r"`isinstance\(treespec, LeafSpec\)` is deprecated",
          r"Checkpoint directory .* exists and is not empty",
          r"Total length of `list` across ranks is zero",
          r"The number of training batches \(\d+\) is smaller than the logging interval")

#: Beginnings of Lightning's informational lines that say nothing about the run: its
#: advertisement for a cloud logger, accelerators that this machine does not have (a GPU that
#: is there is still named), a note on how it counts the steps of the learning-rate schedule,
#: its "max_epochs reached" (a finished run says what it did: :mod:`.next_steps`), and the
#: seed (``config.yaml`` records it; the line would come before a one-line error).
_NOISE_LINES = ("💡 Tip:", "GPU available: False", "TPU available: False",
                "HPU available: False",
                "Loading `train_dataloader` to estimate number of stepping batches",
                "`Trainer.fit` stopped: ", "Seed set to ")


class _DropNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_NOISE_LINES)


def silence_known_warnings() -> None:
    """Hide the known messages of :data:`_NOISE` and :data:`_NOISE_LINES` (nothing else)."""
    for message in _NOISE:
        warnings.filterwarnings("ignore", message=message)
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.seed"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropNoise) for f in logger.filters):
            logger.addFilter(_DropNoise())


def _unwrap_link_error(err: ValueError) -> BaseException:
    """jsonargparse reports an error of the data -> num_classes link as "Call to compute_fn of
    link ... failed: <error>" with the data module's repr; give back the error itself."""
    if str(err).startswith("Call to compute_fn of link") and err.__cause__ is not None:
        return err.__cause__
    return err


def pretrain(argv: list[str] | None = None) -> PretrainCLI:
    """Run ``contrastkit pretrain``; returns the CLI (its ``trainer`` and ``model``).

    The run folder stays locked until the run ends. SIGINT (Ctrl-C) and SIGTERM stop the run at
    the next batch end (a checkpoint being written is finished first), the loss curve and the
    summary figure of what was logged so far are written, and
    :class:`~contrastkit.errors.RunInterrupted` says how to resume (exit status 130 / 143). A
    fresh run that fails before its first checkpoint removes its files, so that the same command
    can be run again. ``--threads N|auto`` sets the CPU threads of the run (restored after it;
    without it the process's setting stays).

    Raises:
        RunInterrupted: after SIGINT or SIGTERM.
        ValueError: for a bad ``--threads``, before anything runs.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    threads = pop_threads(argv)
    if threads is None:
        return _pretrain(argv)
    with using_threads(threads):
        return _pretrain(argv)


def _pretrain(argv: list[str]) -> PretrainCLI:
    """:func:`pretrain` with its threads set."""
    cli, ckpt_path = build(argv)
    stop = SignalStop()
    cli.trainer.callbacks.append(stop)
    output_dir = Path(cli.trainer.default_root_dir)
    # The handler stays until the closing work is done: a signal that comes after the stop (a
    # launcher signals every process, and this one may have stopped on another's) is the same
    # stop, not a kill in the middle of the figures.
    with stop.installed():
        try:
            cli.trainer.fit(cli.model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
        except BaseException as err:
            # After a signal, any error (a data-loader worker that the terminal's Ctrl-C ended,
            # for one) is the interruption; SIGTERMException is Lightning's own stop on SIGTERM.
            signum = stop.signum or (signal.SIGTERM if isinstance(err, SIGTERMException)
                                     else None)
            if signum is None:
                if ckpt_path is None and launched_as_rank_zero():
                    _remove_failed_start(output_dir)
                lost = lost_peer(err, cli.trainer, output_dir)
                if lost is not None:
                    raise lost from None
                raise
            for callback in cli.trainer.callbacks:
                if isinstance(callback, (LossCurveCallback, RunSummaryCallback)):
                    callback.write(cli.trainer)
            message, saved = interrupted_message(cli.trainer, output_dir, signum)
            if not saved and launched_as_rank_zero():
                _remove_failed_start(output_dir)
            raise RunInterrupted(message, 128 + signum) from None
        finally:
            cli.folder_lock.release()
    return cli


def _remove_failed_start(output_dir: Path) -> None:
    """Remove the files of a fresh run that ended before writing any checkpoint."""
    if not any((output_dir / "checkpoints").glob("*.ckpt")):
        clear_outputs([e for e in output_dir.iterdir() if e.name in RUN_OUTPUTS])


#: The option of ``contrastkit pretrain`` that fixes an error, for the errors that have one.
PRETRAIN_HINTS: dict[type[BaseException], str] = {
    UnreadableImageError: "pass --data.skip_corrupt true to skip unreadable images (they are "
    "listed in the run folder's skipped_files.txt)",
    VideoDecodeError: "pass --data.skip_corrupt true to skip unreadable videos (they are "
    "listed in the run folder's skipped_files.txt)",
    MixedImageSizesError: "pass --data.load_size N (e.g. 64) to resize each image's shorter "
    "side to N and centre-crop it when loading",
    torch.OutOfMemoryError: "the device's memory is too small for this step: reduce "
    "--data.batch_size (per process) or the image size (--model.views.size)",
    MemoryError: "the machine's memory is too small: reduce --data.num_workers, "
    "--data.batch_size or the images' load size (--data.load_size)",
}


def pretrain_command(argv: list[str]) -> int:
    """``contrastkit pretrain ...``; a finished run ends with where its results are and what to
    run next (:func:`~contrastkit.cli.next_steps.finished_lines`); an expected failure is one
    line (with the option that fixes it) and exit status 2."""

    def body() -> int:
        cli = pretrain(argv)
        if cli.trainer.is_global_zero:
            print(finished_lines(cli.trainer, cli.datamodule,
                                 Path(cli.trainer.default_root_dir)), flush=True)
        return 0

    return run_command("contrastkit pretrain", body, PRETRAIN_HINTS)
