# Two commands on a fresh machine: `make demo` and `make test`; both install first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
export HF_HUB_OFFLINE := 1

.PHONY: install test test-unit demo check bench clean

install: $(INSTALLED)

# torch first, pinned: it is the CPU build on this machine's disk; any later dependency
# asking for torch is then satisfied instead of pulling a multi-GB CUDA build.
$(INSTALLED): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

test: install
	$(BIN)/pytest

test-unit: install
	$(BIN)/pytest tests/unit

demo: install
	$(BIN)/halluwatch demo

check: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: install
	$(BIN)/python bench/processor.py
	$(BIN)/python bench/ingest.py --traces 10000 --spans-per-trace 20 --runs 3
	$(BIN)/python bench/alerts.py

clean:
	rm -rf $(VENV) .halluwatch .pytest_cache .mypy_cache .ruff_cache
