# ephemera — the commands a developer and CI need. `make demo` and `make test` work from
# a fresh clone: they install what they need (Python tools into .venv) themselves.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VENV_STAMP := $(VENV)/.installed-$(shell cat requirements-dev.txt constraints-dev.txt | sha256sum | cut -c1-12)
CARGO ?= cargo

.PHONY: all venv demo test test-rust lint fmt clean-venv

all: test

## venv: Python tools (moto) pinned in requirements-dev.txt / constraints-dev.txt
venv: $(VENV_STAMP)

$(VENV_STAMP): requirements-dev.txt constraints-dev.txt
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints-dev.txt
	@rm -f $(VENV)/.installed-*
	@touch $@

## demo: one job through the whole pipeline on emulated AWS, printed as it happens
demo: venv
	$(CARGO) build --quiet -p ephemera-cli -p ephemera-tests --bins
	MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server EPHEMERA_BIN=$(CURDIR)/target/debug/ephemera \
		target/debug/demo --config infra/config.example.yaml

## test: formatting, lints, unit, adapter and end-to-end tests
test: venv lint test-rust

test-rust: venv
	MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server $(CARGO) test --workspace --all-targets

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean-venv:
	rm -rf $(VENV)
