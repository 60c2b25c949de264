"""What the bench scripts share: Envoy processes on loopback from the templates in bench/envoy, wrk
runs against them, /proc readers and a description of the machine. One copy of this machinery, so
that every benchmark (bench/load.py and the narrower scripts beside it) starts, drives and measures
Envoy the same way and their figures compare.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pathlib
import platform
import random
import re
import shutil
import statistics
import string
import subprocess
import time
import urllib.request

# The tests' port picker: below the kernel's ephemeral range, so a connection made between choosing
# a port and starting the Envoy that binds it cannot take it as its local port.
from testkit import processes as _processes  # noqa: E402

free_port = _processes.free_port

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
BODIES = BENCH / "bodies"
TOKEN = "bench-agent-token-0001"
# The headers of every call a benchmark makes, beside its `Authorization: Bearer`.
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
# The callers of bench/policy-set-bench.json (behind filters-jwt.yaml), by the claims of their
# tokens: the set attaches its `ops` policy by `groups`, `readonly` by `scope`.
CLAIMS = {"ops": {"sub": "agent-ops", "groups": ["ops"]}, "readonly": {"sub": "agent-ro", "scope": "vms:read"}}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def policy_text(path: pathlib.Path) -> str:
    """A policy file as the one-line JSON text a plugin configuration carries."""
    return json.dumps(json.loads(path.read_text()), separators=(",", ":"))


def module_search_dir(directory: pathlib.Path, links: dict[str, pathlib.Path]) -> pathlib.Path:
    """A directory for ENVOY_DYNAMIC_MODULES_SEARCH_PATH, where Envoy finds `lib<name>.so`: a link
    under each name to its shared object (those that exist), so that modules built in different
    places load side by side, or one build under another's name."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, so in links.items():
        link = directory / name
        if so.is_file() and not link.is_symlink():
            link.symlink_to(so.resolve())
    return directory


@contextlib.contextmanager
def search_path(directory: pathlib.Path | str | None):
    """Envoys started inside find their dynamic modules in `directory` (when given; see
    `module_search_dir`) instead of the search directory set for the run, which is back as it was
    (or unset) after: another build of a module, under the module's own name, for some fronts only."""
    if directory is None:
        yield
        return
    before = os.environ.get("ENVOY_DYNAMIC_MODULES_SEARCH_PATH")
    os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = str(directory)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ENVOY_DYNAMIC_MODULES_SEARCH_PATH", None)
        else:
            os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = before


def render(template: str, **values: str) -> str:
    return string.Template((BENCH / "envoy" / template).read_text()).substitute(**values)


def filters_block(name: str | tuple[str, ...], **values: str) -> str:
    """The HTTP filters of bench/envoy/`name` (or of several files, in order) for front.yaml's
    HTTP_FILTERS, rendered with `values`, without their comments."""
    text = "\n".join(render(n, **values) for n in ((name,) if isinstance(name, str) else name))
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def front_config(filters: str | tuple[str, ...], policy: str, upstream_port: int, listener_extra: str = "",
                 **values: str) -> tuple[str, int, int]:
    """bench/envoy/front.yaml for one front Envoy on new ports, its HTTP filters those of `filters`
    rendered with the policy and `values`: (the configuration, its port, its admin port)."""
    port, admin = free_port(), free_port()
    cfg = render("front.yaml", ADMIN_PORT=str(admin), PORT=str(port), UPSTREAM_PORT=str(upstream_port),
                 LISTENER_EXTRA=listener_extra, HTTP_FILTERS=filters_block(filters, POLICY=policy, **values))
    return cfg, port, admin


# What the upstream answers every call with: a tools/call result listing one VM.
RESULT = ('{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":'
          '"[{\\"vmid\\":100,\\"name\\":\\"web-1\\",\\"status\\":\\"running\\"}]"}],"isError":false}}')


def upstream_config(sse: bool = False) -> tuple[str, int, int]:
    """bench/envoy/upstream.yaml, the responder behind every front Envoy, on new ports: (the
    configuration, its port, its admin port). It answers with RESULT as JSON, or with `sse` as one
    Streamable HTTP `message` event (`text/event-stream`)."""
    port, admin = free_port(), free_port()
    body, kind = (f"event: message\ndata: {RESULT}\n\n", "text/event-stream") if sse else (RESULT, "application/json")
    # A JSON string is a YAML double-quoted scalar.
    return render("upstream.yaml", ADMIN_PORT=str(admin), PORT=str(port), RESULT_BODY=json.dumps(body),
                  RESULT_TYPE=kind), port, admin


