#!/usr/bin/env python3
"""Instructions per allowed call in the front Envoy of the native build, counted by callgrind: a
figure that other work on the machine does not move, unlike CPU time (see Noise in BENCHMARKS.md).

    make dynamic-module          # or, to see the module's own functions, the same build with symbols:
    #   CARGO_PROFILE_DYNAMIC_MODULE_STRIP=false CARGO_PROFILE_DYNAMIC_MODULE_DEBUG=1 \\
    #   make dynamic-module CARGO_TARGET_DIR=/tmp/sym    (then --module-dir /tmp/sym/dynamic-module)
    .venv/bin/python bench/native_instructions.py [--module-dir DIR] [--calls 300]
                                                  [--policy FILE | --policy-set] [--sse] [--no-baselines]

One upstream Envoy and one front Envoy with the module (bench/envoy/filters-dynamic.yaml,
bench/policy-bench.json, concurrency 1), the front under `valgrind --tool=callgrind` (Debian package
valgrind) with instrumentation off until the calls to count. For each level of Envoy's
`dynamic_modules` logger (info: the audit line is written; warning: it is not), set through the
admin `/logging` endpoint of the same process, it sends `--calls` allowed 1 KiB tools/call
(bench/bodies/allowed-1k.json) on one connection and counts them. Printed: instructions per call in
the whole front Envoy and in the functions named by `--show`, per level, and the difference (what
the audit line costs). Then, unless `--no-baselines`, the same count for a front Envoy with the
buffer filter alone (a'), one with Envoy's own `mcp` + `rbac` filters (c) and one with the minimal
body-reading dynamic module (n0, bench/minimal-module, `make bench-minimal`: the floor of any native
filter), each under callgrind in turn, and every front's instructions per call above (a') and above
(n0): what each adds to the same call, exactly.
Kernel work (the write of the log line, the sockets) is not counted.

Last, from the same dumps (callgrind keeps each instruction's count, `--dump-instr=yes`): the 64-byte
lines of code one call runs, for every front and level, split into the dynamic module's, Envoy's,
libc's and the rest (bench/callgrind_lines.py): under load a call's code comes back from beyond the
first-level cache on every call (docs/src/deploy/native-cost.md, Code lines per call); and the same
in 4 KiB pages, each an entry of the instruction TLB.

`--policy FILE` gives the module another policy (bench/policy-results-bench.json: result rules read
and redact every result, in the response-body hook). `--policy-set` counts the module behind Envoy's
jwt_authn (bench/envoy/filters-jwt.yaml) with bench/policy-set-bench.json, the calls made
with a token, signed for the run, whose claims attach the set's `ops` policy (the verified payload is
read in the request-headers hook); it counts that front alone. `--sse` has the upstream answer every
call as one Streamable HTTP `message` event (`text/event-stream`) instead of JSON: with result rules,
the response-body hook then reads the event stream.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import callgrind_lines  # noqa: E402  (the code lines a call runs, from the same dumps)
import harness  # noqa: E402  (bench/harness.py: the Envoy runner and templates)
import native_compare  # noqa: E402  (where the minimal module is built)

SHOW = ["envoy_dynamic_module_on_http_filter_request_headers", "envoy_dynamic_module_on_http_filter_request_body",
        "envoy_dynamic_module_on_http_filter_response_body", "envoy_dynamic_module_callback_log",
        "envoy_dynamic_module_callback_http_set_filter_state_bytes"]


def inclusive(dump: pathlib.Path, names: list[str]) -> dict[str, int]:
    """Total instructions of the dump and the inclusive count of each function in `names`."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(dump)],
                         capture_output=True, text=True, check=True).stdout
    found = {"total": 0}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \(.*?\)\s+(\S+)", line)
        if not m:
            continue
        count, where = int(m.group(1).replace(",", "")), m.group(2)
        if where == "PROGRAM":
            found["total"] = count
        for n in names:
            if where.endswith(":" + n) and n not in found:
                found[n] = count
    return found


# Keys of `count`'s rows that hold code lines, and 4 KiB pages of code, per call rather than
# instructions.
LINES = "lines:"
PAGES = "pages:"


def code_lines(dump: pathlib.Path, calls: int) -> dict[str, float]:
    """The 64-byte lines (`LINES` keys) and the 4 KiB pages (`PAGES` keys) of code one call runs
    (bench/callgrind_lines.py), by where the code lies: the dynamic module (this filter's or the
    minimal one), Envoy's binary, libc, anything else (`other`: code callgrind finds no object for),
    and in all."""
    modules = {"libmcp_policy_native.so", native_compare.MINIMAL.name}
    spans = callgrind_lines.spans_per_call(dump, calls, (callgrind_lines.LINE, callgrind_lines.PAGE))
    out: dict[str, float] = {}
    for prefix, size in ((LINES, callgrind_lines.LINE), (PAGES, callgrind_lines.PAGE)):
        by = {"module": 0.0, "envoy": 0.0, "libc": 0.0, "other": 0.0}
        for obj, n in spans[size].items():
            by["module" if obj in modules else "envoy" if obj == "envoy" else "libc" if obj == "libc.so.6"
               else "other"] += n
        by["total"] = sum(by.values())
        out.update({prefix + k: v for k, v in by.items()})
    return out


