"""Tier 2: `Mcp-Session-Id` bound to its grant (`gateway.session_key`), in real Envoy, in front of the
stateful demo server.

Grant B presenting grant A's session id is refused on POST, GET (with Last-Event-ID) and DELETE
(HTTP 404, −31010), and nothing reaches the server; forged and tampered ids are refused too; the id
works on a second Envoy that shares the key; a rotated key still accepts ids made under the
previous one; the official Python SDK client works unchanged through a bound session. Both builds.
"""

from __future__ import annotations

import base64
import json
import re

import anyio
import httpx
import pytest

from testkit.envoy import start_envoy, wasm_filter
from testkit.jsonrpc import get, headers_for, post, tool_call
from testkit.mcp_session import open_session, result_json

pytestmark = pytest.mark.both_builds

KEY_OLD = "k" * 40
KEY_NEW = "n" * 40
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}).encode()
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
LIST_VMS = tool_call("list_vms", {})


def policy(current: str, previous: str | None = None) -> str:
    p = {"version": "1", "default": "deny", "tools": {"list_vms": {}, "stop_vm": {}},
         "gateway": {"session_key": {"current": current, **({"previous": previous} if previous else {})}}}
    return json.dumps(p)


@pytest.fixture(scope="module")
def envoys(module_stack):
    _, port = module_stack.demo_server(json_response=True)
    a = module_stack.envoy(policy(KEY_OLD), port, name="envoy-a")
    b = module_stack.envoy(policy(KEY_OLD), port, name="envoy-b")
    rotated = module_stack.envoy(policy(KEY_NEW, KEY_OLD), port, name="envoy-rotated")
    fresh = module_stack.envoy(policy(KEY_NEW), port, name="envoy-fresh")
    module_stack.upstream_port = port
    return a, b, rotated, fresh


def session(url: str, token: str) -> str:
    """Initialize a session as `token`; the bound Mcp-Session-Id the client gets."""
    r = post(url, INIT, headers_for(token, **{"mcp-protocol-version": "2025-11-25"}))
    assert r.status == 200, r.body
    sid = r.headers["mcp-session-id"]
    h = headers_for(token, **{"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"})
    assert post(url, INITIALIZED, h).status == 202
    return sid


def sh(token: str, sid: str, **extra: str) -> dict[str, str]:
    return headers_for(token, **{"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25", **extra})


def vm_100(url: str, token: str, sid: str) -> str:
    r = post(url, LIST_VMS, sh(token, sid))
    assert r.status == 200, r.body
    text = r.json()["result"]["content"][0]["text"]
    (vm,) = [v for v in json.loads(text)["vms"] if v["vmid"] == 100]
    return vm["status"]


def assert_refused(r) -> None:
    assert r.status == 404, (r.status, r.body)
    assert (r.error["code"], r.error["data"]["kind"]) == (-31010, "session_invalid")


def test_ids_are_bound_and_the_server_sees_its_own(envoys):
    a, *_ = envoys
    sid = session(a.mcp_url, "grant-a")
    m = re.fullmatch(r"m1\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]{43})", sid)
    assert m, sid
    upstream = base64.urlsafe_b64decode(m.group(1) + "=" * (-len(m.group(1)) % 4)).decode()
    assert re.fullmatch(r"[0-9a-f]{32}", upstream)
    assert vm_100(a.mcp_url, "grant-a", sid) == "running"
    # The server's own id is not a session id at the gateway.
    assert_refused(post(a.mcp_url, LIST_VMS, sh("grant-a", upstream)))


def test_another_grant_cannot_use_the_session(envoys):
    a, *_ = envoys
    sid = session(a.mcp_url, "grant-a")
    stop = tool_call("stop_vm", {"node": "pve1", "vmid": 100})
    assert_refused(post(a.mcp_url, stop, sh("grant-b", sid)))
    assert_refused(get(a.mcp_url, sh("grant-b", sid, **{"last-event-id": "1", "accept": "text/event-stream"})))
    r = httpx.delete(a.mcp_url, headers=sh("grant-b", sid), timeout=10)
    assert r.status_code == 404 and r.json()["error"]["code"] == -31010
    # Nothing reached the server: the VM still runs, and the session was not deleted.
    assert vm_100(a.mcp_url, "grant-a", sid) == "running"
    # The owner's GET stream opens.
    with httpx.stream("GET", a.mcp_url, headers=sh("grant-a", sid, accept="text/event-stream"), timeout=10) as s:
        assert (s.status_code, s.headers["content-type"]) == (200, "text/event-stream")


