#!/usr/bin/env python3
"""The native build against the wasm build, passthrough and the buffer filter: the native build's
acceptance figures, side by side on loopback. `make bench` runs it with `--rounds 5 --out
BENCHMARKS.md` in each layout (the pinned one with two CPUs or more), and each run rewrites its own
section of that file (between the `bench:native` markers for the pinned layout,
`bench:native-shared` for the shared one).

    make build dynamic-module bench-minimal
    .venv/bin/python bench/native_compare.py [--rounds 3] [--seconds 5] [--layout pinned|shared]
                                             [--conns N] [--latency-conns N] [--only n,n''] [--out FILE]

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
difference within a round (median [min, max], and from 6 rounds on the median's 95 % interval:
`harness.median_interval`), the CPU added split into user space and the kernel,
and the CPU the native build adds above the floor (n0).

Two layouts of the processes on the CPUs:

- `pinned` (the default with two CPUs or more): the front Envoys on the last CPU, the upstream and
  wrk on the others, and each front measured in two phases of interleaved rounds. Capacity:
  `--conns` connections (8), so that the front's CPU is the busiest one (the table gives how busy:
  requests/s times CPU per request) and a throughput ratio comes close to a ratio of the fronts'
  own cost per call; throughput and CPU per call come from it. Where the front is less than fully
  busy, the other CPU (wrk and the upstream) limits it too, and a ratio lies between the cost ratio
  and 1. Latency: `--latency-conns` connections (1), so that no request waits behind another in
  the front and a p99 added is the time the filter adds to a call, not a longer queue (at
  capacity, a front that serves 10 % fewer calls a second holds each of its 8 queued calls about
  11 % longer); p50 and p99 come from it.
- `shared` (`--layout shared`): every process on every CPU, one phase with 2 connections, the load
  of `bench/load.py`. wrk and the upstream compete with the front for the same CPUs, so throughput
  ratios are compressed toward 1, and even the floor (n0), which decides nothing, comes out close to
  1.25 times the throughput of (c).

CPU per request depends on the calls in flight (each wake-up of the front is shared by the calls it
finds waiting): compare it within one layout and phase.

`--only` runs some configurations (with a, a' and c).

`--other-module SO` adds (x): (n''') on another build of the module (for example one built with
`make dynamic-module CARGO_TARGET_DIR=/tmp/other` from a changed tree, with its own profile), in
the same rounds as the rest, and a table of (x) against (n''') round by round. A change of a few µs
a call shows only this way: two runs an hour apart can differ by more (docs/src/deploy/native-cost.md,
Code lines per call).
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
          "n0": "(n0) the minimal body-reading dynamic module (the floor)",
          "x": "(x) (n''') on the build given by --other-module"}
# The instance of (x), the configuration --other-module adds.
OTHER = "dynamic_access_log_other"


# The sections of BENCHMARKS.md that `--out` rewrites (`make bench` passes it), one per layout.
MARKERS = {
    "pinned": ("<!-- bench:native:begin (written by bench/native_compare.py; edit above or below) -->",
               "<!-- bench:native:end -->"),
    "shared": ("<!-- bench:native-shared:begin (written by bench/native_compare.py --layout shared; "
               "edit above or below) -->", "<!-- bench:native-shared:end -->"),
}

# (what, per-round value for a configuration, target, phase): the native build's acceptance figures,
# each from the rounds of its phase (`capacity` or `latency`; the shared layout has one phase, which
# serves both). The CPU added is split into user space and the kernel (`/proc/PID/stat`): the
# kernel's share follows the timing of the load (waking wrk and the upstream on loopback) more than
# the filter's work, with the same system calls per call (docs/src/deploy/native-cost.md, Where the
# CPU time goes).
TARGETS = [
    ("throughput vs Envoy's mcp + rbac (c)",
     lambda rows, k, i: rows[k][i]["rps"] / rows["c"][i]["rps"], "≥ 1.25", "capacity"),
    ("throughput vs the buffer filter (a')", lambda rows, k, i: rows[k][i]["rps"] / rows["a'"][i]["rps"], "≥ 0.90",
     "capacity"),
    ("CPU µs added per call above (a')", lambda rows, k, i: rows[k][i]["cpu_us"] - rows["a'"][i]["cpu_us"], "≤ 20",
     "capacity"),
    ("of which user space (Envoy's code and the module)",
     lambda rows, k, i: rows[k][i]["user_us"] - rows["a'"][i]["user_us"], "–", "capacity"),
    ("of which the kernel", lambda rows, k, i: rows[k][i]["sys_us"] - rows["a'"][i]["sys_us"], "–", "capacity"),
    ("p99 µs added above (a')", lambda rows, k, i: rows[k][i]["p99"] - rows["a'"][i]["p99"], "≤ 100", "latency"),
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
    # (x): the access-log front and policy, its module from another search directory.
    load.INSTANCES[OTHER] = load.INSTANCES["dynamic_access_log"]
    load.OVERRIDES[OTHER] = load.OVERRIDES["dynamic_access_log"]


def measure(fronts: dict[str, tuple[harness.Envoy, int]], rounds: int, seconds: int,
            conns: int) -> dict[str, list[dict]]:
    """Interleaved rounds of wrk against each front (order reversed every other round): per round
    and configuration, requests/s, p50 and p99, non-2xx answers, and the front's CPU per request
    (`/proc/PID/stat`, user space and the kernel)."""
    rows: dict[str, list[dict]] = {k: [] for k in fronts}
    for r in range(rounds):
        for key in harness.round_order(list(fronts), r):
            e, port = fronts[key]
            w = harness.timed_wrk(e.proc.pid, port, "allowed-1k.json", seconds, 1, conns)
            rows[key].append({"rps": w["rps"], "p50": w["latency_us"]["percentiles"]["50"],
                              "p99": w["latency_us"]["percentiles"]["99"], "errors": w["non2xx"],
                              **{m: w[m] for m in ("cpu_us", "user_us", "sys_us")}})
    return rows


def spread(vals: list[float]) -> str:
    """Per-round values as median [min, max], as bench/load.py reports its ratios, then the
    median's 95 % interval (`harness.median_interval`) when there are rounds enough for one."""
    ci = harness.median_interval(vals)
    return report.fmt_ratio(harness.summary(vals), 2) + (f" ({ci[0]:.2f} to {ci[1]:.2f})" if ci else "")


