"""Forward+backward time and peak memory of the self-supervised losses on CPU.

For every case (loss, K) it reports

* ``time``: median wall time of forward + backward (all inputs require grad);
* ``ratio``: median over repeats of time / time of the bare matrix products the loss cannot
  avoid, measured interleaved with the loss (same load): the similarity product
  ``A @ C.T`` and its two gradient products ``G @ C`` and ``G.T @ A``, where A are the
  anchors and C the candidates actually needed (in-batch: N x N, NT-Xent/DCL: 2N x 2N,
  queue: N x K, the positive being a row-wise dot). ReSSL and SCE also need the target
  product ``key @ C.T`` (forward only), which their reference includes (4 products);
* ``peak MiB``: growth of the process's peak resident set during one forward+backward after a
  warm-up, in a fresh subprocess per case whose inputs are already allocated, with glibc told
  to return every block > 64 KiB to the OS (``MALLOC_MMAP_THRESHOLD_``) (``VmHWM`` of
  ``/proc/self/status`` after resetting it to the current RSS through ``/proc/self/clear_refs``,
  Linux only); the same figure for the bare products is given for comparison. It includes
  the input gradients and any allocator slack.

``best ratio`` is min(loss times) / min(bare times), less sensitive to a shared, busy CPU.

Usage: ``python benchmarks/losses.py [--repeats 7] [--sizes 0,4096,16384,65536] [--threads 2]
[--no-pml] [--only info_nce,sce]``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

import torch

N, D, NUM_HARD = 256, 128, 4096


def build_inputs(k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(N, D, generator=g).requires_grad_()
    key = torch.randn(N, D, generator=g).requires_grad_()
    queue = torch.randn(k, D, generator=g).requires_grad_() if k else None
    return q, key, queue


def loss_fn(name: str, k: int):
    """Return ``(callable(q, key, queue) -> loss, (anchors, candidates, target_products))``."""
    from contrastkit.losses import infonce  # not `sce`: the package re-exports the function
    from contrastkit.losses.dystress import DySTreSSTemperature
    from contrastkit.losses.hard_contrastive import hard_contrastive
    from contrastkit.losses.sce import ressl, sce

    cands = k if k else N
    if name == "info_nce":
        return lambda q, kk, n: infonce.info_nce(q, kk, n), (N, cands, 0)
    if name == "info_nce+DySTreSS":
        t = DySTreSSTemperature()
        return lambda q, kk, n: infonce.info_nce(q, kk, n, temperature=t), (N, cands, 0)
    if name == "hard_contrastive":
        return (lambda q, kk, n: hard_contrastive(q, kk, n, num_hard=NUM_HARD)), (
            N,
            cands,
            0,
        )
    if name == "nt_xent":
        return lambda q, kk, n: infonce.nt_xent(q, kk), (2 * N, 2 * N, 0)
    if name == "dcl":
        return lambda q, kk, n: infonce.dcl(q, kk), (2 * N, 2 * N, 0)
    if name == "ressl":
        return lambda q, kk, n: ressl(q, kk, n), (N, cands, 1)
    if name == "sce":
        return lambda q, kk, n: sce(q, kk, n), (N, cands, 1)
    if name.startswith("pml."):
        return _pml_loss(name.removeprefix("pml."), k)
    raise ValueError(f"unknown loss {name!r}")


def _pml_loss(cls_name: str, k: int):
    """pytorch-metric-learning with index labels: the same InfoNCE/NT-Xent problem."""
    from pytorch_metric_learning import losses

    loss = getattr(losses, cls_name)(temperature=0.1)
    idx = torch.arange(N)
    if k == 0:  # SimCLR: 2N views, label = sample index
        labels = torch.cat([idx, idx])
        return (lambda q, kk, n: loss(torch.cat([q, kk]), labels)), (2 * N, 2 * N, 0)
    ref_labels = torch.cat([idx, torch.arange(N, N + k)])  # MoCo: key i positive, queue negative
    return (lambda q, kk, n: loss(q, idx, ref_emb=torch.cat([kk, n]), ref_labels=ref_labels)), (
        N,
        N + k,
        0,
    )


def bare_products(a: torch.Tensor, c: torch.Tensor, target: torch.Tensor | None) -> None:
    with torch.no_grad():
        s = a @ c.T
        if target is not None:
            target @ c.T
        s @ c
        s.T @ a


def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1])


def reset_peak_rss_kib() -> int:
    """Reset the peak resident set (VmHWM) to the current one (Linux >= 4.0); return it."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status_kib("VmRSS")


