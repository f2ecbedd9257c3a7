"""Epoch time of the digits demo (``configs/demo/digits_sce.yaml``) on the idle machine and beside
busy-loop processes, for several ``--threads`` settings, in one run (settings and loads
alternated).

Each measurement is a child ``contrastkit pretrain`` of ``--epochs`` epochs; its per-epoch lines
give the epoch times (the first epoch, which warms up, is left out). ``--baseline-src`` names
the ``src`` folder of an earlier commit (without ``--threads``: torch's default threads and
OpenMP waiting policy) to run beside them. ``--wait-policies`` repeats every setting with the
child's ``OMP_WAIT_POLICY`` set (``default``: left unset, so ``--threads`` chooses PASSIVE and the
baseline OpenMP's own); ``--busy 0`` measures the idle machine only. The load average is printed
before and after: on a shared machine other users' processes add to the busy loops.

    git archive a509260 src | tar -x -C /tmp/old
    PYTHONPATH=src .venv/bin/python benchmarks/threads_under_load.py --baseline-src /tmp/old/src \
        --epochs 3 --threads 2 1
    PYTHONPATH=src .venv/bin/python benchmarks/threads_under_load.py --baseline-src /tmp/old/src \
        --epochs 4 --threads auto --busy 0 --repeats 3 --wait-policies default ACTIVE PASSIVE
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "demo" / "digits_sce.yaml"
SRC = Path(__file__).resolve().parents[1] / "src"
_EPOCH = re.compile(r"^epoch \d+/\d+ \(step \d+, ([\d.]+) s[,)]", re.M)


def epoch_seconds(src: Path, threads: list[str], epochs: int,
                  policy: str = "default") -> list[float]:
    """Epoch times of one child run (without its first epoch); ``policy`` other than
    ``default`` is the child's ``OMP_WAIT_POLICY``."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    if policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    with tempfile.TemporaryDirectory() as folder:
        run = subprocess.run(
            [sys.executable, "-m", "contrastkit.cli", "pretrain", *threads, "--config",
             str(CONFIG), "--trainer.max_epochs", str(epochs), "--trainer.enable_progress_bar",
             "false", "--output", f"{folder}/run"],
            capture_output=True, text=True, check=True, env={**env, "PYTHONPATH": str(src)})
    return [float(t) for t in _EPOCH.findall(run.stdout)][1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--busy", type=int, default=2, help="busy-loop processes of the load")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--baseline-src", type=Path, default=None)
    parser.add_argument("--threads", nargs="+", default=["2", "1", "auto"],
                        help="--threads values to compare")
    parser.add_argument("--wait-policies", nargs="+", default=["default"],
                        help="OMP_WAIT_POLICY of the children (default: unset)")
    args = parser.parse_args()
    settings = {f"--threads {n}": (SRC, ["--threads", n]) for n in args.threads}
    if args.baseline_src is not None:
        settings = {"baseline (no --threads)": (args.baseline_src, []), **settings}
    settings = {(label if policy == "default" else f"{label}, OMP_WAIT_POLICY={policy}"):
                (src, threads, policy)
                for label, (src, threads) in settings.items() for policy in args.wait_policies}
    loads = ("idle", f"{args.busy} busy loops") if args.busy else ("idle",)
    print(f"load average before: {os.getloadavg()}", flush=True)
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeats):
        for load in loads:
            loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                     for _ in range(args.busy if load != "idle" else 0)]
            try:
                for label, (src, threads, policy) in settings.items():
                    found = epoch_seconds(src, threads, args.epochs, policy)
                    times.setdefault((label, load), []).extend(found)
                    print(f"  {label}, {load}: {found}", flush=True)
            finally:
                for loop in loops:
                    loop.kill()
                    loop.wait()
    print(f"load average after: {os.getloadavg()}")
    for label in settings:
        idle, *busy = (statistics.median(times[(label, load)]) for load in loads)
        print(f"{label}: idle {idle:.2f} s/epoch" + "".join(
            f", beside {loads[1]} {b:.2f} s/epoch ({b / idle:.1f}x)" for b in busy))


if __name__ == "__main__":
    main()
