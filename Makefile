# Two entry points for a fresh machine (see README.md):
#   make demo  - set up, then run gpuctl on its embedded default (no cluster, no cloud, no GPU)
#   make test  - set up, then run the whole test suite
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test bench setup system-deps

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[test,bench,lint]'
	touch $@

setup: $(BIN)/.installed

# Prometheus and promtool are real test stand-ins (Debian package); install them when root.
# Where they are missing their tests skip, or fail when GPUCTL_REQUIRE_STANDINS=1 (as in CI).
system-deps:
	@command -v promtool >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) \
	  || echo "note: prometheus/promtool not installed; their tests will be skipped (fail with GPUCTL_REQUIRE_STANDINS=1)"; }

demo: setup
	@echo '$$ gpuctl render examples/seed-pod.yaml'
	@$(BIN)/gpuctl render examples/seed-pod.yaml
	@GPUCTL_BIN=$(BIN)/gpuctl GPUCTL_PYTHON=$(BIN)/python examples/demo-node.sh
	@echo '$$ gpuctl mig plan --demand 1g.10gb=9,3g.40gb=3 --gpu H100-80GB'
	@$(BIN)/gpuctl mig plan --demand 1g.10gb=9,3g.40gb=3 --gpu H100-80GB

# One pytest-xdist worker per core (PYTEST_XDIST_AUTO_NUM_WORKERS=N to choose); the fast half
# alone, without stand-ins: $(BIN)/python -m pytest -m "not integration".
test: setup system-deps
	$(BIN)/python -m pytest -q -n auto

bench: setup
	$(BIN)/python bench/run.py

# Stops at the first problem: lint, formatting, types, import contracts (config: pyproject.toml).
.PHONY: lint
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
