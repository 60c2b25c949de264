#!/usr/bin/env python3
"""Load benchmark of mcp-policy-filter in a real Envoy on loopback, plus footprint.

    .venv/bin/python bench/load.py --out BENCHMARKS.md        # what `make bench` runs

Starts one upstream Envoy (direct_response: a fast MCP-shaped responder) and one front Envoy per
configuration, all at once, then drives them with wrk (Debian package) in interleaved rounds:

    (a)  passthrough: router only
    (a') buffer filter + router (what the wasm filter's deployment adds besides the wasm itself)
    (b)  this filter (bench/policy-bench.json: list_vms allowed, a limit that never triggers) + buffer
         + router, an allowed 1 KiB tools/call
    (b') (b) with `--component-log-level wasm:warn`: no per-decision log line
    (c)  Envoy's native envoy.filters.http.mcp + rbac allowing the same tool, same call
    (d)  this filter refusing a denied 1 KiB call with a local reply (same Envoy as (b))
    (e)  (b) with --concurrency 2

Every figure that compares configurations is a ratio within one round (configurations run back to
back, order reversed every other round), summarised as median [min, max] over the rounds; the
front Envoy's CPU time per request (/proc/PID/stat) is reported next to throughput and latency.
Then (a), (b), (c) again with more connections (--sat-conns, default 8), near saturation.
Then: Envoy RSS per configuration, memory per tracked grant, wasm size per release profile
(and wasm-opt from npm binaryen), the criterion results of `cargo bench`, a latency plot, and the
results section of BENCHMARKS.md between its markers.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import tempfile
import time

from footprint import criterion_results, grant_memory, wasm_sizes
from harness import (
    BENCH,
    BODIES,
    ROOT,
    Envoy,
    front_config,
    log,
    machine,
    policy_text,
    post,
    proc_stat,
    round_order,
    run_wrk,
    summary,
    timed_wrk,
    upstream_config,
)
from report import fmt_ratio, fmt_us, human_ns, plot, render_results, write_markdown

# name -> (label, envoy instance, body)
CONFIGS = {
    "a": ("(a) passthrough", "passthrough", "allowed-1k.json"),
    "a'": ("(a') buffer only", "buffer", "allowed-1k.json"),
    "b": ("(b) this filter, allowed", "wasm", "allowed-1k.json"),
    "b'": ("(b') (b), wasm log level warn", "wasm_quiet", "allowed-1k.json"),
    "c": ("(c) native mcp + rbac, allowed", "native", "allowed-1k.json"),
    "d": ("(d) this filter, denied", "wasm", "denied-1k.json"),
    "e": ("(e) (b) with --concurrency 2", "wasm_c2", "allowed-1k.json"),
}
# instance -> (filters template, concurrency, extra envoy args, listener extra)
INSTANCES = {
    "passthrough": ("filters-passthrough.yaml", 1, [], ""),
    "buffer": ("filters-buffer.yaml", 1, [], ""),
    "wasm": ("filters-wasm.yaml", 1, [], ""),
    "wasm_quiet": ("filters-wasm.yaml", 1, ["--component-log-level", "wasm:warn"], ""),
    "native": ("filters-native.yaml", 1, [], ""),
    # Two connections from wrk, one per worker: exact balance instead of the kernel's reuse_port hash.
    "wasm_c2": ("filters-wasm.yaml", 2, [], "    enable_reuse_port: false\n    connection_balance_config: {exact_balance: {}}"),
}
# instance -> (wasm, policy JSON) replacing the defaults: variants given with --variant.
OVERRIDES: dict[str, tuple[pathlib.Path, str]] = {}
# (numerator, denominator, what)
RATIOS = [
    ("b", "a", "throughput (b)/(a): filter vs passthrough"),
    ("b", "c", "throughput (b)/(c): filter vs native mcp+rbac"),
    ("d", "a", "throughput (d)/(a): denied (local reply) vs passthrough"),
    ("b", "a'", "throughput (b)/(a'): the wasm filter alone"),
    ("b'", "b", "throughput (b')/(b): wasm log level warn vs info"),
    ("c", "a", "throughput (c)/(a): native vs passthrough"),
    ("e", "b", "throughput (e)/(b): 2 workers vs 1"),
]



def wasm_size_budget() -> int:
    """`WASM_SIZE_BUDGET` of the Makefile: the size `make size-check` holds the module to."""
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("WASM_SIZE_BUDGET :="):
            return int(line.split(":=")[1])
    raise SystemExit("Makefile: no WASM_SIZE_BUDGET")

def start_front(envoy: str, workdir: pathlib.Path, name: str, instance: str, upstream_port: int, wasm: pathlib.Path,
                policy: str) -> tuple[Envoy, int]:
    filters, conc, extra, listener_extra = INSTANCES[instance]
    wasm, policy = OVERRIDES.get(instance, (wasm, policy))
    cfg, port, admin = front_config(filters, policy, upstream_port, listener_extra, WASM=str(wasm))
    e = Envoy(envoy, workdir, name, cfg, conc, extra)
    e.admin_port = admin
    return e, port


def ready_front(started: tuple[Envoy, int], envoy: str, workdir: pathlib.Path, instance: str, upstream_port: int,
                wasm: pathlib.Path, policy: str, attempts: int = 3) -> tuple[Envoy, int]:
    """Wait for a front Envoy; if it lost its ports to another process between `free_port` and its
    bind ("Address already in use"), start it again on new ports (at most `attempts` times)."""
    e, port = started
    for attempt in range(attempts):
        try:
            e.wait_ready(e.admin_port)
            return e, port
        except SystemExit:
            if attempt + 1 == attempts or "Address already in use" not in e.log.read_text(errors="replace"):
                raise
            log(f"{instance}: a port was taken before Envoy bound it; starting it again on new ports")
            e, port = start_front(envoy, workdir, f"{instance}-retry{attempt + 1}", instance, upstream_port, wasm, policy)
    return e, port


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, help="markdown file whose results section to rewrite")
    ap.add_argument("--json", type=pathlib.Path, default=BENCH / "results.json")
    ap.add_argument("--plot", type=pathlib.Path, default=BENCH / "latency.png")
    ap.add_argument("--envoy", default=str(ROOT / ".venv" / "bin" / "envoy"))
    ap.add_argument("--wasm", type=pathlib.Path,
                    default=ROOT / "target" / "wasm32-wasip1" / "release" / "mcp_policy_filter.wasm")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--conns", type=int, default=2)
    ap.add_argument("--configs", default="a,a',b,b',c,d,e")
    ap.add_argument("--sat-conns", type=int, default=8,
                    help="also run (a), (b), (c) with this many connections, near saturation (0: skip)")
    ap.add_argument("--sat-rounds", type=int, default=3)
    ap.add_argument("--grants", type=int, default=20000, help="distinct grants for memory per grant (0: skip)")
    ap.add_argument("--no-variants", action="store_true", help="skip building opt-level 3 and z wasm variants")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=WASM[,policy=FILE][,quiet]",
                    help="also measure another build or policy of the filter (for profiling), e.g. "
                         "nolog=target/x.wasm,quiet; reported per configuration and against (a)")
    ap.add_argument("--criterion-dir", type=pathlib.Path,
                    default=pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "criterion")
    args = ap.parse_args()
    t_start = time.monotonic()

    if not shutil.which("wrk"):
        raise SystemExit("wrk not found: apt-get install -y wrk")
    if not args.wasm.exists():
        raise SystemExit(f"{args.wasm} missing: make build")
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    policy = policy_text(BENCH / "policy-bench.json")
    for spec in args.variant:
        vname, _, rest = spec.partition("=")
        parts = rest.split(",")
        vwasm = pathlib.Path(parts[0] or args.wasm).resolve()
        vpolicy = policy
        quiet = False
        for part in parts[1:]:
            if part.startswith("policy="):
                vpolicy = policy_text(pathlib.Path(part[7:]))
            elif part == "quiet":
                quiet = True
        inst = f"variant_{vname}"
        INSTANCES[inst] = ("filters-wasm.yaml", 1, ["--component-log-level", "wasm:warn"] if quiet else [], "")
        OVERRIDES[inst] = (vwasm, vpolicy)
        CONFIGS[f"v:{vname}"] = (f"variant {vname}", inst, "allowed-1k.json")
        RATIOS.append((f"v:{vname}", "a", f"throughput variant {vname}/(a)"))
        names.append(f"v:{vname}")
    if "v:minimal" in names and "b" in names:
        # The throughput target's baseline (make bench passes bench/minimal-filter as --variant minimal=…).
        RATIOS.append(("b", "v:minimal", "throughput (b)/minimal: this filter vs the minimal body-reading filter"))
        for n in names:
            if n.startswith("v:") and n != "v:minimal":
                RATIOS.append((n, "v:minimal", f"throughput variant {n[2:]}/minimal"))
                if "c" in names:
                    RATIOS.append((n, "c", f"throughput variant {n[2:]}/(c): vs native mcp+rbac"))
    envoy_version = subprocess.run([args.envoy, "--version"], capture_output=True, text=True).stdout.strip()
    m = re.search(r"version: \S+?/(\d+\.\d+\.\d+)/", envoy_version)
    envoy_version = f"Envoy {m.group(1)}" if m else envoy_version
    mach = machine()
    log(f"{mach['nproc']} cores, {mach['cpu']}, load {' '.join(mach['loadavg_start'])}")

    workdir = pathlib.Path(tempfile.mkdtemp(prefix="mcpf-bench-"))
    envoys: dict[str, tuple[Envoy, int]] = {}
    ok = False
    try:
        up_cfg, up_port, up_admin = upstream_config()
        upstream = Envoy(args.envoy, workdir, "upstream", up_cfg, 1, [])
        instances = sorted({CONFIGS[n][1] for n in names})
        for inst in instances:
            envoys[inst] = start_front(args.envoy, workdir, inst, inst, up_port, args.wasm.resolve(), policy)
        upstream.wait_ready(up_admin)
        for inst in instances:
            envoys[inst] = ready_front(envoys[inst], args.envoy, workdir, inst, up_port, args.wasm.resolve(), policy)
        log(f"started upstream and {len(envoys)} front Envoys: {', '.join(instances)}")

        # Each configuration must do what it claims before it is timed.
        for n in names:
            _, port = envoys[CONFIGS[n][1]]
            status, body = post(port, (BODIES / CONFIGS[n][2]).read_bytes())
            want_denied = n == "d"
            ok = status == 200 and ((b"-31001" in body) if want_denied else (b'"result"' in body))
            if not ok:
                raise SystemExit(f"config {n}: unexpected reply {status} {body[:300]!r}")
        log("every configuration answers as expected; warming up")
        for n in names:
            run_wrk(envoys[CONFIGS[n][1]][1], CONFIGS[n][2], args.warmup, args.threads, args.conns)

        def measure(n: str, conns: int) -> tuple[dict, int]:
            """One wrk run of configuration `n` with `conns` connections: its results with the Envoy's
            CPU time per request, and the Envoy's RSS (KiB) after it."""
            e, port = envoys[CONFIGS[n][1]]
            res = timed_wrk(e.proc.pid, port, CONFIGS[n][2], args.seconds, args.threads, conns)
            res["cpu_us_per_req"] = res.pop("cpu_us")
            return res, proc_stat(e.proc.pid)[0]

        runs: dict[str, list[dict]] = {n: [] for n in names}
        for r in range(args.rounds):
            for n in round_order(names, r):
                res, rss = measure(n, args.conns)
                res["rss_kib"] = rss
                runs[n].append(res)
            line = "  ".join(f"{n}={runs[n][-1]['rps']:.0f}" for n in names)
            log(f"round {r + 1}/{args.rounds} req/s: {line}")

        sat: dict[str, list[dict]] = {}
        sat_names = [n for n in ["a", "b", "c"] if n in names]
        if args.sat_conns and sat_names:
            sat = {n: [] for n in sat_names}
            for r in range(args.sat_rounds):
                for n in round_order(sat_names, r):
                    sat[n].append(measure(n, args.sat_conns)[0])
                line = "  ".join(f"{n}={sat[n][-1]['rps']:.0f}" for n in sat_names)
                log(f"saturation round {r + 1}/{args.sat_rounds} (-c{args.sat_conns}) req/s: {line}")

        rss = {}
        for inst, (e, _) in envoys.items():
            rss[inst], _ = proc_stat(e.proc.pid)
        rss["upstream (direct_response)"], _ = proc_stat(upstream.proc.pid)
        decision_stats = {inst: e.stats("mcp_policy") for inst, (e, _) in envoys.items() if inst.startswith("wasm")}
        rbac_stats = envoys["native"][0].stats("rbac") if "native" in envoys else {}

        grants = None
        if args.grants:
            log(f"memory per grant: {args.grants} distinct grants")
            started = start_front(args.envoy, workdir, "grants", "wasm_quiet", up_port, args.wasm.resolve(), policy)
            grants = grant_memory(started, workdir, args.grants)
            log(f"  {grants['bytes_per_grant']:.0f} RSS bytes, {grants['heap_bytes_per_grant']} heap bytes per grant "
                f"(RSS {grants['rss0_kib']} -> "
                f"{grants['rss1_kib']} KiB, {grants['grants']} new grants tracked)")

        log("wasm sizes")
        wasm = wasm_sizes(args.wasm, not args.no_variants)
        upstream.stop()
        ok = True
    finally:
        for e, _ in envoys.values():
            e.stop()
        if "upstream" in locals():
            upstream.stop()
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"failed: Envoy configs and logs kept in {workdir}")

    # ---- summaries
    configs = {}
    for n in names:
        rs = runs[n]
        pct = lambda q: statistics.median(r["latency_us"]["percentiles"][q] for r in rs)  # noqa: E731
        configs[n] = {
            "runs": rs,
            "rss_kib": rs[-1]["rss_kib"],
            "summary": {
                "rps": statistics.median(r["rps"] for r in rs),
                "p50": pct("50"), "p90": pct("90"), "p99": pct("99"), "p99.9": pct("99.9"),
                "cpu_us_per_req": statistics.median(r["cpu_us_per_req"] for r in rs),
                "errors": sum(r["non2xx"] + sum(r["errors"].values()) for r in rs),
            },
        }
    ratios, diffs = {}, {}
    for num, den, _ in RATIOS:
        if num in runs and den in runs:
            ratios[f"{num}/{den}"] = summary([x["rps"] / y["rps"] for x, y in zip(runs[num], runs[den])])

    def diff(key: str, a: str, b: str, f) -> None:
        if a in runs and b in runs:
            diffs[key] = summary([f(x) - f(y) for x, y in zip(runs[a], runs[b])])

    diff("p99_b_minus_a", "b", "a", lambda r: r["latency_us"]["percentiles"]["99"])
    diff("p50_b_minus_a", "b", "a", lambda r: r["latency_us"]["percentiles"]["50"])
    diff("p99_b_minus_c", "b", "c", lambda r: r["latency_us"]["percentiles"]["99"])
    diff("cpu_b_minus_a", "b", "a", lambda r: r["cpu_us_per_req"])
    diff("cpu_b_minus_abuf", "b", "a'", lambda r: r["cpu_us_per_req"])
    diff("cpu_c_minus_a", "c", "a", lambda r: r["cpu_us_per_req"])
    for n in names:
        if n.startswith("v:") and "a" in runs:
            diff(f"cpu_{n}_minus_a", n, "a", lambda r: r["cpu_us_per_req"])

    saturation = None
    if sat:
        saturation = {
            "conns": args.sat_conns, "rounds": args.sat_rounds,
            "configs": {n: {"rps": statistics.median(r["rps"] for r in rs),
                            "p50": statistics.median(r["latency_us"]["percentiles"]["50"] for r in rs),
                            "p99": statistics.median(r["latency_us"]["percentiles"]["99"] for r in rs),
                            "cpu_us_per_req": statistics.median(r["cpu_us_per_req"] for r in rs),
                            "errors": sum(r["non2xx"] + sum(r["errors"].values()) for r in rs)}
                        for n, rs in sat.items()},
            "ratios": {f"{x}/{y}": summary([p["rps"] / q["rps"] for p, q in zip(sat[x], sat[y])])
                       for x, y in [("b", "a"), ("b", "c"), ("c", "a")] if x in sat and y in sat},
        }

    micro = criterion_results(args.criterion_dir)
    one_k = next((r for r in micro if r["id"] == "decision/allowed/1KiB"), None)
    shipped = wasm[0]["bytes"]
    targets = []

    def target(what: str, value: str, tgt: str, met, note: str = "") -> None:
        verdict = "n/a" if met is None else ("**yes**" if met else "**no**")
        targets.append({"what": what, "value": value, "target": tgt, "met": verdict + note})

    if "b/a" in ratios:
        target("throughput (b)/(a): filter vs passthrough", fmt_ratio(ratios["b/a"]), "≥ 0.92",
               ratios["b/a"]["median"] >= 0.92)
    if "p99_b_minus_a" in diffs:
        d = diffs["p99_b_minus_a"]
        spread = d["max"] - d["min"]
        target("p99(b) − p99(a), µs", fmt_us(d), "≤ 100", d["median"] <= 100,
               f" (inconclusive: the rounds spread over {spread:.0f} µs)" if spread > 400 else "")
    if "b/c" in ratios:
        target("throughput (b)/(c): filter vs native mcp+rbac", fmt_ratio(ratios["b/c"]), "≥ 1.0",
               ratios["b/c"]["median"] >= 1.0)
    if "d/a" in ratios:
        target("throughput (d)/(a): denied (local reply) vs passthrough", fmt_ratio(ratios["d/a"]), "–", None)
    if one_k:
        target("native decision, allowed 1 KiB call (criterion median)", human_ns(one_k["ns"]), "≤ 2 µs",
               one_k["ns"] <= 2000)
    v8 = ROOT / "bench" / "v8-decision" / "target" / "result.json"
    if v8.exists():
        t = json.loads(v8.read_text())
        at = datetime.datetime.fromtimestamp(v8.stat().st_mtime, datetime.timezone.utc).strftime("%H:%M UTC")
        target(f"the same decision inside V8 (`make bench-v8` at {at}: Node.js, opt-level z, wasm-opt -Oz; best of 5)",
               f"{t['us_per_decision_best']:.2f} µs", "–", None)
    v8r = ROOT / "bench" / "v8-decision" / "target" / "request.json"
    if v8r.exists():
        t = json.loads(v8r.read_text())
        target("the whole allowed request's work in the module inside V8 (`bench/v8-decision/request.mjs`: the "
               f"module benchmarked behind an emulated proxy-wasm host, {t['host_calls_per_request']} host calls; "
               "best of 5)", f"{t['us_per_request_best']:.2f} µs", "–", None)
    budget = wasm_size_budget()
    target("wasm size (the module benchmarked, from `make build`)", f"{shipped / 1024:.0f} KiB ({shipped} B)",
           f"≤ {budget:,} B (Makefile `WASM_SIZE_BUDGET`, the target)", shipped <= budget)

    results = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": mach, "envoy": envoy_version,
        "params": {"rounds": args.rounds, "seconds": args.seconds, "warmup": args.warmup, "threads": args.threads,
                   "conns": args.conns},
        "configs": configs, "ratios": ratios, "diffs": diffs, "targets": targets,
        "rss": rss, "grants": grants, "saturation": saturation, "decision_stats": decision_stats, "rbac_stats": rbac_stats,
        "wasm": [{k: (str(v) if k == "path" else v) for k, v in w.items()} for w in wasm],
        "micro": micro,
        "elapsed_s": time.monotonic() - t_start,
    }
    args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False))
    labels = {n: c[0] for n, c in CONFIGS.items()}
    plot(results, args.plot, labels)
    section = render_results(results, labels, RATIOS)
    if args.out:
        write_markdown(args.out, section)
        log(f"wrote {args.out}, {args.json}, {args.plot}")
    # The ratio table on stdout.
    print()
    print("\n".join(line for line in section.splitlines() if line.startswith("|") or line.startswith("####")))


if __name__ == "__main__":
    main()
