"""The table6 SCE training step compiled whole: graphs, graph breaks, host reads, and how
closely it follows the eager step (issue 34).

Builds the real ``contrastkit pretrain`` module of ``configs/repro/gpu/table6_sce.yaml`` (SCE,
ResNet-18 CIFAR stem, shuffle BN 8, queue 4,096 full, bf16 autocast, channels_last, SGD) with
``model.performance.step captured``, runs ``--warmup`` real steps through Lightning (the
captured step is built on the first), then, from one saved state:

* N steps of the graph-safe step as plain code, under a ``TorchDispatchMode`` that records
  every operator reading a device value on the host (``_local_scalar_dense`` behind
  ``.item()``/``bool()``, ``nonzero``, boolean-mask indexing, ...): ``host_syncs``; on CUDA
  also under ``torch.cuda.set_sync_debug_mode("error")``; the same mode estimates the CUDA
  kernels of one step (``launch_count``'s rules): what a CUDA graph of the step replays
  (``graph_kernels_per_step``; outside the graph a captured step launches three copies, the
  batch and the shuffle-BN permutation, and the graph);
* N steps of the same step ``torch.compile``-d with ``fullgraph=True`` (views, forward,
  loss, backward, SGD, EMA, queue write), each from the state the plain step ``i`` started
  from: ``graphs`` (graphs compiled), ``graph_breaks``; the largest relative difference to
  the plain step in the loss (``|a - b| / |a|``), the online weights, the EMA weights and the
  queue after it (each group as one vector, ``||a - b|| / ||a||``): ``max_rel_diff``; the
  compile time (the first call's);
* the N compiled steps in a row from the first state (``trajectory_rel_diff``): an untrained
  contrastive step multiplies any difference, rounding included, by about 5 per step (1e-7 on
  the weights became 3e-4 after 6 plain steps), so this figure grows with N;
* the ms per step of the eager path (``loss.backward()``, the torch optimiser, the method's
  after-step hook: what ``model.performance.step eager`` runs, without Lightning), of the
  graph-safe step and of the compiled one, measured in interleaved rounds in one process; on
  CUDA also the graph-safe step captured into a CUDA graph and replayed (``captured_ms``), and
  the compiled one captured (``compiled_captured_ms``), with the 200-epoch estimate (195 steps
  an epoch, steps only).

On the CPU the model is narrowed (ResNet-18 of width 8, batch 64, the bundled digits): what is
checked there is that the step is one graph without host reads; its timings are CPU proxies.
The last line printed is one JSON object.

Usage: ``PYTHONPATH=src python benchmarks/step_graph.py --device cpu|cuda [--steps 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch._inductor.compile_fx import compile_fx
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).parent))

import launch_count
from contrastkit.cli.pretrain import build
from contrastkit.hot_path import hot_path

#: Operators that make a GPU wait for the host (tests/train/test_hot_path.py has the same).
SYNCHRONISING = {"_local_scalar_dense", "item", "nonzero", "is_nonzero", "equal", "unique",
                 "_unique2", "unique_consecutive", "masked_select", "allclose"}
STEPS_PER_EPOCH = 195  # CIFAR-10, batch 256, the last partial batch dropped


class HostSyncs(TorchDispatchMode):
    """Counts the synchronising operators, all operators and their estimated CUDA kernels
    (``launch_count.estimated_launches``) dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.found: Counter[str] = Counter()
        self.operators = 0
        self.kernels = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.operators += 1
        self.kernels += launch_count.estimated_launches(func, args, kwargs or {})
        indices = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else []
        if name in SYNCHRONISING or (name in ("index", "index_put", "index_put_") and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)):
            self.found[name] += 1
        return func(*args, **(kwargs or {}))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cli_args(device: str, precision: str) -> list[str]:
    """The table6 recipe: on the CPU narrowed (digits, batch 64, width 8), on CUDA at its size
    (batch 256, full width; the digits stand in for CIFAR-10: the step does not read pixels).
    The schedules are those of a 200-epoch run (the experiment stops it early)."""
    args = [*launch_count.DEFAULT_ARGS, "--model.performance.step", "captured",
            "--trainer.max_epochs", "200", "--trainer.precision", precision]
    if device == "cuda":
        return [*args, "--data.subset", "null", "--data.batch_size", "256",
                "--model.method.backbone", '{"name": "resnet18", "cifar_stem": true}',
                "--trainer.accelerator", "gpu", "--trainer.benchmark", "true"]
    # batch 64: 8 keys per shuffle-BN group (with 16, two: statistics of two samples turn
    # rounding differences into differences of whole units within a few steps)
    return [*args, "--data.subset", "256", "--data.batch_size", "64"]


