"""Tier 2: hot policy reload through ECDS from a file (envoy/envoy-ecds.yaml), without restarting Envoy.

Each test renders envoy/envoy-ecds.yaml with its own ports, copies envoy/ecds/mcp_policy.yaml into its
temp dir and points path_config_source at the copy; policies are written with
`testkit.envoy.set_policy` (render, then atomic rename). `make run` / `make reload` (mcp-policy apply)
on the same bootstrap: test_run.py. README / ENVOY-NOTES promise:
- a valid new policy applies in about 0.1 s, without a restart (same PID);
- requests in flight finish on the old config;
- a policy the filter rejects is refused (`extension_config_discovery.http_filter.mcp_policy.update_rejected`
  goes up) and the old one keeps serving;
- rate counters survive a reload while `vm_id` stays the same; a changed `max` applies to the current
  count at once; a new `vm_id` starts from zero.

The tests marked `both_builds` run on the native build too (envoy/envoy-dynamic-ecds.yaml and its
ECDS resource envoy/ecds/mcp_policy_native.yaml), whose counters live in the process: they survive
every reload (there is no `vm_id`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time

import pytest

from testkit.clock import avoid_minute_boundary
from testkit.envoy import ECDS_FILE, render_ecds_config, set_policy
from testkit.jsonrpc import headers_for, post, rpc
from testkit.paths import REPO_ROOT
from testkit.stack import Stack
from testkit.stats import admin_counter
from testkit.upstream import Canned, StubUpstream, compact, json_canned, recorder_reply

STAT = "extension_config_discovery.http_filter.mcp_policy."
RELOAD_DEADLINE = 2.0
FROZEN = "list_vms is frozen during the maintenance window"


@pytest.fixture
def stub():
    with StubUpstream() as s:
        yield s


def shipped_ecds_policy() -> dict:
    """The policy inside envoy/ecds/mcp_policy.yaml as shipped."""
    (res,) = json.loads(ECDS_FILE.read_text(encoding="utf-8"))["resources"]
    return json.loads(res["typed_config"]["config"]["configuration"]["value"])


def start(stack: Stack, stub: StubUpstream, policy: dict | None = None, name: str = "envoy-ecds"):
    """Envoy on the rendered envoy-ecds.yaml, serving `policy` (None: the shipped ECDS file as copied,
    with its wasm path pointed at the filter under test). Returns (envoy, ECDS file)."""
    setup = render_ecds_config(stack.log_dir / name, stub.port, build=stack.build)
    if policy is None and stack.build == "native":
        pass  # the shipped native resource names no file: the module is found by its name
    elif policy is None:
        doc = json.loads(setup.ecds_file.read_text(encoding="utf-8"))
        doc["resources"][0]["typed_config"]["config"]["vm_config"]["code"]["local"]["filename"] = str(stack.wasm)
        tmp = setup.ecds_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc), encoding="utf-8")
        shutil.move(tmp, setup.ecds_file)
    else:
        set_policy(policy, setup.ecds_file, wasm=stack.wasm)
    return stack.start_envoy(setup.config, name), setup.ecds_file


def call(envoy, tool: str, token: str = "reload-grant", args: dict | None = None, id_: int = 1, path: str = "/mcp"):
    body = rpc("tools/call", id_, {"name": tool, "arguments": args or {}})
    return post(envoy.url + path, body, headers_for(token))


def outcome(r) -> tuple:
    """(HTTP status, "forwarded") or (HTTP status, error code, reason) of a tools/call reply."""
    msg = r.json()
    if "error" in msg:
        return (r.status, msg["error"]["code"], msg["error"]["data"].get("reason"))
    return (r.status, "forwarded")


def wait_until_stable(probe, want, deadline: float = RELOAD_DEADLINE, streak: int = 8) -> float:
    """Call `probe()` (each call a new connection, so both workers are asked) until it returns `want`
    `streak` times in a row; returns the seconds until the first `want`. Fails after `deadline` s."""
    t0 = time.monotonic()
    first, run, last = None, 0, None
    while time.monotonic() - t0 < deadline:
        last = probe()
        if last == want:
            first = first if first is not None else time.monotonic() - t0
            run += 1
            if run >= streak:
                return first
        else:
            run = 0
        time.sleep(0.01)
    pytest.fail(f"after {deadline} s: last {last!r}, want {want!r} ({run} in a row)")


def with_list_vms_denied(policy: dict, reason: str = FROZEN) -> dict:
    p = json.loads(json.dumps(policy))
    p["tools"]["list_vms"] = {"action": "deny", "reason": reason}
    return p


# ---------------------------------------------------------------------------------------- (a)


@pytest.mark.both_builds
def test_new_policy_applies_within_2s_without_restart(stack, stub):
    envoy, ecds = start(stack, stub)  # the shipped ECDS file: list_vms allowed
    assert outcome(call(envoy, "list_vms")) == (200, "forwarded")
    pid = envoy.proc.pid
    reloads = admin_counter(envoy, STAT + "config_reload")

    set_policy(with_list_vms_denied(shipped_ecds_policy()), ecds, wasm=stack.wasm)
    took = wait_until_stable(lambda: outcome(call(envoy, "list_vms")), (200, -31001, FROZEN))

    r = call(envoy, "list_vms", id_=77)
    assert r.json() == {"jsonrpc": "2.0", "id": 77, "error": {
        "code": -31001, "message": f"tool 'list_vms' denied: {FROZEN}",
        "data": {"kind": "denied", "tool": "list_vms", "reason": FROZEN, "rule": "tools.list_vms"}}}
    assert not any(s.body == rpc("tools/call", 77, {"name": "list_vms", "arguments": {}}) for s in stub.requests())
    assert envoy.proc.running() and envoy.proc.pid == pid
    assert admin_counter(envoy, STAT + "config_reload") == reloads + 1
    assert admin_counter(envoy, STAT + "update_rejected") == 0
    assert took < RELOAD_DEADLINE


# ---------------------------------------------------------------------------------------- (b)


@pytest.mark.both_builds
def test_request_in_flight_finishes_on_the_old_policy(stack, stub):
    """A list_vms call admitted under the old policy whose upstream answers 1.5 s later, after a
    reload that denies list_vms, completes with 200 and the upstream's body."""
    stub.route("/slow", lambda seen: Canned(200, [("content-type", "application/json")],
                                            recorder_reply(json.loads(seen.body)["id"]), delay=1.5))
    envoy, ecds = start(stack, stub)
    result = {}

    def slow_call():
        t = time.monotonic()
        result["reply"] = call(envoy, "list_vms", id_=4242, path="/slow")
        result["done"] = time.monotonic()
        result["took"] = result["done"] - t

    worker = threading.Thread(target=slow_call)
    worker.start()
    deadline = time.monotonic() + 5
    while not stub.requests("/slow") and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(stub.requests("/slow")) == 1, "the slow call never reached the upstream"

    set_policy(with_list_vms_denied(shipped_ecds_policy()), ecds, wasm=stack.wasm)
    wait_until_stable(lambda: outcome(call(envoy, "list_vms")), (200, -31001, FROZEN), streak=4)
    reloaded_at = time.monotonic()
    worker.join(10)

    assert not worker.is_alive()
    r = result["reply"]
    assert (r.status, r.headers["content-type"], r.body) == (200, "application/json", recorder_reply(4242))
    assert result["took"] >= 1.4
    assert reloaded_at < result["done"], "the reload must take effect while the call is in flight"


