"""Tier 2: argument conditions (`require`, `deny_if`) in real Envoy under the shipped example
envoy/policy-conditions.json, in front of tests/cases/recorder.py.

The example: `vm_agent_exec` requires `args.vmid in [100, 101]` and is denied if `args.command`
matches a destructive-command regex; both conditions carry a reason. Semantics (crates/core/src/policy/conditions.rs):
type-strict (the integer 100 is not the string "100"; numbers compare as exact decimals), and a
condition that cannot be evaluated (missing path, wrong JSON type) denies in `require` and in
`deny_if` alike. A denial names the condition (`rule`: `tools.NAME.require[i]` / `deny_if[i]`,
`reason`: the condition's reason, or `<failed>: <path> <op>` without one) and never echoes an
argument value. A denied call never reaches the upstream.
"""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from testkit.clock import avoid_minute_boundary
from testkit.envoy import CONDITIONS_POLICY
from testkit.jsonrpc import headers_for, post
from testkit.upstream import recorder_lines, recorder_reply

SETTLE = 0.2
NODE = "node-canary-7f3a"          # in every call: must never appear in an error body
VMS_REASON = "vm_agent_exec is allowed on VMs 100 and 101 only"
CMD_REASON = "destructive commands are not allowed"
REQUIRE = "tools.vm_agent_exec.require[0]"
DENY_IF = "tools.vm_agent_exec.deny_if[0]"
POLICY = json.loads(CONDITIONS_POLICY.read_text(encoding="utf-8"))


def exec_body(vmid: str | None, command: str | None, id_: str = "q") -> bytes:
    """A vm_agent_exec call with `vmid` and `command` given as raw JSON texts (None: left out)."""
    args = [f'"node":"{NODE}"']
    if vmid is not None:
        args.append(f'"vmid":{vmid}')
    if command is not None:
        args.append(f'"command":{command}')
    return (f'{{"jsonrpc":"2.0","id":"{id_}","method":"tools/call",'
            f'"params":{{"name":"vm_agent_exec","arguments":{{{",".join(args)}}}}}}}').encode()


def denial(tool: str, reason: str, rule: str, id_: str = "q") -> dict:
    """The exact JSON-RPC error the filter answers a denied call with."""
    return {"jsonrpc": "2.0", "id": id_, "error": {
        "code": -31001, "message": f"tool '{tool}' denied: {reason}",
        "data": {"kind": "denied", "tool": tool, "reason": reason, "rule": rule}}}


def without_reasons(policy: dict) -> dict:
    p = copy.deepcopy(policy)
    for rule in p["tools"].values():
        for cond in rule.get("require", []) + rule.get("deny_if", []):
            cond.pop("reason", None)
    return p


@pytest.fixture(scope="module")
def conditions(module_stack):
    """(Envoy under envoy/policy-conditions.json as shipped, recorder log)."""
    _, port, log = module_stack.recorder("conditions")
    return module_stack.envoy(CONDITIONS_POLICY.read_text(encoding="utf-8"), port, name="envoy-conditions"), log


@pytest.fixture(scope="module")
def no_reasons(module_stack):
    """(Envoy under the same policy with every condition's `reason` removed, recorder log)."""
    _, port, log = module_stack.recorder("no-reasons")
    return module_stack.envoy(without_reasons(POLICY), port, name="envoy-no-reasons"), log


def forwarded_hashes(log) -> set[str]:
    return {e["body_sha256"] for e in recorder_lines(log, settle=SETTLE)}


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


# ------------------------------------------------------------------------------------------ allowed


@pytest.mark.parametrize("vmid", ["100", "101", "100.0", "1e2", "1.00e+2"])
def test_allowed_call_reaches_upstream_unchanged(conditions, vmid):
    """vmid 100 or 101 (as a JSON number, in any exact spelling) with a harmless command is forwarded."""
    envoy, log = conditions
    body = exec_body(vmid, '"uptime"', id_=f"ok-{vmid}")
    r = post(envoy.mcp_url, body, headers_for(f"cond-allow-{vmid}"))
    assert r.status == 200
    assert r.body == recorder_reply(f"ok-{vmid}")
    assert sha(body) in forwarded_hashes(log)


