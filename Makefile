# Two entry points: `make demo` (the main job) and `make test` (the whole suite).
# Both create or reuse .venv and install what they need, torch first: TORCH_PIN from
# TORCH_INDEX when it is set. The defaults suit these machines, whose package index serves the
# CPU build for the exact pin; elsewhere an unpinned torch from PyPI is a CUDA build of about
# 3 GB, so take the CPU one from PyTorch's index:
#   make test TORCH_PIN=torch TORCH_INDEX=https://download.pytorch.org/whl/cpu
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.contrastkit-installed
TORCH_PIN ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: demo demo-losses test lint bench bench-gpu repro-cpu repro-gpu repro-report clean-venv

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || \
		$(PY) -m pip install -q "$(TORCH_PIN)" $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)")
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

# make demo [DATA=cifar10 [ROOT=/path/to/copy]] [ARGS="--trainer.max_epochs 5 ..."]
DATA ?= digits
ROOT ?=
ARGS ?=
demo: $(STAMP)
	$(PY) -m examples.demos.pretrain --data $(DATA) $(if $(ROOT),--root "$(ROOT)") \
		--trainer.enable_progress_bar false $(ARGS)

demo-losses: $(STAMP)
	$(PY) -m examples.demos.losses

# two pytest workers: on 2 cores about 1.4 times faster than one (CONTRIBUTING.md)
test: $(STAMP)
	$(PY) -m pytest -q -n 2

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples studies

bench: $(STAMP)
	$(PY) benchmarks/losses.py

# The CPU-scale reproduction study (docs/reproduction.md): 30 runs in two lanes of one thread
# each, about 15 CPU-hours planned (7-8 hours of two idle cores); resumable: rerun after any
# stop. Finished runs are recorded in docs/reproduction/runs: commit them to go on elsewhere.
repro-cpu: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m studies.repro cpu --study dystress temperature & lane=$$!; \
	OMP_NUM_THREADS=1 $(PY) -m studies.repro cpu --study baselines sincere sce_lambda_tau; \
	second=$$?; wait $$lane && test $$second -eq 0
	$(PY) -m studies.repro report

# Part B on a GPU machine: one pretraining chunk (at most --chunk-time) or evaluation per call,
# resumable; repeat until every run is done (docs/reproduction.md). ARGS: more options. Like
# bench-gpu it runs without .venv (BENCH_PY, the checkout's src on PYTHONPATH).
repro-gpu:
	PYTHONPATH=$${PYTHONPATH:+$$PYTHONPATH:}$(CURDIR)/src $(BENCH_PY) -m studies.repro gpu \
		--max-steps 1 $(ARGS)

repro-report: $(STAMP)
	$(PY) -m studies.repro report

clean-venv:
	rm -rf $(VENV)

# make bench-gpu [BENCH_OUT=folder] [BENCH_ARGS=--eager-only]: the CUDA-only tests, then every
# figure of the GPU-speed goal, the eager loop beside the captured one, into
# BENCH_OUT/bench_gpu.json and bench_gpu.md (benchmarks/bench_gpu.py; < 10 min on one GPU).
# On the GPU machine, which has no .venv: `source .carry/env.sh && make bench-gpu`
# (../shared/gpu/README.md), or the whole session: `bash benchmarks/gpu_session.sh`.
# On a CPU it runs at a small size and says so.
BENCH_OUT ?= bench-gpu
BENCH_ARGS ?=
BENCH_PY ?= $(if $(wildcard $(PY)),$(PY),python3)
bench-gpu:
	PYTHONPATH=$${PYTHONPATH:+$$PYTHONPATH:}$(CURDIR)/src $(BENCH_PY) benchmarks/bench_gpu.py --out $(BENCH_OUT) $(BENCH_ARGS)
