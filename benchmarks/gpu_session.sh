#!/usr/bin/env bash
# The one prepared command of a GPU session for issue 34 (the captured step): every figure
# into $OUT, in one call of at most 10 minutes, each part under its own timeout so that what
# finished comes back when a later part runs out of time.
#
#   source .carry/env.sh && bash benchmarks/gpu_session.sh            # run tool: timeout_s 600
#
# 1. `make bench-gpu` (about 6 min): the CUDA-only tests (tests/train/test_captured_step_cuda.py
#    among them), then the table6 SCE loop for 2 epochs eager, captured, captured with the
#    split on the device, and captured with its forward compiled: bench_gpu.json, bench_gpu.md.
# 2. benchmarks/step_graph.py --device cuda (about 3 min): the step compiled with
#    fullgraph=True (graphs, breaks, host syncs under set_sync_debug_mode("error"), the
#    difference to the plain step), ms per step eager / graph-safe / captured / compiled and
#    captured, the 200-epoch estimate: step_graph.json.
# Reads nothing from the network; writes only under $OUT (4 files).
set -u
OUT=${OUT:-gpu-session}
mkdir -p "$OUT"
log="$OUT/session.log"
{
  date -u '+%Y-%m-%d %H:%M UTC'
  git rev-parse HEAD 2>/dev/null || true
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  python3 -c 'import torch, lightning; print("torch", torch.__version__, "lightning", lightning.__version__)'
} > "$log" 2>&1
start=$SECONDS
timeout 400 make bench-gpu BENCH_OUT="$OUT" BENCH_PY=python3 >> "$log" 2>&1
echo "bench-gpu: exit $? after $((SECONDS - start)) s" >> "$log"
left=$((570 - (SECONDS - start)))
if [ "$left" -gt 60 ]; then
  timeout "$left" python3 benchmarks/step_graph.py --device cuda \
    --json "$OUT/step_graph.json" >> "$log" 2>&1
  echo "step_graph: exit $? after $((SECONDS - start)) s" >> "$log"
else
  echo "step_graph: not run ($left s left)" >> "$log"
fi
tail -c 60000 "$log" > "$log.tail" && mv "$log.tail" "$log"
cat "$OUT/bench_gpu.md" 2>/dev/null
grep -E '^\| |^\{' "$log" | tail -30