def jwt_callers() -> tuple[dict[str, str], dict[str, str]]:
    """For bench/envoy/filters-jwt.yaml: its values (the JWKS of an RS256 key made for the run, the
    issuer and the audience) and a token of each caller of CLAIMS signed with that key, valid for two
    hours (a count under callgrind can take long)."""
    from testkit.identity import AUDIENCE, ISSUER, Issuer  # PyJWT and cryptography: only here

    issuer = Issuer()
    expires = int(time.time()) + 7200
    tokens = {caller: issuer.token(**claims, exp=expires) for caller, claims in CLAIMS.items()}
    return {"JWKS": json.dumps(issuer.jwks), "ISSUER": ISSUER, "AUDIENCE": AUDIENCE}, tokens


def proc_stat(pid: int) -> tuple[int, float]:
    """(VmRSS in KiB, user+system CPU seconds) of a process."""
    rss = 0
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    user, system = proc_cpu(pid)
    return rss, user + system


def proc_cpu(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, all its threads: the process's own code, and the
    kernel's work on its behalf (system calls, and the softirqs the kernel runs in its context)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


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


def post(port: int, body: bytes, token: str = TOKEN) -> tuple[int, bytes]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=body,
        method="POST",
        headers={**MCP_HEADERS, "authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def require_wrk() -> None:
    if not shutil.which("wrk"):
        raise SystemExit("wrk not found: make wrk-deps installs it when run as root (Debian package wrk)")


def run_wrk(port: int, body: str, seconds: int, threads: int, conns: int, token: str = TOKEN) -> dict:
    """wrk posting bench/bodies/`body` with `Authorization: Bearer token`: its requests, errors and
    latency distribution (bench/wrk/post.lua)."""
    require_wrk()
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--latency", "-s", str(BENCH / "wrk" / "post.lua"),
           f"http://127.0.0.1:{port}/mcp", "--", str(BODIES / body), token]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    m = re.search(r"^WRKJSON (.*)$", out, re.M)
    if not m:
        raise SystemExit(f"no result from wrk:\n{out}")
    r = json.loads(m.group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non2xx"] = int(non2xx.group(1)) if non2xx else 0
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    return r


def timed_wrk(pid: int, port: int, body: str, seconds: int, threads: int, conns: int) -> dict:
    """`run_wrk` against the Envoy of process `pid`, with that process's CPU per request over the run
    (`cpu_us`, split into `user_us` and `sys_us`: `proc_cpu`)."""
    user0, sys0 = proc_cpu(pid)
    r = run_wrk(port, body, seconds, threads, conns)
    user1, sys1 = proc_cpu(pid)
    n = max(r["requests"], 1)
    r.update(cpu_us=(user1 - user0 + sys1 - sys0) * 1e6 / n, user_us=(user1 - user0) * 1e6 / n,
             sys_us=(sys1 - sys0) * 1e6 / n)
    return r


def cpu_layout(layout: str) -> tuple[set[int], set[int]]:
    """(the front Envoys' CPUs, the upstream's and wrk's) of this process's CPU set: for `pinned`, the
    last CPU and the others (two CPUs at least); for `shared`, every CPU for both."""
    cpus = sorted(os.sched_getaffinity(0))
    if layout == "shared":
        return set(cpus), set(cpus)
    if len(cpus) < 2:
        raise SystemExit("the pinned layout needs at least two CPUs")
    return {cpus[-1]}, set(cpus[:-1])


@contextlib.contextmanager
def started_on(cpus: set[int]):
    """Processes started inside run on `cpus`: a child inherits this process's CPU set, which is
    restored on leaving."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def round_order(keys: list, r: int) -> list:
    """The order of round `r` over `keys`: as given in even rounds, reversed in odd ones, so that a drift
    over the run (the host's load, a CPU's clock) falls on every configuration alike."""
    return keys if r % 2 == 0 else keys[::-1]


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def median_interval_rank(n: int, level: float = 0.95) -> int:
    """The k of `median_interval` for `n` rounds: the largest k for which the k-th smallest and the
    k-th largest round hold the median of what the rounds sample with probability `level` or more,
    whatever their distribution (each round falls below the median with probability 1/2, so the
    count below it is binomial); 0 when even [min, max] holds it with less (under 6 rounds)."""
    below = [math.comb(n, i) / 2 ** n for i in range(n + 1)]  # P(exactly i rounds below the median)
    k = 0
    while k < n // 2 and 1 - 2 * sum(below[:k + 1]) >= level:
        k += 1
    return k


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """The median's interval from the rounds' order statistics (`median_interval_rank`): for 15
    rounds, the 4th and 12th (96.5 %). None under 6 rounds."""
    k = median_interval_rank(len(values), level)
    if k == 0:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[len(values) - k]


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

