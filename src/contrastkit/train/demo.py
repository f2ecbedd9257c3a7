"""The main job: pretrain SCE on the bundled digits and compare kNN accuracies.

``python -m contrastkit.train.demo`` (``make demo``) runs ``contrastkit pretrain`` with
``configs/demo/digits_sce.yaml`` into a fresh ``runs/demo-<time>`` folder, then prints the
weighted kNN accuracy (k=20, t=0.1) on the digits test split of

* the pretrained backbone,
* the same backbone randomly initialised,
* raw pixels,

and where the checkpoint and the loss-curve PNG are.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from torch import nn

from contrastkit.checkpoints import load_backbone
from contrastkit.data import augment, datasets
from contrastkit.eval import knn_predict
from contrastkit.models.factory import build_backbone

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "demo" / "digits_sce.yaml"


@torch.no_grad()
def _features(backbone: nn.Module | None, dataset: datasets.ArrayImages, size: int) -> tuple:
    images = torch.as_tensor(dataset.images)
    labels = torch.as_tensor(dataset.labels)
    if backbone is None:
        return images.flatten(1).float() / 255.0, labels
    view = augment.preset("eval", size, small=True)
    backbone.eval()
    feats = torch.cat([backbone(view(chunk)) for chunk in images.split(256)])
    return feats, labels


def _knn_accuracy(train: tuple, test: tuple) -> float:
    pred, _ = knn_predict(train[0], train[1], test[0], k=20, temperature=0.1)
    return float((pred == test[1]).float().mean())


def main(argv: list[str] | None = None) -> int:
    """Run the demo; extra arguments are passed to ``contrastkit pretrain``."""
    from contrastkit.train.cli import pretrain

    if not CONFIG.is_file():
        raise SystemExit(f"demo config not found at {CONFIG} (run from a source checkout)")
    output = Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    extra = list(sys.argv[1:] if argv is None else argv)
    cli = pretrain(["--config", str(CONFIG), "--output", str(output), *extra])
    size = cli.model.views_spec.size

    checkpoint = output / "checkpoints" / "last.ckpt"
    pretrained, spec = load_backbone(checkpoint)
    torch.manual_seed(0)
    random_init = build_backbone(spec)
    train, test = datasets.Digits("train"), datasets.Digits("test")
    rows = []
    for name, backbone in (("SCE-pretrained backbone", pretrained),
                           ("same backbone, random init", random_init),
                           ("raw pixels", None)):
        rows.append((name, _knn_accuracy(_features(backbone, train, size),
                                         _features(backbone, test, size))))
    print("\nkNN accuracy on the digits test split (k=20, t=0.1, bank = train split)")
    print(f"| {'features':<28} | top-1 |\n|{'-' * 30}|-------|")
    for name, acc in rows:
        print(f"| {name:<28} | {100 * acc:5.1f} |")
    print(f"\ncheckpoint: {checkpoint}\nloss curve: {output / 'loss_curve.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