def test_forged_and_tampered_ids_are_refused(envoys):
    a, *_ = envoys
    sid = session(a.mcp_url, "grant-a")
    prefix, tag = sid.rsplit(".", 1)
    flipped = prefix + "." + ("A" if tag[0] != "A" else "B") + tag[1:]
    other_upstream = "m1." + base64.urlsafe_b64encode(b"0" * 32).decode().rstrip("=") + "." + tag
    for forged in [flipped, other_upstream, prefix, prefix + ".", sid + "x", "m1..", "session-123"]:
        assert_refused(post(a.mcp_url, LIST_VMS, sh("grant-a", forged)))


def test_a_second_envoy_with_the_key_accepts_the_id_and_rotation(envoys):
    a, b, rotated, fresh = envoys
    sid = session(a.mcp_url, "grant-a")
    assert vm_100(b.mcp_url, "grant-a", sid) == "running"
    assert_refused(post(b.mcp_url, LIST_VMS, sh("grant-b", sid)))
    # Rotation: the new key with the old one as previous accepts old ids; new ids use the new key.
    assert vm_100(rotated.mcp_url, "grant-a", sid) == "running"
    assert_refused(post(fresh.mcp_url, LIST_VMS, sh("grant-a", sid)))
    new_sid = session(rotated.mcp_url, "grant-a")
    assert vm_100(fresh.mcp_url, "grant-a", new_sid) == "running"
    assert_refused(post(a.mcp_url, LIST_VMS, sh("grant-a", new_sid)))


def test_the_python_sdk_works_through_a_bound_session(envoys):
    a, *_ = envoys

    async def scenario():
        with anyio.fail_after(30):
            async with open_session(a.mcp_url, "sdk-grant") as s:
                tools = await s.list_tools()
                vms = result_json(await s.call_tool("list_vms", {}))
                return {t.name for t in tools.tools}, len(vms["vms"])

    names, count = anyio.run(scenario)
    assert "list_vms" in names and count == 4


def test_the_key_can_come_from_the_environment(module_stack, envoys, monkeypatch):
    """`current_env`: the key is read from the environment, not from the policy: the wasm VM's
    (Envoy `vm_config.environment_variables`), or with the native build Envoy's own; ids
    interoperate with an Envoy that has the same key inline."""
    import yaml

    a, *_ = envoys
    port = module_stack.upstream_port
    text = json.dumps({"version": "1", "default": "deny", "tools": {"list_vms": {}},
                       "gateway": {"session_key": {"current_env": "MCPF_TEST_SESSION_KEY"}}})
    cfg = yaml.safe_load(module_stack.render(text, port))
    if module_stack.build == "native":
        monkeypatch.setenv("MCPF_TEST_SESSION_KEY", KEY_OLD)
    else:
        wasm_filter(cfg)["config"]["vm_config"]["environment_variables"] = {
            "key_values": {"MCPF_TEST_SESSION_KEY": KEY_OLD}}
    env = start_envoy(yaml.safe_dump(cfg, sort_keys=False, width=1000), log_dir=module_stack.log_dir,
                      name="envoy-env")
    module_stack.envoys.append(env)
    sid = session(env.mcp_url, "grant-a")
    assert vm_100(env.mcp_url, "grant-a", sid) == "running"
    assert_refused(post(env.mcp_url, LIST_VMS, sh("grant-b", sid)))
    # The same key as envoy A has inline: ids made by either work on both, for their grant only.
    assert vm_100(a.mcp_url, "grant-a", sid) == "running"
    sid_a = session(a.mcp_url, "grant-a")
    assert vm_100(env.mcp_url, "grant-a", sid_a) == "running"
