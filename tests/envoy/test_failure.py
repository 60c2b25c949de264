"""Tier 2: a panic in the filter fails closed: no panic reaches Envoy.

The crate's `test-panic` feature makes a request header `x-mcp-policy-test-panic: 1` panic the
filter. That build goes to its own target dir (target/panic-test), built once per session here
(about a minute from cold); the release build under target/wasm32-wasip1 never has the feature.

Envoy runs with `--concurrency 1`, so the panicking VM is the one every later request meets.
- FAIL_RELOAD (as shipped in envoy/envoy.yaml): 503 until the VM is reloaded (Envoy reloads on the
  next request once ~1 s has passed since the VM's last load), then the policy again.
- FAIL_CLOSED: 503 from then on.
In both, nothing the policy denies ever reaches the upstream (tests/cases/recorder.py).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
import yaml

from testkit.envoy import POLICY_JSON, Envoy, render, wasm_filter
from testkit.jsonrpc import TRANSPORT_ERRORS, Reply, headers_for, post, tool_call
from testkit.paths import REPO_ROOT
from testkit.processes import cargo_build
from testkit.stack import Stack
from testkit.stats import prom_value
from testkit.upstream import recorder_lines, recorder_reply

PANIC_TARGET_DIR = REPO_ROOT / "target" / "panic-test"
PANIC_WASM = PANIC_TARGET_DIR / "wasm32-wasip1" / "release" / "mcp_policy_filter.wasm"
PANIC_HEADER = "x-mcp-policy-test-panic"
POLICY = POLICY_JSON.read_text(encoding="utf-8")  # list_vms allowed, delete_vm denied by default
TOKEN = "grant-failure"
RELOAD_WAIT = 5.0


@pytest.fixture(scope="session")
def panic_wasm() -> Path:
    """The filter built with `--features test-panic` (fails the tests if the build fails)."""
    done = cargo_build(["build", "--release", "--target", "wasm32-wasip1", "-p", "mcp-policy-filter", "--features", "test-panic",
                        "--target-dir", str(PANIC_TARGET_DIR)])
    if done.returncode != 0 or not PANIC_WASM.is_file():
        pytest.fail(f"cargo build --features test-panic failed ({done.returncode}):\n{done.stderr[-3000:]}",
                    pytrace=False)
    return PANIC_WASM


@pytest.fixture
def panic_stack(tmp_path, panic_wasm):
    with Stack(log_dir=tmp_path, wasm=panic_wasm) as s:
        yield s


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def send(url: str, body: bytes, **extra: str) -> Reply | Exception:
    """POST; a transport error (reset, closed connection) is returned, not raised."""
    try:
        return post(url, body, headers_for(TOKEN, **extra), timeout=10)
    except TRANSPORT_ERRORS as e:
        return e


def start(stack: Stack, failure_policy: str | None):
    _, port, log = stack.recorder()
    config = render(stack.wasm, POLICY, port, failure_policy=failure_policy)
    envoy = stack.start_envoy(config, concurrency=1)
    assert (wasm_filter(yaml.safe_load(envoy.config_path.read_text()))["config"]["failure_policy"]
            == (failure_policy or "FAIL_RELOAD"))
    return envoy, log


def is_denial(r) -> bool:
    return isinstance(r, Reply) and r.status == 200 and r.error["code"] == -31001 and \
        r.error["data"]["kind"] == "denied"


def is_503(r) -> bool:
    return isinstance(r, Reply) and r.status == 503


def panic(envoy: Envoy, log) -> None:
    """Send the panicking request: it must fail (5xx or a reset) and never reach the upstream."""
    body = tool_call("list_vms", {}, id="panic")
    r = send(envoy.mcp_url, body, **{PANIC_HEADER: "1"})
    assert isinstance(r, Exception) or r.status >= 500, (r.status, r.body)
    assert sha(body) not in {e["body_sha256"] for e in recorder_lines(log)}


def assert_panic_logged(envoy: Envoy, times: int = 1) -> None:
    """One critical line per panic, from the filter's panic hook."""
    lines = [line for line in envoy.log_text().splitlines() if "mcp-policy-filter panicked" in line]
    assert len(lines) == times, lines
    assert all("[critical][wasm]" in line for line in lines), lines


