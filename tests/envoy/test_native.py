"""Tier 2: what only the native build (crates/filter-native, an Envoy dynamic module) has to prove.

- Its limiter state lives in process memory, shared by every worker thread: 200 simultaneous calls
  of one grant on 4 workers admit exactly `max`.
- A panic never lets a call through: the crate's `test-panic` feature makes a request header
  `x-mcp-policy-test-panic: 1` panic the filter; the stream is reset (never forwarded), and Envoy
  and every later stream go on as before. That build is the dev profile's (unwinding, like the
  release module), built once per session.
- A policy that needs what the build cannot do (the rate limit service, a gRPC callout) is refused
  when it loads, with the reason.
"""

from __future__ import annotations

import copy
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from testkit.clock import avoid_minute_boundary
from testkit.envoy import POLICY_JSON, load_policy
from testkit.jsonrpc import TRANSPORT_ERRORS, Reply, call_tool, headers_for, post, tool_call
from testkit.paths import REPO_ROOT
from testkit.processes import cargo_build
from testkit.stack import Stack
from testkit.upstream import recorder_lines

PANIC_SO = REPO_ROOT / "target" / "debug" / "libmcp_policy_native.so"
PANIC_HEADER = "x-mcp-policy-test-panic"
EXEC_ARGS = {"node": "pve1", "vmid": 100, "command": "uptime"}
CALLS = 200
MAX = 50


@pytest.fixture
def native_stack(tmp_path):
    with Stack(log_dir=tmp_path, build="native") as s:
        yield s


def _limited_policy(max_: int) -> dict:
    policy = load_policy(POLICY_JSON)
    policy = copy.deepcopy(policy)
    policy["tools"]["vm_agent_exec"]["limits"][0]["max"] = max_
    return policy


def _simultaneous_calls(url: str, token: str, n: int) -> list[Reply]:
    """`n` vm_agent_exec calls of one grant, released at once from `n` threads (own connections)."""
    barrier = threading.Barrier(n)

    def one(i):
        barrier.wait()
        return call_tool(url, "vm_agent_exec", token, EXEC_ARGS, id=i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


def test_200_simultaneous_calls_on_4_workers_admit_exactly_max(native_stack):
    _, port, log = native_stack.recorder()
    envoy = native_stack.envoy(_limited_policy(MAX), port, concurrency=4)
    avoid_minute_boundary(margin=8.0)
    replies = _simultaneous_calls(envoy.mcp_url, "grant-native-race", CALLS)
    codes = [None if "result" in r.json() else r.error["code"] for r in replies]
    assert codes.count(None) == MAX, codes
    assert codes.count(-31002) == CALLS - MAX, codes  # rate_limited; none refused for contention
    assert len(recorder_lines(log, settle=0.3)) == MAX
    workers = envoy.worker_connections()
    assert sorted(workers) == ["worker_0", "worker_1", "worker_2", "worker_3"], workers
    assert min(workers.values()) > 0, workers


@pytest.fixture(scope="session")
def panic_so(tmp_path_factory) -> Path:
    """The module built with `--features test-panic`, copied to a directory of its own."""
    done = cargo_build(["build", "--locked", "-p", "mcp-policy-filter-native", "--features",
                        "test-panic,mcp-policy-core/schema"])
    if done.returncode != 0 or not PANIC_SO.is_file():
        pytest.fail(f"cargo build --features test-panic failed ({done.returncode}):\n{done.stderr[-3000:]}",
                    pytrace=False)
    dest = tmp_path_factory.mktemp("panic-module") / PANIC_SO.name
    shutil.copyfile(PANIC_SO, dest)
    return dest


def _send(url: str, tool: str, **extra: str) -> Reply | Exception:
    try:
        return post(url, tool_call(tool, {}), headers_for("grant-panic", **extra), timeout=10)
    except TRANSPORT_ERRORS as e:
        return e


def test_panic_resets_the_stream_and_envoy_keeps_serving(native_stack, panic_so, monkeypatch):
    monkeypatch.setenv("MCP_POLICY_NATIVE", str(panic_so))
    _, port, log = native_stack.recorder()
    envoy = native_stack.envoy(POLICY_JSON.read_text(encoding="utf-8"), port, concurrency=1)
    for _ in range(3):
        panicked = _send(envoy.mcp_url, "list_vms", **{PANIC_HEADER: "1"})
        # Reset (a transport error, or Envoy's 503 for an upstream-less reset): never a forward.
        assert isinstance(panicked, Exception) or panicked.status >= 500, panicked
    assert recorder_lines(log, settle=0.3) == []
    allowed = _send(envoy.mcp_url, "list_vms")
    assert isinstance(allowed, Reply) and allowed.status == 200 and "result" in allowed.json(), allowed
    denied = _send(envoy.mcp_url, "delete_vm")
    assert isinstance(denied, Reply) and denied.error["data"]["kind"] == "denied", denied
    assert len(recorder_lines(log, settle=0.3)) == 1
    assert envoy.proc.running()
    text = envoy.log_text()
    assert text.count("mcp-policy-filter panicked: ") == 3, text[-3000:]
    assert "forced by x-mcp-policy-test-panic" in text


def test_rate_limit_service_is_refused_when_the_policy_loads(native_stack):
    policy = load_policy(POLICY_JSON)
    policy["gateway"]["rate_limit_service"] = {"cluster": "mcp_ratelimit", "domain": "mcp"}
    ended = native_stack.envoy_expect_failure(policy)
    assert ended.returncode == 1, ended.log[-2000:]
    assert "gateway.rate_limit_service (a gRPC callout) is not supported by the native build" in ended.log