def report_tables(phases: dict[str, dict[str, list[dict]]], rss: dict[str, float], rounds: int, head: str,
                  configs: dict[str, str]) -> list[str]:
    """The per-configuration table and the targets' table, as markdown lines. `phases` maps
    `capacity` and `latency` to their rounds (the same rounds in the shared layout)."""
    cap, lat = phases["capacity"], phases["latency"]
    # Rounds whose non-2xx answers count: both phases', or the shared layout's one phase once.
    counted = [cap, lat] if lat is not cap else [cap]
    med = {k: {m: statistics.median(x[m] for x in cap[k]) for m in ("rps", "cpu_us")} for k in configs}
    for k in configs:
        med[k].update({m: statistics.median(x[m] for x in lat[k]) for m in ("p50", "p99")})
        med[k]["errors"] = sum(x["errors"] for rows in counted for x in rows[k])
    out = [head, "",
           "| configuration | req/s | vs passthrough | CPU µs/req | front CPU busy | p50 µs | p99 µs | RSS MiB | "
           f"non-2xx{' (both phases)' if len(counted) == 2 else ''} |",
           "|---|---|---|---|---|---|---|---|---|"]
    base = med["a"]["rps"]
    for key, r in med.items():
        busy = r["rps"] * r["cpu_us"] / 1e6
        out.append(f"| {LABELS[key]} | {r['rps']:.0f} | {r['rps'] / base:.2f} | {r['cpu_us']:.1f} | {busy:.0%} | "
                   f"{r['p50']:.0f} | {r['p99']:.0f} | {rss[key]:.1f} | {r['errors']} |")
    out.append("")
    audited = [k for k in ("n", "n''", "n'''", "x", "n0") if k in configs]
    if not audited:
        return out
    heads = {"n": "(n) audit line to stderr", "n''": "(n'') `--log-path`", "n'''": "(n''') `access_log`",
             "x": "(x) (n''') on the other build", "n0": "(n0) the floor, for reference: no decision"}
    per_round = "median [min, max]" + (" (the median's 95 % interval)" if harness.median_interval_rank(rounds) else "")
    out.append(f"| native build, per round: {per_round} | {' | '.join(heads[k] for k in audited)} | target |")
    out.append("|---|" + "---|" * (len(audited) + 1))
    for what, fn, target, phase in TARGETS:
        rows = phases[phase]
        cells = [spread([fn(rows, key, i) for i in range(rounds)]) for key in audited]
        out.append(f"| {what} | {' | '.join(cells)} | {target} |")
    if "n0" in configs:
        # What the module's own work adds: the floor holds and reads the request as the native
        # build does, so the rest of the native build's CPU is its decision and its effects.
        cells = ["–" if key == "n0" else
                 spread([cap[key][i]["cpu_us"] - cap["n0"][i]["cpu_us"] for i in range(rounds)]) for key in audited]
        out.append(f"| CPU µs added per call above the floor (n0) | {' | '.join(cells)} | – |")
    added = " | ".join(f"{rss[k] - rss['a']:.1f}" for k in audited)
    out.append(f"| RSS above passthrough, MiB (after the run) | {added} | ≤ 8 |")
    if "x" in configs and "n'''" in configs:
        out += ["", *other_table(phases, rounds, per_round)]
    return out


