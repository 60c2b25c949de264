#!/usr/bin/env python3
"""Memory per tracked grant, which bounds the filter's memory: a benchmark for a note, not a test.

    .venv/bin/python bench/grants_memory.py [--grants 100000] [--budget 180] [--threads 4]

Starts Envoy (--concurrency 2, the shipped bootstrap via testkit) with the built filter
and a policy whose `vm_agent_exec` has a per-grant limit, then sends one call from each of N
distinct grants (bearer tokens `mem-<i>`) over a few keep-alive HTTP/1.1 connections. Each such
call creates the grant's counter key and its tracked-grant marker in proxy-wasm shared data.

Reported, before and after: Envoy's RSS (/proc/PID/status VmRSS and RssAnon), the admin
`/memory` allocated and heap bytes (tcmalloc: shared data lives in Envoy's C++ heap), and the
filter's gauge `mcp_policy_tracked_grants`; then bytes per tracked grant. If N grants do not fit in
the time budget, it stops there and reports the measured grants with a linear extrapolation to N.

To keep the client the bottleneck-free part, the route answers with a fixed `direct_response`
(no upstream process; `--upstream recorder` uses tests/cases/recorder.py instead), Envoy logs at
`warn` (no per-decision audit lines) and the access log is removed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
from testkit.envoy import Envoy, hcm, render
from testkit.paths import wasm_path
from testkit.processes import HOST, free_port, new_log_dir, proc_status
from testkit.stack import Stack
from testkit.stats import prometheus

POLICY = {
    "version": "1",
    "default": "deny",
    "tools": {"vm_agent_exec": {"limits": [{"counter": "vm_agent_exec_rate", "window": "minute", "max": 10,
                                            "scope": "grant"}]}},
}
BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "vm_agent_exec", "arguments": {"node": "pve1", "vmid": 100, "command": "uptime"}}},
    separators=(",", ":")).encode()
DIRECT = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}'


def snapshot(envoy: Envoy) -> dict:
    status = proc_status(envoy.proc.pid)
    _, mem = envoy.admin_get("/memory")
    mem = json.loads(mem)
    samples = prometheus(envoy)
    return {"rss_kib": status["VmRSS"], "rss_anon_kib": status.get("RssAnon", 0),
            "allocated": int(mem["allocated"]), "heap_size": int(mem["heap_size"]),
            "tracked": int(samples["mcp_policy_tracked_grants{}"]),
            "allowed": int(samples["mcp_policy_allowed_total{}"]),
            "refused": int(samples["mcp_policy_limiter_unavailable_total{}"] + samples["mcp_policy_rate_limited_total{}"])}


def drive(port: int, prefix: str, n: int, threads: int, deadline: float) -> tuple[int, list[str]]:
    """One call per grant `prefix-0` … `prefix-(n-1)`, from `threads` keep-alive connections, until
    done or `deadline` (monotonic). Returns (calls answered 200 with a result, first problems)."""
    done = [0] * threads
    problems: list[str] = []

    def worker(k: int) -> None:
        conn = http.client.HTTPConnection(HOST, port, timeout=30)
        for i in range(k, n, threads):
            if time.monotonic() > deadline:
                break
            conn.request("POST", "/mcp", BODY, {"content-type": "application/json",
                                                "accept": "application/json, text/event-stream",
                                                "authorization": f"Bearer {prefix}-{i}"})
            r = conn.getresponse()
            data = r.read()
            if r.status == 200 and b'"result"' in data:
                done[k] += 1
            elif len(problems) < 5:
                problems.append(f"{r.status} {data[:200]!r}")
        conn.close()

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(done), problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grants", type=int, default=100_000)
    ap.add_argument("--warmup", type=int, default=2_000, help="distinct grants sent before the 'before' reading")
    ap.add_argument("--budget", type=float, default=180.0, help="seconds for the measured calls")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--upstream", choices=["direct", "recorder"], default="direct")
    ap.add_argument("--json", type=Path, help="also write the results here")
    a = ap.parse_args()

    wasm = wasm_path()
    if not wasm.is_file():
        print(f"no filter at {wasm}: run make build", file=sys.stderr)
        return 2
    policy = dict(POLICY, gateway={"max_tracked_grants": a.grants + a.warmup + 10})
    with Stack(log_dir=new_log_dir("grants-memory-")) as stack:
        if a.upstream == "recorder":
            _, up_port, _ = stack.recorder()
            config = render(stack.wasm, policy, up_port)
        else:
            config = render(stack.wasm, policy, free_port(), direct_response=DIRECT)
        cfg = yaml.safe_load(config)
        hcm(cfg).pop("access_log", None)
        config = yaml.safe_dump(cfg, sort_keys=False, width=1000)
        envoy = stack.start_envoy(config, concurrency=a.concurrency, name="envoy-grants", log_level="warn")
        print(f"Envoy pid {envoy.proc.pid}, --concurrency {a.concurrency}, upstream {a.upstream}, logs {stack.log_dir}")

        ok, problems = drive(envoy.listen_port, "warm", a.warmup, a.threads, time.monotonic() + 120)
        if problems or ok != a.warmup:
            print(f"warm-up failed ({ok}/{a.warmup}): {problems}", file=sys.stderr)
            return 1
        time.sleep(1.0)
        before = snapshot(envoy)
        t0 = time.monotonic()
        ok, problems = drive(envoy.listen_port, "mem", a.grants, a.threads, t0 + a.budget)
        took = time.monotonic() - t0
        time.sleep(1.0)
        after = snapshot(envoy)
        if problems:
            print(f"unexpected replies: {problems}", file=sys.stderr)
            return 1

    grants = after["tracked"] - before["tracked"]
    res = {"requested": a.grants, "answered": ok, "new_tracked_grants": grants, "seconds": round(took, 1),
           "calls_per_second": round(ok / took, 1), "before": before, "after": after}
    per = {k: (after[k] - before[k]) / max(grants, 1) for k in ("allocated", "heap_size")}
    per["rss"] = (after["rss_kib"] - before["rss_kib"]) * 1024 / max(grants, 1)
    per["rss_anon"] = (after["rss_anon_kib"] - before["rss_anon_kib"]) * 1024 / max(grants, 1)
    res["bytes_per_grant"] = {k: round(v, 1) for k, v in per.items()}

    print(f"grants tracked: {before['tracked']} -> {after['tracked']} (+{grants}) in {took:.1f} s "
          f"({ok / took:.0f} calls/s, {a.threads} keep-alive connections)")
    print(f"Envoy VmRSS:    {before['rss_kib'] / 1024:8.1f} -> {after['rss_kib'] / 1024:8.1f} MiB "
          f"(RssAnon {before['rss_anon_kib'] / 1024:.1f} -> {after['rss_anon_kib'] / 1024:.1f} MiB)")
    print(f"/memory allocated: {before['allocated'] / 2**20:8.1f} -> {after['allocated'] / 2**20:8.1f} MiB "
          f"(heap_size {before['heap_size'] / 2**20:.1f} -> {after['heap_size'] / 2**20:.1f} MiB)")
    print("bytes per tracked grant: allocated {allocated:.0f}, heap_size {heap_size:.0f}, VmRSS {rss:.0f}, "
          "RssAnon {rss_anon:.0f}".format(**per))
    if grants < a.grants:
        scale = a.grants / max(grants, 1)
        res["extrapolated_to_requested"] = {
            "allocated_mib": round((before["allocated"] + per["allocated"] * a.grants) / 2**20, 1),
            "rss_mib": round((before["rss_kib"] * 1024 + per["rss"] * a.grants) / 2**20, 1),
            "seconds": round(took * scale, 1)}
        print(f"only {grants} of {a.grants} grants fitted in {a.budget:.0f} s; linear extrapolation to "
              f"{a.grants}: {res['extrapolated_to_requested']}")
    if a.json:
        a.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