# The fronts counted: (label, filters file, logger levels to count at). The module is counted with
# its logger at info (the audit line written) and at warning (not); the baselines have no log line.
FRONTS = [("(n) native module", "filters-dynamic.yaml", ("info", "warning")),
          ("(a') buffer only", "filters-buffer.yaml", ("info",)),
          ("(c) Envoy's mcp + rbac filters", "filters-native.yaml", ("info",)),
          ("(n0) minimal body-reading dynamic module", "filters-dynamic-minimal.yaml", ("info",))]


@dataclasses.dataclass(frozen=True)
class Run:
    """What every front of one run shares: the Envoy binary, the work directory, the policy, the
    upstream's port, the calls counted per level and the functions shown."""
    binary: str
    work: pathlib.Path
    policy: str
    up_port: int
    calls: int
    show: list[str]


def count(run: Run, name: str, filters: str | tuple[str, ...], levels: tuple[str, ...],
          token: str = harness.TOKEN, values: dict[str, str] | None = None) -> dict[str, dict[str, float]]:
    """Instructions per allowed call in a front Envoy with `filters` (rendered with `values` too),
    under callgrind, at each level of its `dynamic_modules` logger, the calls made with `token`:
    {level: {"total" or a function of `run.show`: per call}}."""
    binary, work, calls = run.binary, run.work, run.calls
    cfg, port, admin = harness.front_config(filters, run.policy, run.up_port, **(values or {}))
    front = harness.Envoy.__new__(harness.Envoy)
    front.name, front.log = name, work / f"{name}.log"
    (work / f"{name}.yaml").write_text(cfg)
    dumps = work / f"callgrind.{name}"
    front.proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=yes",
         f"--callgrind-out-file={dumps}.%p", binary,
         "-c", str(work / f"{name}.yaml"), "--concurrency", "1", "--disable-hot-restart",
         "--base-id", str(harness.Envoy.base_id + 500)],
        stdout=front.log.open("wb"), stderr=subprocess.STDOUT)
    pid = front.proc.pid
    try:
        front.wait_ready(admin, timeout=600)
        body = (harness.BODIES / "allowed-1k.json").read_bytes()
        headers = {**harness.MCP_HEADERS, "authorization": f"Bearer {token}"}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

        def send(n: int) -> None:
            for _ in range(n):
                conn.request("POST", "/mcp", body=body, headers=headers)
                r = conn.getresponse()
                answer = r.read()
                if r.status != 200 or b'"result"' not in answer:
                    raise SystemExit(f"{name}: not allowed ({r.status}): {answer[:300]!r}")

        def control(*a: str) -> None:
            subprocess.run(["callgrind_control", *a, str(pid)], check=True, capture_output=True)

        send(50)  # warm-up: connections, the grant's counter, first allocations
        rows: dict[str, dict[str, float]] = {}
        seen: set[str] = set()
        for level in levels:
            req = urllib.request.Request(f"http://127.0.0.1:{admin}/logging?dynamic_modules={level}", method="POST")
            urllib.request.urlopen(req, timeout=120).read()
            send(20)
            control("-i", "on")
            send(calls)
            control("-i", "off")
            control("-d", level)
            control("-z")
            (dump,) = [p for p in work.glob(f"callgrind.{name}.{pid}.*") if p.name not in seen]
            seen.add(dump.name)
            rows[level] = {k: v / calls for k, v in inclusive(dump, run.show).items()}
            rows[level].update(code_lines(dump, calls))
        return rows
    finally:
        front.proc.terminate()
        front.proc.wait(60)


