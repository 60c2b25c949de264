"""Helpers on top of `harness` for the rate-limit, failure and observability tests (and
bench/grants_memory.py). Plain Python, no pytest dependency.

- Prometheus samples from the admin port, parsed exactly (`prometheus`, `prom_value`).
- The Envoy log: audit lines (`audit_records`), access-log decision fields (`access_records`).
- Envoy variants of the shipped bootstrap: another `failure_policy`, a `direct_response` route.
- Clock alignment for fixed windows (`sleep_to_next_second`, `avoid_boundary`).
- A recorder that also answers `tools/list` with a tool list (`start_tools_upstream`, the stub
  upstream of tests/upstream.py), so that a forwarded `tools/list` is a clean `passed` decision
  instead of an unfilterable response.
- `parallel_posts`: a burst of POSTs from many threads released together.
- `/proc/PID/status` readings for memory benchmarks.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import yaml

import harness
from clock import avoid_boundary, sleep_to_next_second, window_index  # noqa: F401 - re-exported
from jsonrpc import Reply, headers_for, post
from upstream import Canned, Seen, StubUpstream, rpc_request

HERE = Path(__file__).resolve().parent

# ----------------------------------------------------------------------------------- grants


def grant_label(token: str) -> str:
    """The label the filter logs for an unregistered bearer token: `sha256:` + 12 hex digits."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# ----------------------------------------------------------------------------------- stats

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def prometheus(envoy: harness.Envoy) -> dict[str, float]:
    """Every sample of admin `/stats/prometheus`, keyed exactly as printed: `name{labels}`
    (Envoy prints `{}` for untagged stats, e.g. `mcp_policy_allowed_total{}`)."""
    status, text = envoy.admin_get("/stats/prometheus")
    if status != 200:
        raise RuntimeError(f"/stats/prometheus: HTTP {status}")
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def prom_value(envoy: harness.Envoy, key: str) -> float:
    """One sample, by its exact printed key, e.g. `mcp_policy_denied_total{}`; KeyError if absent."""
    samples = prometheus(envoy)
    if key not in samples:
        raise KeyError(f"{key} not in /stats/prometheus; mcp samples: "
                       f"{sorted(k for k in samples if 'mcp_policy' in k)}")
    return samples[key]


def prom_family(samples: dict[str, float], name: str) -> dict[str, float]:
    """The samples of one metric family: `{labels text: value}`."""
    return {k[len(name):]: v for k, v in samples.items() if k.startswith(name + "{")}


# ----------------------------------------------------------------------------------- logs

AUDIT_RE = re.compile(r"\[ctx \d+\] audit (\{.*\})\s*$")
TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def audit_records(log_text: str) -> list[dict[str, Any]]:
    """The JSON objects of the filter's audit lines, in log order."""
    out = []
    for line in log_text.splitlines():
        if " audit {" not in line:
            continue
        m = AUDIT_RE.search(line)
        if not m:
            raise AssertionError(f"malformed audit line: {line}")
        out.append(json.loads(m.group(1)))
    return out


def split_access_audit(line: str) -> tuple[str, str | None]:
    """An access-log line of the shipped format without its last field, and that field's value: the
    text after ` audit=` (after ` rid=`) to the end of the line, i.e. `wasm.mcp_audit` as Envoy printed
    it (`-` when unset); None when the line has no such field."""
    at = line.find(" audit=", max(line.find(" rid="), 0))
    if at < 0:
        return line, None
    return line[:at], line[at + len(" audit="):]


def access_audits(log_text: str, request_line: str = '"POST /mcp"') -> list[str]:
    """The `audit=` field (the filter-state value `wasm.mcp_audit`, byte for byte) of every
    access-log line containing `request_line`, in log order."""
    out = []
    for line in log_text.splitlines():
        if request_line in line and " mcp_decision=" in line:
            _, audit = split_access_audit(line)
            if audit is not None:
                out.append(audit)
    return out


def audit_texts(log_text: str) -> list[str]:
    """The JSON text of the filter's audit lines (`[ctx N] audit {…}`), byte for byte, in log order."""
    out = []
    for line in log_text.splitlines():
        if " audit {" in line:
            m = AUDIT_RE.search(line)
            if not m:
                raise AssertionError(f"malformed audit line: {line}")
            out.append(m.group(1))
    return out


