"""What an exported backbone carries besides its weights, and its check when it is loaded.

Every ``.safetensors`` export (and every ``.pth`` export that is not a bare torchvision
state_dict) records, in its metadata:

* ``contrastkit_weights_sha256``: the SHA-256 of its tensors
  (:func:`contrastkit.checkpoints.weights_digest`: keys, dtypes, shapes and bytes), checked
  by :func:`contrastkit.checkpoints.verify_export` whenever contrastkit loads the file: a
  flipped bit is refused in one line naming the file;
* ``contrastkit_run``: the identity of the run it comes from (JSON): ``method``,
  ``backbone`` (its description), ``commit`` of the code that trained it when known (a git
  checkout), the ``contrastkit_version`` that exported it and the ``checkpoint`` file's name;
* ``contrastkit_settings``: the run's settings that evaluating the backbone starts from (JSON,
  :func:`run_settings`): the checkpoint's ``views`` (input size, normalisation, eval resize,
  view presets), ``data`` (dataset, classes, held-out split, load size) and ``monitor`` (kNN
  k and temperature) records, and the normalisation's ``mean`` and ``std`` for other tools;
  :func:`contrastkit.checkpoints.read_metadata` gives them back as a checkpoint's entry holds
  them. A checkpoint without those records (written before them, a torchvision state_dict)
  gives an export without them.

The helpers take and give plain ``str -> str`` metadata (the ``.safetensors`` header's type),
so any export format can carry the same record.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from contrastkit.checkpoints import DIGEST_METADATA, SETTINGS_METADATA, weights_digest
from contrastkit.data.augment import NORMALIZATION
from contrastkit.provenance import source_identity

__all__ = ["RUN_METADATA", "export_metadata", "run_record", "run_settings"]

#: The sections of a checkpoint's ``contrastkit`` entry that an export carries.
SETTINGS = ("views", "data", "monitor")

#: Metadata key of the run's identity (JSON).
RUN_METADATA = "contrastkit_run"


def run_record(checkpoint: Mapping[str, Any], path: str | os.PathLike) -> dict[str, Any]:
    """The identity of the run that wrote the contrastkit checkpoint ``checkpoint`` (read from
    ``path``): method, backbone, training commit (None when unknown), and the exporting code's
    version."""
    entry = checkpoint.get("contrastkit") or {}
    identity = (checkpoint.get("callbacks") or {}).get("RunIdentity") or {}
    return {"method": entry.get("method"), "backbone": entry.get("backbone"),
            "commit": identity.get("commit"), "checkpoint": Path(path).name,
            "contrastkit_version": source_identity()["contrastkit_version"]}


def run_settings(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The settings an export of a checkpoint whose ``contrastkit`` entry (or an earlier
    export's, :func:`contrastkit.checkpoints.read_metadata`) is ``entry`` carries: its
    ``views``, ``data`` and ``monitor`` records, with ``normalization``, the ``name``, ``mean``
    and ``std`` of the views' normalisation (None: none); None when the entry has no ``views``
    record."""
    if not isinstance(entry.get("views"), dict):
        return None
    settings = {key: entry[key] for key in SETTINGS if isinstance(entry.get(key), dict)}
    name = settings["views"].get("normalize")
    if isinstance(name, str) and name in NORMALIZATION:
        mean, std = NORMALIZATION[name]
        settings["normalization"] = {"name": name, "mean": list(mean), "std": list(std)}
    else:
        settings["normalization"] = None
    return settings


def export_metadata(tensors: Mapping[str, torch.Tensor], run: Mapping[str, Any] | None,
                    settings: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The metadata of an export of ``tensors``: their digest, ``run`` and ``settings``
    (:func:`run_settings`; each when given), as JSON with sorted keys."""
    metadata = {DIGEST_METADATA: weights_digest(dict(tensors))}
    if run is not None:
        metadata[RUN_METADATA] = json.dumps(dict(run), sort_keys=True)
    if settings is not None:
        metadata[SETTINGS_METADATA] = json.dumps(dict(settings), sort_keys=True)
    return metadata
