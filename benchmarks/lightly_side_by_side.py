"""contrastkit beside lightly: whole training epochs of the same method, interleaved in one process.

Issue 53, item 7. For each method of :data:`METHODS` (one entry per method), two runs train
side by side in this process on the same 2,560 CIFAR-10 JPEG files (the first ``--images / 10``
of each class of the archive's train split, written once into ``--folder``):

* contrastkit: ``contrastkit pretrain``'s own engine, driven in-process
  (:func:`contrastkit.cli.pretrain.build`, then ``trainer.fit``): its folder dataset (each JPEG
  decoded in the loader workers every epoch), its views on the device, its method, optimiser,
  schedule, logging and per-epoch checkpoint, with the online monitors off
  (``--data.val_split null``: the loader has no held-out split, and neither side scores one);
* lightly 1.6: the model of lightly's CIFAR-10 benchmark
  (``docs/source/getting_started/benchmarks/cifar10_benchmark.py`` of lightly-ai/lightly: the
  same heads, losses, momentum and view transforms, restated here) in a plain PyTorch loop:
  ``LightlyDataset`` over the same folder with lightly's transform (PIL, in the loader
  workers), a ``DataLoader`` as the benchmark builds it (shuffled, last batch dropped, workers
  started per epoch), SGD with momentum (Adam for SwAV, as there) and a cosine schedule per
  epoch.

Both use contrastkit's backbone (``--width``, ResNet-18 with the CIFAR stem; lightly's
benchmark uses its own ``ResNetGenerator``), so only the method and the pipeline differ; the
heads take the backbone's feature size as input and keep the benchmark's other sizes, and the
contrastkit side is configured with the same head sizes. The epochs alternate (contrastkit,
lightly, contrastkit, ...: a lightly epoch runs at each contrastkit epoch's end, outside the
contrastkit epoch's clock), after one untimed epoch of each (worker start-up, first
allocations). A contrastkit epoch is timed from one epoch's start to the next (loader start,
steps, the epoch-end checkpoint); a lightly epoch from its loader's start to its last step.
Printed: per method, the median epoch of each and the median of the per-round ratios
contrastkit / lightly (below 1: contrastkit faster).

One torch thread by default (``--threads``), as the study's lanes train: on a shared machine
torch's default two threads spin while they wait, and contrastkit's views (many small batched
operators in the training process) then slow down far more than lightly's (PIL, one thread
in each loader worker); ``benchmarks/README.md``, "Beside lightly", has the measurement.

A method whose contrastkit side is not in this checkout (its class or option missing) is
listed as such and skipped. Run it in the timm lane's venv (torch + torchvision + lightly)::

    OMP_NUM_THREADS=1 PYTHONPATH=src:. .venv-timm/bin/python \\
        benchmarks/lightly_side_by_side.py --methods simclr moco --rounds 3
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from contrastkit.models.factory import BackboneSpec, build_backbone

ARCHIVE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "cifar10-jpg.tar.gz"


# --- lightly's benchmark models, restated over contrastkit's backbone --------------------------
class LightlyModel(nn.Module):
    """A backbone and the heads, loss and momentum copies of one lightly benchmark model;
    :meth:`loss` is its training step's loss on a batch of views."""

    def __init__(self, backbone: nn.Module, heads: dict[str, nn.Module],
                 criterion: nn.Module, step: Callable[[LightlyModel, list[Tensor]], Tensor],
                 momentum: tuple[str, ...] = (),
                 built_targets: dict[str, nn.Module] | None = None) -> None:
        super().__init__()
        from lightly.models import utils

        self.backbone = backbone
        self.heads = nn.ModuleDict(heads)
        self.criterion = criterion
        self._step = step
        # EMA copies of the backbone and of the named heads, without gradients (a head that
        # cannot be deep-copied, DINO's weight-normalised layer, is built twice, as there)
        self.ema = nn.ModuleDict({name: copy.deepcopy(self.part(name)) for name in momentum})
        self.ema.update(built_targets or {})
        for module in self.ema.values():
            utils.deactivate_requires_grad(module)

    def part(self, name: str) -> nn.Module:
        return self.backbone if name == "backbone" else self.heads[name]

    def update_momentum(self, m: float = 0.99) -> None:
        from lightly.models import utils

        for name, target in self.ema.items():
            utils.update_momentum(self.part(name), target, m)

    def embed(self, x: Tensor, *names: str, target: bool = False) -> Tensor:
        """``x`` through the backbone and then the named heads (the EMA copies with
        ``target``)."""
        modules = self.ema if target else {"backbone": self.backbone, **self.heads}
        out = modules["backbone"](x).flatten(start_dim=1)
        for name in names:
            out = modules[name](out)
        return out

    def loss(self, views: list[Tensor]) -> Tensor:
        return self._step(self, views)

    def trained_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]


