# ephemera — the commands a developer and CI need. `make demo` and `make test` work from
# a fresh clone: they install what they need (Python tools into .venv) themselves.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VENV_STAMP := $(VENV)/.installed-$(shell cat requirements-dev.txt constraints-dev.txt | sha256sum | cut -c1-12)
CARGO ?= cargo

.PHONY: check-fakes check-release-symbols all help venv demo demo-sample check-demo up job test test-rust test-bootstrap conformance conformance-recorded chaos-sweep bench bench-model check-figures check-bench-fresh docs-figures lint fmt clean-venv

all: test

## help: these targets, each with what it does (from the `## name: text` comments here)
help:
	@awk '/^## [a-z][a-z-]*: / { sub(/^## /, ""); name = $$0; sub(/:.*/, "", name); text = $$0; \
		sub(/^[a-z-]*: /, "", text); printf "  %-18s %s\n", name, text; more = 1; next } \
		more && /^## / { sub(/^## /, ""); printf "  %-18s %s\n", "", $$0; next } { more = 0 }' $(MAKEFILE_LIST)

## venv: Python tools (moto) pinned in requirements-dev.txt / constraints-dev.txt
venv: $(VENV_STAMP)

$(VENV_STAMP): requirements-dev.txt constraints-dev.txt
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints-dev.txt
	@rm -f $(VENV)/.installed-*
	@touch $@

## demo: one job through the whole pipeline on emulated AWS, printed as it happens
## (the same `cargo build --workspace --bins` as make test, so neither rebuilds the other's);
## then says whether README.md's sample is still this run in structure
DEMO_TRANSCRIPT := target/demo/transcript.txt
demo: venv
	$(CARGO) build --quiet --workspace --bins
	MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server EPHEMERA_BIN=$(CURDIR)/target/debug/ephemera \
		target/debug/demo --config infra/config.example.yaml --transcript $(DEMO_TRANSCRIPT)
	@$(VENV)/bin/python tests/docs/demo_sample.py --check $(DEMO_TRANSCRIPT) --warn

## check-demo: runs the demo and fails when README.md's sample is not what it prints, in
## structure (resource count, names, statuses, fields and stages; not times, ids or ports)
check-demo: venv
	$(TEST_BUILD) --quiet
	MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server EPHEMERA_BIN=$(CURDIR)/target/debug/ephemera \
		target/debug/demo --config infra/config.example.yaml --transcript $(DEMO_TRANSCRIPT) >/dev/null
	$(VENV)/bin/python tests/docs/demo_sample.py --check $(DEMO_TRANSCRIPT)

## demo-sample: runs the demo and writes what it printed into README.md as its sample
demo-sample: venv
	$(CARGO) build --quiet --workspace --bins
	MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server EPHEMERA_BIN=$(CURDIR)/target/debug/ephemera \
		target/debug/demo --config infra/config.example.yaml --transcript $(DEMO_TRANSCRIPT)
	$(VENV)/bin/python tests/docs/demo_sample.py --write $(DEMO_TRANSCRIPT)

## up: moto, the GitHub simulator and `ephemera local --stack` on loopback, up until
## Ctrl-C; the stack holds the pools of infra/config.example.yaml with GitHub at the
## simulator, and prints the environment to paste so `ephemera` commands and `make job`
## work against it with no flag
up: venv
	$(CARGO) build --quiet --workspace --bins
	MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server EPHEMERA_BIN=$(CURDIR)/target/debug/ephemera \
		target/debug/demo --up --config infra/config.example.yaml

## job: queues COUNT jobs (default 1) with LABELS (comma-separated, default the example
## pool's) through the GitHub simulator of a running `make up` (GITHUB_SIM, from the
## environment it printed), each running DURATION seconds (default 60); the simulator sends
## their signed `queued` webhooks
COUNT ?= 1
LABELS ?= self-hosted,linux,x64
DURATION ?= 60
job:
	@COUNT='$(COUNT)' LABELS='$(LABELS)' DURATION='$(DURATION)' tests/local/queue-jobs.sh

## test: formatting, lints, unit, adapter and end-to-end tests, the runner bootstrap, and
## the figures of README.md and docs/ against the bench files, the demo against its sample;
## one line for each part that passes, a failing part's output (tests/local/quietly.sh:
## each part's whole output in target/make-test/PART.log; VERBOSE=1 shows it as it runs)
TEST_PARTS := lint lint-infra check-figures test-rust test-bootstrap iam-coverage conformance-recorded check-demo
test: venv
	@for part in $(TEST_PARTS); do \
		tests/local/quietly.sh $$part $(MAKE) --no-print-directory $$part || exit $$?; \
	done