def poll_until_recovered(envoy: Envoy, tag: str, denied_bodies: list[bytes]) -> list[tuple[bool, bool]]:
    """Send a denied and an allowed call in turn until both get the policy's answer again (at most
    RELOAD_WAIT s). Every reply must be the policy's answer or Envoy's 503, nothing else.
    Returns (denied got 503, allowed got 503) per round."""
    outcomes = []
    deadline = time.monotonic() + RELOAD_WAIT
    n = 0
    while time.monotonic() < deadline:
        n += 1
        denied = tool_call("delete_vm", {"node": "pve1", "vmid": 100}, id=f"{tag}-d{n}")
        denied_bodies.append(denied)
        rd = send(envoy.mcp_url, denied)
        ra = send(envoy.mcp_url, tool_call("list_vms", {}, id=f"{tag}-a{n}"))
        assert is_denial(rd) or is_503(rd), rd
        allowed_ok = isinstance(ra, Reply) and ra.status == 200 and ra.body == recorder_reply(f"{tag}-a{n}")
        assert allowed_ok or is_503(ra), ra
        outcomes.append((is_503(rd), is_503(ra)))
        if not is_503(rd) and allowed_ok:
            return outcomes
        time.sleep(0.05)
    raise AssertionError(f"the VM did not come back within {RELOAD_WAIT} s after panic {tag}: {outcomes}")


def test_fail_reload_refuses_until_the_vm_reloads_and_never_forwards_a_denied_call(panic_stack):
    """Envoy 1.40 reloads a failed VM on the next request if its last (re)load was at least ~1 s
    ago, else it answers 503 until then. So a panic right after a reload shows the 503 phase: the
    test panics again at once after each recovery, until it has seen one (at most 3 panics)."""
    envoy, log = start(panic_stack, None)  # the shipped failure_policy
    assert post(envoy.mcp_url, tool_call("list_vms", {}, id=0), headers_for(TOKEN)).body == recorder_reply(0)

    denied_bodies: list[bytes] = []
    panics, saw_503 = 0, False
    while panics < 3 and not saw_503:
        panics += 1
        panic(envoy, log)
        outcomes = poll_until_recovered(envoy, f"p{panics}", denied_bodies)
        saw_503 = any(d or a for d, a in outcomes)
    assert saw_503, "no request after a panic was refused with 503"

    # Reloaded: the policy holds again (fresh ids).
    assert is_denial(send(envoy.mcp_url, tool_call("delete_vm", {}, id="after")))
    assert send(envoy.mcp_url, tool_call("list_vms", {}, id="after2")).body == recorder_reply("after2")

    seen = {e["body_sha256"] for e in recorder_lines(log, settle=0.3)}
    assert not seen & {sha(b) for b in denied_bodies}, "a denied call reached the upstream"
    assert all(PANIC_HEADER not in e["headers"] for e in recorder_lines(log))
    assert prom_value(envoy, "envoy_wasm_mcp_policy_vm_reload_success{}") == panics
    assert_panic_logged(envoy, panics)


def test_fail_closed_refuses_everything_after_a_panic(panic_stack):
    envoy, log = start(panic_stack, "FAIL_CLOSED")
    assert post(envoy.mcp_url, tool_call("list_vms", {}, id=0), headers_for(TOKEN)).body == recorder_reply(0)
    assert len(recorder_lines(log)) == 1

    panic(envoy, log)
    replies = []
    deadline = time.monotonic() + 3.0  # well past the ~1 s after which FAIL_RELOAD would have reloaded
    n = 0
    while time.monotonic() < deadline:
        n += 1
        replies.append(send(envoy.mcp_url, tool_call("delete_vm", {"vmid": 100}, id=f"d{n}")))
        replies.append(send(envoy.mcp_url, tool_call("list_vms", {}, id=f"a{n}")))
        time.sleep(0.1)

    bad = [(r.status, r.body[:200]) if isinstance(r, Reply) else repr(r) for r in replies if not is_503(r)]
    assert not bad, bad
    assert len(replies) >= 10
    assert len(recorder_lines(log, settle=0.3)) == 1, "the upstream saw a request after the panic"
    assert prom_value(envoy, "envoy_wasm_mcp_policy_vm_reload_success{}") == 0
    assert_panic_logged(envoy)
