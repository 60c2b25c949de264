"""What an approval costs the call that uses it: latency through real Envoy of an approved call
(the filter's callout to mcp-approvals, which consumes the approval in one SQLite transaction) against
an allowed call to a plain tool, measured in the same run, against the same upstream: the fast
direct_response Envoy of bench/envoy/upstream.yaml (a Python upstream adds ~40 ms of delayed-ACK
stalls that would hide everything else).

    .venv/bin/python bench/approval_latency.py [--calls 300] [--rounds 3]

Per round: N distinct start_vm calls are first sent once (each opens a pending approval), approved
through the service's API, then timed as their identical retries; interleaved with N timed list_vms
calls (allowed, no callout). Also timed: the first, pending, call (callout + a new SQLite row +
the −31007 reply). One client, one keep-alive connection, sequential requests: this is latency,
not throughput. Prints medians and p99 in microseconds and the ratios to the allowed call.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time

from testkit import approvals as ha
from testkit.envoy import start_envoy
from testkit.processes import HOST
from testkit.stack import Stack

import harness  # bench/harness.py, beside this script: the upstream's configuration


def body(id_: int, tool: str, args: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                       "params": {"name": tool, "arguments": args}}).encode()


class Client:
    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection(HOST, port, timeout=10)
        self.headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                        "authorization": "Bearer bench-agent"}

    def post(self, data: bytes) -> tuple[float, dict]:
        t0 = time.perf_counter()
        self.conn.request("POST", "/mcp", body=data, headers=self.headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        elapsed = (time.perf_counter() - t0) * 1e6
        return elapsed, json.loads(raw) if raw else {}


def p99(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.99) - 1)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    allowed: list[float] = []
    approved: list[float] = []
    pending: list[float] = []
    with Stack() as stack:
        up_cfg, rport, _ = harness.upstream_config()
        upstream = start_envoy(up_cfg, concurrency=1, log_dir=stack.log_dir, name="upstream", log_level="warning")
        stack.envoys.append(upstream)
        svc = ha.approvals(stack)
        policy = ha.approval_policy()
        envoy = stack.envoy(policy, rport, approvals_port=svc.check_port, log_level="warning")
        client = Client(envoy.listen_port)
        n = 0
        for r in range(args.rounds):
            calls = [body(10_000 * r + i, "start_vm", {"node": "pve", "vmid": 100, "n": r * args.calls + i})
                     for i in range(args.calls)]
            for c in calls:
                t, v = client.post(c)
                assert v["error"]["code"] == -31007, v
                pending.append(t)
                svc.approve(v["error"]["data"]["approval_id"], "bench")
            for i, c in enumerate(calls):
                t, v = client.post(body(900_000 + n, "list_vms", {}))
                assert "result" in v, v
                allowed.append(t)
                t, v = client.post(c)
                assert "result" in v, v
                approved.append(t)
                n += 1
        _, text = upstream.admin_get("/stats?filter=^http.upstream.downstream_rq_total$")
        forwarded = int(text.split(":")[1])
        assert forwarded == 2 * n, (text, n)
    a50, b50, c50 = (statistics.median(x) for x in (allowed, approved, pending))
    print(f"calls per kind: {len(allowed)} ({args.rounds} rounds x {args.calls})")
    print(f"allowed  (no callout)             p50 {a50:8.0f} us   p99 {p99(allowed):8.0f} us")
    print(f"approved (callout, consume)       p50 {b50:8.0f} us   p99 {p99(approved):8.0f} us   "
          f"p50 ratio {b50 / a50:.2f}  (+{b50 - a50:.0f} us)")
    print(f"pending  (callout, new approval)  p50 {c50:8.0f} us   p99 {p99(pending):8.0f} us   "
          f"p50 ratio {c50 / a50:.2f}  (+{c50 - a50:.0f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
