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
import platform
import random
import re
import shutil
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
BODIES = BENCH / "bodies"
TOKEN = "bench-agent-token-0001"
BEGIN = "<!-- bench:results:begin (written by bench/load.py; edit above or below) -->"
END = "<!-- bench:results:end -->"

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


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render(template: str, **values: str) -> str:
    return string.Template((BENCH / "envoy" / template).read_text()).substitute(**values)


def filters_block(name: str, **values: str) -> str:
    text = render(name, **values)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def proc_stat(pid: int) -> tuple[int, float]:
    """(VmRSS in KiB, user+system CPU seconds) of a process."""
    rss = 0
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss, (int(fields[11]) + int(fields[12])) / ticks


class Envoy:
    """One Envoy process on loopback with its own admin port and base id."""

    base_id = random.randint(2000, 9000) * 10

    def __init__(self, envoy: str, workdir: pathlib.Path, name: str, config: str, concurrency: int, extra: list[str]):
        self.name, self.admin_port = name, None
        Envoy.base_id += 1
        self.cfg = workdir / f"{name}.yaml"
        self.cfg.write_text(config)
        self.log = workdir / f"{name}.log"
        self.cmd = [envoy, "-c", str(self.cfg), "--concurrency", str(concurrency), "--disable-hot-restart",
                    "--base-id", str(Envoy.base_id), *extra]
        self.proc = subprocess.Popen(self.cmd, stdout=self.log.open("wb"), stderr=subprocess.STDOUT)

    def wait_ready(self, admin_port: int, timeout: float = 30) -> None:
        self.admin_port = admin_port
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"envoy {self.name} exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise SystemExit(f"envoy {self.name} not ready after {timeout}s:\n{self.log.read_text()[-3000:]}")

    def stats(self, flt: str) -> dict[str, int]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/stats?filter={flt}", timeout=5) as r:
            out = {}
            for line in r.read().decode().splitlines():
                k, _, v = line.partition(": ")
                if v.strip().lstrip("-").isdigit():
                    out[k] = int(v)
            return out

    def heap_allocated(self) -> int | None:
        """Bytes allocated in Envoy's heap (admin /memory, tcmalloc); shared data lives there."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/memory", timeout=5) as r:
                return int(json.loads(r.read())["allocated"])
        except (OSError, ValueError, KeyError):
            return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_front(envoy: str, workdir: pathlib.Path, name: str, instance: str, upstream_port: int, wasm: pathlib.Path,
                policy: str) -> tuple[Envoy, int]:
    filters, conc, extra, listener_extra = INSTANCES[instance]
    wasm, policy = OVERRIDES.get(instance, (wasm, policy))
    port, admin = free_port(), free_port()
    cfg = render(
        "front.yaml",
        ADMIN_PORT=str(admin),
        PORT=str(port),
        UPSTREAM_PORT=str(upstream_port),
        LISTENER_EXTRA=listener_extra,
        HTTP_FILTERS=filters_block(filters, WASM=str(wasm), POLICY=policy),
    )
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


def post(port: int, body: bytes, token: str = TOKEN) -> tuple[int, bytes]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=body,
        method="POST",
        headers={"content-type": "application/json", "accept": "application/json, text/event-stream",
                 "authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def run_wrk(port: int, body: str, seconds: int, threads: int, conns: int) -> dict:
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--latency", "-s", str(BENCH / "wrk" / "post.lua"),
           f"http://127.0.0.1:{port}/mcp", "--", str(BODIES / body), TOKEN]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    m = re.search(r"^WRKJSON (.*)$", out, re.M)
    if not m:
        raise SystemExit(f"no result from wrk:\n{out}")
    r = json.loads(m.group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non2xx"] = int(non2xx.group(1)) if non2xx else 0
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    return r


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


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


def grant_memory(envoy: str, workdir: pathlib.Path, wasm: pathlib.Path, upstream_port: int, policy: str,
                 n: int) -> dict:
    """RSS growth of an Envoy with the filter after N distinct grants call a rate-limited tool."""
    e, port = start_front(envoy, workdir, "grants", "wasm_quiet", upstream_port, wasm, policy)
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


# ----------------------------------------------------------------------------------------------------
# Machine


def machine() -> dict:
    cpu = "?"
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = pathlib.Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    wrk_v = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("Copyright")[0].strip()
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_gib": round(int(mem) / 2**20, 1), "kernel": platform.release(),
            "loadavg_start": pathlib.Path("/proc/loadavg").read_text().split()[:3], "wrk": wrk_v}


# ----------------------------------------------------------------------------------------------------
# Output


def fmt_ratio(s: dict, digits: int = 3) -> str:
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"


def fmt_us(s: dict) -> str:
    return f"{s['median']:+.0f} [{s['min']:+.0f}, {s['max']:+.0f}]"


def plot(results: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    styles = {"a": "-", "a'": ":", "b": "-", "b'": "--", "c": "-", "d": "-", "e": "-."}
    for name in ["a", "a'", "b", "b'", "c", "d"]:
        if name not in results["configs"]:
            continue
        runs = results["configs"][name]["runs"]
        # Each percentile's median over the rounds.
        qs = sorted(runs[0]["latency_us"]["percentiles"], key=float)
        xs = [100 / (100 - float(q)) for q in qs]
        ys = [statistics.median(r["latency_us"]["percentiles"][q] for r in runs) for q in qs]
        ax.plot(xs, ys, styles[name], marker="o", ms=3, label=CONFIGS[name][0])
    ax.set_xscale("log")
    ticks = [1, 2, 4, 10, 100, 1000, 10000]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["0", "50", "75", "90", "99", "99.9", "99.99"])
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (µs)")
    ax.set_yscale("log")
    m = results["machine"]
    ax.set_title(f"wrk -t{results['params']['threads']} -c{results['params']['conns']}, 1 KiB tools/call, loopback, "
                 f"{m['nproc']} cores; each percentile's median over {results['params']['rounds']} rounds", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def render_results(res: dict) -> str:
    m, p = res["machine"], res["params"]
    out = [BEGIN, "", f"### Latest run: {res['date']}", ""]
    out.append(f"Machine: {m['nproc']} cores, {m['cpu']}, {m['mem_gib']} GiB, Linux {m['kernel']}; load average "
               f"at start {' '.join(m['loadavg_start'])} (the machine is shared: see Noise). {res['envoy']}; "
               f"{m['wrk']}.")
    out.append(f"Load: `wrk -t{p['threads']} -c{p['conns']} -d{p['seconds']}s`, {p['rounds']} rounds, order reversed "
               f"every other round, {p['warmup']} s warm-up per configuration first. Ratios are per round; shown as "
               "median [min, max] over the rounds.")
    out += ["", "#### Ratios and targets", "", "| measure | median [min, max] | target | met |", "|---|---|---|---|"]
    t = res["targets"]
    for row in t:
        out.append(f"| {row['what']} | {row['value']} | {row['target']} | {row['met']} |")
    out += ["", "Informational ratios (no target):", "", "| ratio | median [min, max] |", "|---|---|"]
    for num, den, what in RATIOS:
        key = f"{num}/{den}"
        if key in res["ratios"] and what not in {r["what"] for r in t}:
            out.append(f"| {what} | {fmt_ratio(res['ratios'][key])} |")
    for key, what in [("p50_b_minus_a", "p50(b) − p50(a), µs"),
                      ("p99_b_minus_c", "p99(b) − p99(c), µs"), ("cpu_b_minus_a", "front Envoy CPU per request, (b) − (a), µs"),
                      ("cpu_b_minus_abuf", "front Envoy CPU per request, (b) − (a'), µs"),
                      ("cpu_c_minus_a", "front Envoy CPU per request, (c) − (a), µs"),
                      *[(k, f"front Envoy CPU per request, {k[4:-8]} − (a), µs") for k in res["diffs"]
                        if k.startswith("cpu_v:")]]:
        if key in res["diffs"]:
            out.append(f"| {what} | {fmt_us(res['diffs'][key])} |")
    out += ["", "#### Per configuration (medians over the rounds)", "",
            "| configuration | requests/s | p50 µs | p90 µs | p99 µs | p99.9 µs | front Envoy CPU µs/request | "
            "RSS MiB after the run | errors |", "|---|---|---|---|---|---|---|---|---|"]
    for name, c in res["configs"].items():
        s = c["summary"]
        out.append(f"| {CONFIGS[name][0]} | {s['rps']:.0f} | {s['p50']:.0f} | {s['p90']:.0f} | {s['p99']:.0f} | "
                   f"{s['p99.9']:.0f} | {s['cpu_us_per_req']:.1f} | {c['rss_kib'] / 1024:.1f} | {s['errors']} |")
    sat = res.get("saturation")
    if sat:
        out += ["", f"#### Near saturation: `wrk -t{p['threads']} -c{sat['conns']}`, {sat['rounds']} rounds", "",
                "| configuration | requests/s | p50 µs | p99 µs | front Envoy CPU µs/request | errors |",
                "|---|---|---|---|---|---|"]
        for name, c in sat["configs"].items():
            out.append(f"| {CONFIGS[name][0]} | {c['rps']:.0f} | {c['p50']:.0f} | {c['p99']:.0f} | "
                       f"{c['cpu_us_per_req']:.1f} | {c['errors']} |")
        out += ["", "| ratio | median [min, max] |", "|---|---|"]
        for key, ratio in sat["ratios"].items():
            out.append(f"| throughput {key} at -c{sat['conns']} | {fmt_ratio(ratio)} |")
    out += ["", "![latency percentiles of (a)-(d)](bench/latency.png)", ""]
    out += ["#### Footprint", "", "| wasm build | bytes | KiB |", "|---|---|---|"]
    for w in res["wasm"]:
        out.append(f"| {w['variant']} | {w['bytes']} | {w['bytes'] / 1024:.0f} |")
    out += ["", "| Envoy (concurrency 1 unless noted) | VmRSS MiB after the load rounds |", "|---|---|"]
    for inst, kib in res["rss"].items():
        out.append(f"| {inst} | {kib / 1024:.1f} |")
    g = res.get("grants")
    if g:
        out += ["", f"Memory per tracked grant: {g['grants']} distinct grants each called `vm_agent_exec` "
                f"(a per-grant minute limit) once ({g['seconds']:.1f} s); the filter's gauge "
                f"`mcp_policy_tracked_grants` went {g['tracked_before']} → {g['tracked_after']}. Envoy RSS grew "
                f"{g['rss0_kib'] / 1024:.1f} → {g['rss1_kib'] / 1024:.1f} MiB: **{g['bytes_per_grant']:.0f} bytes per "
                "grant** of RSS"
                + (f", and Envoy's heap (admin `/memory` `allocated`) by **{g['heap_bytes_per_grant']:.0f} bytes per grant**"
                   if g.get("heap_bytes_per_grant") is not None else "")
                + "; the keys and values stored are 97 bytes per grant (layout below)."]
    if res["micro"]:
        out += ["", "#### Micro benchmarks (`cargo bench`, criterion, native)", "",
                "| benchmark | median time | 95% CI | throughput |", "|---|---|---|---|"]
        for r in res["micro"]:
            tp = f"{r['mib_s']:.0f} MiB/s" if r["mib_s"] else ""
            out.append(f"| {r['id']} | {human_ns(r['ns'])} | {human_ns(r['lo'])} – {human_ns(r['hi'])} | {tp} |")
    out += ["", f"Raw data: `bench/results.json`. Total time of bench/load.py: {res['elapsed_s']:.0f} s.", "", END]
    return "\n".join(out)


def human_ns(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def write_markdown(path: pathlib.Path, section: str) -> None:
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n## Results\n\n" + section + "\n"
    path.write_text(text)


# ----------------------------------------------------------------------------------------------------


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
    policy = json.dumps(json.loads((BENCH / "policy-bench.json").read_text()), separators=(",", ":"))
    for spec in args.variant:
        vname, _, rest = spec.partition("=")
        parts = rest.split(",")
        vwasm = pathlib.Path(parts[0] or args.wasm).resolve()
        vpolicy = policy
        quiet = False
        for part in parts[1:]:
            if part.startswith("policy="):
                vpolicy = json.dumps(json.loads(pathlib.Path(part[7:]).read_text()), separators=(",", ":"))
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
        up_port, up_admin = free_port(), free_port()
        upstream = Envoy(args.envoy, workdir, "upstream",
                         render("upstream.yaml", ADMIN_PORT=str(up_admin), PORT=str(up_port)), 1, [])
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
            _, cpu0 = proc_stat(e.proc.pid)
            res = run_wrk(port, CONFIGS[n][2], args.seconds, args.threads, conns)
            rss, cpu1 = proc_stat(e.proc.pid)
            res["cpu_us_per_req"] = (cpu1 - cpu0) * 1e6 / max(res["requests"], 1)
            return res, rss

        runs: dict[str, list[dict]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = names if r % 2 == 0 else list(reversed(names))
            for n in order:
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
                order = sat_names if r % 2 == 0 else list(reversed(sat_names))
                for n in order:
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
            grants = grant_memory(args.envoy, workdir, args.wasm.resolve(), up_port, policy, args.grants)
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
    target("wasm size (the module benchmarked, from `make build`)", f"{shipped / 1024:.0f} KiB ({shipped} B)",
           "≤ 576,731 B (the throughput targets' size bound)", shipped <= 576_731)

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
    plot(results, args.plot)
    section = render_results(results)
    if args.out:
        write_markdown(args.out, section)
        log(f"wrote {args.out}, {args.json}, {args.plot}")
    # The ratio table on stdout.
    print()
    print("\n".join(line for line in section.splitlines() if line.startswith("|") or line.startswith("####")))


if __name__ == "__main__":
    main()