def access_records(log_text: str, request_line: str = '"POST /mcp"') -> list[dict[str, str]]:
    """Access-log lines of the shipped format containing `request_line`, as dicts: the `key=value`
    fields (`mcp_decision`, `mcp_tool`, `mcp_grant`, `mcp_rule`, `mcp_error`, `up`, `rid`) plus
    `status` and `details` (%RESPONSE_CODE% and %RESPONSE_CODE_DETAILS%). The last field, `audit=`
    (see `access_audits`), is left out."""
    out = []
    for line in log_text.splitlines():
        if request_line not in line or " mcp_decision=" not in line:
            continue
        line, _ = split_access_audit(line)
        head, _, rest = line.partition(request_line)
        before_fields = rest.split(" mcp_decision=", 1)[0].split()
        rec = dict(f.split("=", 1) for f in ("mcp_decision=" + rest.split(" mcp_decision=", 1)[1]).split()
                   if "=" in f)
        rec["status"] = before_fields[0] if before_fields else ""
        rec["details"] = before_fields[1] if len(before_fields) > 1 else ""
        out.append(rec)
    return out


def wait_for(predicate, timeout: float, interval: float = 0.05, what: str = "condition"):
    """Poll `predicate()` until it returns a truthy value (returned) or `timeout` s pass (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# ----------------------------------------------------------------------------------- Envoy variants


def render(stack: harness.Stack, policy: dict | str, upstream_port: int, *, wasm: Path | None = None,
           failure_policy: str | None = None, direct_response: str | None = None) -> str:
    """The shipped bootstrap (via `harness.render_envoy_config`) with optional changes:
    `failure_policy` of the wasm filter, and a route that answers with a fixed 200 JSON body
    (`direct_response`) instead of forwarding upstream."""
    text = harness.render_envoy_config(policy, wasm or stack.wasm, harness.free_port(), harness.free_port(),
                                       upstream_port)
    if failure_policy is None and direct_response is None:
        return text
    cfg = yaml.safe_load(text)
    if failure_policy is not None:
        harness.wasm_filter(cfg)["config"]["failure_policy"] = failure_policy
    if direct_response is not None:
        (vhost,) = harness.hcm(cfg)["route_config"]["virtual_hosts"]
        vhost["routes"] = [{"match": {"prefix": "/"},
                            "direct_response": {"status": 200, "body": {"inline_string": direct_response}},
                            "response_headers_to_add": [{"header": {"key": "content-type",
                                                                    "value": "application/json"}}]}]
    return yaml.safe_dump(cfg, sort_keys=False, width=1000)


# Start Envoy on a rendered config as part of the stack (stopped with it): start(stack, config, ...).
start = harness.Stack.start_envoy


# ----------------------------------------------------------------------------------- upstream

TOOLS = ["list_vms", "vm_agent_exec", "delete_vm", "stop_vm"]


def tools_list_answer(seen: Seen) -> Canned | None:
    """A stub upstream responder: a `tools/list` request gets a result listing `TOOLS`; anything else
    the recorder's answer (None)."""
    msg = rpc_request(seen)
    if msg is None or msg["method"] != "tools/list":
        return None
    result = {"tools": [{"name": t, "inputSchema": {"type": "object"}} for t in TOOLS]}
    return Canned(200, [("content-type", "application/json")],
                  json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode())


def start_tools_upstream(stack: harness.Stack, name: str = "tools-upstream") -> tuple[StubUpstream, int, Path]:
    """Like `Stack.recorder()` (same JSONL log), but `tools/list` gets a result listing `TOOLS`."""
    stub = stack.upstream(name, tools_list_answer)
    return stub, stub.port, stub.log


# ----------------------------------------------------------------------------------- processes


def proc_status(pid: int) -> dict[str, int]:
    """Memory lines of /proc/PID/status in KiB: {"VmRSS": ..., "RssAnon": ..., ...}."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[key] = int(parts[0])
    return out


def cargo_build(args: list[str], timeout: float = 900.0) -> subprocess.CompletedProcess:
    """Run `cargo ARGS` in the repository root, capturing output."""
    import shutil

    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    return subprocess.run([cargo, *args], cwd=harness.REPO_ROOT, capture_output=True, text=True, timeout=timeout)


def spread_posts(calls: list[tuple[str, str | None, bytes]], threads: int = 40) -> list[Reply]:
    """POST each (url, token, body) of `calls`, from `threads` threads released together, each call on
    its own connection (so the kernel spreads them over Envoy's workers). Replies in call order."""
    replies: list[Reply | None] = [None] * len(calls)
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def worker(k: int):
        try:
            barrier.wait(timeout=30)
            for i in range(k, len(calls), threads):
                url, token, body = calls[i]
                replies[i] = post(url, body, headers_for(token), timeout=30)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return replies  # type: ignore[return-value]


def parallel_posts(url: str, calls: list[tuple[str | None, bytes]], threads: int = 50) -> list[Reply]:
    """`spread_posts` of (token, body) calls all to `url`."""
    return spread_posts([(url, token, body) for token, body in calls], threads)
