"""Backend operators and estimated CUDA kernel launches of one training step, per phase.

A CPU proxy for the host cost of a GPU step: every operator a step dispatches costs host time
(about 5-8 us each on a GPU host) and most launch one kernel or more. This records, with a
``TorchDispatchMode``, one step of the real ``contrastkit pretrain`` loop (Lightning, views,
method, loss, backward, optimiser, EMA and queue, logging) of a config, by default
``configs/repro/gpu/table6_sce.yaml`` with its eager step, on the CPU with bf16 autocast, its
queue full (the steady state), SGD in its foreach form (what torch picks on a GPU), the first
steps excluded (constants are built and cached there), channels_last on (the CUDA default).
The dataset is swapped for the bundled digits (the operator count does not depend on the
pixels), the batch is small and the ResNet-18 narrowed to width 8 (nor on the sizes; a
full-width bf16 step takes minutes on a 2-core CPU).

Phases (innermost wins): ``augmentation`` (the views), ``forward`` (the method without its
loss, and the engine's own step work), ``loss``, ``backward``, ``optimizer`` (``zero_grad``
and ``step``), ``ema_queue`` (after the optimiser step), ``logging`` (``self.log`` calls),
``lightning`` (the rest of the batch).

Estimated launches: views, metadata and allocation operators 0; convolution backward one per
gradient it computes; a ``_foreach_*`` call over tensors of one dtype one per chunk of
:data:`FOREACH_TENSORS_PER_LAUNCH` tensors (torch's multi-tensor apply), one per tensor when
the dtypes are mixed, except ``_foreach_copy_`` from one dtype into another (each list of one
dtype, the pairs of the same sizes and strides: torch's CUDA ``foreach_tensor_copy_list_kernel``
converts in its multi-tensor kernel, ``aten/src/ATen/native/cuda/ForeachBinaryOpList.cu``);
everything else 1. The count is an estimate (cuDNN may run a convolution
as two kernels, a copy may be fused away), the same for every version measured.

Run: ``PYTHONPATH=src python benchmarks/launch_count.py [--json out.json] [-- pretrain args]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import lightning as L
import torch
from torch.utils._python_dispatch import TorchDispatchMode

PHASES = ("augmentation", "forward", "loss", "backward", "optimizer", "ema_queue", "logging",
          "lightning")

#: Operators that launch nothing: views, metadata, allocations.
NO_LAUNCH = {
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze",
    "squeeze", "as_strided", "alias", "detach", "slice", "select", "split", "split_with_sizes",
    "unbind", "chunk", "narrow", "unflatten", "flatten", "diagonal", "empty", "empty_like",
    "empty_strided", "new_empty", "new_empty_strided", "view_as", "lift_fresh", "_reshape_alias",
    "set_", "resize_", "_local_scalar_dense", "is_same_size", "_has_compatible_shallow_copy_type",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_nonzero", "record_stream",
    "_record_function_enter_new", "_record_function_exit",
    # metadata only: a dtype computed on the host, a view's strides set in place
    "promote_types", "as_strided_",
}
#: Tensors per multi-tensor-apply launch, by the number of tensor lists (torch's CUDA limits).
FOREACH_TENSORS_PER_LAUNCH = {1: 110, 2: 64, 3: 48, 4: 36, 5: 30}


def estimated_launches(func: Any, args: tuple, kwargs: dict) -> int:
    """Estimated CUDA kernel launches of one dispatched operator (module docstring)."""
    name = func.overloadpacket.__name__
    if name in NO_LAUNCH:
        return 0
    if name in ("_to_copy", "to", "clone", "contiguous") and args and isinstance(
            args[0], torch.Tensor) and args[0].numel() == 0:
        return 0
    if name == "convolution_backward":
        mask = args[-1] if args and isinstance(args[-1], (list, tuple)) else (True, True, True)
        return max(1, sum(bool(m) for m in mask))
    if name.startswith("_foreach_"):
        lists = [a for a in args if isinstance(a, (list, tuple)) and a
                 and isinstance(a[0], torch.Tensor)]
        if not lists:
            return 1
        tensors = lists[0]
        if name == "_foreach_copy_" and _converting_copy(*lists):
            return -(-len(tensors) // FOREACH_TENSORS_PER_LAUNCH[2])
        if len({(t.dtype, t.device) for lst in lists for t in lst}) > 1:
            return len(tensors)  # mixed dtypes: one kernel per tensor
        cap = FOREACH_TENSORS_PER_LAUNCH.get(len(lists), 30)
        return -(-len(tensors) // cap)
    return 1


def _converting_copy(dst: list[torch.Tensor], src: list[torch.Tensor]) -> bool:
    """Whether CUDA's ``_foreach_copy_`` takes its multi-tensor path for these lists: one device,
    one dtype per list, the pairs of the same sizes and strides."""
    return (len({t.device for t in (*dst, *src)}) == 1 and len({t.dtype for t in dst}) == 1
            and len({t.dtype for t in src}) == 1
            and all(d.shape == c.shape and d.stride() == c.stride()
                    for d, c in zip(dst, src, strict=True)))


class PhaseCounter(TorchDispatchMode):
    """Counts operators and estimated launches per phase while active."""

    def __init__(self, phase: Callable[[], str]) -> None:
        super().__init__()
        self.phase = phase
        self.ops: Counter[str] = Counter()
        self.launches: Counter[str] = Counter()
        self.names: dict[str, Counter[str]] = defaultdict(Counter)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        phase = self.phase()
        self.ops[phase] += 1
        self.launches[phase] += estimated_launches(func, args, kwargs)
        self.names[phase][func.overloadpacket.__name__] += 1
        return func(*args, **kwargs)


class Phases:
    """A stack of phase names; wrapped callables push theirs while they run."""

    def __init__(self) -> None:
        self.stack = ["lightning"]

    def current(self) -> str:
        return self.stack[-1]

    @contextmanager
    def entered(self, name: str) -> Iterator[None]:
        self.stack.append(name)
        try:
            yield
        finally:
            self.stack.pop()

    def wrap(self, owner: Any, attribute: str, name: str) -> None:
        """Replace ``owner.attribute`` (a callable) by one that runs in phase ``name``."""
        original = getattr(owner, attribute)

        @functools.wraps(original)
        def wrapped(*args, **kwargs):
            with self.entered(name):
                return original(*args, **kwargs)

        setattr(owner, attribute, wrapped)


class RecordOneStep(L.Callback):
    """Counts the operators of training batch ``index`` (0-based) under ``mode``."""

    def __init__(self, mode: PhaseCounter, index: int) -> None:
        self.mode, self.index, self.recorded = mode, index, False

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.index:
            self.mode.__enter__()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.index + 1 and not self.recorded:
            self.mode.__exit__(None, None, None)
            self.recorded = True


def instrument(cli: Any, phases: Phases) -> None:
    """Wrap the loop's parts in their phases; fill the queue; SGD in its foreach form."""
    module, method = cli.model, cli.model.method
    phases.wrap(module, "training_step", "forward")
    phases.wrap(module.train_views, "forward", "augmentation")
    phases.wrap(method, "pair_loss", "loss")
    phases.wrap(module, "backward", "backward")
    phases.wrap(method, "after_optimizer_step", "ema_queue")
    phases.wrap(module, "log", "logging")
    queue = getattr(method, "queue", None)
    if queue is not None:  # the steady state: a full queue of negatives
        queue.stage(torch.randn(queue.size, queue.keys.shape[1]))
        queue.commit()
    configure = module.configure_optimizers

    def foreach_optimizers():
        config = configure()
        optimizer = config["optimizer"] if isinstance(config, dict) else config
        for group in optimizer.param_groups:
            if "foreach" in group:
                group["foreach"] = True
        phases.wrap(optimizer, "step", "optimizer")
        phases.wrap(optimizer, "zero_grad", "optimizer")
        return config

    module.configure_optimizers = foreach_optimizers


