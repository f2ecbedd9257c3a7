"""Cost per epoch of the end-of-epoch checkpoints: the old three full writes (``latest.ckpt``,
``last.ckpt``, ``best.ckpt`` when the monitor improved; each fsync'ed) against the new one full
write of ``last.ckpt`` plus a hard link for ``best.ckpt``. Both sides run through
:class:`contrastkit.train.callbacks.AtomicCheckpointIO` (weights digest included), alternated
in one process.

    PYTHONPATH=src OMP_NUM_THREADS=1 .venv/bin/python benchmarks/checkpoint_writes.py \
        --model resnet18 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from contrastkit.models.factory import BackboneSpec, build_backbone
from contrastkit.train.callbacks import AtomicCheckpointIO


def checkpoint_of(model: str) -> dict:
    """A checkpoint the size of a run's: weights plus two Adam-style moments of each."""
    state = build_backbone(BackboneSpec(name=model)).state_dict()
    moments = {f"{k}.{m}": v.clone().float() for k, v in state.items()
               if v.is_floating_point() for m in ("exp_avg", "exp_avg_sq")}
    return {"state_dict": state, "optimizer_states": [moments], "global_step": 1,
            "contrastkit": {"method": "SCE"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    checkpoint = checkpoint_of(args.model)
    size = sum(t.numel() * t.element_size() for t in checkpoint["state_dict"].values()) + sum(
        t.numel() * t.element_size() for t in checkpoint["optimizer_states"][0].values())
    io = AtomicCheckpointIO()
    times: dict[str, list[float]] = {"three full writes": [], "one write + link": []}
    with tempfile.TemporaryDirectory(dir=".") as folder:
        root = Path(folder)

        def old() -> None:
            for name in ("latest", "last", "best"):
                io.save_checkpoint(checkpoint, root / f"{name}.ckpt")

        def new() -> None:
            io.save_checkpoint(checkpoint, root / "last.ckpt")
            io.link(root / "last.ckpt", root / "best.ckpt")

        for _ in range(args.repeats):
            for label, fn in (("three full writes", old), ("one write + link", new)):
                begin = time.perf_counter()
                fn()
                times[label].append(time.perf_counter() - begin)
    print(f"{args.model}: checkpoint {size / 2**20:.0f} MiB, median of {args.repeats} epochs")
    for label, samples in times.items():
        print(f"  {label}: {statistics.median(samples):.3f} s per epoch "
              f"({', '.join(f'{s:.3f}' for s in samples)})")


if __name__ == "__main__":
    main()
