# make bench, and what it builds and installs. Included by the Makefile, whose variables (CARGO,
# PY, WASM, ...) it uses.

## bench: criterion micro benchmarks of the core, then wrk against real Envoy (passthrough, this
##        filter, Envoy's native mcp+rbac) and the footprint; rewrites the results in BENCHMARKS.md.
##        Then the native build (the dynamic module) side by side with the wasm build and the
##        baselines, its acceptance figures (bench/native_compare.py, with the fronts on a CPU of
##        their own, given two CPUs or more, and then with every process sharing the CPUs; each
##        rewrites its section of BENCHMARKS.md). Then the latency an approval adds (bench/approval_latency.py; printed,
##        recorded by hand in BENCHMARKS.md). Then the rate limit service: latency an RLS decision
##        adds against local limits, and decisions/s with Redis for 1 and 2 instances
##        (bench/rls_bench.py; printed, recorded by hand). Needs wrk (Debian; installed here when
##        run as root). About 25 minutes. NATIVE_ROUNDS (5) sets the native build's rounds per
##        layout: its targets sit inside the noise of 5 rounds, and 15 (about 25 minutes more)
##        give each median an interval narrow enough to judge them.
NATIVE_ROUNDS ?= 5
## bench-minimal: the floors of the two builds, each its own workspace: the baseline of the
##                throughput target (this filter at 0.95 of its throughput or more), a proxy-wasm
##                filter that only reads the credential header and the whole body
##                (bench/minimal-filter); and the same for the native build, a dynamic module that
##                only holds the request and reads them (bench/minimal-module)
.PHONY: bench-minimal
bench-minimal: wasm-target
	cd bench/minimal-filter && CARGO_TARGET_DIR=target $(CARGO) build --locked --release --target $(WASM_TARGET)
	cd bench/minimal-module && CARGO_TARGET_DIR=target $(CARGO) build --locked --release

## bench-v8: the allowed 1 KiB decision timed inside V8 (Node.js, node:wasi), built as the filter
##           is (opt-level "z", wasm-opt -Oz), then the whole allowed request through the release
##           module behind an emulated proxy-wasm host: the in-VM compute per request (bench/v8-decision)
.PHONY: bench-v8
bench-v8: build wasm-target $(WASM_OPT)
	cd bench/v8-decision && $(CARGO) build --locked --release --target $(WASM_TARGET)
	$(WASM_OPT) $(WASM_OPT_FLAGS) bench/v8-decision/target/$(WASM_TARGET)/release/mcpf-bench-v8-decision.wasm \
	  -o bench/v8-decision/target/v8-decision.wasm
	node --no-warnings bench/v8-decision/run.mjs bench/v8-decision/target/v8-decision.wasm \
	  bench/policy-bench.json bench/bodies/allowed-1k.json > bench/v8-decision/target/result.json.tmp
	mv bench/v8-decision/target/result.json.tmp bench/v8-decision/target/result.json
	@cat bench/v8-decision/target/result.json
	node --no-warnings bench/v8-decision/request.mjs $(WASM) \
	  bench/policy-bench.json bench/bodies/allowed-1k.json > bench/v8-decision/target/request.json.tmp
	mv bench/v8-decision/target/request.json.tmp bench/v8-decision/target/request.json
	@cat bench/v8-decision/target/request.json

bench: build dynamic-module bench-minimal bench-v8 approvals ratelimit redis-deps venv wrk-deps
	$(PY) -c 'import matplotlib' 2>/dev/null || \
	  $(PY) -m pip install --quiet --disable-pip-version-check -r bench/requirements.txt
	$(CARGO) bench --locked -p mcp-policy-core --bench core
	$(PY) bench/load.py --out BENCHMARKS.md \
	  --variant minimal=bench/minimal-filter/target/$(WASM_TARGET)/release/mcpf_bench_minimal.wasm \
	  --variant audit_access_log=,policy=bench/policy-bench-audit-access-log.json \
	  --variant audit_off=,policy=bench/policy-bench-audit-off.json \
	  --variant audit_access_log_no_filter_state=,policy=bench/policy-bench-audit-access-log-no-filter-state.json
	@if [ "$$($(PY) -c 'import os; print(len(os.sched_getaffinity(0)))')" -ge 2 ]; then echo "$(PY) bench/native_compare.py --rounds $(NATIVE_ROUNDS) --layout pinned --out BENCHMARKS.md"; \
	  $(PY) bench/native_compare.py --rounds $(NATIVE_ROUNDS) --layout pinned --out BENCHMARKS.md; \
	else echo "bench: one CPU, no pinned layout: the native build's pinned section of BENCHMARKS.md is left as it is"; fi
	$(PY) bench/native_compare.py --rounds $(NATIVE_ROUNDS) --layout shared --out BENCHMARKS.md
	$(PY) bench/approval_latency.py
	$(PY) bench/rls_bench.py

# wrk, the load generator of make bench (Debian; installed here when run as root).
.PHONY: wrk-deps
wrk-deps:
	@command -v wrk >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && apt-get install -y -qq wrk >/dev/null; } || \
	  { echo "wrk, the load generator of make bench and make dynamic-module-profile, is missing: sudo apt-get install wrk" >&2; exit 1; }
