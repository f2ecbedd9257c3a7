"""Export a pretrained backbone: ResNets in torchvision's state_dict layout, other backbones
with their own keys (timm's for ``timm:<model>`` backbones) and their description (see
:mod:`contrastkit.checkpoints`); a Hub-format folder: :mod:`contrastkit.export_hf`.

Every export is written whole or not at all (:func:`write_export`): into a staging folder
beside ``--output``, then renamed into place; an earlier export is replaced only once the new
one is complete, and a failure (a full disk, Ctrl-C, a kill) leaves it as it was. Two exports of
one checkpoint are byte-identical (:func:`safetensors_bytes`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from pathlib import Path

import torch

from contrastkit.checkpoints import (
    EARLIER_EXPORT,
    SPEC_METADATA,
    export_stage,
    load_backbone,
    load_checkpoint_file,
    read_metadata,
    weights_file,
)
from contrastkit.export_metadata import RUN_METADATA, export_metadata, run_record, run_settings
from contrastkit.models.resnet import ResNet
from contrastkit.models.torchvision_layout import to_torchvision_state_dict
from contrastkit.outputs import LOCK_FILE, FolderInUseError, FolderLock, check_output_path

#: Inside an export's staging folder: the export being written.
_NEW = "new"


def check_export_path(output: Path, overwrite: bool) -> None:
    """Refuse an ``output`` under a file, or an existing one without ``overwrite``.

    Raises:
        NotADirectoryError: when a parent of ``output`` is a file.
        FileExistsError: when ``output`` exists and ``overwrite`` is false.
    """
    check_output_path(output, folder=False)
    if output.exists() and not overwrite:
        raise FileExistsError(f"--output {output} exists: pass --overwrite to replace it, or "
                              "choose another --output")


def backbone_state(backbone: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The weights an export writes (detached contiguous copies): torchvision's keys for
    contrastkit's ResNets, the backbone's own otherwise (timm's own keys for ``timm:<model>``
    backbones)."""
    if isinstance(backbone, ResNet):
        return {k: v.contiguous() for k, v in to_torchvision_state_dict(backbone).items()}
    return {k: v.detach().clone().contiguous() for k, v in backbone.state_dict().items()}


def export_backbone(checkpoint: str | os.PathLike, output: str | os.PathLike,
                    overwrite: bool = False) -> Path:
    """Write the backbone of ``checkpoint`` to ``output`` (``.pth`` or ``.safetensors``).

    The file is written whole or not at all (:func:`write_export`), with the mode the user's
    umask gives a new file; an existing ``output`` is replaced only with ``overwrite``. 2-D
    ResNets get torchvision's keys and nothing else (load
    with ``torchvision.models.resnet50().load_state_dict(sd, strict=False)`` or after removing
    ``fc``); other backbones keep their own keys and their
    :class:`~contrastkit.models.factory.BackboneSpec`. Every exported file loads back with
    :func:`contrastkit.checkpoints.load_backbone` and in ``contrastkit eval`` / ``analyze``.
    A ``.safetensors`` file (and a ``.pth`` of a non-ResNet backbone) carries the SHA-256 of
    its tensors, the run's identity and the run's settings (normalisation, input size, data,
    kNN monitor: :mod:`contrastkit.export_metadata`), the digest checked on every load and the
    settings read by ``eval`` / ``analyze``; a ResNet's ``.pth`` is a bare torchvision
    state_dict and carries none of them.

    Raises:
        ValueError: for an unsupported output extension or an unreadable checkpoint.
        FileNotFoundError: when ``checkpoint`` does not exist.
        NotADirectoryError: when a parent of ``output`` is a file.
        FileExistsError: when ``output`` exists and ``overwrite`` is false.
        OSError: when it cannot be written (a full disk), naming ``output``.
    """
    output = Path(output)
    if output.suffix not in (".pth", ".pt", ".safetensors"):
        raise ValueError(f"--output must end in .pth, .pt or .safetensors, got {output.name}")
    recover_export(output)
    check_export_path(output, overwrite)
    backbone, spec = load_backbone(checkpoint)
    native = not isinstance(backbone, ResNet)
    state = backbone_state(backbone)
    metadata = export_metadata(state, run_identity_of(checkpoint),
                               run_settings(read_metadata(checkpoint)))
    if output.suffix == ".safetensors":
        if native:
            metadata[SPEC_METADATA] = json.dumps(asdict(spec))
        return write_export(output, safetensors_bytes(state, metadata))
    buffer = io.BytesIO()
    if native:
        torch.save({"contrastkit": {"backbone": asdict(spec), **metadata},
                    "backbone_state_dict": state}, buffer)
    else:  # torchvision's keys and nothing else: no room for the metadata
        torch.save(state, buffer)
    return write_export(output, buffer.getvalue())