## test-rust: the Rust tests of the workspace, TEST_THREADS (4) at a time, on the emulator
## (MOTO_SERVER)
TEST_THREADS ?= 4
# The binaries (target/debug/{scaler,reaper,webhook,ephemera,demo}) built with the tests
# in one build, so the two share one resolution of features (the tests' dev-dependencies
# add some) and nothing is compiled twice in `make test` (test-rust, then check-demo).
TEST_BUILD = $(CARGO) build --workspace --bins --lib --tests --benches
test-rust: venv
	@# the end-to-end tests drive the built binaries
	$(TEST_BUILD)
	@# 4 at a time on 2 cores: the end-to-end tests wait on leases, timers and webhooks as
	@# much as on the emulator; the longest (burst, cli::kills) sort near the front and
	@# start early
	@# every REST exchange the GitHub simulator serves is recorded for conformance-recorded
	@# --lib --tests --benches, not --all-targets: that adds a test build and link of every
	@# binary (`test = false` in their Cargo.toml: none has a test of its own)
	rm -rf $(IAM_COVERAGE_DIR) $(CONFORMANCE_RECORD) && mkdir -p $(CONFORMANCE_RECORD)
	EPHEMERA_IAM_COVERAGE_DIR=$(CURDIR)/$(IAM_COVERAGE_DIR) MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server \
		EPHEMERA_SIM_RECORD_DIR=$(CURDIR)/$(CONFORMANCE_RECORD) \
		$(CARGO) test --workspace --lib --tests --benches -- --test-threads $(TEST_THREADS)

## iam-coverage: after test-rust and test-bootstrap, the grants of the templates' roles
## that no request of theirs needed, into target/iam-coverage.json; fails on one not kept
## with a reason (`# iam-kept: ROLE/SID ACTION: reason` in the template; docs/testing.md)
IAM_COVERAGE_DIR = target/iam-coverage
iam-coverage: venv
	PYTHONPATH=tests/src $(VENV)/bin/python -m strict_moto.coverage $(IAM_COVERAGE_DIR) target/iam-coverage.json

## chaos-sweep: a long run of the chaos suite, SEEDS schedules from seed FROM (make test
## runs the default 250 from seed 1), on an optimized build; a failure prints its seed,
## which `EPHEMERA_CHAOS_SEED=N EPHEMERA_CHAOS_SCHEDULES=1` replays alone
SEEDS ?= 10000
FROM ?= 100000
chaos-sweep:
	EPHEMERA_CHAOS_SEED=$(FROM) EPHEMERA_CHAOS_SCHEDULES=$(SEEDS) \
		$(CARGO) test --release -p ephemera-core --test chaos -- --nocapture

## test-bootstrap: infra/runner/bootstrap.sh, shellcheck-clean, run without a VM
## (tests/bootstrap: a fake IMDS and GitHub on 127.0.0.1, the JIT table on the strict
## emulator, stubs for dnf/apt-get/systemctl/sudo/power-off, a stub runner), its test
## modules BOOTSTRAP_JOBS (3) at a time (tests/bootstrap/parallel.py)
BOOTSTRAP_JOBS ?= 3
test-bootstrap: venv
	$(VENV)/bin/shellcheck infra/runner/bootstrap.sh
	mkdir -p $(IAM_COVERAGE_DIR)
	EPHEMERA_IAM_COVERAGE_DIR=$(CURDIR)/$(IAM_COVERAGE_DIR) MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server \
		$(VENV)/bin/python tests/bootstrap/parallel.py --jobs $(BOOTSTRAP_JOBS)

## bench: the figures of docs/performance.md (webhook handling into bench/webhook.json;
## binary sizes and cold starts, a 300-job burst, the reaper over 10,000 items into
## bench/results.json), each stamped with the code it measured (tests/docs/figures.py),
## then written into the pages (as `make docs-figures` does)
# 300 jobs: after a 1,000-job burst moto held 19 GiB and the reaper part's queries timed
# out on a 24 GiB machine (BENCH_ARGS="--burst-jobs 1000" on a larger one)
BENCH_ARGS ?= --burst-jobs 300
bench: venv
	@mkdir -p bench
	EPHEMERA_BENCH_WEBHOOK_OUT=$(CURDIR)/bench/webhook.json \
		$(CARGO) bench -p ephemera-core --bench webhook
	$(VENV)/bin/python tests/docs/figures.py --stamp bench/webhook.json
	$(CARGO) build --release -p ephemera-webhook -p ephemera-scaler -p ephemera-reaper
	$(CARGO) build --workspace --bins   # the bench binary, built as make test builds it (no rebuild)
	MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server target/debug/bench \
		--webhook bench/webhook.json --bin-dir target/release --out bench/results.json $(BENCH_ARGS)
	$(VENV)/bin/python tests/docs/figures.py --stamp bench/results.json
	$(VENV)/bin/python tests/docs/figures.py --write