class State:
    """What a step changes, saved once and put back in place (the graph's tensors stay)."""

    def __init__(self, module: Any, captured: Any) -> None:
        self.module, self.captured = module, captured
        optimizer = captured.update.optimizer
        self.buffers = [optimizer.state[p]["momentum_buffer"] for p in captured.update.params
                        if "momentum_buffer" in optimizer.state[p]]
        self.weights = {k: v.detach().clone() for k, v in module.state_dict().items()}
        self.saved = [b.clone() for b in self.buffers]
        self.step = captured.step.clone()
        generator = module.augmentation_rng.generator
        self.rng = generator.get_state()
        self.flag = module.finite_guard.flag_on(captured.step.device).clone()

    def restore(self) -> None:
        self.module.load_state_dict(self.weights)
        for buffer, saved in zip(self.buffers, self.saved, strict=True):
            buffer.copy_(saved)
        self.captured.step.copy_(self.step)
        self.module.augmentation_rng.generator.set_state(self.rng)
        self.module.finite_guard.flag_on(self.step.device).copy_(self.flag)


def snapshot(module: Any) -> dict[str, torch.Tensor]:
    """Online weights, EMA weights and queue, as float64 copies."""
    method = module.method
    out = {f"weights.{k}": v for k, v in method.backbone.named_parameters()}
    out.update({f"weights.projector.{k}": v for k, v in method.projector.named_parameters()})
    out.update({f"ema.{k}": v for k, v in method.target.target.named_parameters()})
    out["queue"] = method.queue.keys
    return {k: v.detach().double().clone() for k, v in out.items()}


def relative(want: dict[str, torch.Tensor], got: dict[str, torch.Tensor]) -> float:
    """``||a - b|| / ||a||`` over every tensor of a group at once (the group's scale: a tensor
    near 0, a bias a few steps from its zero start, would blow up a per-tensor ratio)."""
    a = torch.cat([v.reshape(-1) for v in want.values()])
    b = torch.cat([got[k].reshape(-1) for k in want])
    return float((a - b).norm() / a.norm().clamp_min(1e-300))