def test_the_rest_of_the_example_policy(conditions):
    """list_vms allowed; delete_vm hidden; stop_vm denied with its reason; start_vm under default deny."""
    envoy, log = conditions
    r = post(envoy.mcp_url, b'{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"list_vms","arguments":{}}}',
             headers_for("cond-rest"))
    assert (r.status, r.body) == (200, recorder_reply("q"))
    for tool, reason, rule in [("delete_vm", "tool is hidden by policy", "hide"),
                               ("stop_vm", "stopping VMs needs a change ticket", "tools.stop_vm"),
                               ("start_vm", "not allowed by policy (default: deny)", "default")]:
        body = json.dumps({"jsonrpc": "2.0", "id": "q", "method": "tools/call",
                           "params": {"name": tool, "arguments": {"node": NODE, "vmid": 100}}}).encode()
        r = post(envoy.mcp_url, body, headers_for("cond-rest"))
        assert (r.status, r.json()) == (200, denial(tool, reason, rule)), tool
        assert NODE.encode() not in r.body
        assert sha(body) not in forwarded_hashes(log)


# ------------------------------------------------------------------------------------------ denied

# (case id, vmid raw JSON or None, command raw JSON or None, rule, reason, argument texts that must
#  not appear in the error body besides NODE)
DENIED = [
    ("vmid-102", "102", '"uptime"', REQUIRE, VMS_REASON, ["102"]),
    ("vmid-string-100", '"100"', '"uptime"', REQUIRE, VMS_REASON, ['"100"']),
    ("vmid-string-1_01", '"1_01"', '"uptime"', REQUIRE, VMS_REASON, ["1_01"]),
    ("vmid-string-space-100", '" 100 "', '"uptime"', REQUIRE, VMS_REASON, ['" 100 "']),
    ("vmid-string-plus-100", '"+100"', '"uptime"', REQUIRE, VMS_REASON, ["+100"]),
    ("vmid-bigint", "123456789012345678901234567890", '"uptime"', REQUIRE, VMS_REASON,
     ["123456789012345678901234567890"]),
    # 100 + 1e-21: the same f64 as 100, a different number
    ("vmid-100-plus-epsilon", "100.000000000000000000001", '"uptime"', REQUIRE, VMS_REASON,
     ["100.000000000000000000001"]),
    ("vmid-array", "[100]", '"uptime"', REQUIRE, VMS_REASON, ["[100]"]),
    ("vmid-null", "null", '"uptime"', REQUIRE, VMS_REASON, ["null"]),
    ("vmid-missing", None, '"uptime"', REQUIRE, VMS_REASON, []),
    ("rm-rf", "100", '"rm -rf /tmp/x"', DENY_IF, CMD_REASON, ["rm -rf", "/tmp/x"]),
    ("cd-then-rm", "101", '"cd /; rm x"', DENY_IF, CMD_REASON, ["cd /", "rm x"]),
    ("shutdown", "100", '"shutdown -h now"', DENY_IF, CMD_REASON, ["shutdown", "-h now"]),
    ("command-array", "100", '["rm","-rf","/tmp/x"]', DENY_IF, CMD_REASON, ["/tmp/x", '"-rf"']),
    ("command-array-harmless", "100", '["uptime"]', DENY_IF, CMD_REASON, ['["uptime"]']),
    ("command-missing", "100", None, DENY_IF, CMD_REASON, []),
    # require is checked before deny_if
    ("vmid-102-and-rm", "102", '"rm -rf /tmp/x"', REQUIRE, VMS_REASON, ["102", "/tmp/x"]),
]