@pytest.mark.both_builds
def test_tools_list_in_flight_is_filtered_by_the_old_policy(stack, stub):
    """The old policy hides delete_vm, the new one stop_vm; a tools/list answered after the reload is
    filtered as its request was decided: delete_vm removed, stop_vm kept."""
    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("list_vms", "stop_vm", "delete_vm")]
    stub.route("/slow-list", lambda seen: Canned(
        200, [("content-type", "application/json")],
        compact({"jsonrpc": "2.0", "id": json.loads(seen.body)["id"], "result": {"tools": tools}}), delay=1.5))
    old = {**shipped_ecds_policy(), "hide": ["delete_vm"]}
    new = {**shipped_ecds_policy(), "hide": ["stop_vm"]}
    envoy, ecds = start(stack, stub, old)
    result = {}
    worker = threading.Thread(target=lambda: result.update(
        reply=post(envoy.url + "/slow-list", rpc("tools/list", 9, {}), headers_for("lists-grant"))))
    worker.start()
    deadline = time.monotonic() + 5
    while not stub.requests("/slow-list") and time.monotonic() < deadline:
        time.sleep(0.005)
    set_policy(new, ecds, wasm=stack.wasm)
    wait_until_stable(lambda: outcome(call(envoy, "stop_vm")), (200, -31001, "tool is hidden by policy"), streak=4)
    worker.join(10)
    r = result["reply"]
    assert r.status == 200
    assert r.json() == {"jsonrpc": "2.0", "id": 9, "result": {"tools": tools[:2]}}
    # and a tools/list decided after the reload follows the new policy
    stub.route("/list-now", json_canned({"jsonrpc": "2.0", "id": 10, "result": {"tools": tools}}))
    r = post(envoy.url + "/list-now", rpc("tools/list", 10, {}), headers_for("lists-grant"))
    assert r.json() == {"jsonrpc": "2.0", "id": 10, "result": {"tools": [tools[0], tools[2]]}}


