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

.PHONY: demo demo-losses test test-slow test-all test-timm lint bench bench-gpu repro-cpu repro-gpu repro-report clean-venv

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

# two pytest workers: on 2 cores about 1.4 times faster than one (CONTRIBUTING.md). `make test`
# leaves out the end-to-end checks marked slow (many processes, whole commands, kill and resume);
# `make test-slow` runs those alone, `make test-all` everything.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 -m "not slow"

test-slow: $(STAMP)
	$(PY) -m pytest -q -n 2 -m slow

test-all: $(STAMP)
	$(PY) -m pytest -q -n 2

# The timm lane (docs/integrations.md): timm needs torchvision, which does not import beside the
# CPU torch of .venv, so a second venv holds the pair torch 2.14.1 + torchvision 0.29.1 (a CUDA
# build that also runs on CPUs; about 5.5 GB) with timm; it runs the tests under tests/timm_lane/
# (skipped in .venv), among them the losses' reference tests against lightly 1.6, which needs
# torchvision too. Not part of `make test`: the install is too large for CI.
TIMM_VENV := .venv-timm
TIMM_PY := $(TIMM_VENV)/bin/python
TIMM_STAMP := $(TIMM_VENV)/.contrastkit-installed
TIMM_TORCH ?= torch==2.14.1 torchvision==0.29.1

$(TIMM_STAMP): pyproject.toml Makefile
	@test -x $(TIMM_PY) || $(PYTHON) -m venv $(TIMM_VENV)
	$(TIMM_PY) -m pip install -q --upgrade pip
	$(TIMM_PY) -m pip install -q $(TIMM_TORCH)
	$(TIMM_PY) -m pip install -q -e ".[data,train,eval,imagenet,test,timm]" "lightly==1.6.*"
	@touch $(TIMM_STAMP)

test-timm: $(TIMM_STAMP)
	$(TIMM_PY) -m pytest -q -n 2 tests/timm_lane

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples studies

bench: $(STAMP)
	$(PY) benchmarks/losses.py

# The CPU-scale reproduction study (docs/reproduction.md): two lanes of one thread sharing one
# study list (each takes the next run the other does not hold; issue 54's round first, the tuned
# runs once their grid has chosen); that round plans about 17 CPU-hours. Resumable: rerun after
# any stop. Finished runs are recorded in docs/reproduction/runs: commit them to go on elsewhere.
REPRO_STUDIES = sincere_grid ressl_grid sincere cifar2 baselines temperature sce_lambda_tau dystress baselines_cpu
repro-cpu: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m studies.repro cpu --study $(REPRO_STUDIES) & lane=$$!; \
	OMP_NUM_THREADS=1 $(PY) -m studies.repro cpu --study $(REPRO_STUDIES); \
	second=$$?; wait $$lane && test $$second -eq 0
	$(PY) -m studies.repro report

# Part B, one paper run per block of GPU time (docs/reproduction.md, Part B): the next block's
# estimate and its device call (the run tool's command, carry and timeout), from this machine.
# ARGS: --json (the call only), --force, or --record FOLDER (a finished block's files).
repro-gpu: $(STAMP)
	$(PY) -m studies.repro gpu $(ARGS)

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