@pytest.mark.parametrize("vmid,command,rule,reason,secrets", [c[1:] for c in DENIED], ids=[c[0] for c in DENIED])
def test_denied_call_names_the_condition_and_never_reaches_upstream(conditions, vmid, command, rule, reason, secrets):
    envoy, log = conditions
    body = exec_body(vmid, command)
    r = post(envoy.mcp_url, body, headers_for("cond-deny"))
    assert r.status == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json() == denial("vm_agent_exec", reason, rule)
    for secret in [NODE] + secrets:
        assert secret.encode() not in r.body, f"argument text {secret!r} echoed: {r.body!r}"
    assert sha(body) not in forwarded_hashes(log)


# Without a `reason`, the denial says which way the condition failed: `<failed>: <path> <op>`.
NO_REASON = [
    ("vmid-102", "102", '"uptime"', REQUIRE, "required condition not met: args.vmid in"),
    ("vmid-bigint", "123456789012345678901234567890", '"uptime"', REQUIRE, "required condition not met: args.vmid in"),
    ("vmid-string-100", '"100"', '"uptime"', REQUIRE, "required condition cannot be evaluated: args.vmid in"),
    ("vmid-string-1_01", '"1_01"', '"uptime"', REQUIRE, "required condition cannot be evaluated: args.vmid in"),
    ("vmid-string-space-100", '" 100 "', '"uptime"', REQUIRE, "required condition cannot be evaluated: args.vmid in"),
    ("vmid-string-plus-100", '"+100"', '"uptime"', REQUIRE, "required condition cannot be evaluated: args.vmid in"),
    ("vmid-missing", None, '"uptime"', REQUIRE, "required condition cannot be evaluated: args.vmid in"),
    ("rm-rf", "100", '"rm -rf /tmp/x"', DENY_IF, "denied by condition: args.command regex"),
    ("cd-then-rm", "100", '"cd /; rm x"', DENY_IF, "denied by condition: args.command regex"),
    ("shutdown", "100", '"shutdown -h now"', DENY_IF, "denied by condition: args.command regex"),
    ("command-array", "100", '["rm","-rf","/tmp/x"]', DENY_IF, "deny_if condition cannot be evaluated: args.command regex"),
    ("command-number", "100", "7", DENY_IF, "deny_if condition cannot be evaluated: args.command regex"),
]


@pytest.mark.parametrize("vmid,command,rule,reason", [c[1:] for c in NO_REASON], ids=[c[0] for c in NO_REASON])
def test_denial_without_reason_names_path_op_and_failure(no_reasons, vmid, command, rule, reason):
    envoy, log = no_reasons
    body = exec_body(vmid, command)
    r = post(envoy.mcp_url, body, headers_for("cond-no-reason"))
    assert (r.status, r.json()) == (200, denial("vm_agent_exec", reason, rule))
    assert NODE.encode() not in r.body
    assert sha(body) not in forwarded_hashes(log)


def test_same_policy_without_reasons_still_allows(no_reasons):
    envoy, log = no_reasons
    body = exec_body("101", '"ls -l /var/log"', id_="nr-ok")
    r = post(envoy.mcp_url, body, headers_for("cond-no-reason-ok"))
    assert (r.status, r.body) == (200, recorder_reply("nr-ok"))
    assert sha(body) in forwarded_hashes(log)


def test_calls_denied_by_conditions_consume_no_quota(conditions):
    """The example's limit is 10 per minute per grant: 12 denied calls first, then exactly 10 admitted."""
    envoy, log = conditions
    grant = "cond-quota"
    avoid_minute_boundary(margin=8.0)
    for i in range(12):
        bad = exec_body("102" if i % 2 else "100", '"uptime"' if i % 2 else '"reboot"', id_=f"d{i}")
        assert post(envoy.mcp_url, bad, headers_for(grant)).json()["error"]["code"] == -31001
    admitted = []
    for i in range(11):
        r = post(envoy.mcp_url, exec_body("100", '"uptime"', id_=f"a{i}"), headers_for(grant))
        admitted.append(r.json().get("error", {}).get("code", "ok"))
    assert admitted == ["ok"] * 10 + [-31002]