# ---------------------------------------------------------------------------------------- (c)


@pytest.mark.both_builds
def test_broken_policy_is_rejected_and_the_old_one_keeps_serving(stack, stub):
    envoy, ecds = start(stack, stub)
    pid = envoy.proc.pid
    good = with_list_vms_denied(shipped_ecds_policy())
    good["tools"]["vm_status"] = {}
    set_policy(good, ecds, wasm=stack.wasm)
    wait_until_stable(lambda: outcome(call(envoy, "list_vms")), (200, -31001, FROZEN))
    rejected = admin_counter(envoy, STAT + "update_rejected")
    assert rejected == 0

    broken = json.loads(json.dumps(good))
    broken["tools"]["vm_status"] = {"acton": "allow"}  # unknown field
    broken["tools"]["list_vms"] = {}                   # would allow list_vms again, if it loaded
    set_policy(broken, ecds, wasm=stack.wasm)
    deadline = time.monotonic() + RELOAD_DEADLINE
    while admin_counter(envoy, STAT + "update_rejected") == rejected and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)  # let any further (wrong) increments land
    assert admin_counter(envoy, STAT + "update_rejected") == rejected + 1

    for i in range(8):  # new connections: both workers
        assert outcome(call(envoy, "list_vms", id_=i)) == (200, -31001, FROZEN)
        r = call(envoy, "vm_status", args={"node": "pve1", "vmid": 100}, id_=100 + i)
        assert (r.status, r.body) == (200, recorder_reply(100 + i))
    assert envoy.proc.running() and envoy.proc.pid == pid
    assert "invalid policy at tools.vm_status" in envoy.log_text()
    assert "acton" in envoy.log_text()

    # A valid policy after the broken one applies again.
    set_policy(shipped_ecds_policy(), ecds, wasm=stack.wasm)
    wait_until_stable(lambda: outcome(call(envoy, "list_vms")), (200, "forwarded"))
    assert admin_counter(envoy, STAT + "update_rejected") == rejected + 1


