"""Read backbones out of checkpoints: contrastkit's own, or a torchvision-layout state_dict.

Three formats:

* a contrastkit checkpoint (Lightning ``.ckpt``) stores the backbone description under
  ``checkpoint["contrastkit"]["backbone"]`` and the weights under ``method.backbone.*``. The
  same entry holds what evaluating the checkpoint needs (:func:`read_metadata`; written by
  :meth:`contrastkit.train.module.PretrainModule.on_save_checkpoint`):

  - ``backbone``: the :class:`~contrastkit.models.factory.BackboneSpec` as a dict;
  - ``method``, ``num_classes``: the method's class name, the classes of the online monitors;
  - ``views``: the run's ``ViewsSpec`` as a dict (``size``, ``normalize``, ``eval_resize``,
    ...), its ``online`` / ``target`` presets filled in with the method's defaults;
  - ``data``: ``dataset``, ``classes`` (names, in label order), ``test_fraction``,
    ``split_seed``, ``load_size`` and ``video`` (the clip sampling, or None).

  Checkpoints written before ``views`` and ``data`` were added hold the first three keys only;
  ``contrastkit eval`` then reads those settings from the run's ``config.yaml``;
* a backbone exported by :func:`contrastkit.export.export_backbone` that is not a 2-D ResNet
  (``small_convnet``, ``resnet3d_*``) keeps its own keys and its description: in a ``.pth``
  as ``{"contrastkit": {"backbone": ...}, "backbone_state_dict": ...}``, in a ``.safetensors``
  file as the header metadata ``contrastkit_backbone`` (JSON); exports carry the SHA-256 of
  their tensors (:mod:`contrastkit.export_metadata`), checked here on load
  (:func:`verify_export`);
* a torchvision ResNet state_dict (``conv1.weight``, ``layer1.0...``, optional ``fc.*``), as
  exported 2-D ResNets are, is recognised by its keys; its architecture is inferred from them;
* a Hub-format folder (:mod:`contrastkit.export_hf`) is read through its ``model.safetensors``,
  which carries the description as above, once :func:`check_export_folder` finds it whole; a
  pretraining run folder through its ``checkpoints/last.ckpt`` (:func:`weights_file`).

An export made from a checkpoint that records its run's settings (``views``, ``data``,
``monitor``) carries them (``contrastkit_settings``, :mod:`contrastkit.export_metadata`);
:func:`read_metadata` gives them as a checkpoint's entry does, so evaluating the export starts
from the same settings (the normalisation above all) as evaluating its checkpoint.

Every ``.ckpt`` / ``.pth`` is read by :func:`load_checkpoint_file`, with
``torch.load(weights_only=True)``: tensors and plain values only, so a file whose pickle names a
function (``os.system``, ...) is refused before anything in it runs. Checkpoints written since
``weights_sha256`` was added carry the SHA-256 of their weights (:func:`weights_digest`) under
``checkpoint["contrastkit"]["weights_sha256"]``; :func:`verify_weights` checks it on load.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn

from contrastkit.models.factory import (
    BackboneSpec,
    DINOHeadSpec,
    HeadSpec,
    build_backbone,
    build_head,
)
from contrastkit.models.heads import MLPHead
from contrastkit.models.prototypes import DINOHead
from contrastkit.models.torchvision_layout import load_torchvision_state_dict

_PREFIX = "method.backbone."


def file_hash(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file (the checkpoint's identity in feature-cache keys)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


#: Header metadata key of an exported ``.safetensors`` backbone holding its BackboneSpec (JSON).
SPEC_METADATA = "contrastkit_backbone"


#: Key of the weights' SHA-256 in a checkpoint's ``contrastkit`` entry.
WEIGHTS_SHA256 = "weights_sha256"

_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


def load_checkpoint_file(path: str | os.PathLike, *, mmap: bool = False) -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU, with one-line errors.

    ``weights_only`` unpickles tensors and plain values (dicts, lists, numbers, strings) and
    nothing else: a pickle that names a function or class to call (the way a malicious file
    runs code) is refused before any of it runs. contrastkit's own checkpoints hold only such
    values, so they load.

    Args:
        path: the checkpoint file.
        mmap: memory-map the tensors instead of reading them (zip-format files only).

    Raises:
        ValueError: when the file holds other Python objects (refused, naming the first one)
            or cannot be read (truncated, another format).
    """
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as err:
        found = _GLOBAL.search(str(err))
        if found is None:  # random bytes, text: not a pickle at all
            raise ValueError(f"checkpoint {path} could not be read (not a PyTorch "
                             "checkpoint)") from None
        raise ValueError(f"checkpoint {path} holds Python objects other than tensors and plain "
                         f"values ({found.group(1)}): refused, since loading it could run code; "
                         "contrastkit loads only checkpoints of tensors and plain values") from None
    except Exception as err:  # truncated zip, random bytes, another format: all unreadable
        raise ValueError(f"checkpoint {path} could not be read "
                         f"({type(err).__name__}: {' '.join(str(err).split())})") from None