def other_table(phases: dict[str, dict[str, list[dict]]], rounds: int, what: str) -> list[str]:
    """(x), (n''') on the other build, against (n''') on this one, each figure paired within a round:
    what a change to the module does to a call."""
    cap, lat = phases["capacity"], phases["latency"]
    x, n = "x", "n'''"
    rows = [("throughput, (x) / (n''')", [cap[x][i]["rps"] / cap[n][i]["rps"] for i in range(rounds)]),
            ("CPU µs per call, (x) − (n''')", [cap[x][i]["cpu_us"] - cap[n][i]["cpu_us"] for i in range(rounds)]),
            ("p99 µs, (x) − (n''')", [lat[x][i]["p99"] - lat[n][i]["p99"] for i in range(rounds)])]
    more = sum(1 for i in range(rounds) if cap[x][i]["cpu_us"] > cap[n][i]["cpu_us"])
    return [f"| the other build against this one, per round: {what} | |", "|---|---|",
            *(f"| {name} | {spread(vals)} |" for name, vals in rows),
            f"| rounds in which (x) used more CPU a call | {more} of {rounds} |"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--envoy", default=str(ROOT / ".venv" / "bin" / "envoy"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--layout", choices=("pinned", "shared"),
                    help="pinned: the fronts on the last CPU, the upstream and wrk on the others, a capacity phase "
                         "and a latency phase (the default with two CPUs or more); shared: every process on every "
                         "CPU, one phase (the default with one CPU)")
    ap.add_argument("--conns", type=int,
                    help="wrk's connections: in the pinned layout's capacity phase (default 8), or in the shared "
                         "layout's one phase (default 2)")
    ap.add_argument("--latency-conns", type=int,
                    help="wrk's connections in the pinned layout's latency phase (default 1)")
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path,
                    help="markdown file whose native-build section for this layout (between the bench:native or "
                         "bench:native-shared markers) to rewrite")
    ap.add_argument("--only", help="comma-separated configurations to run (default: all); a, a' and c are "
                    "always run, as the targets are ratios against them")
    ap.add_argument("--other-module", type=pathlib.Path, metavar="SO",
                    help="also run (x), (n''') on this build of the module, and compare it with (n''') round by "
                         "round (with --only, name both n''' and x)")
    args = ap.parse_args()
    known = dict(CONFIGS)
    if args.other_module:
        if not args.other_module.is_file():
            raise SystemExit(f"--other-module: no file {args.other_module}")
        if args.out:
            raise SystemExit("--other-module: not with --out (its section reports the build in the tree)")
        known["x"] = OTHER
    configs = known
    if args.only:
        wanted = {"a", "a'", "c", *args.only.split(",")}
        unknown = wanted - set(known)
        if unknown:
            raise SystemExit(f"--only: unknown configuration(s) {sorted(unknown)}; known: {', '.join(known)}")
        configs = {k: v for k, v in known.items() if k in wanted}
    cpus = sorted(os.sched_getaffinity(0))
    layout = args.layout or ("pinned" if len(cpus) >= 2 else "shared")
    if not args.layout and layout == "shared":
        harness.log("one CPU: the shared layout (the pinned one needs two)")
    pinned = layout == "pinned"
    front_cpus, rest_cpus = harness.cpu_layout(layout)
    for flag, value in (("--conns", args.conns), ("--latency-conns", args.latency_conns)):
        if value is not None and value < 1:
            raise SystemExit(f"{flag} must be at least 1")
    if args.latency_conns is not None and not pinned:
        raise SystemExit("--latency-conns: the shared layout has one phase; give --conns")
    conns = args.conns or (8 if pinned else 2)
    latency_conns = args.latency_conns or 1
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
    # This process, and wrk and the upstream it starts, run on the rest; the fronts on their own.
    os.sched_setaffinity(0, rest_cpus)
    upstream = harness.Envoy(args.envoy, work, "upstream", up_cfg, 1, [])
    fronts: dict[str, tuple[harness.Envoy, int]] = {}
    try:
        upstream.wait_ready(up_admin)
        other = (harness.module_search_dir(work / "other-module", {NATIVE.name: args.other_module})
                 if args.other_module else None)
        with harness.started_on(front_cpus):
            for key, inst in configs.items():
                with harness.search_path(other if key == "x" else None):
                    started = load.start_front(args.envoy, work, inst, inst, up_port, WASM, policy)
                    fronts[key] = load.ready_front(started, args.envoy, work, inst, up_port, WASM, policy)
        body = (harness.BODIES / "allowed-1k.json").read_bytes()
        for key, (e, port) in fronts.items():
            status, answer = harness.post(port, body)
            if status != 200 or b'"result"' not in answer:
                raise SystemExit(f"{key}: not allowed ({status}): {answer[:300]!r}")
            harness.run_wrk(port, "allowed-1k.json", 1, 1, conns)  # warm-up
        capacity = measure(fronts, args.rounds, args.seconds, conns)
        latency = measure(fronts, args.rounds, args.seconds, latency_conns) if pinned else capacity
        rss = {key: harness.proc_stat(e.proc.pid)[0] / 1024 for key, (e, _) in fronts.items()}
        if pinned:
            head = (f"{args.rounds} rounds x {args.seconds}s per phase, front Envoy concurrency 1 on CPU "
                    f"{sorted(front_cpus)}, the upstream and wrk -t1 on {sorted(rest_cpus)}; req/s and CPU from the "
                    f"capacity phase (wrk -c{conns}), p50 and p99 from the latency phase (wrk -c{latency_conns}); "
                    "medians")
        else:
            head = (f"{args.rounds} rounds x {args.seconds}s, wrk -t1 -c{conns}, front Envoy concurrency 1, every "
                    "process on every CPU; medians")
        out = report_tables({"capacity": capacity, "latency": latency}, rss, args.rounds, head, configs)
        print("\n".join(out))
        if args.out:
            begin, end = MARKERS[layout]
            when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            mach = harness.machine()
            section = "\n".join([begin, "", f"#### Latest run ({layout}): {when}, {mach['nproc']} cores, {mach['cpu']}",
                                 "", *out, "", end])
            report.write_markdown(args.out, section, begin, end, heading=f"The native build ({layout})")
        if args.json:
            # Per configuration, each phase's rounds (the shared layout's one phase under `capacity`).
            per = {key: {"capacity": capacity[key], **({"latency": latency[key]} if pinned else {}),
                         "rss_mib": rss[key]} for key in configs}
            settings = {"layout": layout, "rounds": args.rounds, "seconds": args.seconds, "conns": conns,
                        **({"latency_conns": latency_conns} if pinned else {})}
            args.json.write_text(json.dumps({**settings, "configurations": per}, indent=2))
    finally:
        for e, _ in fronts.values():
            e.stop()
        upstream.stop()


if __name__ == "__main__":
    main()
