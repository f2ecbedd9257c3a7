"""The demo's evaluation protocol: few labels per class, and test images shifted by 1/8 of a side.

Why this protocol: what self-supervised pretraining promises is a representation that needs
few labels and is invariant to the changes its views make, not a better classifier when every
training image is labelled. So the demo measures exactly that, with the project's own
low-shot protocol (:func:`contrastkit.eval.lowshot_linear`, ``contrastkit eval lowshot``: the
protocol of Denize et al. 2023, Table 10, after Zheng et al. 2021: linear probes on 16/32/64 images
per class; here 1, 5 and 10 because the 8x8 digits have only about 144 training images per class)
and with a shifted copy of the test split (the pretraining views are random resized crops, so
translations are among the changes the representation was trained to ignore):

* **labelled images**: ``n`` = 1, 5 and 10 per class, drawn from the pretraining split by
  :func:`contrastkit.eval.sample_per_class` (stratified: exactly ``n`` of every class, without
  replacement), with seeds 0..9 (10 draws); and all of them (one probe, seed 0);
* **classifier**: a linear probe on frozen features (:func:`contrastkit.eval.linear_probe`
  with the defaults of ``contrastkit eval lowshot``: standardised features, multinomial
  logistic regression from zero weights, SGD momentum 0.9, learning rate 0.1 with cosine decay,
  batch 256, 100 epochs);
* **test images**: the test split as given, and the same images shifted by :func:`shift_images`:
  each image moves by 1/8 of its side (1 pixel of the 8x8 digits, 4 pixels of CIFAR's 32x32:
  the largest shift of the random crop with 4-pixel padding that trains SCE's linear
  classifiers on CIFAR, Denize et al. 2023, appendix D.1 and the conference supplement)
  towards one of its 8 neighbours, drawn per image with seed 0; vacated pixels are 0;
* **representations**: the pretrained backbone and the same architecture randomly initialised
  (``torch.manual_seed(0)``), both behind the pretraining run's evaluation transform (that of
  its kNN monitor), and raw pixels (``uint8 / 255``, flattened);
* **reported**: top-1 accuracy (%) on the test images, mean and sample standard deviation over
  the 10 draws.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from contrastkit.data.sources.images.datasets import ArrayImages
from contrastkit.eval import LinearProtocol, lowshot_linear
from contrastkit.eval.features import extract_features
from contrastkit.eval.report import markdown_table

#: Labelled images per class of the few-label settings (each also evaluated with all labels).
SHOTS = (1, 5, 10)
#: Seeds of the draws of labelled images (one draw per seed).
SEEDS = tuple(range(10))
#: Linear-probe options: the defaults of ``contrastkit eval lowshot``.
PROBE = LinearProtocol(epochs=100, lr=0.1, batch_size=256)
#: Seed of the shift directions.
SHIFT_SEED = 0
#: The 8 directions ``(dy, dx)`` of :func:`shift_images`, in this order.
DIRECTIONS = ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1))
TEST_SETS = ("as given", "shifted 1/8")


def _words(values: Sequence[int]) -> str:
    """``[1, 5, 10] -> "1, 5 and 10"``; a run of consecutive integers -> ``"0-9"``."""
    text = [str(v) for v in values]
    if len(values) > 2 and list(values) == list(range(values[0], values[0] + len(values))):
        return f"{values[0]}-{values[-1]}"
    return text[0] if len(text) == 1 else ", ".join(text[:-1]) + " and " + text[-1]


def protocol_text(shots: Sequence[int] = SHOTS, seeds: Sequence[int] = SEEDS) -> str:
    """The protocol in a few lines, as the demo prints it before any number."""
    draws = f"{len(seeds)} draw" + ("s" if len(seeds) > 1 else "")
    return f"""\