def weights_digest(state_dict: dict) -> str:
    """SHA-256 over a state_dict's keys (sorted), dtypes, shapes and tensor bytes."""
    digest = hashlib.sha256()
    for key in sorted(state_dict):
        tensor = state_dict[key]
        if not isinstance(tensor, torch.Tensor):
            continue
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{key}|{flat.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def verify_weights(checkpoint: dict, path: str | os.PathLike) -> None:
    """Check a checkpoint's weights against the SHA-256 stored with them (when there is one).

    Raises:
        ValueError: when the stored and the recomputed digests differ (corrupted weights).
    """
    entry = checkpoint.get("contrastkit") if isinstance(checkpoint, dict) else None
    stored = entry.get(WEIGHTS_SHA256) if isinstance(entry, dict) else None
    if stored is None or "state_dict" not in checkpoint:
        return
    if weights_digest(checkpoint["state_dict"]) != stored:
        raise ValueError(f"checkpoint {path} is corrupted: its weights do not match the "
                         "SHA-256 stored with them; use another checkpoint of the run")


#: The weights file of a Hub-format folder (``contrastkit export --format hf``).
HUB_WEIGHTS = "model.safetensors"
#: The Hub-format folder's config; its :data:`EXPORT_RECORD` says the folder is whole.
HUB_CONFIG = "config.json"
#: Key of ``config.json`` listing the files the export wrote (``files``) and the digest of
#: its weights (``weights_sha256``): present only in a folder written whole.
EXPORT_RECORD = "contrastkit_export"
#: Metadata key of an export's tensor digest (:mod:`contrastkit.export_metadata` writes it).
DIGEST_METADATA = "contrastkit_weights_sha256"
#: Metadata key of the run's settings an export carries (JSON: ``views``, ``data``,
#: ``monitor`` of the checkpoint's entry, and the normalisation's values).
SETTINGS_METADATA = "contrastkit_settings"
#: In an export's staging folder (:func:`export_stage`): an earlier export moved aside while
#: the new one takes its place.
EARLIER_EXPORT = "earlier"


def export_stage(output: str | os.PathLike) -> Path:
    """The staging folder of an export to ``output``: ``.NAME.export-partial`` beside it."""
    output = Path(output)
    return output.parent / f".{output.name}.export-partial"


#: In a folder given as a checkpoint, the file read: a Hub-format folder's weights, a
#: pretraining run folder's last checkpoint, the last one of its ``checkpoints/`` folder.
FOLDER_CHECKPOINTS = (HUB_WEIGHTS, "checkpoints/last.ckpt", "last.ckpt")


def weights_file(path: str | os.PathLike) -> Path:
    """``path`` itself; for a folder, the checkpoint in it: the ``model.safetensors`` of a
    Hub-format folder (written by ``contrastkit export --format hf``, or a snapshot of it
    downloaded from the Hub), which must be whole (:func:`check_export_folder`), or the
    ``checkpoints/last.ckpt`` of a pretraining run folder (``last.ckpt`` of its
    ``checkpoints/`` folder) (:data:`FOLDER_CHECKPOINTS`).

    Raises:
        ValueError: for a Hub-format folder that is not a whole export.
        IsADirectoryError: for a folder that holds none of them, naming the checkpoint files
            it holds.
    """
    path = Path(path)
    if not path.is_dir():
        return path
    if (path / HUB_WEIGHTS).exists() or (path / HUB_CONFIG).exists():
        check_export_folder(path)
        return path / HUB_WEIGHTS
    for inside in FOLDER_CHECKPOINTS[1:]:
        if (path / inside).is_file():
            return path / inside
    found = sorted(str(p.relative_to(path)) for pattern in ("*.ckpt", "checkpoints/*.ckpt",
                                                            "*.safetensors", "*.pth")
                   for p in path.glob(pattern) if p.is_file())
    inside = f"; it holds {', '.join(found[:5])}" if found else ""
    raise IsADirectoryError(f"checkpoint {path} is a folder without a checkpoint to read (a run "
                            f"folder's checkpoints/last.ckpt, a Hub folder's {HUB_WEIGHTS}): "
                            f"give a checkpoint file{inside}")


def _header(path: Path) -> dict[str, str]:
    """The metadata of the ``.safetensors`` file ``path``'s header (its tensors are not read).

    Raises:
        ValueError: naming the file, when it cannot be read.
    """
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            return handle.metadata() or {}
    except Exception as err:  # truncated, random bytes, another format: all unreadable
        raise ValueError(f"checkpoint {path} could not be read "
                         f"({type(err).__name__}: {' '.join(str(err).split())})") from None


def check_export_folder(folder: Path) -> None:
    """Refuse a folder that is not a whole Hub-format export: no ``config.json`` with the
    export's record (an export stopped midway before the folder was staged, or one written
    before the record existed), a file it lists missing, a file it does not list (hidden
    files, such as the Hub's ``.gitattributes``, aside), weights of another export than the
    config's, or a config whose ``normalize`` / ``input_size`` contradict the weights' record.

    Raises:
        ValueError: naming the folder and what is wrong, with the command that exports it again.
    """
    again = (f"export it again: contrastkit export --checkpoint CKPT --format hf --output "
             f"{folder} --overwrite")
    config_path = folder / HUB_CONFIG
    if not config_path.is_file() and not (folder / HUB_WEIGHTS).is_file():
        raise ValueError(f"checkpoint {folder} is a folder without {HUB_WEIGHTS} or "
                         f"{HUB_CONFIG}: pass a checkpoint file (a run's checkpoints/last.ckpt) "
                         "or a folder written by contrastkit export --format hf")
    try:
        config = json.loads(config_path.read_text())
        record = config.get(EXPORT_RECORD)
    except (OSError, ValueError, AttributeError):
        config, record = {}, None
    if not isinstance(record, dict) or not isinstance(record.get("files"), list):
        raise ValueError(f"checkpoint {folder} is not a whole export (no {HUB_CONFIG} with its "
                         f"{EXPORT_RECORD} record: an export stopped midway, or written before "
                         f"the record existed); {again}")
    listed = {str(name) for name in record["files"]}
    missing = sorted(name for name in listed if not (folder / name).is_file())
    if missing:
        raise ValueError(f"checkpoint {folder} is an incomplete export ({', '.join(missing)} "
                         f"missing); {again}")
    extra = sorted(e.name for e in folder.iterdir()
                   if not e.name.startswith(".") and e.name not in listed)
    if extra:
        raise ValueError(f"checkpoint {folder} holds files its export did not write "
                         f"({', '.join(extra[:5])}): move them out of the folder")
    metadata = _header(folder / HUB_WEIGHTS)
    if metadata.get(DIGEST_METADATA) != record.get("weights_sha256"):
        raise ValueError(f"checkpoint {folder} mixes two exports: its {HUB_WEIGHTS} is not the "
                         f"one its {HUB_CONFIG} was written with; {again}")
    views = _settings(metadata, folder / HUB_WEIGHTS).get("views") or {}
    for key, recorded in (("normalize", views.get("normalize")), ("input_size", views.get("size"))):
        if config.get(key) != recorded:
            raise ValueError(f"checkpoint {folder}: its {HUB_CONFIG} gives {key} "
                             f"{config.get(key)!r}, its {HUB_WEIGHTS} records {recorded!r} (the "
                             f"config was edited, or the folder mixes two exports); {again}")


def _settings(metadata: dict, path: Path) -> dict:
    """The run's settings an export's metadata carries (``{}`` when it carries none).

    Raises:
        ValueError: naming the file, when they are not a JSON object.
    """
    text = metadata.get(SETTINGS_METADATA)
    if text is None:
        return {}
    try:
        settings = json.loads(text)
    except (TypeError, ValueError):
        settings = None
    if not isinstance(settings, dict):
        raise ValueError(f"checkpoint {path}: its {SETTINGS_METADATA} metadata is not a JSON "
                         "object; export it again from its checkpoint")
    return settings


def _missing(path: Path) -> FileNotFoundError:
    """``path`` does not exist; says so, and what an export stopped midway left beside it."""
    message = f"checkpoint {path} does not exist"
    stage = export_stage(path)
    if stage.is_dir():
        earlier = stage / EARLIER_EXPORT
        message += (": an export into it was stopped midway; run the same contrastkit export "
                    "again" + (f" (it first puts back the earlier export, kept in {earlier})"
                               if earlier.exists() else ""))
    return FileNotFoundError(message)


def verify_export(tensors: dict, metadata: dict | None, path: str | os.PathLike) -> None:
    """Check the tensors of an export against the digest in its metadata (files without one,
    exported before it existed, are not checked).

    Raises:
        ValueError: naming the file, when the digests differ (changed bytes).
    """
    stored = (metadata or {}).get(DIGEST_METADATA)
    if stored is not None and weights_digest(dict(tensors)) != stored:
        raise ValueError(f"checkpoint {path} is corrupted: its weights do not match the "
                         "SHA-256 stored in its metadata; export it again from its checkpoint")


def _read(path: str | os.PathLike) -> dict:
    """The file's content; a ``.safetensors`` file's metadata spec lands under ``contrastkit``."""
    path = weights_file(path)
    if not path.is_file():
        raise _missing(path)
    if path.suffix != ".safetensors":
        data = load_checkpoint_file(path)
        verify_weights(data, path)
        if isinstance(data, dict) and isinstance(data.get("backbone_state_dict"), dict):
            verify_export(data["backbone_state_dict"], data.get("contrastkit"), path)
        return data
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            tensors = {k: handle.get_tensor(k) for k in handle.keys()}
            metadata = handle.metadata() or {}
    except Exception as err:  # truncated, random bytes, another format: all unreadable
        raise ValueError(f"checkpoint {path} could not be read "
                         f"({type(err).__name__}: {' '.join(str(err).split())})") from None
    verify_export(tensors, metadata, path)
    spec = metadata.get(SPEC_METADATA)
    if spec is None:
        return tensors
    return {"contrastkit": {"backbone": json.loads(spec)}, "backbone_state_dict": tensors}


def read_metadata(path: str | os.PathLike) -> dict:
    """The ``contrastkit`` entry of a checkpoint or exported backbone (an export's settings,
    ``views``, ``data`` and ``monitor``, as a checkpoint's entry holds them); ``{}`` when it has
    none (a torchvision-layout state_dict).

    The weights are not read: a ``.ckpt`` / ``.pth`` is memory-mapped, a ``.safetensors`` file
    gives its header only.

    Raises:
        FileNotFoundError: when ``path`` does not exist.
        ValueError: when the file cannot be read.
    """
    path = weights_file(path)
    if not path.is_file():
        raise _missing(path)
    if path.suffix == ".safetensors":
        metadata = _header(path)
        spec = metadata.get(SPEC_METADATA)
        entry = {} if spec is None else {"backbone": json.loads(spec)}
    else:
        try:
            data = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except pickle.UnpicklingError:
            data = load_checkpoint_file(path)  # raises the one-line refusal
        except Exception:  # torch's legacy (non-zip) format cannot be memory-mapped
            data = _read(path)
        found = data.get("contrastkit") if isinstance(data, dict) else None
        entry = dict(found) if isinstance(found, dict) else {}
        metadata = entry
    return {**entry, **_settings(metadata, path)}


def infer_torchvision_spec(state_dict: dict) -> BackboneSpec:
    """Guess the ResNet depth, stem and width of a torchvision-layout state_dict.

    Raises:
        ValueError: when the keys are not those of a torchvision ResNet.
    """
    if "conv1.weight" not in state_dict or "layer4.0.conv1.weight" not in state_dict:
        raise ValueError("state_dict is neither a contrastkit checkpoint nor a torchvision "
                         "ResNet state_dict (no conv1.weight / layer4.* keys)")
    conv1 = state_dict["conv1.weight"]
    width = int(conv1.shape[0])
    bottleneck = "layer1.0.conv3.weight" in state_dict
    blocks3 = sum(1 for k in state_dict if k.startswith("layer3.") and k.endswith(".conv1.weight"))
    if bottleneck:
        name = "resnet50"
    else:
        name = "resnet34" if blocks3 == 6 else "resnet18"
    return BackboneSpec(name=name, cifar_stem=int(conv1.shape[-1]) == 3, width=width)


def load_backbone(path: str | os.PathLike) -> tuple[nn.Module, BackboneSpec]:
    """Build the backbone stored in ``path`` (a file, or a Hub-format folder: see
    :func:`weights_file`) and load its weights (eval mode).

    Returns:
        ``(backbone, spec)``.

    Raises:
        FileNotFoundError: when ``path`` does not exist.
        ValueError: when the file is not a checkpoint or its weights do not fit the
            architecture it declares (the message names the keys).
    """
    data = _read(path)
    if isinstance(data, dict) and "contrastkit" in data:
        spec = recorded_backbone(data["contrastkit"], path)
        backbone = build_backbone(spec)
        if "backbone_state_dict" in data:  # exported with its own keys
            weights = data["backbone_state_dict"]
        else:
            weights = {k[len(_PREFIX):]: v for k, v in data["state_dict"].items()
                       if k.startswith(_PREFIX)}
        _check_shapes(backbone.state_dict(), weights, spec, path)
        missing, unexpected = backbone.load_state_dict(weights, strict=False)
        if missing or unexpected:
            raise ValueError(f"checkpoint {path}: backbone weights do not match the recorded "
                             f"backbone {_describe(spec)} (missing {missing[:5]}, unexpected "
                             f"{unexpected[:5]})")
    else:
        state = data.get("state_dict", data) if isinstance(data, dict) else data
        spec = infer_torchvision_spec(state)
        backbone = build_backbone(spec)
        load_torchvision_state_dict(backbone, state)  # type: ignore[arg-type]
    return backbone.eval(), spec


#: What ``--space projector`` reads: the projector's output, for DINO's head its bottleneck.
ProjectorSpec = HeadSpec | DINOHeadSpec


def load_projector(path: str | os.PathLike) -> tuple[nn.Module, ProjectorSpec]:
    """Build the projector g stored in a pretraining checkpoint and load its weights (eval mode).

    The checkpoint does not record the projector's :class:`HeadSpec`; it is read off the
    ``method.projector.layers.*`` weights: the linear layers are the 2-D ``layers.{i}.weight``
    tensors (input size, hidden size, output size from their shapes), a batch norm is a
    ``layers.{i}.running_mean``; a batch norm after the last linear layer means
    ``batch_norm="all"``, one only before it ``"hidden"``, none ``"none"``. The weights must then
    fit that head exactly. DINO's head (``mlp.*`` and ``last_layer.*``) is read likewise
    (:func:`dino_bottleneck_from_weights`); g is then its MLP, whose output the head
    L2-normalises for its prototypes: the embedding they score, as SwAV's projector output is
    for its prototypes (the K prototype scores are not an embedding on the sphere).

    Returns:
        ``(projector, spec)``: an :class:`MLPHead` and its :class:`HeadSpec`, or DINO's MLP and
        its :class:`DINOHeadSpec`.

    Raises:
        FileNotFoundError: when ``path`` does not exist.
        ValueError: naming the file, when it holds no projector (an exported backbone, a
            torchvision state_dict, a method without one) or weights that fit no MLP head.
    """
    data = _read(path)
    state = data.get("state_dict") if isinstance(data, dict) else None
    prefix = "method.projector."
    weights = {k[len(prefix):]: v for k, v in (state or {}).items() if k.startswith(prefix)}
    if not weights:
        raise ValueError(f"checkpoint {path} holds no projector (no {prefix}* weights): only a "
                         "contrastkit pretraining checkpoint of a method with a projector has one")
    try:
        return projector_from_state(weights)
    except (ValueError, RuntimeError) as err:
        raise ValueError(f"checkpoint {path}: {str(err).splitlines()[0]}") from None


def projector_from_state(weights: dict[str, torch.Tensor]) -> tuple[nn.Module, ProjectorSpec]:
    """What ``--space projector`` reads, from a projector's ``state_dict``
    (:func:`load_projector`): DINO's head (``last_layer.*``) as its bottleneck
    (:func:`dino_bottleneck_from_weights`), any other as an :class:`MLPHead`
    (:func:`projector_from_weights`)."""
    if any(k.startswith("last_layer.") for k in weights):
        return dino_bottleneck_from_weights(weights)
    return projector_from_weights(weights)


def projector_from_weights(weights: dict[str, torch.Tensor]) -> tuple[MLPHead, HeadSpec]:
    """An :class:`MLPHead` built from the shapes of its own ``state_dict`` and loaded with it
    (eval mode); see :func:`load_projector`.

    Raises:
        ValueError: when the weights are not those of an :class:`MLPHead`.
    """
    linear = sorted((_layer_index(k, "layers"), v.shape) for k, v in weights.items()
                    if k.endswith(".weight") and v.ndim == 2
                    and _layer_index(k, "layers") is not None)
    norms = [_layer_index(k, "layers") for k in weights
             if k.endswith(".running_mean") and _layer_index(k, "layers") is not None]
    if not linear:
        raise ValueError("projector weights hold no linear layer (layers.N.weight)")
    last = linear[-1][0]
    batch_norm = "all" if any(i > last for i in norms) else ("hidden" if norms else "none")
    out_dim, in_dim = int(linear[-1][1][0]), int(linear[0][1][1])
    hidden = int(linear[0][1][0]) if len(linear) > 1 else out_dim
    spec = HeadSpec(hidden_dim=hidden, out_dim=out_dim, num_layers=len(linear),
                    batch_norm=batch_norm,  # type: ignore[arg-type]
                    last_bias=f"layers.{last}.bias" in weights)
    head = MLPHead(in_dim, hidden, out_dim, len(linear), spec.batch_norm, spec.last_bias)
    missing, unexpected = head.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise ValueError(f"projector weights fit no MLP head (read as {spec}, input {in_dim}; "
                         f"missing {missing[:5]}, unexpected {unexpected[:5]})")
    return head.eval(), spec


def dino_bottleneck_from_weights(weights: dict[str, torch.Tensor]) -> tuple[nn.Sequential,
                                                                           DINOHeadSpec]:
    """The MLP of a :class:`~contrastkit.models.DINOHead` (eval mode, ``out_dim`` its
    bottleneck size), the head built from the shapes of its own ``state_dict`` and loaded with
    all of it: linear layers ``mlp.{i}.weight``, batch norms ``mlp.{i}.running_mean``, K the
    rows of ``last_layer.weight``, a learned ``last_layer.gain`` when the row norms are not
    fixed.

    Raises:
        ValueError: when the weights are not those of a DINO head.
    """
    linear = sorted((_layer_index(k, "mlp"), v.shape) for k, v in weights.items()
                    if k.endswith(".weight") and v.ndim == 2
                    and _layer_index(k, "mlp") is not None)
    last = weights.get("last_layer.weight")
    if not linear or last is None:
        raise ValueError("projector weights hold no DINO head (mlp.N.weight and "
                         "last_layer.weight)")
    bottleneck = int(linear[-1][1][0])
    spec = DINOHeadSpec(hidden_dim=int(linear[0][1][0]) if len(linear) > 1 else bottleneck,
                        bottleneck_dim=bottleneck, num_prototypes=int(last.shape[0]),
                        num_layers=len(linear),
                        batch_norm=any(k.endswith(".running_mean") for k in weights),
                        norm_last_layer="last_layer.gain" not in weights)
    head = DINOHead(int(linear[0][1][1]), **asdict(spec))
    missing, unexpected = head.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise ValueError(f"projector weights fit no DINO head (read as {spec}; missing "
                         f"{missing[:5]}, unexpected {unexpected[:5]})")
    return _bottleneck(head), spec


def random_projector(spec: ProjectorSpec, in_dim: int) -> nn.Module:
    """The module ``--space projector`` reads for ``spec`` (:func:`load_projector`), freshly
    initialised as its method initialises it (eval mode): the random-init baseline's."""
    if isinstance(spec, DINOHeadSpec):
        return _bottleneck(DINOHead(in_dim, **asdict(spec)))
    return build_head(spec, in_dim).eval()


def _bottleneck(head: DINOHead) -> nn.Sequential:
    """``head``'s MLP (eval mode), its ``out_dim`` the bottleneck's size."""
    mlp = head.mlp.eval()
    mlp.out_dim = mlp[-1].out_features  # type: ignore[assignment]
    return mlp


def _layer_index(key: str, container: str) -> int | None:
    """``N`` of a parameter or buffer key ``{container}.N.name``; None for any other key."""
    parts = key.split(".")
    return int(parts[1]) if len(parts) == 3 and parts[0] == container and parts[1].isdigit() \
        else None


def is_text_record(entry: dict) -> bool:
    """Whether a checkpoint's ``contrastkit`` entry describes a sentence encoder (SimCSE:
    a ``TextEncoderSpec`` with its ``pooling``) rather than an image or clip backbone."""
    backbone = entry.get("backbone")
    return entry.get("method") == "SimCSE" or (isinstance(backbone, dict) and
                                                "pooling" in backbone)


def recorded_backbone(entry: dict, path: str | os.PathLike) -> BackboneSpec:
    """The :class:`BackboneSpec` a checkpoint's ``contrastkit`` entry records.

    Raises:
        ValueError: naming the file, for a sentence encoder (with the command that evaluates
            it) or a record that is not a backbone contrastkit builds.
    """
    backbone = entry.get("backbone")
    if is_text_record(entry):
        name = backbone.get("name") if isinstance(backbone, dict) else None
        raise ValueError(f"checkpoint {path} is a sentence encoder (method "
                         f"{entry.get('method')}, model {name}), not an image backbone: "
                         f"evaluate it with contrastkit eval sts --checkpoint {path}")
    known = {f.name for f in fields(BackboneSpec)}
    if not isinstance(backbone, dict) or set(backbone) - known:
        raise ValueError(f"checkpoint {path} records a backbone contrastkit does not build "
                         f"({backbone!r}; a backbone has the fields {sorted(known)})")
    return BackboneSpec(**backbone)


def _describe(spec: BackboneSpec) -> str:
    return (f"{spec.name} (cifar_stem={spec.cifar_stem}, width={spec.width}, "
            f"out_dim={spec.out_dim}, norm={spec.norm})")


def _check_shapes(expected: dict, weights: dict, spec: BackboneSpec,
                  path: str | os.PathLike) -> None:
    """Refuse weights whose shapes are not those of the recorded backbone, naming the first
    tensor that differs (instead of ``load_state_dict``'s many-line size mismatch)."""
    for key, tensor in expected.items():
        found = weights.get(key)
        if isinstance(found, torch.Tensor) and tuple(found.shape) != tuple(tensor.shape):
            raise ValueError(f"checkpoint {path}: weight {key} has the shape "
                             f"{tuple(found.shape)}, the recorded backbone {_describe(spec)} "
                             f"needs {tuple(tensor.shape)}: the weights are not those of the "
                             "backbone the checkpoint records")