def _two_views(model: LightlyModel, views: list[Tensor]) -> Tensor:
    """SimCLR, DCL, DCLW, Barlow Twins, VICReg: both views through the same encoder."""
    return model.criterion(model.embed(views[0], "projection"), model.embed(views[1],
                                                                             "projection"))


def _moco(model: LightlyModel, views: list[Tensor]) -> Tensor:
    """MoCo (v2) of the benchmark: EMA update first, keys shuffled through the momentum
    encoder, symmetric loss against the memory bank of the loss."""
    from lightly.models import utils

    model.update_momentum(0.99)

    def one_way(query_view: Tensor, key_view: Tensor) -> Tensor:
        shuffled, order = utils.batch_shuffle(key_view)
        query = model.embed(query_view, "projection")
        key = utils.batch_unshuffle(model.embed(shuffled, "projection", target=True), order)
        return model.criterion(query, key)

    return 0.5 * (one_way(views[0], views[1]) + one_way(views[1], views[0]))


def _byol(model: LightlyModel, views: list[Tensor]) -> Tensor:
    model.update_momentum(0.99)
    p0, p1 = (model.embed(v, "projection", "prediction") for v in views[:2])
    with torch.no_grad():
        z0, z1 = (model.embed(v, "projection", target=True) for v in views[:2])
    return 0.5 * (model.criterion(p0, z1) + model.criterion(p1, z0))


def _mocov3(model: LightlyModel, views: list[Tensor]) -> Tensor:
    """MoCo v3 (no model in lightly's CIFAR-10 benchmark): predictor on the online branch,
    momentum keys, lightly's NT-Xent of each query against the other view's keys, symmetric."""
    model.update_momentum(0.99)
    q0, q1 = (model.embed(v, "projection", "prediction") for v in views[:2])
    with torch.no_grad():
        k0, k1 = (model.embed(v, "projection", target=True) for v in views[:2])
    return model.criterion(q0, k1) + model.criterion(q1, k0)


def _swav(model: LightlyModel, views: list[Tensor]) -> Tensor:
    model.heads["prototypes"].normalize()
    scores = [model.heads["prototypes"](nn.functional.normalize(
        model.embed(v, "projection"), dim=1)) for v in views]
    return model.criterion(scores[:2], scores[2:])


def _nnclr(model: LightlyModel, views: list[Tensor]) -> Tensor:
    z0, z1 = (model.embed(v, "projection") for v in views[:2])
    p0, p1 = model.heads["prediction"](z0), model.heads["prediction"](z1)
    bank = model.heads["bank"]
    z0, z1 = bank(z0.detach(), update=False), bank(z1.detach(), update=True)
    return 0.5 * (model.criterion(z0, p1) + model.criterion(z1, p0))


def _dino(model: LightlyModel, views: list[Tensor]) -> Tensor:
    model.update_momentum(0.99)
    with torch.no_grad():
        teacher = [model.embed(v, "projection", target=True) for v in views[:2]]
    student = [model.embed(v, "projection") for v in views]
    return model.criterion(teacher, student, epoch=0)


def _mlp(*layers: tuple[int, int, bool, nn.Module | None]) -> nn.Module:
    """lightly's ``ProjectionHead`` from ``(in, out, batch norm, activation)`` blocks."""
    from lightly.models.modules import heads

    return heads.ProjectionHead([(i, o, nn.BatchNorm1d(o) if bn else None, act)
                                 for i, o, bn, act in layers])


def _simclr_views(lightly_transforms):
    return lightly_transforms.SimCLRTransform(input_size=32, cj_strength=0.5, gaussian_blur=0.0)