def safetensors_bytes(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> bytes:
    """The ``.safetensors`` file of ``tensors`` with header ``metadata``, the same bytes for the
    same arguments: safetensors writes the metadata in its hash map's order, which changes from
    one process to the next, so the header is written again with its keys sorted (the format:
    an 8-byte little-endian header length, the JSON header padded with spaces to a multiple of
    8 bytes, the tensors' bytes, whose offsets count from the header's end)."""
    from safetensors.torch import save

    raw = save(dict(tensors), metadata=dict(metadata))
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + length])
    if "__metadata__" in header:
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + raw[8 + length:]


def recover_export(output: Path) -> None:
    """Undo what an export to ``output`` stopped midway left (:func:`write_export`): the
    earlier export it had moved aside is put back when ``output`` is missing (removed when the
    new one took its place), the rest of its staging folder removed.

    Raises:
        OSError: naming the staging folder, when it cannot be cleared.
    """
    stage = export_stage(output)
    if not stage.is_dir():
        return
    try:
        with _locked_stage(stage):
            _settle(stage, output)
    except FolderInUseError:
        raise
    except OSError as err:
        raise OSError(err.errno, f"--output {output}: the staging folder {stage} of a stopped "
                      f"export could not be cleared: {err.strerror or err}") from None


@contextlib.contextmanager
def _locked_stage(stage: Path) -> Iterator[None]:
    """Hold ``stage``'s lock; remove ``stage`` afterwards when it is empty."""
    try:
        with FolderLock(stage):
            yield
    finally:
        with contextlib.suppress(OSError):
            stage.rmdir()  # only when empty: not while another export holds its lock there


@contextlib.contextmanager
def _staging(stage: Path, output: Path) -> Iterator[None]:
    """Hold ``stage``'s lock (:func:`_locked_stage`), with what a stopped export left there
    settled (:func:`_settle`) before and after."""
    with _locked_stage(stage):
        _settle(stage, output)
        try:
            yield
        finally:
            _settle(stage, output)


def _settle(stage: Path, output: Path) -> None:
    """Put the earlier export kept in ``stage`` back at ``output`` when ``output`` is missing
    (a swap cut between its two renames), remove it when the new one took its place; remove
    everything else in ``stage`` but its lock."""
    earlier = stage / EARLIER_EXPORT
    if earlier.exists() and not output.exists():
        os.rename(earlier, output)
    for entry in stage.iterdir():
        if entry.name != LOCK_FILE:
            _remove(entry)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to the new file ``path`` (the umask's mode) and fsync it."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def write_export(output: Path, content: bytes | Mapping[str, bytes]) -> Path:
    """Write an export to ``output``, whole or not at all: ``content`` is a file's bytes, or a
    folder's files by name.

    It is written into ``.NAME.export-partial/`` beside ``output``
    (:func:`~contrastkit.checkpoints.export_stage`; locked meanwhile, so a second export into
    ``output`` is refused at once), each file fsync'ed, then renamed to ``output``: a file
    replaces an earlier one in that rename; an earlier folder is moved into the staging folder
    first and removed once the new one is in place. A failure or a kill before the renames
    leaves ``output`` as it was; a kill between a folder's two renames leaves the earlier
    export in the staging folder, which the next export puts back first
    (:func:`recover_export`) and ``eval`` names.

    Raises:
        OSError: one line naming ``output`` and the OS error (a full disk), ``output`` unchanged;
            :class:`~contrastkit.outputs.FolderInUseError` while another export writes there.
    """
    stage = export_stage(output)
    existed = output.exists()
    try:
        with _staging(stage, output):
            new = stage / _NEW
            if isinstance(content, bytes):
                _write_file(new, content)
            else:
                new.mkdir()
                for name, data in sorted(content.items()):
                    _write_file(new / name, data)
                if output.exists():
                    os.rename(output, stage / EARLIER_EXPORT)
            os.replace(new, output)
    except FolderInUseError:
        raise
    except OSError as err:
        kept = "the earlier export there is unchanged" if existed else "nothing was written"
        raise OSError(err.errno, f"--output {output} could not be written: "
                      f"{err.strerror or err}; {kept}") from None
    return output


def run_identity_of(checkpoint: str | os.PathLike) -> dict | None:
    """The identity of the run of a contrastkit checkpoint (:func:`run_record`), or of an
    earlier export (its own record, a Hub-format folder's included); None for other files (a
    torchvision state_dict)."""
    path = weights_file(checkpoint)
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            recorded = (handle.metadata() or {}).get(RUN_METADATA)
        return json.loads(recorded) if recorded else None
    data = load_checkpoint_file(path, mmap=True)
    if isinstance(data, dict) and "contrastkit" in data and "state_dict" in data:
        return run_record(data, path)
    entry = data.get("contrastkit") if isinstance(data, dict) else None
    recorded = entry.get(RUN_METADATA) if isinstance(entry, dict) else None
    return json.loads(recorded) if recorded else None