#: The table6 recipe on the CPU: digits instead of the CIFAR archive, a small batch.
DEFAULT_ARGS = [
    "--config", "configs/repro/gpu/table6_sce.yaml",
    "--data.dataset", "digits", "--data.root", "null", "--data.cache_dir", "null",
    "--data.batch_size", "16", "--data.num_workers", "0", "--data.subset", "64",
    "--model.views.size", "32", "--model.views.normalize", "cifar10",
    "--model.method.backbone", '{"name": "resnet18", "cifar_stem": true, "width": 8}',
    "--model.performance.channels_last", "true",  # what a CUDA run picks by default
    # the eager step, whose launches each cost host time (the config's captured step replays
    # them as one CUDA graph: benchmarks/step_graph.py measures that one)
    "--model.performance.step", "eager", "--data.on_device", "false",
    "--trainer.accelerator", "cpu", "--trainer.precision", "bf16-mixed",
    "--trainer.max_epochs", "1", "--trainer.benchmark", "false",
    "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1000",
]


def count_step(args: list[str], step: int = 2) -> dict[str, Any]:
    """Operators and estimated launches per phase of training step ``step`` (0-based)."""
    from contrastkit.cli.pretrain import build

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        cli, _ = build([*args, "--trainer.max_steps", str(step + 1), "--output", f"{folder}/run"])
        phases = Phases()
        mode = PhaseCounter(phases.current)
        instrument(cli, phases)
        recorder = RecordOneStep(mode, step)
        cli.trainer.callbacks.append(recorder)
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    if not recorder.recorded:
        raise RuntimeError(f"step {step} was not reached (too few batches)")
    return {
        "ops": {p: mode.ops[p] for p in PHASES},
        "launches": {p: mode.launches[p] for p in PHASES},
        "total_ops": sum(mode.ops.values()),
        "total_launches": sum(mode.launches.values()),
        "names": {p: dict(mode.names[p].most_common()) for p in PHASES if mode.names[p]},
    }


def markdown(result: dict[str, Any]) -> str:
    rows = ["| phase | operators | est. launches |", "|---|---:|---:|"]
    rows += [f"| {p} | {result['ops'][p]:,} | {result['launches'][p]:,} |" for p in PHASES]
    rows.append(f"| **total** | **{result['total_ops']:,}** | **{result['total_launches']:,}** |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--top", action="store_true", help="print the commonest operators")
    opts = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    result = count_step([*DEFAULT_ARGS, *extra])
    print(markdown(result))
    if opts.top:
        for phase, names in result["names"].items():
            print(phase, list(names.items())[:12])
    if opts.json:
        with open(opts.json, "w") as handle:
            json.dump(result, handle, indent=1)
    return result


if __name__ == "__main__":
    main()
