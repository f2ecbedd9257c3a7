"""Time one optimisation step of SimCLR and SCE against a plain supervised step.

Same network (ResNet-18, CIFAR stem), same two pre-generated 32x32 views, same optimiser (SGD,
momentum 0.9, weight decay 5e-4), same threads, in the same process. Steps of the variants are
interleaved round-robin (one step of each, then the next round) so a change of machine load
hits every variant alike; the median over the timed rounds is reported.

Variants:

* ``supervised``: backbone + linear classifier, cross-entropy on both views (with gradient).
* ``simclr``: :class:`contrastkit.methods.SimCLR` (projector, gather, NT-Xent) on both views.
  Same network passes as ``supervised``: the difference is the contrastive machinery.
* ``sce``: :class:`contrastkit.methods.SCE` as the table6 recipe builds it (:func:`table6_sce`:
  shuffle BN 8, queue 4096, EMA target branch; channels_last on CUDA). SCE back-propagates
  through the online view only and runs the target view through the EMA copy without gradient,
  so it does *less* backbone work than ``supervised``; ``supervised_sce_passes`` repeats exactly
  SCE's passes (view 0 with gradient, view 1 through a frozen copy, no gradient) with a linear
  classifier, and is the reference that isolates SCE's machinery (projector, loss, queue, EMA).

Overhead = (method step - reference step) / reference step. Augmentation is excluded from the
timed steps and timed separately (both views of one batch, ``ViewsSpec`` presets). Component
timings at the requested batch (loss forward+backward on embeddings, EMA update + queue commit)
show where the machinery's time goes without the backbone's noise.

Usage::

    python benchmarks/train_step.py --batch-size 256 --steps 5 --warmup 1
    python benchmarks/train_step.py --batch-size 256 --components-only
    python benchmarks/train_step.py --device cuda --bf16 --sync-debug   # warns at each sync
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from contrastkit.data.augment.views import build_train_views
from contrastkit.data.specs import ViewsSpec
from contrastkit.hot_path import hot_path
from contrastkit.losses import nt_xent, sce
from contrastkit.methods import SCE, SimCLR
from contrastkit.models.factory import BackboneSpec, HeadSpec, build_backbone
from contrastkit.schedules import ScheduleState

BACKBONE = BackboneSpec(name="resnet18", cifar_stem=True)
PROJECTOR = HeadSpec(hidden_dim=512, out_dim=128, num_layers=2, batch_norm="hidden")


def _sgd(params) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.03, momentum=0.9, weight_decay=5e-4)


DEVICE = torch.device("cpu")
BF16 = False


def _sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


def _timed(fn: Callable[[], object]) -> float:
    _sync()
    start = time.perf_counter()
    with torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=BF16):
        fn()
    _sync()
    return time.perf_counter() - start


class Supervised:
    """Backbone + linear classifier, cross-entropy on both views."""

    def __init__(self, views, labels, classes: int = 10) -> None:
        self.backbone = build_backbone(BACKBONE).to(DEVICE)
        self.head = nn.Linear(self.backbone.out_dim, classes).to(DEVICE)
        self.opt = _sgd([*self.backbone.parameters(), *self.head.parameters()])
        self.views, self.labels = views, labels

    def step(self) -> None:
        self.opt.zero_grad(set_to_none=True)
        loss = sum(F.cross_entropy(self.head(self.backbone(v)), self.labels) for v in self.views)
        loss.backward()
        self.opt.step()


class SupervisedSCEPasses:
    """SCE's network passes with a supervised loss: view 0 with gradient, view 1 through a
    frozen copy of the backbone without gradient (no projector, no queue, no EMA)."""

    def __init__(self, views, labels, classes: int = 10) -> None:
        self.backbone = build_backbone(BACKBONE).to(DEVICE)
        self.frozen = copy.deepcopy(self.backbone).requires_grad_(False)
        self.head = nn.Linear(self.backbone.out_dim, classes).to(DEVICE)
        self.opt = _sgd([*self.backbone.parameters(), *self.head.parameters()])
        self.views, self.labels = views, labels

    def step(self) -> None:
        self.opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            self.frozen(self.views[1])
        loss = F.cross_entropy(self.head(self.backbone(self.views[0])), self.labels)
        loss.backward()
        self.opt.step()


class MethodStep:
    """A contrastkit method: forward, backward, SGD step, after-step hook (EMA, queue), inside
    :func:`contrastkit.hot_path.hot_path` as the training engine runs it."""

    def __init__(self, method: nn.Module, views, labels, total_steps: int,
                 device: torch.device | None = None) -> None:
        self.method = method.to(device or DEVICE)
        self.opt = _sgd([p for p in method.parameters() if p.requires_grad])
        self.views, self.labels = views, labels
        self.total = total_steps
        self.i = 0

    def step(self) -> None:
        state = ScheduleState(step=self.i, total_steps=self.total)
        self.opt.zero_grad(set_to_none=True)
        with hot_path():
            out = self.method(self.views, self.labels, state)
        out.loss.backward()
        self.opt.step()
        with hot_path():
            self.method.after_optimizer_step(state)
        self.i += 1


def table6_sce() -> nn.Module:
    """SCE as ``configs/repro/gpu/table6_sce.yaml`` builds it: shuffle BN over 8 groups,
    temperatures 0.2 / 0.1, coefficient 0.5, EMA 0.99, queue 4,096; channels_last on CUDA."""
    method = SCE(backbone=BACKBONE, projector=PROJECTOR, momentum=0.99, queue_size=4096,
                 shuffle_bn=8, coeff=0.5, temperature=0.2, target_temperature=0.1)
    if DEVICE.type == "cuda":
        method = method.to(memory_format=torch.channels_last)
    return method


def _median_ms(samples: list[float]) -> float:
    return 1000.0 * statistics.median(samples)


def component_timings(batch: int, repeats: int) -> dict[str, float]:
    """Machinery alone at ``batch``: loss forward+backward on embeddings, EMA + queue commit."""
    torch.manual_seed(1)
    out: dict[str, float] = {}
    z1 = torch.randn(batch, PROJECTOR.out_dim, device=DEVICE, requires_grad=True)
    z2 = torch.randn(batch, PROJECTOR.out_dim, device=DEVICE, requires_grad=True)
    queue = F.normalize(torch.randn(4096, PROJECTOR.out_dim, device=DEVICE), dim=1)

    def simclr_loss():
        with hot_path():
            loss = nt_xent(z1, z2, temperature=0.2)
        loss.backward()

    def sce_loss():
        with hot_path():
            loss = sce(z1, z2.detach(), queue, temperature=0.1, target_temperature=0.07,
                       coeff=0.5)
        loss.backward()

    method = SCE(backbone=BACKBONE, projector=PROJECTOR, momentum=0.99,
                 queue_size=4096).to(DEVICE)
    state = ScheduleState(step=1, total_steps=100)

    def ema_and_queue():
        method.queue.stage(F.normalize(torch.randn(batch, PROJECTOR.out_dim, device=DEVICE),
                                       dim=1))
        with hot_path():
            method.after_optimizer_step(state)

    for name, fn in (("NT-Xent fwd+bwd", simclr_loss), ("SCE loss fwd+bwd (queue 4096)", sce_loss),
                     ("EMA update + queue commit", ema_and_queue)):
        fn()
        out[name] = _median_ms([_timed(fn) for _ in range(repeats)])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5, help="timed rounds (median reported)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: as is)")
    parser.add_argument("--variants", default="supervised,supervised_sce_passes,simclr,sce")
    parser.add_argument("--components-only", action="store_true",
                        help="only the machinery timings (loss, EMA + queue), no full steps")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:i]")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast in the timed steps")
    parser.add_argument("--sync-debug", action="store_true",
                        help="CUDA: warn at every host-device synchronisation after warm-up")
    args = parser.parse_args()
    global DEVICE, BF16
    DEVICE, BF16 = torch.device(args.device), args.bf16
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.components_only:
        print(f"components at batch {args.batch_size}, {torch.get_num_threads()} threads "
              "(median ms):")
        for name, ms in component_timings(args.batch_size, max(args.steps, 5)).items():
            print(f"  {name:<32}{ms:>8.1f}")
        return
    torch.manual_seed(0)
    b = args.batch_size
    images = torch.randint(0, 256, (b, 3, 32, 32), dtype=torch.uint8).to(DEVICE)
    labels = torch.randint(0, 10, (b,)).to(DEVICE)
    spec = ViewsSpec(size=32, normalize="cifar10")
    make_views = build_train_views(spec, SCE.default_views).to(DEVICE)
    with torch.no_grad():
        make_views(images)
        aug_ms = _median_ms([_timed(lambda: make_views(images)) for _ in range(5)])
        views = make_views(images)
    if DEVICE.type == "cuda":  # the engine's default layout on CUDA (PerformanceSpec)
        views = [v.contiguous(memory_format=torch.channels_last) for v in views]
    total = args.warmup + args.steps
    builders = {
        "supervised": lambda: Supervised(views, labels),
        "supervised_sce_passes": lambda: SupervisedSCEPasses(views, labels),
        "simclr": lambda: MethodStep(SimCLR(backbone=BACKBONE, projector=PROJECTOR,
                                            temperature=0.2), views, labels, total),
        "sce": lambda: MethodStep(table6_sce(), views, labels, total),
    }
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = set(names) - set(builders)
    if unknown:
        raise SystemExit(f"--variants: unknown {sorted(unknown)}; allowed: {list(builders)}")
    runners = {n: builders[n]() for n in names}
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(total):
        if args.sync_debug and DEVICE.type == "cuda" and r == args.warmup:
            torch.cuda.set_sync_debug_mode("warn")
        this_round = {n: _timed(runners[n].step) for n in names}
        if r >= args.warmup:
            for n, t in this_round.items():
                times[n].append(t)
        print(f"round {r + 1}/{total}{' (warm-up)' if r < args.warmup else ''}: " + ", ".join(
            f"{n} {1000 * t:.0f} ms" for n, t in this_round.items()), flush=True)
    if args.sync_debug and DEVICE.type == "cuda":
        torch.cuda.set_sync_debug_mode("default")
    med = {n: _median_ms(times[n]) for n in names}
    print(f"\n{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{DEVICE}{' bf16' if BF16 else ''}, {torch.get_num_threads()} threads, batch {b}, "
          "32x32, ResNet-18 CIFAR stem, "
          f"median of {args.steps} steps after {args.warmup} warm-up")
    print(f"augmentation (both views, not timed in steps): {aug_ms:.0f} ms")
    print(f"{'variant':<24}{'ms/step':>10}{'min':>10}{'max':>10}{'images/s':>10}")
    for n in names:
        print(f"{n:<24}{med[n]:>10.0f}{1000 * min(times[n]):>10.0f}{1000 * max(times[n]):>10.0f}"
              f"{1000 * b / med[n]:>10.0f}")
    refs = {"simclr": "supervised", "sce": "supervised_sce_passes"}
    for n, ref in refs.items():
        if n in med and ref in med:
            print(f"overhead {n} vs {ref}: {100 * (med[n] - med[ref]) / med[ref]:+.1f}%")
        if n in med and "supervised" in med and ref != "supervised":
            print(f"  ({n} vs supervised two-view step: "
                  f"{100 * (med[n] - med['supervised']) / med['supervised']:+.1f}%)")
    print("components at this batch (median ms):")
    for name, ms in component_timings(b, max(args.steps, 5)).items():
        print(f"  {name:<32}{ms:>8.1f}")


if __name__ == "__main__":
    main()