## conformance: the GitHub simulator's recorded REST exchanges checked against GitHub's
## OpenAPI description (@octokit/openapi, pinned in tests/conformance), and known-bad
## exchanges (wrong path, method, body) shown to be rejected; records its own (the
## simulator, apps and one pipeline's end-to-end tests) first
CONFORMANCE_RECORD := target/conformance/exchanges
conformance: venv
	rm -rf $(CONFORMANCE_RECORD) && mkdir -p $(CONFORMANCE_RECORD)
	EPHEMERA_SIM_RECORD_DIR=$(CURDIR)/$(CONFORMANCE_RECORD) MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server \
		$(CARGO) test --workspace --test e2e -- sim:: apps:: pipeline::one_job_gets_one_runner_which_runs_it_and_is_reaped
	$(MAKE) --no-print-directory conformance-recorded

## conformance-recorded: the conformance check on what test-rust recorded (every exchange
## of every end-to-end test), without running a test again; make test runs this one
conformance-recorded: venv
	@command -v node >/dev/null && command -v npm >/dev/null || { \
		echo "make test needs Node.js 18+ with npm for the GitHub conformance check"; \
		echo "(install it, e.g. apt-get install nodejs npm, and run make test again)"; exit 1; }
	@test -n "$$(ls $(CONFORMANCE_RECORD) 2>/dev/null)" || { \
		echo "conformance: nothing recorded in $(CONFORMANCE_RECORD); run make test-rust or make conformance"; exit 1; }
	cd tests/conformance && npm ci --no-audit --no-fund --loglevel=error
	node tests/conformance/check.mjs $(CONFORMANCE_RECORD)
	node tests/conformance/check.mjs --each-must-fail tests/conformance/fixtures/bad-exchanges.jsonl
	@if node tests/conformance/check.mjs tests/conformance/fixtures/bad-exchanges.jsonl >/dev/null 2>&1; then \
		echo "conformance: the check accepted known-bad exchanges" >&2; exit 1; \
	else echo "conformance: known-bad exchanges rejected, as they must be"; fi

## bench-model: bursts of 100, 1,000 and 10,000 jobs on a model of AWS's and GitHub's
## quotas (the real handlers on the in-memory ports, simulated time; a few minutes on
## 2 cores) into bench/model.json, stamped with the code it measured and written into
## the pages; see docs/performance.md "At scale"
bench-model: venv
	@mkdir -p bench
	$(CARGO) build --release -p ephemera-model --bin bench-model
	target/release/bench-model --out bench/model.json $(BENCH_MODEL_ARGS)
	$(VENV)/bin/python tests/docs/figures.py --stamp bench/model.json
	$(VENV)/bin/python tests/docs/figures.py --write

## check-figures: every figure of README.md and docs/ is what its bench file holds (a
## bench file older than the code it measures is reported, as a warning: a bench run takes
## longer than a change, and make test must not need one)
check-figures: venv
	$(VENV)/bin/python tests/docs/figures.py --check --warn-stale
	$(VENV)/bin/python -m unittest discover -s tests/docs

## check-bench-fresh: fails when a bench file is older than the code it measures, naming
## the file and the command that regenerates it (run before quoting a bench in a release)
check-bench-fresh: venv
	$(VENV)/bin/python tests/docs/figures.py --check

## docs-figures: write the figures of README.md and docs/ from bench/*.json
docs-figures: venv
	$(VENV)/bin/python tests/docs/figures.py --write

## lint: rustfmt, clippy with warnings as errors, the API docs with a broken intra-doc
## link as an error, and the fakes kept out of the Lambda functions
lint: check-fakes
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" $(CARGO) doc --workspace --no-deps --quiet

## check-fakes: the three Lambda functions build ephemera-core without its `fakes` feature,
## so its in-memory ports (`memory`) and the `Intercept` decorator are not compiled into
## them (cargo's feature resolution for exactly those packages, as `cargo lambda build`
## and `make bench` build them)
FUNCTIONS = -p ephemera-webhook -p ephemera-scaler -p ephemera-reaper
check-fakes:
	@features=$$($(CARGO) tree $(FUNCTIONS) -e normal,build,features -i ephemera-core); \
	if echo "$$features" | grep -q 'ephemera-core feature "fakes"'; then \
		echo "check-fakes: a Lambda function's build enables ephemera-core's fakes:"; \
		echo "$$features" | grep -B2 -A6 'feature "fakes"'; exit 1; \
	else echo "check-fakes: ok, no Lambda function builds ephemera-core's fakes"; fi

