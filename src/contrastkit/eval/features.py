"""Frozen-backbone features of a dataset split, batched, with an on-disk cache.

:func:`extract_features` runs ``backbone(transform(images))`` over a dataset in order, batch by
batch, the transform (e.g. ``augment.preset("eval", size)``) running on the batch's device. The
result ``(features float32 (N, D), labels int64 (N,))`` is cached under ``cache_dir`` when a
``cache_key`` is given; :func:`feature_cache_key` builds one from everything the features
depend on (checkpoint SHA-256, dataset name/root/split/fingerprint, transform, image size)
and the way image files are decoded (``DECODE_MODE``: entries cached before the reduced decode
of large images, or under another decode, are not reused).

Cache layout, for ``stem = sha256(cache_key)[:32]``:

* ``stem.safetensors`` (or ``stem.npz`` when safetensors is not installed) with the tensors
  ``features`` and ``labels``;
* ``stem.json``, the sidecar: the full key, the file name, its SHA-256 and the shapes.

Both are written atomically (temporary file in the same folder, then ``os.replace``), data
first, sidecar last. A cache entry is used only when the sidecar's key equals ``cache_key`` and
the data file's SHA-256 equals the recorded one; anything else (truncated or flipped bytes,
missing or unreadable sidecar, wrong shapes) is reported with a ``UserWarning`` and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from contrastkit.checkpoints import file_hash
from contrastkit.data.decode.images import DECODE_MODE, collate_images
from contrastkit.outputs import temp_file_beside

__all__ = ["extract_features", "feature_cache_key", "load_cached", "save_cached"]

_FORMAT_VERSION = 1


def feature_cache_key(**parts: object) -> str:
    """Canonical cache key: sorted JSON of ``parts`` (values must be JSON-serialisable), the
    cache format version and the image decode mode
    (:data:`~contrastkit.data.decode.images.DECODE_MODE`).

    Pass everything the features depend on, e.g. ``checkpoint_sha256``, ``dataset``, ``root``,
    ``split``, ``fingerprint``, ``transform``, ``image_size``.
    """
    return json.dumps({"v": _FORMAT_VERSION, "decode": DECODE_MODE, **parts}, sort_keys=True,
                      default=str)


def _stem(cache_key: str) -> str:
    return hashlib.sha256(cache_key.encode()).hexdigest()[:32]


def _atomic_write(path: Path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` on a temporary file next to ``path``, then move it into place."""
    fd, tmp = temp_file_beside(path)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _has_safetensors() -> bool:
    try:
        import safetensors.torch  # noqa: F401
    except ImportError:
        return False
    return True


def save_cached(cache_dir: str | os.PathLike, cache_key: str, features: Tensor,
                labels: Tensor) -> Path:
    """Write ``features`` and ``labels`` to the cache (data file, then checksummed sidecar).

    Returns:
        Path of the data file.
    """
    cache_dir = Path(cache_dir)
    stem = _stem(cache_key)
    tensors = {"features": features.detach().cpu().contiguous(),
               "labels": labels.detach().cpu().contiguous()}
    if _has_safetensors():
        from safetensors.torch import save_file

        data = cache_dir / f"{stem}.safetensors"
        _atomic_write(data, lambda tmp: save_file(tensors, tmp))
    else:
        data = cache_dir / f"{stem}.npz"

        def write_npz(tmp: str) -> None:
            with open(tmp, "wb") as handle:
                np.savez(handle, **{k: v.numpy() for k, v in tensors.items()})

        _atomic_write(data, write_npz)
    sidecar = {
        "key": cache_key, "file": data.name, "sha256": file_hash(data),
        "features_shape": list(tensors["features"].shape),
        "labels_shape": list(tensors["labels"].shape),
    }
    text = json.dumps(sidecar, indent=2)
    _atomic_write(cache_dir / f"{stem}.json", lambda tmp: Path(tmp).write_text(text))
    return data


