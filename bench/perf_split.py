#!/usr/bin/env python3
"""Where a request's CPU goes inside the front Envoy, by code region, measured with Linux perf.

    .venv/bin/python bench/perf_split.py [--seconds 6] [--rounds 3] [--only KEY,...]
                                         [--layout shared|pinned] [--conns N]
                                         [--variant NAME=WASM[,policy=FILE]] ...

For each configuration, one front Envoy (`--concurrency 1`, the templates bench/harness.py renders) is
driven by wrk (`-t1 -c2`, the allowed 1 KiB tools/call; `--conns` sets the connections) while
`perf record -F 2999` samples it. In the default layout, `shared`, every process runs on every CPU;
`--layout pinned` runs each front Envoy on the last CPU and the upstream and wrk on the others, with
8 connections, as the capacity phase of bench/native_compare.py's pinned layout does (with perf
itself on the other CPUs too). The
samples are split by where they fell and turned into microseconds per request
(samples / frequency / requests):

    kernel   the Linux kernel (sockets, epoll, scheduling) on behalf of Envoy
    envoy    Envoy's own code: HTTP, the filter chain, the proxy-wasm host (every host call's
             C++ side: header maps, shared data, filter state, metrics, the logger) and V8's runtime
    JIT      code V8 generated: the filter's wasm functions and the wasm <-> host call stubs
    module   the native build's shared object (`make dynamic-module`): the core and its ABI glue
             (or the minimal module's, for n0)
    libc     memcpy and friends called from any of them (malloc is Envoy's own tcmalloc, which its
             binary exports: counted under envoy; the native module's mimalloc under module)

The configurations (keys for `--only`): a (passthrough), a' (the buffer filter), c (Envoy's mcp +
RBAC), m (the minimal body-reading filter, bench/minimal-filter), b (this filter with the audit record
as an info log line, `log`, the default), b_al (as a filter-state value, `access_log`), b_nofs
(`access_log` and `filter_state: false`), and the native build as bench/native_compare.py runs it:
n (as shipped), n' (its logger at warn: no audit line), n''' (`access_log`) and n0 (the minimal
body-reading dynamic module, bench/minimal-module: the floor of any native filter). The native ones
need `make dynamic-module` (and n0 `make bench-minimal`); without a shared object its
configurations are left out, with a line saying so.
Medians over the rounds are printed as a Markdown table. perf's own overhead inflates every figure
by roughly the same factor; compare the rows, not the absolute sum with bench/load.py's CPU column.

`--hooks` also records call stacks (by frame pointer, which Envoy and the module keep) and splits the
native build's time by the module's hook it fell under (`envoy_dynamic_module_on_http_filter_*`,
exported, so named even in the stripped module), with the part spent inside Envoy's ABI callbacks
(`envoy_dynamic_module_callback_*`: filter state, headers, the logger) counted apart, and Envoy's code
outside every hook (what the stream costs Envoy itself beside the module).

Needs `perf` (Debian `linux-perf`) and permission to profile Envoy (root, or
`kernel.perf_event_paranoid` ≤ 1). Not part of `make bench`: run by hand when attributing cost.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import harness  # noqa: E402  (the Envoy templates, process helpers and wrk runner the benchmarks share)
import load  # noqa: E402  (start_front: a front Envoy of the load benchmark's configurations)
import native_compare  # noqa: E402  (the native build's front Envoys)

FREQ = 2999
REGIONS = ("kernel", "envoy", "JIT", "module", "libc")
# perf names a shared object by the file that was mapped: a link's target. Names of other builds of
# the native module (--other-module) that count as the module too.
OTHER_MODULES: set[str] = set()


def region(dso: str) -> str | None:
    if dso.startswith("[kernel"):
        return "kernel"
    if dso.startswith("[JIT]"):
        return "JIT"
    if dso in (native_compare.NATIVE.name, native_compare.MINIMAL.name) or dso in OTHER_MODULES:
        return "module"
    if dso.startswith("libc") or dso.startswith("libm") or dso.startswith("[vdso]"):
        return "libc"
    if dso == "envoy":
        return "envoy"
    return None


def samples_by_region(data: pathlib.Path) -> dict[str, int]:
    out = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", "dso", "-n", "--stdio",
                          "-g", "none"], capture_output=True, text=True, check=True).stdout
    counts = {r: 0 for r in REGIONS}
    for line in out.splitlines():
        m = re.match(r"\s*[\d.]+%\s+(\d+)\s+(.+?)\s*$", line)
        if m and (r := region(m.group(2))):
            counts[r] += int(m.group(1))
    return counts


HOOK = "envoy_dynamic_module_on_http_filter_"
CALLBACK = "envoy_dynamic_module_callback_"
HOOKS = ("request_headers", "request_body", "other hooks")


def samples_by_hook(data: pathlib.Path) -> dict[str, int]:
    """Samples under each of the module's hooks (the innermost hook frame of a stack), under Envoy's
    ABI callbacks called from any hook (`callbacks`), and in Envoy's code under no hook (`envoy outside`)."""
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,sym,dso"], capture_output=True, text=True,
                         check=True).stdout
    counts: collections.Counter[str] = collections.Counter()
    for sample in out.split("\n\n"):
        # Each frame: `ip symbol (shared object)`.
        lines = [(line.split(None, 1) + [""])[1].rsplit(" (", 1) for line in sample.strip().splitlines()]
        frames = [f[0] for f in lines]
        at = next((i for i, f in enumerate(frames) if f.startswith(HOOK)), None)
        if at is None:
            if lines and lines[0][-1].endswith("/envoy)"):
                counts["envoy outside"] += 1
            if any(f.startswith(CALLBACK) for f in frames):
                # A callback whose stack lost its hook (a frame without a frame pointer): counted
                # outside, so the outside column is only as good as this count is small.
                counts["unattributed"] += 1
            continue
        hook = frames[at][len(HOOK):]
        counts[hook if hook in HOOKS else "other hooks"] += 1
        if any(f.startswith(CALLBACK) for f in frames[:at]):
            counts["callbacks"] += 1
    return counts


