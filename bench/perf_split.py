#!/usr/bin/env python3
"""Where a request's CPU goes inside the front Envoy, by code region, measured with Linux perf.

    .venv/bin/python bench/perf_split.py [--seconds 6] [--rounds 3] [--variant NAME=WASM[,policy=FILE]] ...

For each configuration, one front Envoy (`--concurrency 1`, the templates bench/harness.py renders) is
driven by wrk (`-t1 -c2`, the allowed 1 KiB tools/call) while `perf record -F 2999` samples it; the
samples are split by where they fell and turned into microseconds per request
(samples / frequency / requests):

    kernel   the Linux kernel (sockets, epoll, scheduling) on behalf of Envoy
    envoy    Envoy's own code: HTTP, the filter chain, the proxy-wasm host (every host call's
             C++ side: header maps, shared data, filter state, metrics, the logger) and V8's runtime
    JIT      code V8 generated: the filter's wasm functions and the wasm <-> host call stubs
    libc     memcpy, malloc and friends called from either

The configurations: (a) passthrough, (c) native mcp + RBAC, the minimal body-reading filter
(bench/minimal-filter), and this filter with the audit record as an info log line (`log`, the
default), as a filter-state value (`access_log`), and with `access_log` and `filter_state: false`.
Medians over the rounds are printed as a Markdown table. perf's own overhead inflates every figure
by roughly the same factor; compare the rows, not the absolute sum with bench/load.py's CPU column.

Needs `perf` (Debian `linux-perf`) and permission to profile Envoy (root, or
`kernel.perf_event_paranoid` ≤ 1). Not part of `make bench`: run by hand when attributing cost.
"""

from __future__ import annotations

import argparse
import json
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

FREQ = 2999
REGIONS = ("kernel", "envoy", "JIT", "libc")


def region(dso: str) -> str | None:
    if dso.startswith("[kernel"):
        return "kernel"
    if dso.startswith("[JIT]"):
        return "JIT"
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


def measure(envoy: str, workdir: pathlib.Path, inst: str, up_port: int, wasm: pathlib.Path, policy: str,
            seconds: int, name: str) -> dict[str, float]:
    e, port = load.start_front(envoy, workdir, name, inst, up_port, wasm, policy)
    try:
        e.wait_ready(e.admin_port)
        status, body = harness.post(port, (harness.BODIES / "allowed-1k.json").read_bytes())
        if status != 200 or b'"result"' not in body:
            raise SystemExit(f"{name}: unexpected reply {status} {body[:200]!r}")
        harness.run_wrk(port, "allowed-1k.json", 2, 1, 2)  # warm up
        data = workdir / f"{name}.perf"
        rec = subprocess.Popen(["perf", "record", "-F", str(FREQ), "-p", str(e.proc.pid), "-o", str(data)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        r = harness.run_wrk(port, "allowed-1k.json", seconds, 1, 2)
        rec.send_signal(2)
        rec.wait(30)
        counts = samples_by_region(data)
        per_req = {k: v / FREQ / r["requests"] * 1e6 for k, v in counts.items()}
        per_req["total"] = sum(per_req[k] for k in REGIONS)
        per_req["rps"] = r["rps"]
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
    args = ap.parse_args()
    if not shutil.which("perf"):
        raise SystemExit("perf not found: apt-get install linux-perf")

    def policy_text(path: pathlib.Path) -> str:
        return json.dumps(json.loads(path.read_text()), separators=(",", ":"))

    default = policy_text(harness.BENCH / "policy-bench.json")
    # name -> (instance template, wasm, policy)
    configs: dict[str, tuple[str, pathlib.Path, str]] = {
        "(a) passthrough": ("passthrough", args.wasm, default),
        "(c) native mcp + rbac": ("native", args.wasm, default),
        "minimal body-reading filter": ("wasm", args.minimal, default),
        "this filter, audit log": ("wasm", args.wasm, default),
        "this filter, audit access_log": ("wasm", args.wasm,
                                          policy_text(harness.BENCH / "policy-bench-audit-access-log.json")),
        "this filter, access_log, no filter state": (
            "wasm", args.wasm, policy_text(harness.BENCH / "policy-bench-audit-access-log-no-filter-state.json")),
    }
    for v in args.variant:
        vname, _, rest = v.partition("=")
        parts = rest.split(",")
        pol = next((policy_text(pathlib.Path(p[7:])) for p in parts if p.startswith("policy=")), default)
        configs[f"variant {vname}"] = ("wasm", pathlib.Path(parts[0]).resolve(), pol)

    workdir = pathlib.Path(tempfile.mkdtemp(prefix="mcpf-perf-"))
    rounds: dict[str, list[dict[str, float]]] = {n: [] for n in configs}
    up_port, up_admin = harness.free_port(), harness.free_port()
    upstream = harness.Envoy(args.envoy, workdir, "upstream",
                             harness.render("upstream.yaml", ADMIN_PORT=str(up_admin), PORT=str(up_port)), 1, [])
    try:
        upstream.wait_ready(up_admin)
        for rnd in range(args.rounds):
            order = list(configs) if rnd % 2 == 0 else list(reversed(configs))
            for i, n in enumerate(order):
                inst, wasm, pol = configs[n]
                rounds[n].append(measure(args.envoy, workdir, inst, up_port, wasm.resolve(), pol, args.seconds,
                                         f"r{rnd}-{i}"))
                harness.log(f"round {rnd + 1} {n}: {rounds[n][-1]['total']:.1f} µs/request")
    finally:
        upstream.stop()
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))
    base = statistics.median(r["total"] for r in rounds["(a) passthrough"])
    print(f"perf record -F {FREQ}, wrk -t1 -c2 -d{args.seconds}s, {args.rounds} rounds; "
          "µs of front-Envoy CPU per request, medians\n")
    print("| configuration | requests/s | kernel | envoy | JIT (wasm) | libc | total | total − (a) |")
    print("|---|---|---|---|---|---|---|---|")
    for n, rs in rounds.items():
        med = {k: statistics.median(r[k] for r in rs) for k in (*REGIONS, "total", "rps")}
        print(f"| {n} | {med['rps']:.0f} | " + " | ".join(f"{med[k]:.1f}" for k in (*REGIONS, "total"))
              + f" | {med['total'] - base:+.1f} |")


if __name__ == "__main__":
    main()
