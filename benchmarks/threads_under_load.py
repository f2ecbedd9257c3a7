"""Epoch time of the digits demo (``configs/demo/digits_sce.yaml``) on the idle machine and beside
a background load, for several ``--threads`` settings, in one run (settings and loads
alternated).

Each measurement is a child pretraining run of ``--epochs`` epochs; its per-epoch lines give the
epoch times (the first epoch, which warms up, is left out). The child runs as
``contrastkit pretrain`` (which is what ``make demo`` runs: both make waiting OpenMP threads
sleep and take ``--threads``). ``--baseline-src`` names the ``src`` folder of an earlier commit
to run beside them; ``--old-demo`` runs that baseline as ``make demo`` did before issue 37
(``pretrain()`` called after torch was imported: OpenMP's own waiting policy, which spins).

The background (``--background``) is ``--jobs`` processes started before each loaded
measurement and killed after it:

* ``training``: other pretraining runs (this commit's ``contrastkit pretrain`` of the same demo
  config, many epochs, ``--threads auto``), the load of other people's training jobs;
* ``spinning-training``: the same with ``OMP_WAIT_POLICY=ACTIVE`` (jobs whose OpenMP threads
  spin, as torch's do by default);
* ``busy``: ``while True: pass`` loops.

The goal of issue 37 item 5: under ``--jobs`` background trainings, the demo's epoch at most
1.5 times its fair share, the idle epoch times (jobs + 1). The load average is printed before
and after: on a shared machine other users' processes add to the background.

    PYTHONPATH=src .venv/bin/python benchmarks/threads_under_load.py --epochs 4 \\
        --background training spinning-training --threads auto 1
    git archive ddfde2f src | tar -x -C /tmp/old
    PYTHONPATH=src .venv/bin/python benchmarks/threads_under_load.py --baseline-src /tmp/old/src \\
        --old-demo --epochs 4 --background training --threads auto
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "demo" / "digits_sce.yaml"
SRC = Path(__file__).resolve().parents[1] / "src"
_EPOCH = re.compile(r"^epoch \d+/\d+ \(step \d+, ([\d.]+) s[,)]", re.M)
#: ``make demo`` before issue 37: ``examples.demos.pretrain`` imported torch, then called
#: ``pretrain`` (no ``--threads``, no waiting policy).
_OLD_DEMO = ("import sys, torch\nfrom contrastkit.cli.pretrain import pretrain\n"
             "pretrain(sys.argv[1:])")


def _env(src: Path, policy: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    if policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    return {**env, "PYTHONPATH": str(src)}


def epoch_seconds(src: Path, threads: list[str], epochs: int, policy: str = "default",
                  old_demo: bool = False) -> list[float]:
    """Epoch times of one child run (without its first epoch); ``policy`` other than
    ``default`` is the child's ``OMP_WAIT_POLICY``."""
    start = [sys.executable, "-c", _OLD_DEMO] if old_demo else \
        [sys.executable, "-m", "contrastkit.cli", "pretrain", *threads]
    with tempfile.TemporaryDirectory() as folder:
        run = subprocess.run(
            [*start, "--config", str(CONFIG), "--trainer.max_epochs", str(epochs),
             "--trainer.enable_progress_bar", "false", "--output", f"{folder}/run"],
            capture_output=True, text=True, check=True, env=_env(src, policy))
    return [float(t) for t in _EPOCH.findall(run.stdout)][1:]


def start_background(kind: str, jobs: int, folder: str) -> list[subprocess.Popen]:
    """``jobs`` background processes of ``kind`` (see the module docstring)."""
    if kind == "busy":
        return [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(jobs)]
    policy = "ACTIVE" if kind == "spinning-training" else "default"
    return [subprocess.Popen(
        [sys.executable, "-m", "contrastkit.cli", "pretrain", "--config", str(CONFIG),
         "--trainer.max_epochs", "10000", "--trainer.enable_progress_bar", "false",
         "--output", f"{folder}/background{i}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(SRC, policy))
        for i in range(jobs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=2, help="background processes")
    parser.add_argument("--background", nargs="+", default=["training"],
                        choices=("training", "spinning-training", "busy"),
                        help="kinds of background load, each measured (beside idle)")
    parser.add_argument("--warm-up", type=float, default=20.0,
                        help="seconds the background runs before a measurement starts")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--baseline-src", type=Path, default=None)
    parser.add_argument("--old-demo", action="store_true",
                        help="run the baseline as make demo did before issue 37")
    parser.add_argument("--threads", nargs="+", default=["auto", "1"],
                        help="--threads values to compare")
    parser.add_argument("--wait-policies", nargs="+", default=["default"],
                        help="OMP_WAIT_POLICY of the children (default: unset)")
    args = parser.parse_args()
    settings = {f"--threads {n}": (SRC, ["--threads", n], False) for n in args.threads}
    if args.baseline_src is not None:
        label = "baseline, as make demo ran it" if args.old_demo else "baseline"
        settings = {label: (args.baseline_src, [], args.old_demo), **settings}
    settings = {(label if policy == "default" else f"{label}, OMP_WAIT_POLICY={policy}"):
                (src, threads, old, policy)
                for label, (src, threads, old) in settings.items()
                for policy in args.wait_policies}
    loads = ("idle", *args.background)
    print(f"load average before: {os.getloadavg()}", flush=True)
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeats):
            for load in loads:
                background = [] if load == "idle" else start_background(load, args.jobs,
                                                                        folder)
                try:
                    if background:
                        time.sleep(args.warm_up)  # past the background runs' start-up
                    for label, (src, threads, old, policy) in settings.items():
                        found = epoch_seconds(src, threads, args.epochs, policy, old)
                        times.setdefault((label, load), []).extend(found)
                        print(f"  {label}, {load}: {found} (load average "
                              f"{os.getloadavg()[0]:.1f})", flush=True)
                finally:
                    for process in background:
                        process.kill()
                        process.wait()
    print(f"load average after: {os.getloadavg()}")
    fair = args.jobs + 1
    for label in settings:
        idle, *loaded = (statistics.median(times[(label, load)]) for load in loads)
        print(f"{label}: idle {idle:.2f} s/epoch" + "".join(
            f", beside {args.jobs} {load} {b:.2f} s/epoch ({b / idle:.1f}x idle, "
            f"{b / (idle * fair):.2f}x the fair share)" for load, b in zip(loads[1:], loaded,
                                                                            strict=True)))


if __name__ == "__main__":
    main()
