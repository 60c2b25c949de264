"""The footprint and micro-benchmark figures of bench/load.py: wasm size per release profile (and
after wasm-opt), Envoy memory per tracked grant, and the criterion results of `cargo bench`.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import time

from harness import BENCH, BODIES, ROOT, Envoy, log, proc_stat

# ----------------------------------------------------------------------------------------------------
# Footprint


def wasm_opt_command() -> list[str] | None:
    """wasm-opt and its flags exactly as `make build` runs them (tools/wasm-opt, Makefile WASM_OPT_FLAGS)."""
    exe = ROOT / "tools" / "wasm-opt" / "node_modules" / ".bin" / "wasm-opt"
    if not exe.exists():
        found = shutil.which("wasm-opt")
        if not found:
            return None
        exe = pathlib.Path(found)
    flags = ["-Oz", "--enable-bulk-memory", "--enable-sign-ext", "--enable-mutable-globals",
             "--enable-nontrapping-float-to-int"]
    m = re.search(r"^WASM_OPT_FLAGS\s*:=\s*(.+)$", (ROOT / "Makefile").read_text(), re.M)
    if m:
        flags = m.group(1).split()
    return [str(exe), *flags]


def wasm_sizes(benchmarked: pathlib.Path, build_variants: bool) -> list[dict]:
    """Size of the module benchmarked, and of release builds at opt-level s, 3 and z (lto,
    codegen-units=1, strip, panic=abort as in Cargo.toml), each before and after wasm-opt."""
    rows = [{"variant": "the module benchmarked above (`make build`: Cargo.toml's release profile, then wasm-opt)",
             "path": benchmarked, "bytes": benchmarked.stat().st_size}]
    if not build_variants:
        return rows
    opt = wasm_opt_command()
    for level in ["s", "3", "z"]:
        target_dir = ROOT / "target" / "bench-footprint" / f"opt-{level}"
        env = dict(os.environ, CARGO_PROFILE_RELEASE_OPT_LEVEL=level, CARGO_TARGET_DIR=str(target_dir))
        log(f"building the wasm with opt-level={level} into {target_dir.relative_to(ROOT)}")
        subprocess.run(["cargo", "build", "--quiet", "--release", "--locked", "--target", "wasm32-wasip1",
                        "-p", "mcp-policy-filter"],
                       cwd=ROOT, env=env, check=True)
        path = target_dir / "wasm32-wasip1" / "release" / "mcp_policy_filter.wasm"
        rows.append({"variant": f'opt-level="{level}"', "path": path, "bytes": path.stat().st_size})
        if opt:
            out = path.with_name("mcp_policy_filter.opt.wasm")
            subprocess.run([*opt, str(path), "-o", str(out)], check=True)
            rows.append({"variant": f'opt-level="{level}" + wasm-opt {" ".join(opt[1:2])}', "path": out,
                         "bytes": out.stat().st_size})
    if not opt:
        log("wasm-opt not found (make build installs it into tools/wasm-opt): skipped")
    return rows


def grant_memory(started: tuple[Envoy, int], workdir: pathlib.Path, n: int) -> dict:
    """RSS growth of an Envoy with the filter after N distinct grants call a rate-limited tool.
    `started`: that Envoy just started (load.start_front), and its port; stopped here when done."""
    e, port = started
    try:
        e.wait_ready(e.admin_port)
        body = workdir / "grant-call.json"
        body.write_text('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"vm_agent_exec",'
                        '"arguments":{"node":"pve","vmid":100,"command":"uptime"}}}')
        script = str(BENCH / "wrk" / "grants.lua")
        url = f"http://127.0.0.1:{port}/mcp"

        def stat(suffix: str) -> int:
            return next((v for k, v in e.stats("mcp_policy").items() if k.endswith(suffix)), 0)

        def allowed() -> int:
            return stat("mcp_policy_allowed_total")

        def tracked() -> int:
            return stat("mcp_policy_tracked_grants")

        # Warm up with as many requests from one grant (to an allowed tool under a per-grant limit), so
        # that what grows afterwards is the grants, not Envoy's first-use allocations.
        warm = BENCH / "wrk" / "post.lua"
        subprocess.run(["wrk", "-t1", "-c1", "-d2s", "-s", str(warm), url, "--", str(BODIES / "allowed-1k.json"),
                        "one-grant"], capture_output=True, check=True)
        time.sleep(0.5)
        rss0, _ = proc_stat(e.proc.pid)
        heap0 = e.heap_allocated()
        base, tracked0 = allowed(), tracked()
        # wrk's main thread sleeps for -d whatever the script does, so watch Envoy's counter and stop wrk
        # once N calls were allowed (grants.lua stops sending after N responses).
        t0 = time.monotonic()
        w = subprocess.Popen(["wrk", "-t1", "-c2", "-d300s", "-s", script, url, "--", str(body), str(n)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            while allowed() < base + n and w.poll() is None and time.monotonic() - t0 < 300:
                time.sleep(0.1)
        finally:
            took = time.monotonic() - t0
            w.terminate()
            wrk_out = w.communicate()[0]
        if "unexpected status" in wrk_out:
            raise SystemExit(f"grant memory: {wrk_out[:2000]}")
        time.sleep(0.5)
        rss1, _ = proc_stat(e.proc.pid)
        heap1 = e.heap_allocated()
        new = tracked() - tracked0
        return {"grants": new, "tracked_before": tracked0, "tracked_after": tracked0 + new,
                "allowed_new": allowed() - base, "rss0_kib": rss0, "rss1_kib": rss1,
                "bytes_per_grant": (rss1 - rss0) * 1024 / max(new, 1), "seconds": took,
                "heap0": heap0, "heap1": heap1,
                "heap_bytes_per_grant": (heap1 - heap0) / max(new, 1) if heap0 is not None and heap1 is not None
                else None}
    finally:
        e.stop()


# ----------------------------------------------------------------------------------------------------
# Criterion results


def criterion_results(crit_dir: pathlib.Path) -> list[dict]:
    rows = []
    if not crit_dir.is_dir():
        return rows
    found = sorted(crit_dir.glob("**/new/estimates.json"))
    # Only the latest `cargo bench` session: skip results of benchmarks that no longer exist.
    latest = max((f.stat().st_mtime for f in found), default=0)
    for est in found:
        if est.stat().st_mtime < latest - 900:
            continue
        bench_dir = est.parent.parent
        meta = bench_dir / "new" / "benchmark.json"
        if not meta.exists():
            continue
        info = json.loads(meta.read_text())
        e = json.loads(est.read_text())
        ns = e["median"]["point_estimate"]
        lo, hi = e["median"]["confidence_interval"]["lower_bound"], e["median"]["confidence_interval"]["upper_bound"]
        tp = info.get("throughput") or {}
        nbytes = tp.get("Bytes") or tp.get("BytesDecimal")
        rows.append({"id": info.get("full_id") or info.get("title"), "ns": ns, "lo": lo, "hi": hi,
                     "bytes": nbytes, "mib_s": (nbytes / (ns / 1e9) / 2**20) if nbytes else None})
    return rows