def _byol_views(lightly_transforms):
    return lightly_transforms.BYOLTransform(
        view_1_transform=lightly_transforms.BYOLView1Transform(input_size=32, gaussian_blur=0.0),
        view_2_transform=lightly_transforms.BYOLView2Transform(input_size=32, gaussian_blur=0.0))


def _lightly_simclr(d: int, backbone: nn.Module, loss: str = "NTXentLoss") -> LightlyModel:
    import lightly.loss
    from lightly.models.modules import heads

    return LightlyModel(backbone, {"projection": heads.SimCLRProjectionHead(d, 512, 128)},
                        getattr(lightly.loss, loss)(), _two_views)


def _lightly_moco(d: int, backbone: nn.Module) -> LightlyModel:
    from lightly.loss import NTXentLoss
    from lightly.models.modules import heads

    return LightlyModel(backbone, {"projection": heads.MoCoProjectionHead(d, 512, 128)},
                        NTXentLoss(temperature=0.1, memory_bank_size=(4096, 128)), _moco,
                        momentum=("backbone", "projection"))


def _lightly_byol(d: int, backbone: nn.Module) -> LightlyModel:
    from lightly.loss import NegativeCosineSimilarity
    from lightly.models.modules import heads

    return LightlyModel(backbone, {"projection": heads.BYOLProjectionHead(d, 1024, 256),
                                   "prediction": heads.BYOLPredictionHead(256, 1024, 256)},
                        NegativeCosineSimilarity(), _byol, momentum=("backbone", "projection"))


def _lightly_barlow(d: int, backbone: nn.Module) -> LightlyModel:
    from lightly.loss import BarlowTwinsLoss

    head = _mlp((d, 2048, True, nn.ReLU(inplace=True)), (2048, 2048, False, None))
    return LightlyModel(backbone, {"projection": head}, BarlowTwinsLoss(), _two_views)


def _lightly_vicreg(d: int, backbone: nn.Module) -> LightlyModel:
    """Not in lightly's CIFAR-10 benchmark: its ImageNet ResNet-50 model (VICReg's head and
    loss) with the CIFAR sizes of the benchmark's Barlow Twins head."""
    from lightly.loss import VICRegLoss
    from lightly.models.modules import heads

    head = heads.VICRegProjectionHead(d, 2048, 2048, num_layers=2)
    return LightlyModel(backbone, {"projection": head}, VICRegLoss(), _two_views)


def _lightly_swav(d: int, backbone: nn.Module) -> LightlyModel:
    from lightly.loss import SwaVLoss
    from lightly.models.modules import heads

    return LightlyModel(backbone, {"projection": heads.SwaVProjectionHead(d, 512, 128),
                                   "prototypes": heads.SwaVPrototypes(128, 512)},
                        SwaVLoss(), _swav)


def _lightly_nnclr(d: int, backbone: nn.Module) -> LightlyModel:
    from lightly.loss import NTXentLoss
    from lightly.models.modules import NNMemoryBankModule, heads

    head = _mlp((d, 2048, True, nn.ReLU(inplace=True)), (2048, 256, True, None))
    return LightlyModel(backbone, {"projection": head,
                                   "prediction": heads.NNCLRPredictionHead(256, 4096, 256),
                                   "bank": NNMemoryBankModule(size=(4096, 256))},
                        NTXentLoss(), _nnclr)


def _lightly_dino(d: int, backbone: nn.Module) -> LightlyModel:
    from lightly.loss import DINOLoss
    from lightly.models.modules import heads

    def head() -> nn.Module:  # two layers for CIFAR-10, as the benchmark
        built = heads.DINOProjectionHead(d, 2048, 256, 2048, batch_norm=True)
        built.layers = _mlp((d, 2048, True, nn.GELU()), (2048, 256, False, None)).layers
        return built

    return LightlyModel(backbone, {"projection": head()}, DINOLoss(output_dim=2048), _dino,
                        momentum=("backbone",), built_targets={"projection": head()})