def _read_data(path: Path) -> dict[str, Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    with np.load(path, allow_pickle=False) as arrays:
        return {k: torch.from_numpy(arrays[k].copy()) for k in arrays.files}


def load_cached(cache_dir: str | os.PathLike, cache_key: str) -> tuple[Tensor, Tensor] | None:
    """Cached ``(features, labels)`` for ``cache_key``, or None (miss, or a corrupt entry).

    A corrupt entry (checksum mismatch, unreadable file or sidecar, another key, wrong shapes)
    raises no error: it warns (``UserWarning`` naming the file and the problem) and returns None
    so that the caller rebuilds it.
    """
    cache_dir = Path(cache_dir)
    stem = _stem(cache_key)
    sidecar_path = cache_dir / f"{stem}.json"
    data_files = [p for p in (cache_dir / f"{stem}.safetensors", cache_dir / f"{stem}.npz")
                  if p.exists()]
    if not sidecar_path.exists():
        if data_files:
            _warn_corrupt(data_files[0], "its checksum sidecar is missing")
        return None
    damaged = sidecar_path  # the file the warning names: the sidecar until it has been read
    try:
        sidecar = json.loads(sidecar_path.read_text())
        data = cache_dir / str(sidecar["file"])
        if sidecar["key"] != cache_key:
            raise ValueError("the sidecar belongs to another key")
        if not data.exists():
            raise ValueError(f"data file {data.name} is missing")
        damaged = data
        if file_hash(data) != sidecar["sha256"]:
            raise ValueError("SHA-256 of the stored content does not match the sidecar")
        tensors = _read_data(data)
        features, labels = tensors["features"], tensors["labels"]
        if (list(features.shape) != sidecar["features_shape"]
                or list(labels.shape) != sidecar["labels_shape"]):
            raise ValueError("stored shapes differ from the sidecar")
    except Exception as err:  # any failure means: do not trust this entry
        _warn_corrupt(damaged, str(err))
        return None
    return features.float(), labels.long()


def _warn_corrupt(path: Path, problem: str) -> None:
    warnings.warn(f"feature cache entry {path} is corrupt ({problem}); rebuilding it",
                  UserWarning, stacklevel=3)


def _batches(dataset: Dataset, batch_size: int) -> Iterator[tuple[Tensor, Tensor]]:
    """``(images, labels)`` batches in dataset order (``ArrayImages.batches`` when available)."""
    fast = getattr(dataset, "batches", None)
    if callable(fast):
        yield from fast(batch_size)
        return
    for images, labels in DataLoader(dataset, batch_size=batch_size, shuffle=False,
                                     collate_fn=collate_images):
        yield images, torch.as_tensor(labels)


def _progress(total: int, enabled: bool, desc: str) -> object | None:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="img", file=sys.stderr, leave=False)


def _compute(backbone: nn.Module, batches: Iterable[tuple[Tensor, Tensor]],
             transform: Callable[[Tensor], Tensor] | None, device: torch.device,
             bar: object | None) -> tuple[Tensor, Tensor]:
    feats, labels, seen = [], [], 0
    with torch.inference_mode():
        for images, batch_labels in batches:
            x = images.to(device, non_blocking=True)
            out = backbone(transform(x) if transform is not None else x)
            if out.dim() != 2:
                raise ValueError(f"backbone returned shape {tuple(out.shape)}, expected (B, D)")
            if not bool(torch.isfinite(out).all()):
                raise ValueError(f"backbone produced NaN or Inf features in the batch starting "
                                 f"at sample {seen}")
            feats.append(out.float().cpu())
            labels.append(torch.as_tensor(batch_labels).long().cpu())
            seen += x.shape[0]
            if bar is not None:
                bar.update(x.shape[0])  # type: ignore[attr-defined]
    if not feats:
        raise ValueError("dataset is empty: no features to extract")
    return torch.cat(feats), torch.cat(labels)


def extract_features(
    backbone: nn.Module,
    dataset: Dataset,
    *,
    batch_size: int,
    transform: Callable[[Tensor], Tensor] | None,
    device: torch.device | str,
    cache_dir: str | os.PathLike | None = None,
    cache_key: str | None = None,
    progress: bool = True,
    desc: str = "features",
) -> tuple[Tensor, Tensor]:
    """Features ``backbone(transform(images))`` of every sample of ``dataset``, in order.

    The backbone is put in eval mode and moved to ``device``; each uint8 batch is moved to
    ``device`` before ``transform`` runs, so augmentation happens where the model is. With
    ``cache_dir`` and ``cache_key`` the result is read from / written to the cache described in
    the module docstring (a corrupt entry is warned about and rebuilt).

    Args:
        backbone: maps ``(B, 3, H, W)`` float images to ``(B, D)`` features.
        dataset: yields ``(uint8 image (C, H, W), int label)``; ``ArrayImages.batches`` is used
            when available.
        batch_size: images per forward pass.
        transform: batched image transform (e.g. ``augment.preset("eval", size)``) or None.
        device: ``"cpu"``, ``"cuda"``, ...
        cache_dir: cache folder (None: no cache).
        cache_key: identity of the features, e.g. from :func:`feature_cache_key`.
        progress: show a tqdm progress bar on stderr (when tqdm is installed).
        desc: label of the progress bar.

    Returns:
        ``(features, labels)``: float32 ``(N, D)`` and int64 ``(N,)`` tensors on the CPU.

    Raises:
        ValueError: bad ``batch_size``, an empty dataset, or NaN/Inf features (the message names
            the first batch).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    use_cache = cache_dir is not None and cache_key is not None
    if use_cache:
        cached = load_cached(cache_dir, cache_key)  # type: ignore[arg-type]
        if cached is not None:
            return cached
    device = torch.device(device)
    backbone = backbone.to(device).eval()
    if isinstance(transform, nn.Module):
        transform = transform.to(device)
    bar = _progress(len(dataset), progress, desc)  # type: ignore[arg-type]
    try:
        features, labels = _compute(backbone, _batches(dataset, batch_size), transform, device,
                                    bar)
    finally:
        if bar is not None:
            bar.close()  # type: ignore[attr-defined]
    if use_cache:
        save_cached(cache_dir, cache_key, features, labels)  # type: ignore[arg-type]
    return features, labels