def print_lines(counted: dict[str, dict[str, dict[str, float]]], fronts: list, alone: bool,
                prefix: str = LINES) -> None:
    """The code lines (`prefix` LINES) or pages (PAGES) one call runs, by where the code lies, for
    every front and level counted."""
    where = ["module", "envoy", "libc", "other", "total"]
    rows = [(f"{label}, logger at {level}" if len(levels) > 1 else label, c[level])
            for (label, _, levels), c in zip(fronts, counted.values()) for level in levels]
    print()
    print(("64-byte lines" if prefix == LINES else "4 KiB pages") + " of code per allowed call (bench/callgrind_lines.py)")
    print(f"{'':58s} " + " ".join(f"{w:>8s}" for w in where)
          + ("" if alone else f" {'above buffer':>12s} {'above floor':>12s}"))
    base = None if alone else counted[FRONTS[1][0]]["info"][prefix + "total"]
    floor = None if alone else counted[FRONTS[3][0]]["info"][prefix + "total"]
    for label, row in rows:
        line = f"{label:58s} " + " ".join(f"{row.get(prefix + w, 0.0):8.0f}" for w in where)
        if base is not None and floor is not None:
            total = row[prefix + "total"]
            line += f" {total - base:+12.0f} {total - floor:+12.0f}"
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--envoy", default=str(harness.ROOT / ".venv" / "bin" / "envoy"))
    ap.add_argument("--module-dir", type=pathlib.Path, default=harness.ROOT / "target" / "dynamic-module")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--show", nargs="*", default=SHOW)
    ap.add_argument("--no-baselines", action="store_true", help="count the module's front Envoy only")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--policy", type=pathlib.Path, default=harness.BENCH / "policy-bench.json",
                       help="the module's policy (bench/policy-results-bench.json: result rules read every result)")
    which.add_argument("--policy-set", action="store_true",
                       help="the module behind jwt_authn (bench/envoy/filters-jwt.yaml) with "
                       "bench/policy-set-bench.json, the calls made with a token whose claims attach its `ops` "
                       "policy; implies --no-baselines")
    ap.add_argument("--sse", action="store_true",
                    help="the upstream answers as an SSE stream of one message event instead of JSON")
    args = ap.parse_args()
    args.no_baselines |= args.policy_set
    if not (args.module_dir / "libmcp_policy_native.so").is_file():
        raise SystemExit(f"{args.module_dir}/libmcp_policy_native.so missing: make dynamic-module")
    if not args.no_baselines and not native_compare.MINIMAL.is_file():
        raise SystemExit(f"{native_compare.MINIMAL} missing: make bench-minimal")
    # The wrapper in .venv/bin is Python; valgrind must run the binary itself.
    binary = subprocess.run([sys.executable, "-c", "import envoy._main as m, pathlib; "
                             "print(pathlib.Path(m.__file__).parent / '_bin' / 'envoy')"],
                            capture_output=True, text=True, check=True).stdout.strip()
    policy = harness.policy_text(harness.BENCH / "policy-set-bench.json" if args.policy_set else args.policy)
    fronts = FRONTS[:1] if args.no_baselines else FRONTS
    token, values = harness.TOKEN, {}
    if args.policy_set:
        values, tokens = harness.jwt_callers()
        token = tokens["ops"]
        fronts = [(FRONTS[0][0] + " behind jwt_authn, policy set", ("filters-jwt.yaml", FRONTS[0][1]), FRONTS[0][2])]
    work = pathlib.Path(tempfile.mkdtemp(prefix="native-instructions-"))
    # One search directory for both modules: a link to each shared object.
    modules = harness.module_search_dir(work / "modules", {
        "libmcp_policy_native.so": args.module_dir / "libmcp_policy_native.so",
        native_compare.MINIMAL.name: native_compare.MINIMAL})
    os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = str(modules)
    up_cfg, up_port, up_admin = harness.upstream_config(sse=args.sse)
    upstream = harness.Envoy(args.envoy, work, "upstream", up_cfg, 1, [])
    try:
        upstream.wait_ready(up_admin)
        run = Run(binary, work, policy, up_port, args.calls, args.show)
        counted = {label: count(run, f"front{i}", filters, levels, token if i == 0 else harness.TOKEN, values)
                   for i, (label, filters, levels) in enumerate(fronts)}
        module = counted[fronts[0][0]]
        print(f"instructions per allowed call, {args.calls} calls per level (callgrind; kernel work not counted)")
        print(f"{'':58s} {'info':>10s} {'warning':>10s} {'difference':>10s}")
        for key in ["total", *args.show]:
            i, w = module["info"].get(key, 0.0), module["warning"].get(key, 0.0)
            print(f"{key:58s} {i:10.0f} {w:10.0f} {i - w:10.0f}")
        if not args.no_baselines:
            base = counted[FRONTS[1][0]]["info"]["total"]
            floor = counted[FRONTS[3][0]]["info"]["total"]
            print()
            print(f"{'whole front Envoy, per allowed call':58s} {'total':>10s} {'above buffer':>12s} "
                  f"{'above floor':>12s}")
            rows = [(f"{FRONTS[0][0]}, logger at info (audit line)", module["info"]["total"]),
                    (f"{FRONTS[0][0]}, logger at warning", module["warning"]["total"]),
                    *((label, c["info"]["total"]) for label, c in list(counted.items())[1:])]
            for label, total in rows:
                print(f"{label:58s} {total:10.0f} {total - base:+12.0f} {total - floor:+12.0f}")
        print_lines(counted, fronts, args.no_baselines)
        print_lines(counted, fronts, args.no_baselines, PAGES)
    finally:
        upstream.proc.terminate()
        upstream.proc.wait(60)


if __name__ == "__main__":
    main()
