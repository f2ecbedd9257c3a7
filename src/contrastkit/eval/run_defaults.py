"""What the pretraining run says about evaluating its checkpoint: the defaults of the common
options of ``contrastkit eval | analyze``.

A checkpoint written by ``contrastkit pretrain`` carries them in its ``contrastkit`` entry
(see :mod:`contrastkit.checkpoints`): the view size, normalisation, eval resize and view
presets, and the data options (dataset, held-out split, load size, clip sampling), so that
evaluating it needs the checkpoint alone; an export of it carries the same records
(:mod:`contrastkit.export_metadata`), read here alike. Checkpoints written before that entry
held them are read through :func:`legacy_run_defaults`, the run folder's ``config.yaml``.
The normalisation is the run's, always (:func:`resolve_normalize`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = ["RunDefaults", "legacy_run_defaults", "resolve_normalize", "run_defaults"]


@dataclass(frozen=True)
class RunDefaults:
    """The pretraining run's settings that evaluation starts from (None: not known).

    Attributes:
        source: where they were read: the checkpoint or the export carrying them, the run's
            ``config.yaml`` (checkpoints written before the record) or None (nothing known: an
            export without them, a torchvision state_dict, a checkpoint written before the
            record outside its run folder).
        size: view size.
        eval_resize: ``small`` or ``large`` (the evaluation transform).
        normalize: normalisation name.
        views: (online, target) augmentation presets.
        dataset: dataset name of the run; the data options below apply to that dataset only.
        load_size, test_fraction, split_seed: image loading and held-out split.
        video: the clip sampling (``VideoDataSpec`` as a dict).
        knn_k, knn_temperature: the run's kNN monitor's (``contrastkit eval knn``'s defaults,
            so that both report the same accuracy on the same images).
        monitor_split: the split the kNN monitor queried (which ``best.ckpt`` was chosen on).
    """

    source: Path | None = None
    size: int | None = None
    eval_resize: str | None = None
    normalize: str | None = None
    views: tuple[str, str] | None = None
    dataset: str | None = None
    load_size: int | None = None
    test_fraction: float | None = None
    split_seed: int | None = None
    video: dict | None = None
    knn_k: int | None = None
    knn_temperature: float | None = None
    monitor_split: str | None = None

    def data_option(self, name: str, dataset: str) -> Any:
        """The run's data option ``name`` when evaluating on its own ``dataset``, else None."""
        return getattr(self, name) if dataset == self.dataset else None


def run_defaults(checkpoint: Path, entry: dict) -> RunDefaults:
    """The defaults of ``checkpoint`` whose ``contrastkit`` entry is ``entry``.

    The entry's ``views`` and ``data`` records when it has them; otherwise (a checkpoint
    written before them) :func:`legacy_run_defaults`. A checkpoint its run's ``config.yaml``
    disagrees with is refused first (:func:`check_run_config`).
    """
    check_run_config(checkpoint, entry)
    views, data = entry.get("views"), entry.get("data")
    if not isinstance(views, dict) or not isinstance(data, dict):
        return legacy_run_defaults(checkpoint)
    monitor = entry.get("monitor") if isinstance(entry.get("monitor"), dict) else {}
    return replace(_defaults(checkpoint, views, data, views.get("online"), views.get("target")),
                   knn_k=monitor.get("knn_k"), knn_temperature=monitor.get("knn_temperature"),
                   monitor_split=monitor.get("val_split"))


def resolve_normalize(given: str | None, run: RunDefaults) -> tuple[str | None, str]:
    """The normalisation to evaluate with (None: none) and where it comes from, in words.

    A backbone reads images normalised as in its training, so where the run's settings are
    known (``run.source``: the checkpoint, an export carrying them, the run's
    ``config.yaml``) their normalisation is used, and a ``given`` one (``--normalize``; ``none``
    for none) that contradicts it is refused: its features would not be the model's. Without a
    record (an older export, a torchvision state_dict), ``given`` or none.

    Raises:
        ValueError: naming both values and the file that records the run's, for a ``given``
            normalisation that contradicts it.
    """
    name = None if given in (None, "none") else given
    if run.source is None:
        return name, ("--normalize" if given is not None else
                      "not recorded by the checkpoint: pass --normalize NAME if it was trained "
                      "with one")
    recorded = None if run.normalize in (None, "none") else run.normalize
    if given is not None and name != recorded:
        raise ValueError(f"--normalize {given} contradicts the normalisation the model was "
                         f"trained with, {recorded or 'none'}, recorded in {run.source}: leave "
                         "--normalize out (the recorded one is used)")
    return recorded, f"recorded in {run.source.name}"


