#!/usr/bin/env python3
"""The execution profile the native build is optimized with (`make dynamic-module-profile`).

    rustup component add llvm-tools      # llvm-profdata of the toolchain's own LLVM
    make dynamic-module-profile          # this script, after the venv and wrk

Under load, the native build's time goes to cold caches more than to instructions: its hooks take
about 20 µs a call in a loaded front Envoy against 2.5-3 µs for the same decision in a loop
(docs/src/deploy/native-cost.md, Where the CPU time goes). Profile-guided optimization lays out the code
by how often it runs (hot paths together and straight, cold paths out of the way), which is what
such a workload needs; it changes no behaviour.

1. Builds the module instrumented (`-Cprofile-generate`, the `dynamic-module` cargo profile and the
   same frame pointers as `make dynamic-module`) into target/pgo-generate, without any RUSTFLAGS of
   the caller's: the profile describes the module `make dynamic-module` builds without them (a
   build with flags that change its code, such as `-Ctarget-cpu`, finds no profile for the functions
   they change, and LLVM says so).
2. Runs it in front Envoys on loopback (bench/envoy/filters-dynamic.yaml, the logger at info as
   shipped) behind which one upstream Envoy answers every call with a tool result, and drives them
   with wrk: allowed calls of 200 B, 1 KiB and 64 KiB, a denied call and a rate-limited one under
   bench/policy-bench.json; argument conditions and their regex under
   bench/policy-conditions-bench.json; the audit record for the access log; result rules reading
   and redacting every result (bench/policy-results-bench.json); and a policy set behind Envoy's
   jwt_authn (bench/envoy/filters-jwt.yaml, bench/policy-set-bench.json), whose callers'
   tokens, signed for the run, attach one policy or the other by their claims. Each front Envoy
   exits cleanly, and the module's profile runtime writes its counts at exit.
3. Merges the counts (sparse: functions that never ran are left out) with the toolchain's
   `llvm-profdata` into crates/filter-native/pgo/mcp_policy_native.profdata, and records beside it
   the toolchain's LLVM major version (llvm-version: `make dynamic-module` uses the profile only with
   a rustc of the same LLVM, whose reader is sure to take it) and the hash of the sources it
   describes (sources: `make dynamic-module` says when they changed since), both as mk/native.mk
   computes them for that comparison.
   The old profile stays in place until the new one is complete.

A profile older than the code still builds a correct module: functions whose code changed since get
no profile and are optimized as without one. Run this again after changing the core or the module.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import harness  # noqa: E402  (bench/harness.py: the Envoy runner, templates and wrk)

ROOT = harness.ROOT
PGO_DIR = ROOT / "crates" / "filter-native" / "pgo"
PROFILE = PGO_DIR / "mcp_policy_native.profdata"
LLVM_VERSION = PGO_DIR / "llvm-version"
SOURCES = PGO_DIR / "sources"
GENERATE_DIR = ROOT / "target" / "pgo-generate"
# Where the instrumented build writes its counts by default: one fixed path, so that the flags, and
# with them cargo's cache, are the same from one run to the next.
RAW_DIR = GENERATE_DIR / "raw"

# What the front Envoys serve while the profile is taken, one front Envoy per entry: (policy file,
# filters, [(body, caller, seconds, what its first call must get)]). A caller is None for the bearer
# token `harness.TOKEN`, or one of `harness.CLAIMS` ("ops", "readonly") for the front behind
# jwt_authn, whose tokens the run signs. The allowed 1 KiB call, what agents mostly send and what
# the benchmarks measure, gets the most time; paths a deployment may not use (policy sets, result
# rules) get enough that their code is laid out as code that runs, not as cold code. The first call
# of each run is checked (`probe`): a front that answers otherwise is not serving what the profile
# is meant to describe.
PLAIN, JWT = "filters-dynamic.yaml", ("filters-jwt.yaml", "filters-dynamic.yaml")
RESULT, REDACTED, REFUSED = "result", "result, redacted", "error -31001"
WORKLOAD = [
    ("policy-bench.json", PLAIN, [("allowed-1k.json", None, 12, RESULT), ("allowed-200.json", None, 3, RESULT),
                                  ("allowed-64k.json", None, 2, RESULT), ("denied-1k.json", None, 3, REFUSED),
                                  ("exec-1k.json", None, 2, RESULT)]),
    ("policy-conditions-bench.json", PLAIN, [("exec-1k.json", None, 3, RESULT), ("allowed-1k.json", None, 2, RESULT)]),
    ("policy-bench-audit-access-log.json", PLAIN, [("allowed-1k.json", None, 3, RESULT)]),
    ("policy-results-bench.json", PLAIN, [("allowed-1k.json", None, 4, REDACTED)]),
    ("policy-set-bench.json", JWT, [("allowed-1k.json", "ops", 4, RESULT), ("exec-1k.json", "ops", 1, RESULT),
                                    ("allowed-1k.json", "readonly", 2, RESULT),
                                    ("exec-1k.json", "readonly", 1, REFUSED)]),
]


def llvm_profdata() -> pathlib.Path:
    """The toolchain's own llvm-profdata (rustup's llvm-tools component): it reads the raw profiles
    the toolchain's profile runtime writes, whatever the system's LLVM is."""
    rustc = os.environ.get("RUSTC", "rustc")
    sysroot = subprocess.run([rustc, "--print", "sysroot"], capture_output=True, text=True, check=True).stdout.strip()
    host = subprocess.run([rustc, "--print", "host-tuple"], capture_output=True, text=True, check=True).stdout.strip()
    tool = pathlib.Path(sysroot) / "lib" / "rustlib" / host / "bin" / "llvm-profdata"
    if not tool.is_file():
        raise SystemExit(f"{tool} missing: rustup component add llvm-tools")
    return tool


def build_instrumented(raw_dir: pathlib.Path) -> pathlib.Path:
    # Encoded (0x1F-separated, each flag one argument): the raw directory's path may hold a space.
    flags = "\x1f".join(["-Cforce-frame-pointers=yes", f"-Cprofile-generate={raw_dir}"])
    env = dict(os.environ, CARGO_TARGET_DIR=str(GENERATE_DIR), CARGO_ENCODED_RUSTFLAGS=flags)
    env.pop("RUSTFLAGS", None)
    subprocess.run([*os.environ.get("CARGO", "cargo").split(), "build", "--profile", "dynamic-module", "--locked", "-p", "mcp-policy-filter-native"],
                   cwd=ROOT, env=env, check=True)
    module = GENERATE_DIR / "dynamic-module" / "libmcp_policy_native.so"
    if not module.is_file():
        raise SystemExit(f"{module} was not built")
    return module


def probe(port: int, body: str, token: str) -> str:
    """What the front answers one call of bench/bodies/`body`: RESULT, REDACTED (a result rule of
    bench/policy-results-bench.json rewrote it), "error CODE" (the JSON-RPC error) or "HTTP STATUS"."""
    status, answer = harness.post(port, (harness.BODIES / body).read_bytes(), token)
    if status != 200:
        return f"HTTP {status}"
    message = json.loads(answer)
    if "result" in message:
        return REDACTED if "[host]" in answer.decode() else RESULT
    return f"error {message.get('error', {}).get('code')}"


def train(envoy: str, module: pathlib.Path, raw_dir: pathlib.Path, work: pathlib.Path) -> int:
    """Drive front Envoys with the instrumented module; returns the number of requests served."""
    os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = str(module.parent)
    # Only the front Envoys' counts: build scripts of the instrumented build wrote their own.
    os.environ["LLVM_PROFILE_FILE"] = str(raw_dir / "envoy-%p-%m.profraw")
    # The policy set's callers: their tokens, and the key that signs them as the JWKS.
    jwt_values, tokens = harness.jwt_callers()
    up_cfg, up_port, up_admin = harness.upstream_config()
    upstream = harness.Envoy(envoy, work, "upstream", up_cfg, 1, [])
    served = 0
    try:
        upstream.wait_ready(up_admin)
        for i, (policy_file, filters, runs) in enumerate(WORKLOAD):
            policy = harness.policy_text(harness.BENCH / policy_file)
            cfg, port, admin = harness.front_config(filters, policy, up_port, **jwt_values)
            front = harness.Envoy(envoy, work, f"front{i}", cfg, 1, [])
            try:
                front.wait_ready(admin)
                for body, caller, seconds, expected in runs:
                    token = tokens[caller] if caller else harness.TOKEN
                    outcome = probe(port, body, token)
                    if outcome != expected:
                        raise SystemExit(f"{policy_file}, {body}, {caller or 'bearer'}: {outcome}, not {expected} "
                                         f"(logs in {work}); the profile in place is unchanged")
                    w = harness.run_wrk(port, body, seconds, 1, 2, token=token)
                    harness.log(f"{policy_file}, {body}{f', {caller}' if caller else ''}: {outcome}, "
                                f"{w['requests']} requests")
                    served += w["requests"]
            finally:
                front.stop()
    finally:
        upstream.stop()
    return served


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envoy", default=str(ROOT / ".venv" / "bin" / "envoy"))
    ap.add_argument("--sources", required=True, help="the hash of the sources the profile describes "
                    "(PGO_SOURCES of mk/native.mk), recorded beside it")
    ap.add_argument("--llvm", required=True, help="this rustc's LLVM major version (RUSTC_LLVM of mk/native.mk, "
                    "which make dynamic-module compares with it), recorded beside it")
    args = ap.parse_args()
    profdata = llvm_profdata()
    harness.require_wrk()
    shutil.rmtree(RAW_DIR, ignore_errors=True)
    RAW_DIR.mkdir(parents=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="mcpf-pgo-"))
    module = build_instrumented(RAW_DIR)
    served = train(args.envoy, module, RAW_DIR, work)
    raws = sorted(RAW_DIR.glob("envoy-*.profraw"))
    if len(raws) != len(WORKLOAD):
        raise SystemExit(f"expected {len(WORKLOAD)} profiles (one per front Envoy), found {len(raws)} in {RAW_DIR}: "
                         f"did an Envoy not exit cleanly? (logs in {work}); the profile in place is unchanged")
    PGO_DIR.mkdir(parents=True, exist_ok=True)
    # Sparse: functions that never ran are left out (a third of the size); they build as without a
    # profile either way. Merged beside the profile, then put in its place, with its LLVM version
    # and sources: no build ever sees a new profile with an old version or a half-written one.
    partial = PROFILE.with_suffix(".profdata.partial")
    subprocess.run([str(profdata), "merge", "--sparse", "-o", str(partial), *map(str, raws)], check=True)
    LLVM_VERSION.unlink(missing_ok=True)
    os.replace(partial, PROFILE)
    SOURCES.write_text(args.sources + "\n")
    LLVM_VERSION.write_text(args.llvm + "\n")
    shutil.rmtree(RAW_DIR)
    shutil.rmtree(work)
    harness.log(f"{PROFILE.relative_to(ROOT)}: {PROFILE.stat().st_size} bytes from {served} requests "
                f"(LLVM {LLVM_VERSION.read_text().strip()}); make dynamic-module builds with it")


if __name__ == "__main__":
    main()
