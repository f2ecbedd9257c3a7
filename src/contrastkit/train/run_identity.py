"""A run's identity: the settings that define what it trains, checked on every resume.

A run is its data, its seed and its method (the model section: method, backbone, heads, views,
optimiser), plus the few trainer settings that change what a step computes. Every checkpoint
stores them (:class:`RunIdentity`, a callback whose state Lightning saves under
``checkpoint["callbacks"]["RunIdentity"]``), flattened to dotted keys as the command line
spells them (``data.subset``, ``model.method.queue_size``, ``seed_everything``).

``--resume`` compares the configuration it was given with the checkpoint's
(:func:`identity_changes`):

* a change of a key that defines the run is refused, in one line naming every such key with
  both values (:func:`refuse_changes`): training on with other data or another seed would make
  the run's record false;
* a change of how the run is computed but not of what it computes (:data:`HOW_KEYS`: loader
  workers, the feature cache, compilation and memory layout, the devices and precision of the
  trainer) is allowed and recorded, one JSON line per resume in ``RUN/resumes.jsonl``
  (:func:`record_changes`); the run's ``config.yaml`` stays the one it was started with.

An extension that legitimately changes a defining key (continuing a finished run for more
epochs with a new stated schedule, say) passes those keys as ``allowed`` to
:func:`identity_changes`: they are then recorded like the others instead of refused.
Checkpoints written before the identity was stored are not checked.

The data is also its files: every checkpoint stores the listing of ``data.root``
(:func:`contrastkit.data.sources.listing.data_listing`: per class folder, the number of files and
a digest of their relative paths and sizes), and a resume whose listing differs is refused in
one line saying what changed (:func:`checked_listing`); checkpoints written before the listing
was stored resume with a one-line note, unchecked.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import lightning as L
import yaml

from contrastkit.data.sources.listing import data_listing, listing_changes
from contrastkit.provenance import source_identity

__all__ = ["RESUMES", "RunIdentity", "checked_identity", "checked_listing", "identity_changes",
           "record_changes", "recorded_identity", "refuse_changes", "run_identity"]

#: The file of the recorded changes, one JSON line per resume that changed a setting.
RESUMES = "resumes.jsonl"

#: Prefixes of the keys that define a run (a change is refused unless allowed).
DEFINING = ("seed_everything", "data.", "model.", "trainer.accumulate_grad_batches",
            "trainer.gradient_clip_val", "trainer.gradient_clip_algorithm")

#: Keys (or prefixes, ending in ``.``) of how a run is computed, not of what: a resume may change
#: them; the change is recorded.
HOW_KEYS = ("data.num_workers", "data.cache_dir", "model.performance.", "trainer.accelerator",
            "trainer.strategy", "trainer.devices", "trainer.num_nodes", "trainer.precision")

#: Keys of the learning-rate schedule: :func:`contrastkit.train.resume.check_resume_fits`
#: refuses their changes first, with its own message.
SCHEDULE_KEYS = ("trainer.max_epochs", "trainer.max_steps", "model.optimizer.")


def _matches(key: str, patterns: Collection[str]) -> bool:
    """Whether ``key`` is one of ``patterns`` or lies under one ending in ``.`` (a section)."""
    return any(key == p or (p.endswith(".") and f"{key}.".startswith(p)) for p in patterns)


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping) and value:
        for key, inner in value.items():
            if key == "init_args":  # the command line spells model.method.X, not init_args
                _flatten(inner, prefix, out)
            else:
                _flatten(inner, f"{prefix}{key}.", out)
    else:
        out[prefix[:-1]] = value


def run_identity(dumped_config: str) -> dict[str, Any]:
    """The identity of a run from its configuration as LightningCLI dumps it (YAML): the
    :data:`DEFINING` and :data:`HOW_KEYS` keys, flattened, with JSON values."""
    flat: dict[str, Any] = {}
    _flatten(yaml.safe_load(dumped_config) or {}, "", flat)
    kept = {k: v for k, v in flat.items() if _matches(k, DEFINING) or _matches(k, HOW_KEYS)}
    return json.loads(json.dumps(kept, default=str))


def recorded_identity(checkpoint: Mapping) -> dict[str, Any] | None:
    """The identity a checkpoint stores (None for checkpoints written before it was)."""
    state = (checkpoint.get("callbacks") or {}).get(RunIdentity.__name__)
    config = state.get("config") if isinstance(state, Mapping) else None
    return dict(config) if isinstance(config, Mapping) else None


def identity_changes(recorded: Mapping[str, Any], now: Mapping[str, Any],
                     allowed: Collection[str] = ()) -> tuple[dict, dict]:
    """``(refused, recorded)``: the keys whose value differs between the checkpoint's identity
    and the configuration given now, as ``{key: (then, now)}``, split into the defining ones
    (refused) and those of :data:`HOW_KEYS` or ``allowed`` (recorded). Keys that only one side
    has (an option added by a later version) and schedule keys (checked before) are left out.
    """
    refused, changed = {}, {}
    for key in sorted(_compared_keys(recorded, now)):
        then, given = _value_at(recorded, key), _value_at(now, key)
        if then == given or _matches(key, SCHEDULE_KEYS):
            continue
        if _matches(key, HOW_KEYS) or _matches(key, allowed):
            changed[key] = (then, given)
        else:
            refused[key] = (then, given)
    return refused, changed


def _compared_keys(a: Mapping[str, Any], b: Mapping[str, Any]) -> set[str]:
    """The keys of both, and for a key of one side under a key that the other side holds as a
    value (a section given on one side, ``null`` on the other), that key."""
    keys = set(a) & set(b)
    for one, other in ((a, b), (b, a)):
        for key in set(one) - set(other):
            parts = key.split(".")
            prefixes = (".".join(parts[:n]) for n in range(1, len(parts)))
            keys.update(p for p in prefixes if p in other)
    return keys


def _value_at(flat: Mapping[str, Any], key: str) -> Any:
    """The value of ``key``: a leaf, or the section of its sub-keys as a dict."""
    if key in flat:
        return flat[key]
    return {k[len(key) + 1:]: v for k, v in flat.items() if k.startswith(f"{key}.")}


def refuse_changes(refused: Mapping[str, tuple], path: str | os.PathLike) -> None:
    """Raise the one-line refusal of a resume that changes what the run is.

    Raises:
        ValueError: naming each key with the run's value and the given one.
    """
    if not refused:
        return
    run = Path(path).parent.parent
    keys = "; ".join(f"{k} is {_show(now)} but the run was started with {_show(then)}"
                     for k, (then, now) in refused.items())
    raise ValueError(f"--resume {path}: {keys}: a resumed run keeps its data, seed and method; "
                     f"resume with the run's own config (--config {run / 'config.yaml'}) or "
                     "start a new run with another --output")


def _show(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (dict, list, str)) else str(value)


def record_changes(folder: Path, changed: Mapping[str, tuple], checkpoint: str,
                   step: int, epoch: int | None = None) -> None:
    """Append the changes of one resume to ``folder/resumes.jsonl`` (nothing when none), with
    the checkpoint's step and, when given, its completed epochs."""
    if not changed:
        return
    line = {"resumed": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "checkpoint": str(checkpoint), "step": int(step),
            **({"epoch": int(epoch)} if epoch is not None else {}),
            "changed": {k: {"then": then, "now": now} for k, (then, now) in changed.items()}}
    with open(folder / RESUMES, "a") as handle:
        handle.write(json.dumps(line) + "\n")


