"""The views' loader crops decoded by NVIDIA DALI: each view's box decoded alone, on the GPU
(nvJPEG, DALI's ``mixed`` backend) or on the CPU (libjpeg-turbo), with ``data.crops: dali``.

The boxes are those of :mod:`contrastkit.data.loading.crops`, the papers' random resized crops
(one per view, drawn from the image's own size with the uniforms keyed by ``(seed, epoch,
index)``: :meth:`~contrastkit.data.loading.crops.ViewCrops.uniforms`). The files are read and the
boxes drawn in Python (a header read per file) and handed to DALI through
``fn.external_source``; per view DALI decodes only the box (``fn.decoders.image_slice``: the
fused crop-decode) and resizes it to the view's side (antialiased linear, ``fn.resize``), and the
uint8 ``(B, 3, S, S)`` batches go to the views' device augmentation unchanged (``from_crops``:
flips and colour steps on the device).

EXIF orientation, as the loader path applies it: the boxes are drawn on the upright image, each
is handed to DALI as the box of the stored pixels it covers (:func:`stored_box`; DALI decodes
the stored pixels, ``adjust_orientation=False``), and the square view DALI returns is turned
upright in torch (:func:`upright_views`), which commutes with the resize of a box to a square.

What differs from the loader-crops path: the loader decodes at a reduced DCT scale when every
box allows it and resizes with torch's antialiased bilinear filter; DALI decodes at full size
and resizes with its own filter. The crops agree up to that rounding: the mean absolute
difference per view is at most 2 grey levels (of 255), measured by
``tests/data/test_dali_crops.py`` on photo-like JPEGs with and without DCT reduction.

Requires ``nvidia-dali-cuda120`` or ``-cuda130`` (``contrastkit[dali]``, ``docs/data.md``).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from contrastkit.data.decode.images import (
    ORIENTATIONS,
    exif_orientation,
    jpeg_header,
    jpeg_orientation,
    oriented_size,
    pillow,
    upright_size,
)
from contrastkit.data.loading.crops import CropSpec, SampleReader, ViewCrops, crop_box

__all__ = ["DaliCrops", "dali_boxes", "stored_box", "upright_views"]


def _import_dali() -> Any:
    try:
        import nvidia.dali as dali
    except ImportError as err:
        raise ImportError(
            f"data.crops: dali needs NVIDIA DALI ({err}): pip install nvidia-dali-cuda120 (or "
            "-cuda130 for CUDA 13), or 'contrastkit[dali]' (docs/data.md)") from None
    return dali


def _image_geometry(data: bytes, name: str) -> tuple[int, int, int]:
    """``(height, width, orientation)``: the stored size (from the JPEG header, else from
    Pillow's header parser) and the EXIF orientation that turns it upright."""
    header = jpeg_header(data)
    if header is not None and 0 not in header[:2]:
        return header[0], header[1], jpeg_orientation(data)
    try:
        with pillow().open(io.BytesIO(data)) as image:
            turn = exif_orientation(image)
            return (*oriented_size(*upright_size(image), turn), turn)
    except Exception as err:
        raise ValueError(f"{name}: not an image DALI can decode ({err})") from None


def dali_boxes(crops: ViewCrops, data: bytes, name: str, index: int,
               epoch: int) -> tuple[list[tuple[int, int, int, int]], int]:
    """``(boxes, orientation)``: the ``(x0, y0, w, h)`` box of each view of sample ``index`` in
    ``epoch`` as drawn on the upright image (the boxes
    :class:`~contrastkit.data.loading.crops.LoaderCrops` cuts from the same image), given as
    boxes of the stored pixels (:func:`stored_box`), and the image's EXIF orientation."""
    height, width, turn = _image_geometry(data, name)
    upright = oriented_size(height, width, turn)
    return [stored_box(crop_box(u, *upright, spec), height, width, turn)
            for u, spec in zip(crops.uniforms(index, epoch), crops.specs, strict=True)], turn


def stored_box(box: tuple[int, int, int, int], height: int, width: int,
               orientation: int) -> tuple[int, int, int, int]:
    """The box ``(x0, y0, w, h)`` of the upright image as a box of the stored ``height x
    width`` pixels (:data:`~contrastkit.data.decode.images.ORIENTATIONS`: the flips undone on
    the transposed frame, then the transpose)."""
    x0, y0, w, h = box
    transpose, flip_rows, flip_cols = ORIENTATIONS.get(orientation, (False, False, False))
    rows, cols = (width, height) if transpose else (height, width)
    if flip_rows:
        y0 = rows - y0 - h
    if flip_cols:
        x0 = cols - x0 - w
    return (y0, x0, h, w) if transpose else (x0, y0, w, h)


def upright_views(views: Tensor, orientations: Sequence[int]) -> Tensor:
    """``(B, S, S, C)`` crops of stored pixels, each turned upright by its EXIF orientation
    (a square crop resized to a square: turning it before or after the resize is the same)."""
    if not any(turn in ORIENTATIONS for turn in orientations):
        return views
    turned = []
    for view, turn in zip(views, orientations, strict=True):
        transpose, flip_rows, flip_cols = ORIENTATIONS.get(turn, (False, False, False))
        view = view.transpose(0, 1) if transpose else view
        dims = [d for d, flip in ((0, flip_rows), (1, flip_cols)) if flip]
        turned.append(view.flip(dims) if dims else view)
    return torch.stack(turned)


class _BatchSource:
    """DALI's ``external_source``: per call one batch of encoded files, one anchor and one
    shape array per view (the boxes on the stored pixels), the labels and the EXIF
    orientations; ``StopIteration`` at the end of the epoch."""

    def __init__(self, reader: SampleReader, crops: ViewCrops, batch_size: int) -> None:
        self.reader, self.crops, self.batch_size = reader, crops, batch_size
        self.keys: Iterator[tuple[int, int]] = iter(())

    def __call__(self) -> tuple[list[np.ndarray], ...]:
        files: list[np.ndarray] = []
        anchors: list[list[np.ndarray]] = [[] for _ in self.crops.specs]
        shapes: list[list[np.ndarray]] = [[] for _ in self.crops.specs]
        labels: list[np.ndarray] = []
        turns: list[np.ndarray] = []
        for index, epoch in self.keys:
            data, name, label = self.reader.read(index)
            boxes, turn = dali_boxes(self.crops, data, name, index, epoch)
            files.append(np.frombuffer(data, dtype=np.uint8))
            for view, (x0, y0, w, h) in enumerate(boxes):
                anchors[view].append(np.array([x0, y0], dtype=np.float32))
                shapes[view].append(np.array([w, h], dtype=np.float32))
            labels.append(np.array([label], dtype=np.int64))
            turns.append(np.array([turn], dtype=np.int64))
            if len(files) == self.batch_size:
                return (files, *anchors, *shapes, labels, turns)
        raise StopIteration  # the last partial batch is dropped, as the training loader does


class DaliCrops:
    """Batches ``([view_1, ..., view_V], labels)`` of uint8 ``(B, 3, S_v, S_v)`` view crops
    decoded by DALI (module doc), in the order of ``sampler``.

    Args:
        reader: the encoded images (:func:`~contrastkit.data.loading.crops.encoded_reader`).
        specs: one :class:`~contrastkit.data.loading.crops.CropSpec` per view, in view order.
        sampler: yields ``(index, epoch)`` keys
            (:class:`~contrastkit.data.loading.crops.EpochKeys`; Lightning calls its
            ``set_epoch`` through this object's ``sampler``).
        batch_size: images per batch (a last partial batch is dropped).
        seed: the run's data seed (the boxes' uniforms).
        device: ``cpu`` (libjpeg-turbo in DALI's CPU threads) or ``gpu`` (nvJPEG).
        device_id: the CUDA device of ``gpu``.
        num_threads: DALI's CPU threads.
    """

    def __init__(self, reader: SampleReader, specs: Sequence[CropSpec], sampler: Any,
                 batch_size: int, seed: int = 0, device: str = "cpu", device_id: int = 0,
                 num_threads: int = 2) -> None:
        if device not in ("cpu", "gpu"):
            raise ValueError(f"DALI decode device must be 'cpu' or 'gpu', got {device!r}")
        self.reader, self.sampler, self.batch_size = reader, sampler, int(batch_size)
        self.crops = ViewCrops(specs, seed)
        self.device = device
        self.source = _BatchSource(reader, self.crops, self.batch_size)
        self.pipeline = self._build(device_id if device == "gpu" else None, num_threads)
        self._started = False

    def _build(self, device_id: int | None, num_threads: int) -> Any:
        dali = _import_dali()
        fn, types = dali.fn, dali.types
        views = len(self.crops.specs)
        pipe = dali.Pipeline(batch_size=self.batch_size, num_threads=num_threads,
                             device_id=device_id, prefetch_queue_depth=2)
        with pipe:
            inputs = fn.external_source(source=self.source, num_outputs=2 * views + 3,
                                        batch=True)
            files, labels, turns = inputs[0], inputs[-2], inputs[-1]
            decoder = "mixed" if self.device == "gpu" else "cpu"
            outputs = []
            for view, spec in enumerate(self.crops.specs):
                box = fn.decoders.image_slice(
                    files, inputs[1 + view], inputs[1 + views + view], device=decoder,
                    output_type=types.RGB, axis_names="WH", normalized_anchor=False,
                    normalized_shape=False, adjust_orientation=False)
                outputs.append(fn.resize(box, resize_x=spec.size, resize_y=spec.size,
                                         interp_type=types.INTERP_LINEAR, antialias=True))
            pipe.set_outputs(*outputs, labels, turns)
        pipe.build()
        return pipe

    def __len__(self) -> int:
        return len(self.sampler) // self.batch_size

    def __iter__(self) -> Iterator[tuple[list[Tensor], Tensor]]:
        self.source.keys = iter(self.sampler)
        if self._started:
            self.pipeline.reset()
        self._started = True
        while True:
            try:
                outputs = self.pipeline.run()
            except StopIteration:
                return
            *views, labels, turns = (_to_torch(out) for out in outputs)
            orientations = turns.view(-1).tolist()
            # upright; (B, S, S, 3) -> (B, 3, S, S), channels-last strides (the loader path's)
            yield ([upright_views(v, orientations).permute(0, 3, 1, 2) for v in views],
                   labels.view(-1))


def _to_torch(batch: Any) -> Tensor:
    """A DALI output batch as a torch tensor of its own (on the GPU for GPU outputs).

    GPU outputs come through DLPack (torch's stream waits for DALI's) and are copied: DALI
    reuses its output buffers for the batches it prefetches, while the training step may still
    read the batch. ``as_array`` already copies a CPU batch."""
    if type(batch).__name__.endswith("GPU"):
        return torch.from_dlpack(batch.as_tensor()).clone()
    return torch.from_numpy(batch.as_array())
