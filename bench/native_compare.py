#!/usr/bin/env python3
"""The native build against the wasm build, passthrough and the buffer filter: the native build's
acceptance figures, side by side on loopback. `make bench` runs it with `--rounds 5 --out
BENCHMARKS.md`, which rewrites that file's section between the `bench:native` markers.

    make build dynamic-module bench-minimal
    .venv/bin/python bench/native_compare.py [--rounds 3] [--seconds 5] [--pin] [--only n,n''] [--out FILE]

One upstream Envoy (bench/envoy/upstream.yaml) and ten front Envoys (concurrency 1, no access
log), all at once: (a) passthrough, (a') buffer only, (c) Envoy's own `mcp` + `rbac` filters
(bench/envoy/filters-native.yaml), (b) the wasm filter + buffer, (b') the same with the wasm
logger at warn, (n) the native module (no buffer filter: it holds the request itself), (n') the
same without the audit line (its logger at warn), (n'') (n) with Envoy's log in a file
(`--log-path`: written in batches by Envoy's flush thread), (n''') (n) with `gateway.audit:
"access_log"` (bench/policy-bench-audit-access-log.json), and (n0) the minimal body-reading dynamic
module (bench/minimal-module, `make bench-minimal`): the floor of any native filter that holds and
reads the request on this Envoy, with no decision. All with bench/policy-bench.json and an allowed
1 KiB tools/call (bench/bodies). wrk drives each in interleaved rounds (order reversed every other
round); reported: requests/s, p50 and p99 latency, front-Envoy CPU µs per request (median over
rounds), and each Envoy's RSS after load; then the native build's targets, each a ratio or
difference within a round (median [min, max]), the CPU added split into user space and the kernel,
and the CPU the native build adds above the floor (n0).

By default every process shares every CPU, so wrk and the upstream compete with the front and
throughput ratios are compressed toward 1. `--pin` runs the fronts on the last CPU and the upstream
and wrk on the others, with 8 connections: the front is then the bottleneck, and a throughput ratio
is a ratio of the fronts' own cost per call. `--only` runs some configurations (with a, a' and c).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import statistics
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import harness  # noqa: E402  (bench/harness.py: the Envoy runner, wrk and /proc readers)
import load  # noqa: E402  (bench/load.py: its Envoy instances and start_front/ready_front)
import report  # noqa: E402  (bench/report.py: a marked section of a markdown file rewritten)

ROOT = harness.ROOT
NATIVE = ROOT / "target" / "dynamic-module" / "libmcp_policy_native.so"
WASM = ROOT / "target" / "wasm32-wasip1" / "release" / "mcp_policy_filter.wasm"
MINIMAL = ROOT / "bench" / "minimal-module" / "target" / "release" / "libmcpf_bench_minimal_module.so"
CONFIGS = {"a": "passthrough", "a'": "buffer", "c": "native", "b": "wasm", "b'": "wasm_quiet", "n": "dynamic",
           "n'": "dynamic_quiet", "n''": "dynamic_log_path",
           "n'''": "dynamic_access_log", "n0": "dynamic_minimal"}
LABELS = {"a": "(a) passthrough", "a'": "(a') buffer only", "c": "(c) Envoy's mcp + rbac filters", "b": "(b) wasm filter + buffer",
          "b'": "(b') (b), wasm log level warn", "n": "(n) native module",
          "n'": "(n') (n), dynamic_modules log level warn",
          "n''": "(n'') (n), Envoy's log in a file (--log-path)",
          "n'''": "(n''') (n), the audit record for the access log (`gateway.audit: \"access_log\"`)",
          "n0": "(n0) the minimal body-reading dynamic module (the floor)"}


# The section of BENCHMARKS.md that `--out` rewrites (`make bench` passes it).
BEGIN = "<!-- bench:native:begin (written by bench/native_compare.py; edit above or below) -->"
END = "<!-- bench:native:end -->"

# (what, per-round value for a configuration, target): the native build's acceptance figures. The
# CPU added is split into user space and the kernel (`/proc/PID/stat`): the kernel's share follows
# the timing of the load (waking wrk and the upstream on loopback) more than the filter's work, with
# the same system calls per call (docs/src/deploy/native-cost.md, Where the CPU time goes).
TARGETS = [
    ("throughput vs Envoy's mcp + rbac (c)", lambda rows, k, i: rows[k][i]["rps"] / rows["c"][i]["rps"], "≥ 1.25"),
    ("throughput vs the buffer filter (a')", lambda rows, k, i: rows[k][i]["rps"] / rows["a'"][i]["rps"], "≥ 0.90"),
    ("CPU µs added per call above (a')", lambda rows, k, i: rows[k][i]["cpu_us"] - rows["a'"][i]["cpu_us"], "≤ 20"),
    ("of which user space (Envoy's code and the module)",
     lambda rows, k, i: rows[k][i]["user_us"] - rows["a'"][i]["user_us"], "–"),
    ("of which the kernel", lambda rows, k, i: rows[k][i]["sys_us"] - rows["a'"][i]["sys_us"], "–"),
    ("p99 µs added above (a')", lambda rows, k, i: rows[k][i]["p99"] - rows["a'"][i]["p99"], "≤ 100"),
]


def register_instances(work: pathlib.Path) -> None:
    """Add the native build's front Envoys to bench/load.py's instances (`dynamic`, `dynamic_quiet`,
    `dynamic_log_path`, `dynamic_access_log`, and the floor `dynamic_minimal`), and point Envoy at
    both modules: one search directory (`work/modules`) with a link to each shared object.
    `bench/perf_split.py` runs the same ones."""
    modules = harness.module_search_dir(work / "modules", {so.name: so for so in (NATIVE, MINIMAL)})
    os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = str(modules)
    load.INSTANCES["dynamic_minimal"] = ("filters-dynamic-minimal.yaml", 1, [], "")
    load.INSTANCES["dynamic"] = ("filters-dynamic.yaml", 1, [], "")
    # No per-decision audit line (gateway.audit "log" writes it at info), as (b') for wasm.
    load.INSTANCES["dynamic_quiet"] = ("filters-dynamic.yaml", 1, ["--component-log-level", "dynamic_modules:warn"], "")
    # The audit line at info, but Envoy's log written by its file flush thread in batches instead of
    # one unbuffered write(2) per line to standard error.
    load.INSTANCES["dynamic_log_path"] = ("filters-dynamic.yaml", 1, ["--log-path", str(work / "n-log-path.log")], "")
    # The audit record in filter state for the access log, as load.py's variant audit_access_log.
    load.INSTANCES["dynamic_access_log"] = ("filters-dynamic.yaml", 1, [], "")
    access_log = harness.policy_text(harness.BENCH / "policy-bench-audit-access-log.json")
    load.OVERRIDES["dynamic_access_log"] = (WASM, access_log)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--envoy", default=str(ROOT / ".venv" / "bin" / "envoy"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--conns", type=int, default=2)
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path,
                    help="markdown file whose native-build section (between the bench:native markers) to rewrite")
    ap.add_argument("--only", help="comma-separated configurations to run (default: all); a, a' and c are "
                    "always run, as the targets are ratios against them")
    ap.add_argument("--pin", action="store_true",
                    help="front Envoys on the last CPU, the upstream and wrk on the others, and --conns 8 unless "
                         "given: each front is then the bottleneck, so throughput ratios are ratios of the "
                         "fronts' own cost (by default all share every CPU and the ratios are compressed toward 1)")
    args = ap.parse_args()
    configs = dict(CONFIGS)
    if args.only:
        wanted = {"a", "a'", "c", *args.only.split(",")}
        unknown = wanted - set(CONFIGS)
        if unknown:
            raise SystemExit(f"--only: unknown configuration(s) {sorted(unknown)}; known: {', '.join(CONFIGS)}")
        configs = {k: v for k, v in CONFIGS.items() if k in wanted}
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin and len(cpus) < 2:
        raise SystemExit("--pin needs at least two CPUs")
    front_cpus, rest_cpus = ({cpus[-1]}, set(cpus[:-1])) if args.pin else (set(cpus), set(cpus))
    if args.pin and "--conns" not in sys.argv:
        args.conns = 8
    needed = [(NATIVE, "make dynamic-module"), (WASM, "make build")]
    if "n0" in configs:
        needed.append((MINIMAL, "make bench-minimal"))
    for f, make in needed:
        if not f.is_file():
            raise SystemExit(f"{f} missing: {make}")
    policy = harness.policy_text(harness.BENCH / "policy-bench.json")
    work = pathlib.Path(tempfile.mkdtemp(prefix="native-compare-"))
    register_instances(work)
    up_cfg, up_port, up_admin = harness.upstream_config()
    # Processes inherit this process's CPU set: each is started with the set it is to run on.
    os.sched_setaffinity(0, rest_cpus)
    upstream = harness.Envoy(args.envoy, work, "upstream", up_cfg, 1, [])
    fronts: dict[str, tuple[harness.Envoy, int]] = {}
    try:
        upstream.wait_ready(up_admin)
        os.sched_setaffinity(0, front_cpus)
        for key, inst in configs.items():
            started = load.start_front(args.envoy, work, inst, inst, up_port, WASM, policy)
            fronts[key] = load.ready_front(started, args.envoy, work, inst, up_port, WASM, policy)
        os.sched_setaffinity(0, rest_cpus)
        body = (harness.BODIES / "allowed-1k.json").read_bytes()
        for key, (e, port) in fronts.items():
            status, answer = harness.post(port, body)
            if status != 200 or b'"result"' not in answer:
                raise SystemExit(f"{key}: not allowed ({status}): {answer[:300]!r}")
            harness.run_wrk(port, "allowed-1k.json", 1, 1, args.conns)  # warm-up
        rows: dict[str, list[dict]] = {k: [] for k in configs}
        order = list(configs)
        for r in range(args.rounds):
            for key in (order if r % 2 == 0 else order[::-1]):
                e, port = fronts[key]
                user0, sys0 = harness.proc_cpu(e.proc.pid)
                w = harness.run_wrk(port, "allowed-1k.json", args.seconds, 1, args.conns)
                user1, sys1 = harness.proc_cpu(e.proc.pid)
                n = max(w["requests"], 1)
                rows[key].append({"rps": w["rps"], "p50": w["latency_us"]["percentiles"]["50"],
                                  "p99": w["latency_us"]["percentiles"]["99"], "errors": w["non2xx"],
                                  "cpu_us": (user1 - user0 + sys1 - sys0) * 1e6 / n,
                                  "user_us": (user1 - user0) * 1e6 / n, "sys_us": (sys1 - sys0) * 1e6 / n})
        result = {}
        for key, runs in rows.items():
            e, _ = fronts[key]
            rss, _ = harness.proc_stat(e.proc.pid)
            result[key] = {m: statistics.median(x[m] for x in runs)
                           for m in ("rps", "p50", "p99", "cpu_us", "user_us", "sys_us")}
            result[key]["errors"] = sum(x["errors"] for x in runs)
            result[key]["rss_mib"] = rss / 1024
        pinned = f", fronts on CPU {sorted(front_cpus)}, upstream and wrk on {sorted(rest_cpus)}" if args.pin else ""
        out = [f"{args.rounds} rounds x {args.seconds}s, wrk -t1 -c{args.conns}, front Envoy concurrency 1{pinned}; "
               "medians", "",
               "| configuration | req/s | vs passthrough | p50 µs | p99 µs | CPU µs/req | RSS MiB | non-2xx |",
               "|---|---|---|---|---|---|---|---|"]
        base = result["a"]["rps"]
        for key, r in result.items():
            out.append(f"| {LABELS[key]} | {r['rps']:.0f} | {r['rps'] / base:.2f} | {r['p50']:.0f} | {r['p99']:.0f} | "
                       f"{r['cpu_us']:.1f} | {r['rss_mib']:.1f} | {r['errors']} |")
        out.append("")
        audited = [k for k in ("n", "n''", "n'''", "n0") if k in configs]
        heads = {"n": "(n) audit line to stderr", "n''": "(n'') `--log-path`", "n'''": "(n''') `access_log`",
                 "n0": "(n0) the floor, for reference: no decision"}
        out.append(f"| native build, per round: median [min, max] | {' | '.join(heads[k] for k in audited)} | target |")
        out.append("|---|" + "---|" * (len(audited) + 1))
        for what, fn, target in TARGETS:
            cells = []
            for key in audited:
                vals = [fn(rows, key, i) for i in range(args.rounds)]
                cells.append(f"{statistics.median(vals):.2f} [{min(vals):.2f}, {max(vals):.2f}]")
            out.append(f"| {what} | {' | '.join(cells)} | {target} |")
        if "n0" in configs:
            # What the module's own work adds: the floor holds and reads the request as the native
            # build does, so the rest of the native build's CPU is its decision and its effects.
            cells = []
            for key in audited:
                vals = [rows[key][i]["cpu_us"] - rows["n0"][i]["cpu_us"] for i in range(args.rounds)]
                cells.append("–" if key == "n0" else
                             f"{statistics.median(vals):.2f} [{min(vals):.2f}, {max(vals):.2f}]")
            out.append(f"| CPU µs added per call above the floor (n0) | {' | '.join(cells)} | – |")
        rss = " | ".join(f"{result[k]['rss_mib'] - result['a']['rss_mib']:.1f}" for k in audited)
        out.append(f"| RSS above passthrough, MiB (after the run) | {rss} | ≤ 8 |")
        print("\n".join(out))
        if args.out:
            when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            mach = harness.machine()
            section = "\n".join([BEGIN, "", f"#### Latest run: {when}, {mach['nproc']} cores, {mach['cpu']}", "",
                                 *out, "", END])
            report.write_markdown(args.out, section, BEGIN, END, heading="The native build")
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
    finally:
        for e, _ in fronts.values():
            e.stop()
        upstream.stop()


if __name__ == "__main__":
    main()
