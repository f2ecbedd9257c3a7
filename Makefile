# Two entry points: `make demo` (the main job) and `make test` (the whole suite).
# Both create or reuse .venv and install what they need. torch is installed first with an
# exact pin because on these machines that pin is the CPU build; an unpinned torch pulls CUDA.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.contrastkit-installed
TORCH_PIN ?= torch==2.13.0

.PHONY: demo demo-losses test lint bench repro-cpu repro-report clean-venv

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

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples

bench: $(STAMP)
	$(PY) benchmarks/losses.py

# The CPU-scale reproduction study (docs/reproduction.md): every study with its default seeds
# (61 runs of 3-8 min plus 1-3 min of evaluation each on 2 cores: about 5 hours); resumable.
repro-cpu: $(STAMP)
	$(VENV)/bin/contrastkit repro cpu
	$(VENV)/bin/contrastkit repro report

repro-report: $(STAMP)
	$(VENV)/bin/contrastkit repro report

clean-venv:
	rm -rf $(VENV)
