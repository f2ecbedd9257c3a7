"""Speed of contrastkit.eval: weighted kNN (faiss and torch) and the cached-feature linear probe.

Usage: ``.venv/bin/python benchmarks/eval.py`` (defaults: bank 50,000 x 512, 10,000 queries,
k = 200, 10 classes; probe on 50,000 x 512, batch 256). Prints one line per measurement.
Random Gaussian features: the search cost does not depend on the data.
"""

from __future__ import annotations

import argparse
import time

import torch

from contrastkit.eval import LinearProtocol, knn_predict, linear_probe


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bank", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--k", type=int, default=200)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--probe-epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=None, help="torch/faiss threads")
    parser.add_argument("--repeats", type=int, default=2, help="kNN runs per backend (best)")
    return parser.parse_args()


def _set_threads(threads: int | None) -> int:
    if threads is not None:
        torch.set_num_threads(threads)
        try:
            import faiss

            faiss.omp_set_num_threads(threads)
        except ImportError:
            pass
    return torch.get_num_threads()


def bench_knn(args: argparse.Namespace, bank: torch.Tensor, labels: torch.Tensor,
              queries: torch.Tensor) -> dict[str, torch.Tensor]:
    preds = {}
    for backend in ("faiss", "torch"):
        try:
            best = float("inf")
            for _ in range(args.repeats):
                start = time.perf_counter()
                pred, _ = knn_predict(bank, labels, queries, k=args.k, backend=backend)
                best = min(best, time.perf_counter() - start)
        except ImportError as exc:
            print(f"knn backend={backend}: skipped ({exc})")
            continue
        preds[backend] = pred
        print(f"knn backend={backend} bank={args.bank}x{args.dim} queries={args.queries} "
              f"k={args.k}: {best:.2f} s, {args.queries / best:,.0f} queries/s")
    if len(preds) == 2:
        agree = float((preds["faiss"] == preds["torch"]).double().mean())
        print(f"knn faiss/torch prediction agreement: {agree:.6f}")
    return preds


def bench_probe(args: argparse.Namespace, bank: torch.Tensor, labels: torch.Tensor) -> None:
    test, test_labels = bank[:1000], labels[:1000]
    warm_up = LinearProtocol(epochs=1, batch_size=args.batch_size)
    linear_probe(bank, labels, test, test_labels, warm_up)
    start = time.perf_counter()
    linear_probe(bank, labels, test, test_labels,
                 LinearProtocol(epochs=args.probe_epochs, batch_size=args.batch_size))
    seconds = time.perf_counter() - start
    steps = args.probe_epochs * -(-args.bank // args.batch_size)
    print(f"linear_probe {args.bank}x{args.dim}, {args.classes} classes, batch "
          f"{args.batch_size}: {args.probe_epochs / seconds:.2f} epochs/s "
          f"({steps / seconds:,.0f} steps/s)")


def main() -> None:
    args = _parse()
    threads = _set_threads(args.threads)
    print(f"torch {torch.__version__}, {threads} threads")
    g = torch.Generator().manual_seed(0)
    bank = torch.randn(args.bank, args.dim, generator=g)
    labels = torch.randint(0, args.classes, (args.bank,), generator=g)
    queries = torch.randn(args.queries, args.dim, generator=g)
    bench_knn(args, bank, labels, queries)
    bench_probe(args, bank, labels)


if __name__ == "__main__":
    main()