Protocol (fixed before measuring; the same for the three representations):
  labelled images  {_words(shots)} per class from the pretraining split, stratified draws
                   (seeds {_words(seeds)}: {draws}); and all labels (one probe, seed {seeds[0]})
  classifier       linear probe on frozen features with the defaults of `contrastkit eval
                   lowshot`: standardised features, SGD momentum 0.9, lr 0.1 cosine decay,
                   batch 256, 100 epochs
  test images      the test split as given; and shifted: each image moved by 1/8 of its side
                   (digits 1 px of 8, CIFAR 4 px of 32) towards one of its 8 neighbours
                   (drawn per image, seed {SHIFT_SEED}), vacated pixels black
  representations  the pretrained backbone; the same backbone randomly initialised (seed 0);
                   raw pixels (flattened, /255)
  reported         test top-1 %: mean ± sample std over the {draws}"""


def _span(offset: int, length: int) -> tuple[slice, slice]:
    """Source and destination slices of a move by ``offset`` along an axis of ``length``."""
    return (slice(max(0, -offset), length - max(0, offset)),
            slice(max(0, offset), length - max(0, -offset)))


def shift_images(images: Tensor, pixels: int, seed: int = SHIFT_SEED) -> tuple[Tensor, Tensor]:
    """Move every image by ``pixels`` towards one of its 8 neighbours, filling with zeros.

    Image ``i`` gets the direction ``(dy_i, dx_i) = DIRECTIONS[j_i]`` with ``j_i`` uniform in
    ``0..7`` (``torch.randint`` from ``torch.Generator().manual_seed(seed)``), and
    ``out[i, c, y, x] = images[i, c, y - p dy_i, x - p dx_i]`` where that pixel exists, else 0
    (``p = pixels``; ``dy = 1`` moves the content down, ``dx = 1`` to the right).

    Args:
        images: ``(N, C, H, W)`` images.
        pixels: shift length, ``1 <= pixels < min(H, W)``.
        seed: seed of the directions.

    Returns:
        ``(shifted, offsets)``: the shifted images (same dtype) and the ``(N, 2)`` long
        offsets ``(p dy_i, p dx_i)``.
    """
    if images.dim() != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(images.shape)}")
    height, width = images.shape[-2:]
    if isinstance(pixels, bool) or not isinstance(pixels, int) or \
            not 1 <= pixels < min(height, width):
        raise ValueError(f"pixels must be an int in [1, {min(height, width)}), got {pixels!r}")
    choice = torch.randint(len(DIRECTIONS), (images.shape[0],),
                           generator=torch.Generator().manual_seed(seed))
    offsets = torch.tensor(DIRECTIONS, dtype=torch.long)[choice] * pixels
    out = torch.zeros_like(images)
    for dy, dx in {tuple(o) for o in offsets.tolist()}:
        rows = ((offsets[:, 0] == dy) & (offsets[:, 1] == dx)).nonzero().flatten()
        (src_y, dst_y), (src_x, dst_x) = _span(dy, height), _span(dx, width)
        out[rows, :, dst_y, dst_x] = images[rows, :, src_y, src_x]
    return out, offsets


def as_tensors(dataset: Dataset) -> tuple[Tensor, Tensor]:
    """All images ``(N, C, H, W)`` uint8 and labels ``(N,)`` int64 of ``dataset``, in order."""
    if isinstance(dataset, ArrayImages):
        return (torch.from_numpy(np.array(dataset.images, dtype=np.uint8)),  # a writable copy
                torch.from_numpy(np.array(dataset.labels, dtype=np.int64)))
    pairs = [dataset[i][:2] for i in range(len(dataset))]  # type: ignore[arg-type]
    return torch.stack([p[0] for p in pairs]), torch.tensor([int(p[1]) for p in pairs])


def representation_features(
    backbone: nn.Module | None, images: Tensor, transform: Callable[[Tensor], Tensor],
    device: torch.device | str,
) -> Tensor:
    """Features of uint8 ``images``: ``backbone(transform(x))``, or raw pixels ``x / 255``
    flattened when ``backbone`` is None."""
    if backbone is None:
        return images.flatten(1).float() / 255.0
    unlabelled = ArrayImages(images.numpy(), np.zeros(len(images), dtype=np.int64), [])
    features, _ = extract_features(backbone, unlabelled, batch_size=256, transform=transform,
                                   device=device, progress=False)
    return features


def few_label_accuracies(
    train: tuple[Tensor, Tensor], test: tuple[Tensor, Tensor],
    shots: Sequence[int] = SHOTS, seeds: Sequence[int] = SEEDS,
) -> dict[str, dict[str, object]]:
    """Linear-probe top-1 (%) with ``shots`` labelled images per class (one draw per seed) and
    with all labels (one probe, the first seed), via :func:`contrastkit.eval.lowshot_linear`.

    Returns:
        ``{"1": {"mean", "std", "top1": [per seed], "num_train"}, ..., "all": {...}}`` with
        accuracies in percent.
    """
    x, y = train
    tx, ty = test
    few = lowshot_linear(x, y, tx, ty, shots=list(shots), seeds=list(seeds), protocol=PROBE)
    full = lowshot_linear(x, y, tx, ty, shots=[None], seeds=[seeds[0]], protocol=PROBE)
    table: dict[str, dict[str, object]] = {}
    for shot, row in [*few.items(), *full.items()]:
        table["all" if shot is None else str(shot)] = {
            "mean": 100 * float(row["mean"]),  # type: ignore[arg-type]
            "std": 100 * float(row["std"]),  # type: ignore[arg-type]
            "top1": [100 * float(v) for v in row["top1"]],  # type: ignore[union-attr]
            "num_train": row["num_train"],
        }
    return table


def compare(
    backbones: Mapping[str, nn.Module | None], train: tuple[Tensor, Tensor],
    test: tuple[Tensor, Tensor], transform: Callable[[Tensor], Tensor],
    device: torch.device | str, shots: Sequence[int] = SHOTS, seeds: Sequence[int] = SEEDS,
) -> dict[str, dict[str, dict[str, dict[str, object]]]]:
    """The whole protocol: ``{representation: {test set: few_label_accuracies(...)}}``.

    Args:
        backbones: representation name -> backbone (``None`` = raw pixels).
        train: the pretraining split's uint8 images and labels (the labelled pool).
        test: the test split's uint8 images and labels.
        transform: the evaluation transform in front of the backbones.
        device: where the backbones run.
        shots, seeds: labelled images per class and the seeds of their draws.
    """
    side = min(test[0].shape[-2:])
    shifted, _ = shift_images(test[0], side // 8)
    tests = {TEST_SETS[0]: test[0], TEST_SETS[1]: shifted}
    results: dict[str, dict[str, dict[str, dict[str, object]]]] = {}
    for name, backbone in backbones.items():
        train_x = representation_features(backbone, train[0], transform, device)
        results[name] = {}
        for key, images in tests.items():
            test_x = representation_features(backbone, images, transform, device)
            results[name][key] = few_label_accuracies((train_x, train[1]), (test_x, test[1]),
                                                      shots, seeds)
    return results


def results_table(results: Mapping[str, Mapping[str, Mapping[str, Mapping[str, object]]]]) -> str:
    """Markdown table: one row per (test set, labels per class), one column per representation."""
    names = list(results)
    first = results[names[0]]
    rows = []
    for test_set, by_shot in first.items():
        for shot in by_shot:
            cells = []
            for name in names:
                row = results[name][test_set][shot]
                mean, std = float(row["mean"]), float(row["std"])  # type: ignore[arg-type]
                many = len(row["top1"]) > 1  # type: ignore[arg-type]
                cells.append(f"{mean:.1f} ± {std:.1f}" if many else f"{mean:.1f}")
            rows.append([shot, test_set, *cells])
    return markdown_table(["labels/class", "test images", *names], rows)
