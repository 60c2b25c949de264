"""Cluster-wide limits: what an RLS decision costs (make bench; printed, recorded by hand in
BENCHMARKS.md).

    .venv/bin/python bench/rls_bench.py [--calls 2000] [--seconds 5] [--concurrency 64] [--build native]

The Envoys run the wasm build, or with `--build native` (after `make dynamic-module`) the native one,
whose rate limit call is an HTTP/2 stream (docs/src/deploy/native.md).

1. Latency an RLS decision adds to an allowed call: two Envoys (1 worker each) in front of the fast
   direct_response upstream of bench/envoy/upstream.yaml, the same policy (vm_agent_exec, one
   `grant` limit of 1,000,000 per hour), one counting in shared data, the other through
   gateway.rate_limit_service -> mcp-ratelimit -> Redis. Calls alternate between the two on one
   keep-alive connection each, so machine load hits both alike; p50 and p99 of each and the
   difference.
2. The service's decisions per second with Redis, for 1 and 2 instances on one Redis
   (target/release/examples/rls_load, gRPC, 64 concurrent requests over 4 HTTP/2 connections per
   instance, 1000 grants), and per CPU-second the service processes used (/proc/PID/stat), the
   "per core" figure: Redis and the load generator run on the same cores.
3. Redis memory per counter: used_memory growth over 20,000 new counters, divided by their number.
4. Flows (marks) through the service against marks in shared data, in the same run: two more Envoys
   (1 worker each), one flow `read_secret` -> `http_post`, one keeping marks in shared data, the
   other through the service. The check: `http_post` by a grant never marked (one mark check per
   call, allowed); the marking: `read_secret`, whose response is held until the mark is recorded.
   Alternating, p50 and p99 of each and the difference.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from testkit import rls as hr
from testkit.envoy import start_envoy
from testkit.native import BUILDS, filter_build
from testkit.processes import HOST
from testkit.stack import Stack

import harness  # bench/harness.py, beside this script: the upstream's configuration

LOAD = ROOT / "target" / "release" / "examples" / "rls_load"
LIMIT = {"counter": "exec_rate", "window": "hour", "max": 1_000_000, "scope": "grant"}


def body(i: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "vm_agent_exec", "arguments": {"node": "pve1", "vmid": 100}}}).encode()


class Client:
    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection(HOST, port, timeout=10)
        self.headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                        "authorization": f"Bearer bench-{os.getpid()}"}

    def post(self, data: bytes) -> float:
        t0 = time.perf_counter()
        self.conn.request("POST", "/mcp", body=data, headers=self.headers)
        raw = self.conn.getresponse().read()
        elapsed = (time.perf_counter() - t0) * 1e6
        assert b'"result"' in raw, raw[:200]
        return elapsed


FLOWS_TOOLS = {"read_secret": {"marks": ["secret"]}, "http_post": {}}
FLOWS = [{"name": "no-egress", "if_marked": ["secret"], "deny": ["http_post"], "for": "10m"}]


def call_body(tool: str) -> bytes:
    # id 1: the fast upstream answers every call with id 1, and a mark is set by the result to its call.
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": {}}}).encode()


def flows_latency(stack: Stack, rport: int, rls_port: int, calls: int) -> None:
    local_policy = {"version": "1", "default": "deny", "tools": FLOWS_TOOLS, "flows": FLOWS}
    # 1 s: on a loaded machine a 100 ms callout times out now and then, and a marking response is
    # then reset (fail closed); such calls are counted, not timed.
    service_policy = {**hr.cluster_policy(FLOWS_TOOLS, timeout="1s"), "flows": FLOWS}
    local = start_envoy(hr.render(stack, local_policy, rport, [rls_port]), concurrency=1,
                        log_dir=stack.log_dir, name="envoy-flows-local", log_level="warning")
    service = start_envoy(hr.render(stack, service_policy, rport, [rls_port]), concurrency=1,
                          log_dir=stack.log_dir, name="envoy-flows-rls", log_level="warning")
    stack.envoys += [local, service]
    series = {}
    for what, tool, token in (("check (http_post, unmarked grant)", "http_post", "checker"),
                              ("mark (read_secret, response held)", "read_secret", "marker")):
        a, b = Client(local.listen_port), Client(service.listen_port)
        a.headers["authorization"] = b.headers["authorization"] = f"Bearer {token}-{os.getpid()}"
        data = call_body(tool)
        for _ in range(200):
            a.post(data)
            b.post(data)
        la, lb, failed = [], [], 0
        for _ in range(calls):
            for client, xs in ((a, la), (b, lb)):
                try:
                    xs.append(client.post(data))
                except (http.client.HTTPException, OSError, AssertionError):
                    failed += 1
                    client.conn.close()
        series[what] = (la, lb)
        if failed:
            print(f"  ({what}: {failed} calls reset or refused, not timed)")
    print(f"flows, {calls} calls each, alternating, 1 worker per Envoy:")
    for what, (la, lb) in series.items():
        a50, b50 = statistics.median(la), statistics.median(lb)
        print(f"  {what}")
        print(f"    marks in shared data        p50 {a50:7.0f} us   p99 {p99(la):7.0f} us")
        print(f"    marks in the service        p50 {b50:7.0f} us   p99 {p99(lb):7.0f} us")
        print(f"    added by the round trip     p50 {b50 - a50:+7.0f} us   p99 {p99(lb) - p99(la):+7.0f} us")


def p99(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.99) - 1)]


def redis_info(port: int, field: str) -> int:
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", "memory"], capture_output=True, text=True).stdout
    return int(next(line.split(":")[1] for line in out.splitlines() if line.startswith(field + ":")))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(targets: list[int], seconds: int, concurrency: int, distinct: int) -> dict:
    argv = [str(LOAD), "--seconds", str(seconds), "--concurrency", str(concurrency), "--distinct", str(distinct)]
    for p in targets:
        argv += ["--target", f"http://127.0.0.1:{p}"]
    return json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--flows-only", action="store_true", help="only part 4 (flows)")
    ap.add_argument("--build", choices=BUILDS, default=filter_build(), help="the filter build the Envoys run")
    args = ap.parse_args()
    print(f"filter build: {args.build}")
    with Stack(build=args.build) as stack:
        _, redis_port = hr.start_redis(stack)
        rls = [hr.start_rls(stack, redis_port, name="rls-1"), hr.start_rls(stack, redis_port, name="rls-2")]
        up_cfg, rport, _ = harness.upstream_config()
        upstream = start_envoy(up_cfg, concurrency=1, log_dir=stack.log_dir, name="upstream", log_level="warning")
        stack.envoys.append(upstream)
        if args.flows_only:
            flows_latency(stack, rport, rls[0].port, args.calls)
            return 0
        tools = {"vm_agent_exec": {"limits": [LIMIT]}}
        local_policy = {"version": "1", "default": "deny", "tools": tools}
        service_policy = hr.cluster_policy(tools, timeout="100ms")
        local = start_envoy(hr.render(stack, local_policy, rport, [rls[0].port]), concurrency=1,
                            log_dir=stack.log_dir, name="envoy-local", log_level="warning")
        service = start_envoy(hr.render(stack, service_policy, rport, [rls[0].port]), concurrency=1,
                              log_dir=stack.log_dir, name="envoy-rls", log_level="warning")
        stack.envoys += [local, service]
        a, b = Client(local.listen_port), Client(service.listen_port)
        for i in range(200):  # warm up both paths (connections, V8, Redis script cache)
            a.post(body(i))
            b.post(body(i))
        la, lb = [], []
        for i in range(args.calls):
            la.append(a.post(body(i)))
            lb.append(b.post(body(i)))
        a50, b50 = statistics.median(la), statistics.median(lb)
        print(f"latency, {args.calls} allowed calls each, alternating, 1 worker per Envoy:")
        print(f"  local shared-data limit     p50 {a50:7.0f} us   p99 {p99(la):7.0f} us")
        print(f"  rate limit service (Redis)  p50 {b50:7.0f} us   p99 {p99(lb):7.0f} us")
        print(f"  added by the RLS decision   p50 {b50 - a50:+7.0f} us   p99 {p99(lb) - p99(la):+7.0f} us")

        pids = [r.proc.pid for r in rls]
        runs = []
        for targets in ([rls[0].port], [r.port for r in rls]):
            cpu0 = sum(cpu_seconds(p) for p in pids)
            r = load(targets, args.seconds, args.concurrency, 1000)
            r["service_cpu_s"] = sum(cpu_seconds(p) for p in pids) - cpu0
            runs.append(r)
        one, two = runs
        print(f"service decisions/s with Redis ({args.concurrency} concurrent, {args.seconds} s, "
              f"{os.cpu_count()} cores shared by service, Redis and load generator):")
        for name, r in (("1 instance ", one), ("2 instances", two)):
            per_core = r["decisions"] / r["service_cpu_s"] if r["service_cpu_s"] else float("nan")
            print(f"  {name}  {r['per_second']:8.0f}/s   errors {r['errors']}   p50 {r['p50_us']} us   p99 {r['p99_us']} us"
                  f"   service CPU {r['service_cpu_s']:.2f} s = {per_core:.0f} decisions per CPU-second")

        subprocess.run(["redis-cli", "-p", str(redis_port), "FLUSHALL"], capture_output=True, check=True)
        before = redis_info(redis_port, "used_memory")
        n = 20_000
        argv = [str(LOAD), "--seconds", "3", "--concurrency", "16", "--distinct", str(n), "--target",
                f"http://127.0.0.1:{rls[0].port}"]
        # Run until every distinct counter exists (each request creates at most one).
        while int(subprocess.run(["redis-cli", "-p", str(redis_port), "DBSIZE"], capture_output=True,
                                 text=True).stdout.strip() or 0) < n:
            subprocess.run(argv, capture_output=True, check=True)
        keys = int(subprocess.run(["redis-cli", "-p", str(redis_port), "DBSIZE"], capture_output=True,
                                  text=True).stdout.strip())
        grown = redis_info(redis_port, "used_memory") - before
        print(f"Redis memory: {grown} bytes for {keys} counters = {grown / keys:.0f} bytes per counter")
        flows_latency(stack, rport, rls[0].port, args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