## check-release-symbols: a release build of the three functions, then no symbol of
## ephemera-core's fakes in the ephemera-core library they link, nor in the binaries
## (tests/release/symbols.py; a library built with the fakes is shown as the control)
check-release-symbols: venv
	$(CARGO) build --release $(FUNCTIONS)
	$(VENV)/bin/python tests/release/symbols.py

## fmt: formats the Rust code
fmt:
	$(CARGO) fmt --all

## clean-venv: removes .venv (the next target that needs it installs it again)
clean-venv:
	rm -rf $(VENV)

## lint-infra: template.yaml and the image stack (cfn-lint, sam validate --lint; the image
## stack's install component carries bootstrap.sh as it is, and template.yaml's user data
## is the script as `make user-data` writes it), Image Builder's own rules on the image
## stack (infra/image/lint.py, each rule with a fixture that breaks it in
## tests/fixtures/image-lint), the runner bootstrap and user-data scripts (shellcheck) and
## the example configuration against its JSON Schema
.PHONY: build deploy destroy lint-infra image-component user-data
SAM := SAM_CLI_TELEMETRY=0 $(CURDIR)/$(VENV)/bin/sam

lint-infra: venv
	$(VENV)/bin/cfn-lint template.yaml infra/image/template.yaml
	AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} $(SAM) validate --lint
	AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} $(SAM) validate --lint -t infra/image/template.yaml
	$(VENV)/bin/python infra/image/component.py --check
	$(VENV)/bin/python infra/image/lint.py infra/image/template.yaml
	$(VENV)/bin/python -m unittest discover -s infra/image -p 'test_*.py'
	$(VENV)/bin/shellcheck infra/runner/bootstrap.sh infra/user-data.sh
	infra/user-data.sh --check
	$(VENV)/bin/python -c 'import json, sys, yaml, jsonschema; \
		jsonschema.validate(yaml.safe_load(open(sys.argv[2])), json.load(open(sys.argv[1])))' \
		infra/config.schema.json infra/config.example.yaml

## image-component: infra/image/template.yaml's install component, made again from
## infra/runner/bootstrap.sh (run it after every change of the script)
image-component: venv
	$(VENV)/bin/python infra/image/component.py

## user-data: writes the runner launch template's UserData in template.yaml from
## infra/runner/bootstrap.sh (edit the script, then run this)
user-data:
	infra/user-data.sh

## build: the three functions as Lambda `bootstrap` binaries (.aws-sam/build), for the
## template's Architecture: arm64 by default, `make build ARCH=x86_64` otherwise.
## sam build runs cargo-lambda, which links with zig; both come from .venv.
ARCH ?= arm64
RUST_TARGET_arm64 := aarch64-unknown-linux-gnu
RUST_TARGET_x86_64 := x86_64-unknown-linux-gnu

build: venv
	@case "$(ARCH)" in arm64|x86_64) ;; *) echo "ARCH must be arm64 or x86_64, not $(ARCH)"; exit 1;; esac
	@target=$(RUST_TARGET_$(ARCH)); \
	if [ ! -d "$$(rustc --print sysroot)/lib/rustlib/$$target" ] && \
	   ! rustup target add "$$target" >/dev/null 2>&1; then \
		echo "make build: the Rust standard library for $$target is not installed and"; \
		echo "could not be downloaded (rustup target add $$target). Build for this"; \
		echo "machine's architecture instead:  make build ARCH=x86_64"; \
		echo "and deploy with the same:          make deploy ARCH=x86_64"; \
		exit 1; \
	fi
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(SAM) build --beta-features \
		--parameter-overrides Architecture=$(ARCH)
	@ls -l .aws-sam/build/*/bootstrap

## deploy: `sam deploy --guided` of what `make build` made (asks for the parameters once,
## then keeps them in samconfig.deploy.toml, untracked, made from samconfig.toml)
SAM_DEPLOY_CONFIG := samconfig.deploy.toml
deploy: venv
	@[ -f $(SAM_DEPLOY_CONFIG) ] || cp samconfig.toml $(SAM_DEPLOY_CONFIG)
	$(SAM) deploy --guided --config-file $(SAM_DEPLOY_CONFIG) --parameter-overrides Architecture=$(ARCH)

## destroy: `ephemera destroy` of the deployment STACK (default ephemera) and its image
## stack IMAGE_STACK (default STACK-image): names what it deletes, asks, says what it keeps
STACK ?= ephemera
IMAGE_STACK ?= $(STACK)-image
destroy:
	$(CARGO) build --quiet --bin ephemera
	target/debug/ephemera destroy --stack $(STACK) --image-stack $(IMAGE_STACK)
