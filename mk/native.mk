# The native build (an Envoy dynamic module) and its profile-guided optimization. Included by
# the Makefile, whose variables (CARGO, PY, ...) it uses.

## dynamic-module: the native build of the filter, an Envoy dynamic module (crates/filter-native, for
##                 Envoy 1.40 and 1.41); prints the .so's path last (envoy/envoy-dynamic.yaml loads it
##                 from ENVOY_DYNAMIC_MODULES_SEARCH_PATH, the path's directory)
# Where cargo writes it: ./target, or CARGO_TARGET_DIR given on make's command line (the Makefile).
DYNAMIC_MODULE := $(abspath $(or $(CARGO_TARGET_DIR),target)/dynamic-module/libmcp_policy_native.so)
# Profile-guided optimization (docs/src/deploy/native-cost.md, Profile-guided build): the execution
# profile in crates/filter-native/pgo (make dynamic-module-profile) lays the module's code out by
# how often it runs. It is used when this rustc has the LLVM major version that wrote it, whose
# reader is sure to take it; any other rustc builds without it, and says so. PGO=0 builds without.
PGO ?= 1
PGO_PROFILE := crates/filter-native/pgo/mcp_policy_native.profdata
PGO_LLVM = $(strip $(shell cat crates/filter-native/pgo/llvm-version 2>/dev/null))
RUSTC_LLVM = $(shell $(or $(RUSTC),rustc) -vV 2>/dev/null | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
PGO_USE = $(and $(filter 1,$(PGO)),$(wildcard $(PGO_PROFILE)),$(PGO_LLVM),$(filter $(PGO_LLVM),$(RUSTC_LLVM)))
# The sources the profile describes, hashed: taken with the profile (pgo/sources), compared at each
# build, so that a profile older than the code says so (its changed functions build as without it).
PGO_SOURCES = $(firstword $(shell find crates/core/src crates/filter-native/src -name '*.rs' -type f | LC_ALL=C sort \
  | xargs sha256sum | sha256sum))
PGO_STALE = $(if $(filter $(PGO_SOURCES),$(strip $(shell cat crates/filter-native/pgo/sources 2>/dev/null))),,; the \
  core or the module changed since it was taken, so the changed code builds as without it \
  (make dynamic-module-profile takes it again))
PGO_NOTE = $(if $(PGO_USE),profile-guided: $(PGO_PROFILE) (LLVM $(PGO_LLVM))$(PGO_STALE),$(if $(filter 1,$(PGO)),\
  $(if $(wildcard $(PGO_PROFILE)),without the profile: it was taken with LLVM $(or $(PGO_LLVM),unknown) and \
  this rustc has LLVM $(or $(RUSTC_LLVM),unknown: $(or $(RUSTC),rustc) -vV failed) (make dynamic-module-profile \
  takes it again with this toolchain),without a profile: no $(PGO_PROFILE) (make dynamic-module-profile)),\
  without the profile (PGO=$(PGO): 1 uses it)))
# Frame pointers, as Envoy keeps them: perf stacks and Envoy's tcmalloc heap profiles walk through
# the module's frames instead of reading its stack as garbage. About 1,100 instructions a call
# (docs/src/deploy/native-cost.md, Instructions per call). Flags of the caller are kept as they are (the
# shell adds to them, so a `$ORIGIN` in them stays): CARGO_ENCODED_RUSTFLAGS (0x1F-separated) when
# it is set, since cargo then ignores RUSTFLAGS, else RUSTFLAGS split at spaces, tabs and line ends.
# Ours go to cargo in the encoded form, each one argument, so that the profile's path may hold a
# space (a checkout under "My Projects").
.PHONY: dynamic-module
dynamic-module:
	@echo "$(strip $(PGO_NOTE))"
	if [ -n "$${CARGO_ENCODED_RUSTFLAGS+set}" ]; then flags="$$CARGO_ENCODED_RUSTFLAGS"; \
	else flags="$$(printf '%s' "$${RUSTFLAGS:-}" | tr -s ' \t\r\n' '\037' | sed 's/^\x1f//; s/\x1f$$//')"; fi; \
	unset RUSTFLAGS; \
	export MCP_POLICY_NATIVE_PROFILE="$(if $(PGO_USE),$(if $(PGO_STALE),stale,current))"; \
	export CARGO_ENCODED_RUSTFLAGS="$${flags:+$$flags$$(printf '\037')}-Cforce-frame-pointers=yes$(if $(PGO_USE),$$(printf '\037')-Cprofile-use=$(abspath $(PGO_PROFILE)))"; \
	$(CARGO) build --profile dynamic-module --locked -p mcp-policy-filter-native
	@echo "built $(DYNAMIC_MODULE): $$(stat -c %s '$(DYNAMIC_MODULE)') bytes"
	@echo "$(DYNAMIC_MODULE)"

## dynamic-module-profile: take the execution profile make dynamic-module optimizes with
##                         (bench/pgo_profile.py: the module built instrumented and driven in a
##                         front Envoy by wrk, about a minute); needs rustup's llvm-tools
##                         (rustup component add llvm-tools). Run it again after changing the core
##                         or the module: a stale profile builds a correct but slower module.
.PHONY: dynamic-module-profile
dynamic-module-profile: venv wrk-deps
	$(PY) bench/pgo_profile.py --sources $(PGO_SOURCES) --llvm $(RUSTC_LLVM)