def _lightly_mocov3(d: int, backbone: nn.Module) -> LightlyModel:
    from lightly.loss import NTXentLoss
    from lightly.models.modules import heads

    projection = heads.MoCoProjectionHead(d, 2048, 256, num_layers=3, batch_norm=True)
    return LightlyModel(backbone, {"projection": projection,
                                   "prediction": heads.BYOLPredictionHead(256, 2048, 256)},
                        NTXentLoss(temperature=0.2), _mocov3,
                        momentum=("backbone", "projection"))


@dataclass(frozen=True)
class Method:
    """One row of the comparison.

    Attributes:
        lightly: ``(feature size, backbone) -> LightlyModel``: lightly's benchmark model.
        views: ``lightly.transforms -> transform``: its views, as the benchmark sets them.
        contrastkit: ``contrastkit pretrain`` options of the same method with the same heads.
        adam: lightly's benchmark trains it with Adam (lr 1e-3, weight decay 1e-6).
        lr: SGD's rate at batch 128 on both sides (the benchmark's 0.06 unless stated).
        note: what differs from lightly's benchmark beyond the backbone.
    """

    lightly: Callable[[int, nn.Module], LightlyModel]
    views: Callable
    contrastkit: tuple[str, ...]
    adam: bool = False
    lr: float = 6e-2
    note: str = ""


def _ck(cls: str, projector: dict, *extra: str, predictor: dict | None = None,
        views: str = "simclr_cifar") -> tuple[str, ...]:
    """``contrastkit pretrain`` options of method ``cls`` with these heads and views (32 px;
    ``simclr_cifar``: lightly's ``SimCLRTransform`` at the benchmark's settings)."""
    args = ["--model.method", f"contrastkit.methods.{cls}",
            "--model.method.projector", json.dumps(projector),
            "--model.views", json.dumps({"online": views, "target": views, "size": 32}), *extra]
    if predictor is not None:
        args += ["--model.method.predictor", json.dumps(predictor)]
    return tuple(args)


_BN_ALL = {"hidden_dim": 512, "out_dim": 128, "batch_norm": "all"}

#: The methods both libraries have, one entry each.
METHODS: dict[str, Method] = {
    "simclr": Method(_lightly_simclr, _simclr_views,
                     _ck("SimCLR", _BN_ALL, "--model.method.temperature", "0.5")),
    "moco": Method(_lightly_moco, _simclr_views,
                   _ck("MoCo", {"hidden_dim": 512, "out_dim": 128, "batch_norm": "none"},
                       "--model.method.temperature", "0.1", "--model.method.symmetric", "true",
                       "--model.method.queue_size", "4096"),
                   note="lightly's benchmark splits the batch norms of both encoders into 8 "
                        "groups (ResNetGenerator num_splits 8); both sides here use "
                        "contrastkit's backbone, plain batch norm"),
    "dcl": Method(lambda d, b: _lightly_simclr(d, b, "DCLLoss"), _simclr_views,
                  _ck("SimCLR", _BN_ALL, "--model.method.loss", "dcl",
                      "--model.method.temperature", "0.1")),
    "dclw": Method(lambda d, b: _lightly_simclr(d, b, "DCLWLoss"), _simclr_views,
                   _ck("SimCLR", _BN_ALL, "--model.method.loss", "dclw",
                       "--model.method.temperature", "0.1")),
    "byol": Method(_lightly_byol, _byol_views,
                   _ck("BYOL", {"hidden_dim": 1024, "out_dim": 256},
                       predictor={"hidden_dim": 1024, "out_dim": 256})),
    "barlow_twins": Method(_lightly_barlow, _byol_views,
                           _ck("BarlowTwins", {"hidden_dim": 2048, "out_dim": 2048})),
    "vicreg": Method(_lightly_vicreg, _byol_views,
                     _ck("VICReg", {"hidden_dim": 2048, "out_dim": 2048}), lr=3.75e-3,
                     note="not in lightly's CIFAR-10 benchmark: its ImageNet model's head and "
                          "loss at the Barlow Twins head's CIFAR sizes, BYOL's views; SGD at "
                          "a sixteenth of the rate, 0.0075 at batch 256 (here the contrastkit "
                          "side's loss is NaN at step 8 at 0.03 and at step 19 at 0.015, the "
                          "rate configs/repro/cpu/vicreg.yaml trains 195 steps at)"),
    "swav": Method(_lightly_swav, lambda t: t.SwaVTransform(
        crop_sizes=[32], crop_counts=[2], crop_min_scales=[0.14], crop_max_scales=[1.0],
        cj_strength=0.5, gaussian_blur=0),
        _ck("SwAV", {"hidden_dim": 512, "out_dim": 128}, "--model.method.num_prototypes", "512",
            "--model.method.freeze_prototypes", '{"until": 0}'), adam=True),
    "dino": Method(_lightly_dino, lambda t: t.DINOTransform(
        global_crop_size=32, n_local_views=0, cj_strength=0.5, gaussian_blur=(0, 0, 0)),
        _ck("DINO", {"hidden_dim": 2048, "bottleneck_dim": 256, "num_prototypes": 2048,
                     "num_layers": 2, "batch_norm": True})),
    "nnclr": Method(_lightly_nnclr, _simclr_views,
                    _ck("NNCLR", {"hidden_dim": 2048, "out_dim": 256, "batch_norm": "all"},
                        "--model.method.queue_size", "4096", "--model.method.form", "nt_xent",
                        "--model.method.temperature", "0.5",
                        predictor={"hidden_dim": 4096, "out_dim": 256})),
    "mocov3": Method(_lightly_mocov3, _byol_views,
                     _ck("MoCoV3", {"hidden_dim": 2048, "out_dim": 256, "num_layers": 3,
                                    "batch_norm": "all"},
                         predictor={"hidden_dim": 2048, "out_dim": 256}),
                     note="not in lightly's benchmarks: lightly's MoCo head (3 layers, batch "
                          "norm), BYOL's predictor head and NT-Xent (in-batch, 2N-2 "
                          "negatives)"),
}


