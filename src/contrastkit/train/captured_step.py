"""The whole training step as one CUDA graph (``model.performance.step: captured``).

An eager step on a GPU is bound by the host: about 600 kernels are launched one by one from
Python (``benchmarks/README.md``). :class:`CapturedStep` writes the step so that it can be
recorded once and replayed: views, forward, loss, backward, optimiser, EMA update, queue write
and the NaN flag, every kernel reading and writing tensors that stay at the same addresses, and
nothing in it reading a device value on the host. What changes from step to step lives on the
device and is updated in place:

* the step counter (a 0-d int64 tensor), which indexes the learning rate of every parameter
  group and the EMA rate, tabulated once for the whole run (:mod:`.graph_optim`);
* the queue's position and fill count (its ``ptr`` and ``filled`` buffers,
  :meth:`~contrastkit.methods.queue.MemoryQueue.write_at_pointer`);
* the shuffle-BN permutation, drawn on the host from the method's own generator before each
  step and copied into a device buffer the graph reads
  (:meth:`~contrastkit.methods.shuffle_bn.ShuffleBN.draw_planned`);
* the augmentation generator, registered with the CUDA graph, which advances its offset at
  every replay as the eager draws would (its checkpointed state stays exact);
* the first non-finite step (:meth:`~contrastkit.train.finite_guard.FiniteGuard.observe_on_device`).

The batch is copied into static input tensors before each step; the loss and logged values are
static output tensors, read by Lightning only on logging steps.

Lightning still drives the run (:class:`~contrastkit.train.module.PretrainModule` in manual
optimisation): epochs, checkpoints, logging, resume, DDP. Its optimiser keeps the momentum
buffers the step updates in place, so checkpoints are those of the eager path, and a run can
resume in either mode. The module calls ``optimizer.step(closure)`` with a closure that runs
:meth:`CapturedStep.run` (so Lightning counts the step and calls its hooks); the parameters
then have no ``.grad`` and the optimiser's own update skips them all.

On a CUDA device the first ``warmup`` steps run on a side stream (cuDNN autotuning, lazy
initialisation, compilation), then one step is captured into a ``torch.cuda.CUDAGraph`` and
replayed at every later step. Until the memory queue is full its size changes from step to
step, so those steps run uncaptured. On the CPU the same step runs as plain code, step by step:
what the tests check there (no host read, the same weights as the eager path) is what the graph
replays. With ``compile`` the step's forward half (views, encoders, loss) is
``torch.compile``-d (``fullgraph=True``) and captured with the rest
(``benchmarks/step_graph.py`` compiles the whole step, backward included).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import Tensor

from contrastkit.distributed import is_distributed, world_size
from contrastkit.hot_path import hot_path
from contrastkit.schedules import Schedule
from contrastkit.train.collapse_check import embedding_spread
from contrastkit.train.graph_optim import OptimizerUpdate, at_step, step_table

if TYPE_CHECKING:
    from lightning import LightningModule as PretrainModule  # the engine's, train.module
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LambdaLR

__all__ = ["CapturedStep", "check_capturable"]


def check_capturable(module: PretrainModule, trainer: Any) -> None:
    """Raise ``ValueError`` naming what a captured step of ``module`` under ``trainer`` cannot
    compute (checked before training starts, and again when the step is built)."""
    method, fix = module.method, "or use model.performance.step eager"
    scheduled = sorted(name for name, value in vars(method).items()
                       if isinstance(value, Schedule))
    if scheduled:
        raise ValueError(f"model.performance.step captured: {', '.join(scheduled)} of "
                         f"{type(method).__name__} is a schedule (its value would be frozen in "
                         f"the graph); use a number {fix}")
    if not method.captured_step:
        raise ValueError(f"model.performance.step captured: {type(method).__name__} keeps state "
                         f"the captured step does not update (see its docstring) {fix}")
    frozen = sorted(name for name, freeze in method.gradient_freezes.items() if freeze.until)
    if frozen:
        raise ValueError(f"model.performance.step captured does not freeze layers "
                         f"({', '.join(frozen)} of {type(method).__name__}) {fix}")
    if module.optimizer_spec.clip_grad_per_parameter is not None:
        raise ValueError(f"model.performance.step captured does not clip gradients: unset "
                         f"model.optimizer.clip_grad_per_parameter {fix}")
    if module.views_spec.video is not None:
        raise ValueError(f"model.performance.step captured runs image views: {fix} for video")
    if module.optimizer_spec.name not in ("sgd", "lars"):
        raise ValueError(f"model.performance.step captured computes SGD and LARS steps, not "
                         f"{module.optimizer_spec.name}: set model.optimizer.name {fix}")
    if trainer.gradient_clip_val:
        raise ValueError(f"model.performance.step captured does not clip gradients: unset "
                         f"trainer.gradient_clip_val {fix}")
    if trainer.accumulate_grad_batches != 1:
        raise ValueError(f"model.performance.step captured takes one batch per optimiser "
                         f"step: set trainer.accumulate_grad_batches 1 {fix}")
    precision = str(trainer.precision)
    if "16" in precision and "bf16" not in precision:
        raise ValueError(f"model.performance.step captured runs in 32-true or bf16-mixed "
                         f"precision (fp16's loss scaling reads the device every step) {fix}")


class CapturedStep:
    """One training step of ``module``, graph-safe; captured into a CUDA graph on CUDA.

    Args:
        module: the Lightning module (its method, views, classifier, finite guard).
        optimizer: its optimiser (``torch.optim.SGD`` or LARS), whose state is updated.
        scheduler: its ``LambdaLR``; the learning rates are tabulated from its functions.
        images: the first batch's images (shape, dtype and device of every batch).
        labels: the first batch's labels.
        compile: ``torch.compile`` the step's forward half (``fullgraph=True``).
        warmup: steps run on a side stream before the capture (CUDA).
    """

    def __init__(self, module: PretrainModule, optimizer: Optimizer, scheduler: LambdaLR,
                 images: Tensor, labels: Tensor, *, compile: bool = False,
                 warmup: int = 3) -> None:
        check_capturable(module, module.trainer)
        self.module, self.method = module, module.method
        device = images.device
        total = module._total_steps()
        self.step = torch.tensor(int(module.global_step), dtype=torch.int64, device=device)
        rates = [(lambda k, f=f, b=b: b * f(k))
                 for f, b in zip(scheduler.lr_lambdas, scheduler.base_lrs, strict=True)]
        self.update = OptimizerUpdate(optimizer, rates, total, device)
        optimizer.zero_grad(set_to_none=True)  # the optimiser's own step must find no .grad
        target, base = self.method.target, self.method.base_momentum
        self.ema_rate = (step_table(lambda k: 1.0 - self.method.momentum_at(k, total), total,
                                    device) if target is not None and base is not None else None)
        self.total_steps = total
        self.images, self.labels = torch.empty_like(images), torch.empty_like(labels)
        self.world = world_size()
        self.key_shuffle = getattr(self.method, "key_shuffle", None)
        if self.key_shuffle is not None:
            self.key_shuffle.plan(torch.empty(images.shape[0] * self.world, dtype=torch.int64,
                                              device=device))
            native = device.type == "cuda" and not compile and not self.key_shuffle.running_stats
            self.key_shuffle.use_kernel("native" if native else "formula")
        module.finite_guard.flag_on(device)
        self.state = module.schedule_state()
        self.autocast = (torch.is_autocast_enabled(device.type),
                         torch.get_autocast_dtype(device.type))
        self.queue_rows = 0
        self.numbers: dict[str, float] = {}
        self.compiled_forward = (torch.compile(self._forward, fullgraph=True) if compile
                                 else None)
        self.warmup, self.warm = warmup, 0
        #: seconds from the first step to the end of the capture (warm-up, compilation)
        self.setup_s = 0.0
        self._started: float | None = None
        self.graph: Any = None
        self.outputs: dict[str, Tensor] = {}

    # --- the step ------------------------------------------------------------------------------
    def _forward(self) -> tuple[Tensor, dict[str, Tensor], Tensor | None]:
        """Views, encoders, loss (and the online classifier's): the loss to differentiate,
        the values to log (the method's loss as ``loss``) and the keys staged for the queue."""
        module, method = self.module, self.method
        with torch.no_grad():  # views in float32 even under autocast (the views' own)
            views = module.train_views(self.images)
        if module._channels_last:
            views = [v.contiguous(memory_format=torch.channels_last) for v in views]
        with hot_path():
            out = method(views, self.labels, self.state)
        loss, logs = out.loss, {"loss": out.loss.detach()}  # logged: the method's loss alone
        for name, value in out.logs.items():
            if callable(value):
                logs[name] = value().detach()
            elif isinstance(value, Tensor):
                logs[name] = value.detach()
            else:
                self.numbers[name] = float(value)
        if out.embedding is not None:  # the collapse check's train/z_std
            logs["z_std"] = embedding_spread(out.embedding)
        if module.classifier is not None:
            extra, accuracy = module.online_classifier(out.features, self.labels, True)
            loss, logs["online_linear_acc"] = loss + extra, accuracy.detach()
        keys = method.queue.take_staged() if method.queue is not None else None
        return loss, logs, keys

    def _step(self) -> dict[str, Tensor]:
        """Forward, backward, optimiser, EMA, queue write, NaN flag: device work only."""
        kind = self.images.device.type
        enabled, dtype = self.autocast
        with torch.autocast(kind, dtype=dtype, enabled=enabled, cache_enabled=False):
            compiled = self.compiled_forward is not None and self._static()
            loss, logs, keys = (self.compiled_forward if compiled else self._forward)()
        with torch.autocast(kind, enabled=False):  # as the eager path: outside autocast
            grads = list(torch.autograd.grad(loss, self.update.params, allow_unused=True))
            if self.world > 1:
                grads = _mean_over_processes(grads, self.world)
            self.update(grads, self.step)
            if self.ema_rate is not None:
                self.method.target.update_by(at_step(self.ema_rate, self.step, torch.float32))
            if keys is not None:
                self.method.queue.write_at_pointer(keys)
                self.queue_rows = keys.shape[0]
            self.module.finite_guard.observe_on_device(logs["loss"], self.step)
            self.step.add_(1)
        return logs

    # --- running it ----------------------------------------------------------------------------
    def run(self, images: Tensor, labels: Tensor) -> dict[str, Tensor]:
        """One optimiser step on this batch; the loss and logged values (static tensors on a
        CUDA device: read them before the next step)."""
        self.prepare(images, labels)
        if self.graph is not None:
            self.graph.replay()
        elif not self._static() or self.images.device.type != "cuda":
            self.outputs = self._step()
        elif self.warm < self.warmup:
            self._started = self._started or time.perf_counter()
            self.outputs = self._on_side_stream()
            self.warm += 1
        else:
            self._capture()
            self.setup_s = time.perf_counter() - (self._started or time.perf_counter())
        self.finish()
        return self.outputs

    def _static(self) -> bool:
        """Whether every shape of the step is fixed (a queue that is still filling is not)."""
        queue = self.method.queue
        return queue is None or queue.num_valid == queue.size

    def prepare(self, images: Tensor, labels: Tensor) -> None:
        """Host work before a step: the batch into the static inputs, the next shuffle-BN
        permutation into its buffer."""
        self.images.copy_(images)
        self.labels.copy_(labels)
        if self.key_shuffle is not None:
            self.key_shuffle.draw_planned()

    def finish(self) -> None:
        """Host work after a step: the queue's host copies of its pointer and fill count."""
        if self.method.queue is not None:
            self.method.queue.advance_host_copies(self.queue_rows)

    def _on_side_stream(self) -> dict[str, Tensor]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            outputs = self._step()
        torch.cuda.current_stream().wait_stream(side)
        return outputs

    def _capture(self) -> None:
        """Record one step into a CUDA graph, then replay it (the capture runs nothing)."""
        graph = torch.cuda.CUDAGraph()
        generator = self.module.augmentation_rng.generator
        if generator is not None and generator.device.type == "cuda":
            graph.register_generator_state(generator)
        with torch.cuda.graph(graph):
            self.outputs = self._step()
        self.graph = graph
        graph.replay()

    def momentum_after(self, step: int) -> float | None:
        """The EMA momentum used after optimiser step ``step`` (host arithmetic, for logs):
        the eager path's, whose EMA update runs before Lightning counts the step."""
        if self.ema_rate is None:
            return None
        return self.method.momentum_at(step, self.total_steps)

    def release(self) -> None:
        """Give the method back to eager steps (the shuffle-BN draws and kernel)."""
        if self.key_shuffle is not None:
            self.key_shuffle.plan(None)
            self.key_shuffle.use_kernel("formula")
        self.graph = None


def _mean_over_processes(grads: list[Tensor | None], world: int) -> list[Tensor | None]:
    """Every gradient averaged over the processes as DDP does (each divided by ``world``, then
    summed by one all-reduce), in its own memory layout."""
    present = [g for g in grads if g is not None]
    if not present or not is_distributed():
        return grads
    flat = torch.cat([g.reshape(-1) for g in present]).mul_(1.0 / world)
    dist.all_reduce(flat)
    out, start = [], 0
    for g in grads:
        if g is None:
            out.append(None)
            continue
        reduced = torch.empty_like(g)
        reduced.copy_(flat[start:start + g.numel()].view(g.shape))
        out.append(reduced)
        start += g.numel()
    return out