class Experiment(L.Callback):
    """After the warm-up steps: the runs of the module docstring, on ``batches``."""

    def __init__(self, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.result: dict[str, Any] = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.opts.warmup and not self.result:
            self.result = run_experiment(pl_module, batch, self.opts)
            trainer.should_stop = True


def run_experiment(module: Any, batch: Any, opts: argparse.Namespace) -> dict[str, Any]:
    captured = module._captured
    device = captured.step.device
    images, labels = batch[0].to(device), batch[1].to(device)
    generator = torch.Generator(device=device).manual_seed(0)
    batches = [(images[torch.randperm(len(images), generator=generator, device=device)],
                labels) for _ in range(opts.steps)]
    if captured.key_shuffle is not None:  # the statistics compiled (see timings for native)
        captured.key_shuffle.use_kernel("formula")

    def plain_step() -> dict[str, torch.Tensor]:
        captured.compiled_forward = None
        return captured._step()

    def one(fn, x: torch.Tensor, y: torch.Tensor,
            checks: TorchDispatchMode | None = None) -> float:
        captured.prepare(x, y)
        if checks is None:
            out = fn()
        else:  # the step itself, not the reading of its loss below
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode("error")
            with checks:
                out = fn()
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode(0)
        captured.finish()
        return float(out["loss"])

    # the plain steps, with the state before each and the weights after each
    syncs = HostSyncs()
    before, after, plain = [State(module, captured)], [], []
    for x, y in batches:
        plain.append(one(plain_step, x, y, syncs))
        after.append(snapshot(module))
        before.append(State(module, captured))
    graphs: list[int] = []

    def counting(gm, example_inputs):
        graphs.append(len(gm.graph.nodes))
        return compile_fx(gm, example_inputs) if opts.backend == "inductor" else gm.forward

    # the whole step where dynamo traces torch.autograd.grad (torch >= 2.13 here); else the
    # forward half, as the engine compiles it (model.performance.compile)
    scope = "step" if hasattr(torch._dynamo.config, "trace_autograd_ops") else "forward"
    if scope == "step":
        torch._dynamo.config.trace_autograd_ops = True
        whole = torch.compile(plain_step, fullgraph=True, backend=counting)

        def compiled() -> dict[str, torch.Tensor]:
            return whole()
    else:
        forward = torch.compile(captured._forward, fullgraph=True, backend=counting)

        def compiled() -> dict[str, torch.Tensor]:
            captured.compiled_forward = forward
            return captured._step()

    # each compiled step from the state the plain one started from: the step's own difference
    per_step: list[dict[str, float]] = []
    compile_s = 0.0
    for i, (x, y) in enumerate(batches):
        before[i].restore()
        begin = time.perf_counter()
        loss = one(compiled, x, y)
        compile_s = compile_s or time.perf_counter() - begin  # the first call compiles
        per_step.append(differences(plain[i], loss, after[i], snapshot(module)))
    # the compiled steps in a row from the first state: the trajectory
    before[0].restore()
    chained = [one(compiled, x, y) for x, y in batches]
    trajectory = differences(plain[-1], chained[-1], after[-1], snapshot(module))
    trajectory["loss"] = max(abs(a - b) / abs(a) for a, b in zip(plain, chained, strict=True))
    diffs = {k: max(d[k] for d in per_step) for k in per_step[0]}
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "backend": opts.backend, "batch": int(images.shape[0]), "precision": opts.precision,
        "compiled_scope": scope,
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "graphs": len(graphs), "graph_nodes": graphs,
        "host_syncs": int(sum(syncs.found.values())), "host_sync_ops": dict(syncs.found),
        "operators_per_step": syncs.operators / len(plain),
        "graph_kernels_per_step": syncs.kernels / len(plain), "steps": len(plain),
        "max_rel_diff": max(diffs.values()), "rel_diff": diffs,
        "rel_diff_per_step": per_step, "trajectory_rel_diff": trajectory,
        "compile_s": compile_s, "losses_plain": plain, "losses_compiled_chained": chained,
    }
    result.update(timings(module, captured, plain_step, compiled, batches, opts, device))
    return result


def differences(loss_a: float, loss_b: float, a: dict[str, torch.Tensor],
                b: dict[str, torch.Tensor]) -> dict[str, float]:
    """Relative differences of a loss and of the weight groups of two snapshots."""
    out = {"loss": abs(loss_a - loss_b) / abs(loss_a)}
    for group in ("weights", "ema", "queue"):
        out[group] = relative({k: v for k, v in a.items() if k.startswith(group)}, b)
    return out


def eager_step(module: Any, captured: Any, x: torch.Tensor, y: torch.Tensor) -> None:
    """The eager path's step without Lightning: views, method, online classifier,
    ``backward``, the torch optimiser, the after-step hook (EMA, queue commit), as
    ``model.performance.step eager`` runs them."""
    method, optimizer = module.method, captured.update.optimizer
    enabled, dtype = captured.autocast
    with torch.autocast(x.device.type, dtype=dtype, enabled=enabled):
        with torch.no_grad():
            views = module.train_views(x)
        if module._channels_last:
            views = [v.contiguous(memory_format=torch.channels_last) for v in views]
        with hot_path():
            out = method(views, y, captured.state)
        loss = out.loss
        if module.classifier is not None:
            loss = loss + module.online_classifier(out.features, y, False)[0]
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)  # the graph-safe steps must find no .grad
    with hot_path():
        method.after_optimizer_step(captured.state)