# --- the images ---------------------------------------------------------------------------
def write_images(archive: Path, folder: Path, images: int) -> Path:
    """The first ``images / 10`` files of each class of ``archive``'s train split, as
    ``folder/<class>/NNNN.jpg`` (written once; an existing complete folder is kept)."""
    per_class = images // 10
    done = folder.with_name(folder.name + ".complete")  # beside it: not a file of the data
    if done.is_file() and done.read_text() == str(images):
        return folder
    with tarfile.open(archive) as tar:
        for member in tar:
            parts = Path(member.name).parts
            if len(parts) == 3 and parts[0] == "train" and member.isfile() and \
                    int(Path(parts[2]).stem) < per_class:
                target = folder / parts[1] / parts[2]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
    done.write_text(str(images))
    return folder


# --- the two sides ------------------------------------------------------------------------
@dataclass
class LightlySide:
    """lightly's model, loader and optimiser; :meth:`epoch` trains one epoch, returns seconds."""

    model: LightlyModel
    loader: torch.utils.data.DataLoader
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    seconds: list[float] = field(default_factory=list)

    def epoch(self) -> float:
        begin = time.perf_counter()
        self.model.train()
        for views, _, _ in self.loader:
            loss = self.model.loss(list(views))
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        self.scheduler.step()
        elapsed = time.perf_counter() - begin
        self.seconds.append(elapsed)
        return elapsed


def lightly_side(method: Method, folder: Path, width: int, batch: int, workers: int,
                 epochs: int) -> LightlySide:
    import lightly.transforms
    from lightly.data import LightlyDataset

    backbone = build_backbone(BackboneSpec(name="resnet18", cifar_stem=True, width=width))
    model = method.lightly(backbone.out_dim, backbone)
    dataset = LightlyDataset(input_dir=str(folder), transform=method.views(lightly.transforms))
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True,
                                         drop_last=True, num_workers=workers)
    lr_factor = batch / 128  # the benchmark's linear scaling
    optimizer = (torch.optim.Adam(model.trained_parameters(), lr=1e-3 * lr_factor,
                                  weight_decay=1e-6) if method.adam else
                 torch.optim.SGD(model.trained_parameters(), lr=method.lr * lr_factor,
                                 momentum=0.9, weight_decay=5e-4))
    return LightlySide(model, loader, optimizer,
                       torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs))


