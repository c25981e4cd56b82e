# patchkit — every target installs what it needs (Debian packages, a project virtualenv).
# chromium: the tests open every kind of report.html in it, headless (tests/support/browser.py).
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
APT_PACKAGES := openssh-server busybox quilt chromium
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

.PHONY: setup system-deps test test-fast test-series test-faults series-check profile-run lint format bench clean

# The test runs keep Python's compiled files (and pytest's rewritten test modules) in
# __pycache__: with PYTHONDONTWRITEBYTECODE set, as on some images, each pytest process compiles
# and rewrites the whole suite again (about 10 s of CPU each). Their temporary trees go to a
# memory file system where there is one (/dev/shm): the tests make and remove tens of thousands
# of small files and git repositories, which cost a few times more on a disk's file system.
# PATCHKIT_TEST_TMPDIR=DIR picks another place.
unexport PYTHONDONTWRITEBYTECODE
PATCHKIT_TEST_TMPDIR ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo "$${TMPDIR:-/tmp}")
PYTEST := TMPDIR=$(PATCHKIT_TEST_TMPDIR) $(BIN)/python -m pytest

STARTUP_HOOK := $(VENV)/.startup-hook

setup: system-deps $(STAMP) $(STARTUP_HOOK)

system-deps:
	@missing=""; \
	[ -x /usr/sbin/sshd ] || missing="$$missing openssh-server"; \
	command -v busybox >/dev/null || missing="$$missing busybox"; \
	command -v quilt >/dev/null || missing="$$missing quilt"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo"; \
	  $$SUDO apt-get install -y -q $$missing >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q $$missing >/dev/null; }; \
	fi

$(STAMP): pyproject.toml
	@[ -x $(BIN)/python ] || { echo "creating the virtualenv $(VENV) ($(PY) -m venv)"; $(PY) -m venv $(VENV); }
	@echo "installing patchkit and its Python packages into $(VENV) (invoke, unidiff, GitPython, pytest, hypothesis, matplotlib, torch, tokenizers, PyYAML...); about a minute the first time"
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,report,profile,inventory,ansible,lint]'
	@echo "installed; next time this step is skipped until pyproject.toml changes"
	@touch $(STAMP)

# Ctrl-C while invoke or patchkit starts, before invoke has imported itself: one line and exit
# 130, not a traceback (patchkit/startup.py): the venv's site-packages gets patchkit-startup.pth.
$(STARTUP_HOOK): patchkit/startup.py $(STAMP)
	@$(BIN)/python -m patchkit.startup install
	@touch $@

# The whole suite in two passes: everything but tests/profile spread over the cores by
# pytest-xdist (a test file per worker: its module fixtures built once; every sshd on a port of
# its own), then tests/profile one test at a time: its sweeps time stand-in servers and decide
# between them, and a second worker on the same cores adds noise those verdicts were not built
# for (under xdist on this 2-core machine one listed another phase first). Both passes always
# run; the target fails when either does. Each pass is announced with its usual duration on a
# 2-core machine (bench/RESULTS.md#ci: about 4 minutes each, 10 with `make lint` in CI), and the
# last line sums both passes' counts (.ci/test_total.py reads each pass's junit XML).
test: setup
	@status=0; results=$$(mktemp -d "$(PATCHKIT_TEST_TMPDIR)/patchkit-test.XXXXXX"); \
	echo "make test, pass 1 of 2: every test but tests/profile, spread over the cores by pytest-xdist (usually about 4 minutes on 2 cores)"; \
	$(PYTEST) -q -n auto --dist loadfile --ignore=tests/profile --junitxml="$$results/pass1.xml" || status=1; \
	echo "make test, pass 2 of 2: tests/profile, one test at a time (usually about 4 minutes on 2 cores)"; \
	$(PYTEST) -q tests/profile --junitxml="$$results/pass2.xml" || status=1; \
	$(BIN)/python .ci/test_total.py "$$results/pass1.xml" "$$results/pass2.xml"; \
	rm -rf "$$results"; \
	exit $$status

# The fast subset: no sshd, no wheels, nothing slow (markers in pyproject.toml, carried by the
# tests themselves and by tests/conftest.py's shared fixtures); an unmarked test that would need
# one of them fails here.
# Spread over the cores by pytest-xdist, a test file per worker (its module fixtures built once).
test-fast: setup
	PATCHKIT_TEST_FAST=1 $(PYTEST) -q -n auto --dist loadfile -m "not sshd and not wheels and not slow"

# The tests live in a folder per layer (tests/conftest.py lists them): cli, engine, author,
# report, profile, timing, transport, plus integration, faults, series and project. Two of them
# run apart as well: the shipped series against their pinned wheels (tests/series: the wheel
# matrix, fetched once into .cache/), and the fault tests (tests/faults: crash instants, kills
# at every command, misbehaving sshd, failures as the CLI reports them).
test-series: setup
	$(PYTEST) -q -n auto --dist loadfile tests/series

test-faults: setup
	$(PYTEST) -q -n auto --dist loadfile tests/faults

# Every shipped sglang series against its release's wheel (fetched once by pinned sha256 into
# .cache/), both layouts, and the coverage table (release x worker file -> phases); then the
# static proof of each (patchkit/author/phaseproof.py): a line per series, its findings if any.
series-check: setup
	$(PYTEST) -q -s tests/series/test_series_matrix.py
	$(BIN)/python -m patchkit.author.phaseproof --all

profile-run: setup
	$(BIN)/invoke profile.run

# The target program parses under bash's sh and BusyBox ash; ruff (rules and paths in
# pyproject.toml) and mypy (patchkit, the strictness in pyproject.toml) report and change nothing.
lint: setup
	sh -n patchkit/engine/target.sh && busybox sh -n patchkit/engine/target.sh
	$(BIN)/ruff check
	$(BIN)/ruff format --check
	$(BIN)/mypy patchkit
	@# invoke.yaml's commented defaults are generated from patchkit/settings.py's option table
	$(BIN)/invoke patch.gen-config --check > /dev/null

# Rewrites the tree: the formatter, then ruff's safe fixes (review the diff before committing).
format: setup
	$(BIN)/ruff format
	$(BIN)/ruff check --fix

bench: setup
	$(BIN)/python bench/bench_apply.py
	$(BIN)/python bench/bench_ssh.py

clean:
	rm -rf $(VENV) .work profile-out .pytest_cache