def timings(module: Any, captured: Any, plain: Any, compiled: Any, batches: list,
            opts: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """ms per step of each variant, in interleaved rounds (the medians). Every variant takes
    the shuffle-BN statistics by the formula but ``*_native_ms`` (the native kernel, block
    groups: what a captured step on CUDA uses when it is not compiled)."""
    key_shuffle = captured.key_shuffle
    planned = key_shuffle.planned

    def eager() -> None:
        key_shuffle.plan(None)  # the eager step draws its own permutation
        eager_step(module, captured, *batches[0])
        key_shuffle.plan(planned)

    def step(fn: Any) -> Any:
        def one() -> None:
            captured.prepare(*batches[0])
            fn()
            captured.finish()
        return one

    variants = {"eager_ms": (eager, "formula"), "graph_safe_ms": (step(plain), "formula"),
                "graph_safe_native_ms": (step(plain), "native"),
                "compiled_ms": (step(compiled), "formula")}
    if device.type == "cuda":
        for name, fn, kernel in (("captured_ms", plain, "formula"),
                                 ("captured_native_ms", plain, "native"),
                                 ("compiled_captured_ms", compiled, "formula")):
            key_shuffle.use_kernel(kernel)
            variants[name] = (step(_graphed(captured, fn, batches[0])), kernel)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(opts.rounds):
        for name, (fn, kernel) in variants.items():
            key_shuffle.use_kernel(kernel)
            _sync(device)
            begin = time.perf_counter()
            for _ in range(opts.block):
                fn()
            _sync(device)
            times[name].append(1e3 * (time.perf_counter() - begin) / opts.block)
    out: dict[str, Any] = {k: statistics.median(v) for k, v in times.items()}
    out["rounds"] = {k: [round(t, 3) for t in v] for k, v in times.items()}
    best = min((out[k] for k in ("captured_ms", "captured_native_ms", "compiled_captured_ms")
                if k in out), default=None)
    if best is not None:
        out["estimated_200_epochs_s"] = best * STEPS_PER_EPOCH * 200 / 1e3
    return out


def _graphed(captured: Any, fn: Any, batch: tuple[torch.Tensor, torch.Tensor]) -> Any:
    """``fn`` run 3 times on a side stream, then captured into a CUDA graph; returns a function
    that replays it (the replay under ``set_sync_debug_mode("error")`` once)."""
    for _ in range(3):
        captured.prepare(*batch)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        captured.finish()
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(captured.module.augmentation_rng.generator)
    with torch.cuda.graph(graph):
        outputs = fn()

    def replay() -> dict[str, torch.Tensor]:
        graph.replay()
        return outputs

    captured.prepare(*batch)
    torch.cuda.set_sync_debug_mode("error")
    replay()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode(0)
    captured.finish()
    return replay


def markdown(result: dict[str, Any]) -> str:
    rows = ["| figure | value |", "|---|---:|"]
    for key in ("device", "torch", "backend", "precision", "compiled_scope", "batch", "graphs",
                "graph_breaks", "host_syncs", "graph_kernels_per_step", "steps", "max_rel_diff",
                "compile_s", "eager_ms", "graph_safe_ms", "graph_safe_native_ms", "compiled_ms",
                "captured_ms", "captured_native_ms", "compiled_captured_ms",
                "estimated_200_epochs_s"):
        if key in result:
            value = result[key]
            rows.append(f"| {key} | {value:.4g} |" if isinstance(value, float)
                        else f"| {key} | {value} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--steps", type=int, default=5, help="steps compared (N)")
    parser.add_argument("--warmup", type=int, default=2, help="real steps before")
    parser.add_argument("--backend", choices=("inductor", "aot_eager"), default="inductor")
    parser.add_argument("--precision", default=None,
                        help="trainer precision (default: 32-true on the CPU, bf16-mixed on "
                             "CUDA, the table6 setting)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--block", type=int, default=3, help="steps per timed block")
    parser.add_argument("--json", help="also write the result here")
    opts = parser.parse_args(argv)
    if opts.precision is None:
        opts.precision = "32-true" if opts.device == "cpu" else "bf16-mixed"
    if opts.device == "cpu":
        torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        cli, _ = build([*cli_args(opts.device, opts.precision), "--output", f"{folder}/run"])
        experiment = Experiment(opts)
        cli.trainer.callbacks.append(experiment)
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    result = experiment.result
    if not result:
        raise RuntimeError("the warm-up steps did not run")
    print(markdown(result))
    summary = {k: result[k] for k in ("graph_breaks", "graphs", "host_syncs", "steps",
                                      "max_rel_diff", "compile_s")}
    summary["trajectory_max_rel_diff"] = max(result["trajectory_rel_diff"].values())
    summary.update({k: result[k] for k in ("eager_ms", "graph_safe_ms", "compiled_ms",
                                           "captured_ms", "compiled_captured_ms",
                                           "estimated_200_epochs_s") if k in result})
    if opts.json:
        Path(opts.json).write_text(json.dumps(result, indent=1))
    print(json.dumps(summary))
    return result


if __name__ == "__main__":
    main()