@pytest.mark.both_builds
def test_mcp_policy_apply_reports_applied_then_rejected(stack, stub, tmp_path):
    """`mcp-policy apply` (what `make reload` runs) on this build's ECDS resource: a valid edit is
    reported applied and decides at once; a policy the filter refuses is reported rejected with the
    filter's own log line, and the previous policy keeps serving."""
    subprocess.run(["make", "-s", "native"], cwd=REPO_ROOT, check=True, timeout=900, capture_output=True)
    envoy, ecds = start(stack, stub)
    policy_file = tmp_path / "policy.json"

    def apply(policy: str, *flags: str) -> subprocess.CompletedProcess:
        policy_file.write_text(policy, encoding="utf-8")
        return subprocess.run([str(REPO_ROOT / "target" / "release" / "mcp-policy"), "apply", str(policy_file), *flags,
                               "--ecds", str(ecds), "--admin", f"http://127.0.0.1:{envoy.admin_port}",
                               "--envoy-log", str(envoy.proc.log_path)],
                              capture_output=True, text=True, timeout=30)

    r = apply(json.dumps(with_list_vms_denied(shipped_ecds_policy())))
    assert (r.returncode, r.stderr) == (0, ""), r
    assert r.stdout.startswith(f"{policy_file}: applied: Envoy loaded the new policy for mcp_policy in "), r.stdout
    assert r.stdout.count("\n") == 1, r.stdout  # its approval cluster, mcp_approvals, is Envoy's
    wait_until_stable(lambda: outcome(call(envoy, "list_vms")), (200, -31001, FROZEN))
    # A service cluster Envoy does not have: Envoy loads the policy all the same, and apply says so.
    typo = with_list_vms_denied(shipped_ecds_policy())
    typo["gateway"]["approval"]["cluster"] = "mcp_approvalz"
    r = apply(json.dumps(typo))
    assert (r.returncode, r.stdout.count("\n")) == (0, 1), r
    assert r.stdout.startswith(f"{policy_file}: applied: "), r.stdout
    assert r.stderr == (
        f"{policy_file}: warning: gateway.approval.cluster 'mcp_approvalz' is not a cluster of this Envoy (admin "
        "/clusters): every call that needs approval is refused until it is\n"), r.stderr
    r = apply(json.dumps(with_list_vms_denied(shipped_ecds_policy())))
    assert (r.returncode, r.stdout.count("\n"), r.stderr) == (0, 1, ""), r
    r = apply('{"version": "1", "tools": {"list_vms": {"acton": "allow"}}}\n', "--no-check")
    assert r.returncode == 5, r
    assert r.stderr.startswith(f"{policy_file}: rejected: Envoy refused the new configuration of mcp_policy "), r.stderr
    assert "invalid policy at tools.list_vms.acton: unknown field `acton`" in r.stderr
    # The same refused policy again, from an ECDS file laid out by hand (its keys in another order):
    # to Envoy the same resource as its last, refused, update, which it would count a success without
    # loading. apply makes Envoy load it, and reports the refusal again.
    doc = json.loads(ecds.read_text(encoding="utf-8"))
    ecds.write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
    r = apply('{"version": "1", "tools": {"list_vms": {"acton": "allow"}}}\n', "--no-check")
    assert r.returncode == 5, r
    assert r.stderr.startswith(f"{policy_file}: rejected: "), r.stderr
    for i in range(8):
        assert outcome(call(envoy, "list_vms", id_=i)) == (200, -31001, FROZEN)


# ---------------------------------------------------------------------------------------- (d)


def limited(max_: int, marker: str) -> dict:
    """vm_agent_exec at most `max_` a minute per grant; stop_vm denied with `marker` (to see which
    policy serves without consuming quota)."""
    return {"version": "1", "default": "deny", "tools": {
        "vm_agent_exec": {"limits": [{"counter": "exec", "window": "minute", "max": max_, "scope": "grant"}]},
        "stop_vm": {"action": "deny", "reason": marker}}}


EXEC = {"node": "pve1", "vmid": 100, "command": "uptime"}


def exec_codes(envoy, token: str, n: int) -> list:
    return [outcome(call(envoy, "vm_agent_exec", token, EXEC, id_=i))[1] for i in range(n)]


@pytest.mark.both_builds
def test_rate_counters_survive_a_reload_with_the_same_vm_id(stack, stub):
    envoy, ecds = start(stack, stub, limited(5, "max 5"))
    avoid_minute_boundary(margin=6.0)
    assert exec_codes(envoy, "reload-rate", 3) == ["forwarded"] * 3

    set_policy(limited(4, "max 4"), ecds, wasm=stack.wasm)
    wait_until_stable(lambda: outcome(call(envoy, "stop_vm")), (200, -31001, "max 4"))

    assert exec_codes(envoy, "reload-rate", 3) == ["forwarded", -31002, -31002]
    # the new max applies to a fresh grant in full
    assert exec_codes(envoy, "reload-rate-fresh", 5) == ["forwarded"] * 4 + [-31002]


def test_a_new_vm_id_starts_from_zero(stack, stub):
    envoy, ecds = start(stack, stub, limited(4, "max 4"))
    avoid_minute_boundary(margin=6.0)
    assert exec_codes(envoy, "reload-vmid", 5) == ["forwarded"] * 4 + [-31002]

    set_policy(limited(4, "max 4, new vm"), ecds, wasm=stack.wasm, vm_id="mcp_policy_v2")
    wait_until_stable(lambda: outcome(call(envoy, "stop_vm")), (200, -31001, "max 4, new vm"))

    assert exec_codes(envoy, "reload-vmid", 5) == ["forwarded"] * 4 + [-31002]
