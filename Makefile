# Two entry points: `make demo` (the main job) and `make test` (the whole suite).
# Both create or reuse .venv and install what they need. torch is installed first with an
# exact pin because on these machines that pin is the CPU build; an unpinned torch pulls CUDA.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.contrastkit-installed
TORCH_PIN ?= torch==2.13.0

.PHONY: demo demo-losses test lint bench bench-gpu repro-cpu repro-report clean-venv

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

# make demo [DATA=cifar10 [ROOT=/path/to/copy]] [ARGS="--trainer.max_epochs 5 ..."]
DATA ?= digits
ROOT ?=
ARGS ?=
demo: $(STAMP)
	$(PY) -m contrastkit.demos.pretrain --data $(DATA) $(if $(ROOT),--root "$(ROOT)") \
		--trainer.enable_progress_bar false $(ARGS)

demo-losses: $(STAMP)
	$(PY) -m contrastkit.demos.losses

# two pytest workers: on 2 cores the suite takes 6.4 min instead of 8.9 (CONTRIBUTING.md)
test: $(STAMP)
	$(PY) -m pytest -q -n 2

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples

bench: $(STAMP)
	$(PY) benchmarks/losses.py

# The CPU-scale reproduction study (docs/reproduction.md): two lanes of one thread sharing one
# study list (each takes the next run the other does not hold; the temperature reruns first, the
# tuned SINCERE/SupCon runs once their grid has chosen); the second round plans about 19
# CPU-hours. Resumable: rerun after any stop. Finished runs are recorded in
# docs/reproduction/runs: commit them to go on elsewhere.
REPRO_STUDIES = temperature dystress sincere_grid sincere cifar2 baselines sce_lambda_tau
repro-cpu: $(STAMP)
	OMP_NUM_THREADS=1 $(VENV)/bin/contrastkit repro cpu --study $(REPRO_STUDIES) & lane=$$!; \
	OMP_NUM_THREADS=1 $(VENV)/bin/contrastkit repro cpu --study $(REPRO_STUDIES); \
	second=$$?; wait $$lane && test $$second -eq 0
	$(VENV)/bin/contrastkit repro report

repro-report: $(STAMP)
	$(VENV)/bin/contrastkit repro report

clean-venv:
	rm -rf $(VENV)

# make bench-gpu [BENCH_OUT=folder]: the CUDA-only tests, then every figure of the GPU-speed goal
# into BENCH_OUT/bench_gpu.json and bench_gpu.md (benchmarks/bench_gpu.py; < 10 min on one
# GPU). On the GPU machine, which has no .venv: `source .carry/env.sh && make bench-gpu`
# (../shared/gpu/README.md). On a CPU it runs at a small size and says so.
BENCH_OUT ?= bench-gpu
BENCH_PY ?= $(if $(wildcard $(PY)),$(PY),python3)
bench-gpu:
	PYTHONPATH=$${PYTHONPATH:+$$PYTHONPATH:}$(CURDIR)/src $(BENCH_PY) benchmarks/bench_gpu.py --out $(BENCH_OUT)