#: The key of the data's listing in :class:`RunIdentity`'s state.
LISTING = "data_listing"


def checked_listing(data: Mapping[str, Any], resumed: Mapping | None,
                    ckpt_path: str | None) -> dict[str, Any] | None:
    """The listing of the data of a parsed ``data`` section (``dataset``, ``root`` and the
    splits; :func:`~contrastkit.data.sources.listing.data_listing` of its ``root``; None for
    a dataset without one), checked against the one the checkpoint ``resumed`` recorded at the
    run's start (read from ``ckpt_path``), before the data is opened. Nothing is checked when
    ``data.root`` itself changed (:func:`checked_identity` refuses that, naming the key); a
    checkpoint written before listings were stored gets a one-line note on stderr.

    Raises:
        ValueError: one line saying what changed and how to start a new run on the files.
    """
    name, root = data.get("dataset"), data.get("root")
    root = os.path.expanduser(root) if isinstance(root, str) and root else None
    splits = {data.get(k) for k in ("train_split", "bank_split", "val_split")}
    listing = None if name is None else data_listing(
        name, root, {"train", "val", "test"} | {s for s in splits if isinstance(s, str)})
    if listing is None or resumed is None:
        return listing
    started = (recorded_identity(resumed) or {}).get("data.root")
    if isinstance(started, str) and os.path.expanduser(started) != root:
        return listing
    state = (resumed.get("callbacks") or {}).get(RunIdentity.__name__)
    path = ckpt_path or ""
    if not isinstance(state, Mapping) or LISTING not in state:
        print(f"note: --resume {path}: the checkpoint records no listing of data.root {root} "
              "(written before runs recorded one), so its files are not checked; they are "
              "recorded from now on", file=sys.stderr)
        return listing
    change = None if state[LISTING] is None else listing_changes(state[LISTING], listing)
    if change is not None:
        run = Path(path).parent.parent
        raise ValueError(
            f"--resume {path}: data.root {root} changed since the run started: {change}; a "
            "resumed run keeps its data (a held-out split would be drawn again from other "
            "files); put the files back as they were to resume, or start a new run on them "
            f"with another --output (contrastkit pretrain --config {run / 'config.yaml'} "
            "--output NEW_FOLDER)")
    return listing


def checked_identity(cli: Any, resumed: Mapping | None, ckpt_path: str | None,
                     listing: Mapping[str, Any] | None = None) -> tuple[RunIdentity, dict]:
    """The :class:`RunIdentity` of the configuration a ``LightningCLI`` ``cli`` parsed (with
    the ``listing`` of its data, :func:`checked_listing`), and the changes to record when it
    resumes the checkpoint ``resumed`` (read from ``ckpt_path``).

    Raises:
        ValueError: for a resume that changes what the run is (:func:`refuse_changes`).
    """
    identity = run_identity(cli.parser.dump(cli.config, skip_none=False))
    recorded = recorded_identity(resumed) if resumed is not None else None
    changed: dict = {}
    if recorded is not None:
        refused, changed = identity_changes(recorded, identity)
        refuse_changes(refused, ckpt_path or "")
    return RunIdentity(identity, listing), changed


class RunIdentity(L.Callback):
    """Store the run's identity (:func:`run_identity`) in every checkpoint, with the listing
    of its data's files and the code that trains it
    (:func:`contrastkit.provenance.source_identity`: version, commit when known).

    Args:
        config: the flattened identity of the configuration this process runs.
        listing: :func:`~contrastkit.data.sources.listing.data_listing` of its ``data.root``
            (None: a dataset without one).
    """

    def __init__(self, config: Mapping[str, Any],
                 listing: Mapping[str, Any] | None = None) -> None:
        self.config = dict(config)
        self.listing = None if listing is None else dict(listing)
        self.source = source_identity()

    def state_dict(self) -> dict[str, Any]:
        return {"config": dict(self.config), LISTING: self.listing, **self.source}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Nothing to restore: the configuration given now was checked against it."""