def _defaults(source: Path, views: dict, data: dict, online: object,
              target: object) -> RunDefaults:
    video = data.get("video")
    return RunDefaults(
        source=source, size=views.get("size"), eval_resize=views.get("eval_resize"),
        normalize=views.get("normalize"),
        views=(str(online), str(target)) if online is not None and target is not None else None,
        dataset=data.get("dataset"), load_size=data.get("load_size"),
        test_fraction=data.get("test_fraction"), split_seed=data.get("split_seed"),
        video=video if isinstance(video, dict) else None)


def _run_config(checkpoint: Path) -> tuple[Path, dict] | None:
    """``(path, content)`` of the ``config.yaml`` of the run a ``RUN/checkpoints/*.ckpt``
    belongs to; None for another file or a config that is missing or unreadable."""
    path = checkpoint.parent.parent / "config.yaml"
    if checkpoint.suffix != ".ckpt" or checkpoint.parent.name != "checkpoints" or \
            not path.is_file():
        return None
    try:
        import yaml

        config = yaml.safe_load(path.read_text()) or {}
    except Exception:  # a config we cannot read only loses the defaults
        return None
    return (path, config) if isinstance(config, dict) else None


def check_run_config(checkpoint: Path, entry: dict) -> None:
    """Refuse a checkpoint in ``RUN/checkpoints/`` whose run's ``config.yaml`` names another
    method (``model.method.class_path``) or backbone (``model.method.init_args.backbone``,
    the fields it gives) than the checkpoint records: the checkpoint is not that run's (copied
    into another run's folder), so neither the run's settings nor its name would describe it.

    Raises:
        ValueError: naming the checkpoint and its record, the config and what it gives.
    """
    found = _run_config(checkpoint)
    model = found[1].get("model") if found else None
    method = model.get("method") if isinstance(model, dict) else None
    if not found or not isinstance(method, dict):
        return
    path, fix = found[0], (f"the checkpoint is not that run's: evaluate it from its own run "
                           f"folder, or move it out of {checkpoint.parent}")
    recorded, given = entry.get("method"), str(method.get("class_path") or "").rpartition(".")[2]
    if recorded and given and recorded != given:
        raise ValueError(f"checkpoint {checkpoint} records the method {recorded}, its run's "
                         f"config {path} gives {given} (model.method.class_path); {fix}")
    args = method.get("init_args")
    backbone = args.get("backbone") if isinstance(args, dict) else None
    record = entry.get("backbone")
    if isinstance(backbone, dict) and isinstance(record, dict):
        differ = sorted(k for k, v in backbone.items() if k in record and record[k] != v)
        if differ:
            raise ValueError(f"checkpoint {checkpoint} records the backbone {record}, its run's "
                             f"config {path} gives {backbone} (model.method.init_args.backbone, "
                             f"{', '.join(differ)} differ); {fix}")


# --- fallback for checkpoints written before the record ----------------------------------------
def legacy_run_defaults(checkpoint: Path) -> RunDefaults:
    """Fallback for checkpoints whose ``contrastkit`` entry holds no ``views`` / ``data``
    record (written before it existed): the ``model`` and ``data`` sections of the run's
    ``config.yaml``, for ``RUN/checkpoints/*.ckpt`` only.

    View presets the config leaves to the method are its class's ``default_views`` (the class
    is imported by the name the config gives). A config that is missing or unreadable only
    loses the defaults.
    """
    found = _run_config(checkpoint)
    if found is None:
        return RunDefaults()
    path, config = found
    model, data = config.get("model") or {}, config.get("data") or {}
    if not isinstance(model, dict) or not isinstance(data, dict):
        return RunDefaults()
    views = model.get("views") or {}
    online, target = views.get("online"), views.get("target")
    if online is None or target is None:
        try:
            module, _, name = str(model["method"]["class_path"]).rpartition(".")
            defaults = getattr(importlib.import_module(module), name).default_views
            online, target = online or defaults[0], target or defaults[1]
        except Exception:
            online = target = None
    return _defaults(path, views, data, online, target)