def contrastkit_args(method: Method, folder: Path, width: int, batch: int, workers: int,
                     epochs: int, output: Path) -> list[str]:
    backbone = {"name": "resnet18", "cifar_stem": True, "width": width}
    lr = method.lr * batch / 128
    optimizer = ({"name": "adam", "base_lr": 1e-3 * batch / 128, "weight_decay": 1e-6}
                 if method.adam else {"base_lr": lr, "weight_decay": 5e-4})
    return [*method.contrastkit, "--model.method.backbone", json.dumps(backbone),
            "--model.optimizer", json.dumps({**optimizer, "scale_lr": False,
                                             "warmup_epochs": 0}),
            "--data.dataset", "folder", "--data.root", str(folder), "--data.val_split", "null",
            "--data.batch_size", str(batch), "--data.num_workers", str(workers),
            "--trainer.max_epochs", str(epochs), "--trainer.accelerator", "cpu",
            "--trainer.devices", "1", "--trainer.enable_progress_bar", "false",
            "--output", str(output)]


def interleaved(name: str, method: Method, folder: Path, args: argparse.Namespace,
                work: Path) -> dict[str, object]:
    """One method: ``args.rounds`` timed epochs of each side after one untimed, alternating."""
    import lightning as L

    from contrastkit.cli.pretrain import build
    from contrastkit.train.finite_guard import NonFiniteLossError

    epochs = args.rounds + 1
    try:  # the parser printed why on a SystemExit
        cli, _ = build(contrastkit_args(method, folder, args.width, args.batch_size,
                                        args.workers, epochs, work / name))
    except (SystemExit, ValueError) as err:
        why = str(err) if isinstance(err, ValueError) else "its class or option is missing"
        return {"method": name, "skipped": f"contrastkit side not in this checkout: {why}"}
    torch.manual_seed(0)
    lightly = lightly_side(method, folder, args.width, args.batch_size, args.workers, epochs)
    contrastkit: list[float] = []

    class Alternate(L.Callback):
        """A lightly epoch at each contrastkit epoch's end, outside that epoch's clock."""

        mark: float | None = None
        inside = 0.0

        def _close(self) -> None:
            if self.mark is not None:
                contrastkit.append(time.perf_counter() - self.mark - self.inside)

        def on_train_epoch_start(self, trainer, pl_module) -> None:
            self._close()
            self.mark, self.inside = time.perf_counter(), 0.0

        def on_train_epoch_end(self, trainer, pl_module) -> None:
            self.inside = lightly.epoch()

        def on_train_end(self, trainer, pl_module) -> None:
            self._close()

    cli.trainer.callbacks.append(Alternate())
    try:  # a diverging recipe ends this row, not the whole comparison
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    except NonFiniteLossError as err:
        return {"method": name, "skipped": f"contrastkit side diverged: {err}"}
    ck, ly = contrastkit[1:], lightly.seconds[1:]  # the first epoch of each: start-up
    ratios = [a / b for a, b in zip(ck, ly, strict=True)]
    return {"method": name, "contrastkit_s": round(statistics.median(ck), 2),
            "lightly_s": round(statistics.median(ly), 2),
            "ratio": round(statistics.median(ratios), 3),
            "ratios": [round(r, 3) for r in ratios], "note": method.note}


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--archive", type=Path, default=ARCHIVE)
    parser.add_argument("--folder", type=Path, default=Path(".cache/lightly_side_by_side"),
                        help="where the JPEG files are written once")
    parser.add_argument("--images", type=int, default=2560)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--workers", type=int, default=1,
                        help="loader workers of both sides")
    parser.add_argument("--rounds", type=int, default=5, help="timed epochs of each side")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of the process (both sides; loader workers have "
                        "one each)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    folder = write_images(args.archive, args.folder, args.images)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name in args.methods:
            row = interleaved(name, METHODS[name], folder, args, Path(work))
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\n| method | contrastkit s/epoch | lightly s/epoch | ratio (median of "
          f"{args.rounds}) |\n|---|---|---|---|")
    for row in rows:
        if "skipped" in row:
            print(f"| {row['method']} | {row['skipped']} | | |")
        else:
            print(f"| {row['method']} | {row['contrastkit_s']} | {row['lightly_s']} | "
                  f"{row['ratio']} |")
    return rows


if __name__ == "__main__":
    main()