def measure(envoy: str, workdir: pathlib.Path, inst: str, up_port: int, wasm: pathlib.Path, policy: str,
            seconds: int, name: str, hooks: bool, conns: int, front_cpus: set[int]) -> dict[str, float]:
    """One front Envoy, started on `front_cpus`, sampled under wrk with `conns` connections (wrk runs
    on this process's CPUs)."""
    with harness.started_on(front_cpus):
        e, port = load.start_front(envoy, workdir, name, inst, up_port, wasm, policy)
    try:
        e.wait_ready(e.admin_port)
        status, body = harness.post(port, (harness.BODIES / "allowed-1k.json").read_bytes())
        if status != 200 or b'"result"' not in body:
            raise SystemExit(f"{name}: unexpected reply {status} {body[:200]!r}")
        harness.run_wrk(port, "allowed-1k.json", 2, 1, conns)  # warm up
        data = workdir / f"{name}.perf"
        rec = subprocess.Popen(["perf", "record", *(["-g"] if hooks else []), "-F", str(FREQ), "-p", str(e.proc.pid),
                                "-o", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        r = harness.run_wrk(port, "allowed-1k.json", seconds, 1, conns)
        rec.send_signal(2)
        rec.wait(30)
        counts = samples_by_region(data)
        per_req = {k: v / FREQ / r["requests"] * 1e6 for k, v in counts.items()}
        per_req["total"] = sum(per_req[k] for k in REGIONS)
        per_req["rps"] = r["rps"]
        if hooks and inst.startswith("dynamic"):
            for k, v in samples_by_hook(data).items():
                per_req[f"hook {k}"] = v / FREQ / r["requests"] * 1e6
        return per_req
    finally:
        e.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envoy", default=str(harness.ROOT / ".venv" / "bin" / "envoy"))
    ap.add_argument("--wasm", type=pathlib.Path,
                    default=harness.ROOT / "target" / "wasm32-wasip1" / "release" / "mcp_policy_filter.wasm")
    ap.add_argument("--minimal", type=pathlib.Path,
                    default=harness.BENCH / "minimal-filter" / "target" / "wasm32-wasip1" / "release"
                    / "mcpf_bench_minimal.wasm")
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=WASM[,policy=FILE]",
                    help="also measure another build or policy of this filter")
    ap.add_argument("--json", type=pathlib.Path, help="write every round's figures here")
    ap.add_argument("--hooks", action="store_true",
                    help="record call stacks and split the native build's time by the module's hooks")
    ap.add_argument("--only", help="comma-separated configuration keys to run (a is always run); default: all")
    ap.add_argument("--layout", choices=("shared", "pinned"), default="shared",
                    help="shared (the default): every process on every CPU; pinned: each front Envoy on the last "
                         "CPU, the upstream and wrk on the others, as bench/native_compare.py's pinned layout")
    ap.add_argument("--conns", type=int, help="wrk's connections (default 2 shared, 8 pinned)")
    ap.add_argument("--other-module", type=pathlib.Path, metavar="SO",
                    help="also run (n') on another build of the native module, interleaved with the rest: for "
                         "example one built with `make dynamic-module CARGO_TARGET_DIR=/tmp/x PGO=0`")
    args = ap.parse_args()
    if not shutil.which("perf"):
        raise SystemExit("perf not found: apt-get install linux-perf")
    if args.conns is not None and args.conns < 1:
        raise SystemExit("--conns must be at least 1")
    conns = args.conns or (8 if args.layout == "pinned" else 2)
    front_cpus, rest_cpus = harness.cpu_layout(args.layout)

    default = harness.policy_text(harness.BENCH / "policy-bench.json")
    access_log = harness.policy_text(harness.BENCH / "policy-bench-audit-access-log.json")
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="mcpf-perf-"))
    # key -> (label, instance template, wasm, policy)
    known: dict[str, tuple[str, str, pathlib.Path, str]] = {
        "a": ("(a) passthrough", "passthrough", args.wasm, default),
        "a'": ("(a') buffer only", "buffer", args.wasm, default),
        "c": ("(c) native mcp + rbac", "native", args.wasm, default),
        "m": ("minimal body-reading filter", "wasm", args.minimal, default),
        "b": ("this filter, audit log", "wasm", args.wasm, default),
        "b_al": ("this filter, audit access_log", "wasm", args.wasm, access_log),
        "b_nofs": ("this filter, access_log, no filter state", "wasm", args.wasm,
                   harness.policy_text(harness.BENCH / "policy-bench-audit-access-log-no-filter-state.json")),
        "n": ("native build, audit log", "dynamic", args.wasm, default),
        "n'": ("native build, no audit line (logger at warn)", "dynamic_quiet", args.wasm, default),
        "n'''": ("native build, audit access_log", "dynamic_access_log", args.wasm, access_log),
        "n0": ("minimal body-reading dynamic module", "dynamic_minimal", args.wasm, default),
    }
    wanted = list(known) if not args.only else ["a", *args.only.split(",")]
    unknown = [k for k in wanted if k not in known]
    if unknown:
        raise SystemExit(f"--only: unknown configuration(s) {unknown}; known: {', '.join(known)}")
    if native_compare.NATIVE.is_file() or args.other_module:
        native_compare.register_instances(workdir)
    elif any(k.startswith("n") for k in wanted):
        harness.log(f"{native_compare.NATIVE} missing (make dynamic-module): the native build is left out")
        wanted = [k for k in wanted if not k.startswith("n")]
    if "n0" in wanted and not native_compare.MINIMAL.is_file():
        harness.log(f"{native_compare.MINIMAL} missing (make bench-minimal): the floor (n0) is left out")
        wanted.remove("n0")
    configs = {known[k][0]: known[k][1:] for k in dict.fromkeys(wanted)}
    # Envoy finds a module by its name in the search directory it is started with: the other build
    # gets a directory of its own, set for its front Envoys only.
    other_label, search_dirs = "native build, no audit line, --other-module", {}
    if args.other_module:
        if not args.other_module.is_file():
            raise SystemExit(f"--other-module: no file {args.other_module}")
        other_dir = harness.module_search_dir(workdir / "other-module", {native_compare.NATIVE.name: args.other_module})
        OTHER_MODULES.add(args.other_module.resolve().name)
        configs[other_label] = known["n'"][1:]
        search_dirs[other_label] = str(other_dir)
    for v in args.variant:
        vname, _, rest = v.partition("=")
        parts = rest.split(",")
        pol = next((harness.policy_text(pathlib.Path(p[7:])) for p in parts if p.startswith("policy=")), default)
        configs[f"variant {vname}"] = ("wasm", pathlib.Path(parts[0]).resolve(), pol)

    rounds: dict[str, list[dict[str, float]]] = {n: [] for n in configs}
    up_cfg, up_port, up_admin = harness.upstream_config()
    # This process, and wrk and the upstream it starts, run on the rest (every CPU, shared).
    os.sched_setaffinity(0, rest_cpus)
    upstream = harness.Envoy(args.envoy, workdir, "upstream", up_cfg, 1, [])
    try:
        upstream.wait_ready(up_admin)
        for rnd in range(args.rounds):
            for i, n in enumerate(harness.round_order(list(configs), rnd)):
                inst, wasm, pol = configs[n]
                with harness.search_path(search_dirs.get(n)):
                    rounds[n].append(measure(args.envoy, workdir, inst, up_port, wasm.resolve(), pol, args.seconds,
                                             f"r{rnd}-{i}", args.hooks, conns, front_cpus))
                harness.log(f"round {rnd + 1} {n}: {rounds[n][-1]['total']:.1f} µs/request")
    finally:
        upstream.stop()
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))
    base = statistics.median(r["total"] for r in rounds["(a) passthrough"])
    where = (f"the front on CPU {sorted(front_cpus)}, the upstream and wrk on {sorted(rest_cpus)}"
             if args.layout == "pinned" else "every process on every CPU")
    print(f"perf record -F {FREQ}, wrk -t1 -c{conns} -d{args.seconds}s, {where}, {args.rounds} rounds; "
          "µs of front-Envoy CPU per request, medians\n")
    buffer = statistics.median(r["total"] for r in rounds["(a') buffer only"]) if "(a') buffer only" in rounds else None
    print("| configuration | requests/s | kernel | envoy | JIT (wasm) | module (native) | libc | total | total − (a) "
          "| total − (a') |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, rs in rounds.items():
        med = {k: statistics.median(r[k] for r in rs) for k in (*REGIONS, "total", "rps")}
        print(f"| {n} | {med['rps']:.0f} | " + " | ".join(f"{med[k]:.1f}" for k in (*REGIONS, "total"))
              + f" | {med['total'] - base:+.1f} | "
              + (f"{med['total'] - buffer:+.1f} |" if buffer is not None else "– |"))

    hooked = {n: rs for n, rs in rounds.items() if any(k.startswith("hook ") for k in rs[0])}
    if hooked:
        print("\nThe native build's hooks: µs of front-Envoy CPU per request under each, medians (a round without a "
              "sample under a hook counts 0)\n")
        print("| configuration | " + " | ".join(HOOKS) + " | all hooks | of which Envoy's ABI callbacks "
              "| Envoy's code outside the hooks |")
        print("|---|" + "---|" * (len(HOOKS) + 3))
        for n, rs in hooked.items():
            cells = [statistics.median(r.get(f"hook {h}", 0.0) for r in rs) for h in HOOKS]
            every = statistics.median(sum(r.get(f"hook {h}", 0.0) for h in HOOKS) for r in rs)
            calls = statistics.median(r.get("hook callbacks", 0.0) for r in rs)
            outside = statistics.median(r.get("hook envoy outside", 0.0) for r in rs)
            print(f"| {n} | " + " | ".join(f"{c:.1f}" for c in cells) + f" | {every:.1f} | {calls:.1f} "
                  f"| {outside:.1f} |")
        lost = {n: statistics.median(r.get("hook unattributed", 0.0) for r in rs) for n, rs in hooked.items()}
        print("\nSamples in an ABI callback whose stack shows no hook (counted outside the hooks), µs per "
              "request: " + ", ".join(f"{n} {v:.2f}" for n, v in lost.items()))


if __name__ == "__main__":
    main()