def run_case(name: str, k: int, repeats: int, mode: str, threads: int) -> dict:
    torch.set_num_threads(threads)
    fn, (n_anchor, n_cand, n_target) = loss_fn(name, k)
    q, key, queue = build_inputs(k)
    g = torch.Generator().manual_seed(1)
    a, c = torch.randn(n_anchor, D, generator=g), torch.randn(n_cand, D, generator=g)
    t = torch.randn(n_anchor, D, generator=g) if n_target else None

    def loss_step() -> None:
        fn(q, key, queue).backward()

    def ref_step() -> None:
        bare_products(a, c, t)

    if mode in ("memory", "ref-memory"):
        step = ref_step if mode == "ref-memory" else loss_step
        step()  # warm-up: one-time allocations (thread pools, autograd engine)
        for tensor in (q, key, queue):
            if tensor is not None:
                tensor.grad = None
        gc.collect()
        before = reset_peak_rss_kib()
        step()
        return {"peak_mib": (status_kib("VmHWM") - before) / 1024}

    loss_step(), ref_step()  # warm-up
    times, refs, ratios = [], [], []
    for _ in range(repeats):
        for tensor in (q, key, queue):
            if tensor is not None:
                tensor.grad = None
        t0 = time.perf_counter()
        ref_step()
        t1 = time.perf_counter()
        loss_step()
        t2 = time.perf_counter()
        times.append(t2 - t1)
        refs.append(t1 - t0)
        ratios.append((t2 - t1) / (t1 - t0))
    return {
        "time_ms": 1e3 * statistics.median(times),
        "ref_ms": 1e3 * statistics.median(refs),
        "ratio": statistics.median(ratios),
        "best_ratio": min(times) / min(refs),
    }


def in_subprocess(name: str, k: int, repeats: int, mode: str, threads: int) -> dict:
    cmd = [sys.executable, __file__, "--case", name, str(k), str(repeats), mode, str(threads)]
    env = dict(os.environ)
    if mode != "time":  # memory: glibc returns every block > 64 KiB to the OS when freed
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def cases(sizes: list[int], pml: bool) -> list[tuple[str, int]]:
    out = []
    for k in sizes:
        names = ["info_nce", "info_nce+DySTreSS", "hard_contrastive", "ressl", "sce"]
        if k == 0:
            names += ["nt_xent", "dcl"]
        if pml:  # PML's NTXentLoss needs ~4.6 GiB at K=4096 and grows ~linearly in K
            names += ["pml.NTXentLoss", "pml.SupConLoss"] if k <= 4096 else ["pml.SupConLoss"]
        out += [(name, k) for name in names]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--sizes", default="0,4096,16384,65536")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-pml", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated loss names to run")
    parser.add_argument("--case", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        name, k, repeats, mode, threads = args.case
        print(json.dumps(run_case(name, int(k), int(repeats), mode, int(threads))))
        return

    sizes = [int(s) for s in args.sizes.split(",")]
    only = set(filter(None, args.only.split(",")))
    print(f"N={N}, D={D}, num_hard={NUM_HARD}, torch {torch.__version__}, {args.threads} threads")
    print("| loss | K | time ms | bare ms | ratio | best ratio | peak MiB | bare peak MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ref_memory: dict[tuple[int, int, int], float] = {}
    for name, k in cases(sizes, not args.no_pml):
        if only and name not in only:
            continue
        repeats = max(3, args.repeats // 2) if name.startswith("pml.") and k else args.repeats
        try:
            res = in_subprocess(name, k, repeats, "time", args.threads)
            res.update(in_subprocess(name, k, 0, "memory", 1))
        except subprocess.CalledProcessError as err:
            print(f"| {name} | {k} | failed: {err.stderr.strip().splitlines()[-1]} ||||||")
            continue
        _, shape = loss_fn(name, k)
        if shape not in ref_memory:
            ref_memory[shape] = in_subprocess(name, k, 0, "ref-memory", 1)["peak_mib"]
        print(
            f"| {name} | {k} | {res['time_ms']:.1f} | {res['ref_ms']:.1f} | {res['ratio']:.2f} "
            f"| {res['best_ratio']:.2f} | {res['peak_mib']:.1f} | {ref_memory[shape]:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
