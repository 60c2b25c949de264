"""Tier 2: the filter judges what the server will run, one test per kind, in real Envoy.

Each kind is a way in which the filter's reading of a request could differ from the server's:
(1) member names equal after case folding or removing invisible characters, (2) request charsets,
(3) client responses, (4) tool names that differ by case or invisible characters, (5) numbers read
as binary64, (6) strings read after NFKC without default-ignorable code points, (7) credentials
outside the grant's one place, (8) SSE lines that lenient clients read as data, (9) ids of −32600
replies. Upstream: testkit/upstream.py `StubUpstream`, which records every request it gets, so a
refusal is also checked to reach nothing upstream.
"""

from __future__ import annotations

import json

import pytest
import yaml

from testkit.envoy import hcm, start_envoy
from testkit.jsonrpc import headers_for, post
from testkit.upstream import sse_canned

POLICY = {
    "version": "1",
    "default": "allow",
    "hide": ["delete_vm"],
    "tools": {
        "stop_vm": {"action": "deny", "reason": "stopping VMs needs a change ticket"},
        "vm_agent_exec": {
            "require": [{"path": "args.vmid", "op": "lte", "value": 1000}],
            "deny_if": [
                {"path": "args.vmid", "op": "eq", "value": 100, "reason": "VM 100 is the management VM"},
                {"path": "args.command", "op": "regex", "value": "(^|\\s)rm(\\s|$)", "reason": "no rm"},
                {"path": "args.mode", "op": "in", "value": ["force"], "reason": "no force"},
            ],
        },
    },
}
TOKEN = "reading-grant"


@pytest.fixture(scope="module")
def envoy(module_stack, stub):
    return module_stack.envoy(POLICY, stub.port, name="envoy-reading")


def send(envoy, stub, body: str | bytes, *, path: str = "/mcp", headers: dict | None = None):
    """POST `body`; returns (reply, how many requests the upstream saw for it)."""
    before = len(stub.seen)
    h = headers or headers_for(TOKEN)
    r = post(envoy.url + path, body.encode() if isinstance(body, str) else body, h)
    return r, len(stub.seen) - before


def call(name: str, args: str = "{}", id_: str = "7") -> str:
    return f'{{"jsonrpc":"2.0","id":{id_},"method":"tools/call","params":{{"name":"{name}","arguments":{args}}}}}'


def test_kind1_member_names_that_fold_together_are_refused_with_the_id(envoy, stub):
    bodies = [
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_vms","Name":"delete_vm","arguments":{}}}',
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_vms","arguments":{"c":1,"C":2}}}',
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_vms","arguments":{"a":[{"k":1,"\\u212a":2}]}}}',
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_vms","arguments":{"c":1,"c\\u0000":2}}}',
        '{"jsonrpc":"2.0","id":7,"Method":"tools/call","method":"tools/call","params":{"name":"list_vms"}}',
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","param\\u017f":{"name":"delete_vm"},"params":{"name":"list_vms"}}',
    ]
    for body in bodies:
        r, upstream = send(envoy, stub, body)
        assert (r.status, r.error["code"], r.json()["id"], upstream) == (400, -32600, 7, 0), body
    r, upstream = send(envoy, stub, '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name\\u0000":"delete_vm","name":"list_vms"}}')
    assert (r.status, r.json()["id"], upstream) == (400, 7, 0)
    r, upstream = send(envoy, stub, '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"Name":"delete_vm","arguments":{}}}')
    assert (r.status, r.error["code"], r.json()["id"], upstream) == (400, -32602, 7, 0)
    r, upstream = send(envoy, stub, call("list_vms", '{"a":1,"b":{"a":2}}'))
    assert (r.status, upstream) == (200, 1)


@pytest.mark.parametrize("ctype,status", [
    ("application/json; charset=utf-8; charset=utf-7", 415),
    ("application/json; charset=UTF-7", 415),
    ('application/json; charset="iso-8859-1"', 415),
    ("application/json; charset=utf-8; charset=utf-8", 415),
    ("application/json; charset", 415),
    ('application/json; Charset="UTF-8"', 200),
    ("application/json", 200),
])
def test_kind2_request_charset_other_than_utf8_is_415(envoy, stub, ctype, status):
    r, upstream = send(envoy, stub, call("list_vms"), headers=headers_for(TOKEN, content_type=ctype))
    assert (r.status, upstream) == (status, 1 if status == 200 else 0)
    if status == 415:
        assert r.error["data"]["kind"] == "unsupported_media_type"


def test_kind3_mixed_batches_are_400_and_client_responses_follow_the_policy(envoy, stub, module_stack):
    mixed = ('[{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"list_vms","arguments":{}}},'
             '{"jsonrpc":"2.0","id":"elicit-7","result":{"action":"accept"}}]')
    r, upstream = send(envoy, stub, mixed)
    assert (r.status, upstream) == (400, 0)
    assert [(e["id"], e["error"]["code"]) for e in r.json()] == [(13, -32600)]
    response = '{"jsonrpc":"2.0","id":"elicit-7","result":{"action":"accept","content":{"confirm":true}}}'
    r, upstream = send(envoy, stub, response)
    assert (r.status, upstream) == (202, 1)  # gateway.client_responses defaults to "allow"
    deny = module_stack.envoy({**POLICY, "gateway": {"client_responses": "deny"}}, stub.port, name="envoy-no-responses")
    r, upstream = send(deny, stub, response)
    assert (r.status, r.error["code"], r.error["data"]["rule"], upstream) == (403, -31001, "gateway.client_responses", 0)
    r, upstream = send(deny, stub, call("list_vms"))
    assert (r.status, upstream) == (200, 1)


@pytest.mark.parametrize("name,rule", [
    ("Delete_VM", "hide"), ("DELETE-VM", "hide"), (" delete_vm\t", "hide"), ("delete\u200b_vm", "hide"), ("ｄｅｌｅｔｅ_ｖｍ", "hide"),
    ("Stop_VM", "tools.stop_vm"), ("stop_vm\u00ad", "tools.stop_vm"), ("\u017ftop_vm", "tools.stop_vm"),
    ("\u200b" + " " * 10_000 + "delete-vm", "hide"),
])
def test_kind4_names_that_fold_onto_a_hidden_or_denied_tool_are_denied(envoy, stub, name, rule):
    body = json.dumps({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": name, "arguments": {}}})
    r, upstream = send(envoy, stub, body)
    assert (r.status, r.error["code"], r.error["data"]["rule"], r.json()["id"], upstream) == (200, -31001, rule, 10, 0)


@pytest.mark.parametrize("vmid,allowed", [
    ("100.00000000000000001", False), ("99.999999999999999999", False), ("1e2", False), ("1e999999999", False),
    ("1000.0000000000000001", False), ("-1e999999999", False), ("101", True), ("100.5", True), ("1e-400", True),
])
def test_kind5_numbers_are_judged_as_sent_and_as_binary64(envoy, stub, vmid, allowed):
    r, upstream = send(envoy, stub, call("vm_agent_exec", f'{{"vmid":{vmid},"command":"uptime","mode":"safe"}}'))
    if allowed:
        assert (r.status, upstream) == (200, 1), r.body
    else:
        assert (r.status, r.error["code"], r.json()["id"], upstream) == (200, -31001, 7, 0)


@pytest.mark.parametrize("command,mode,allowed", [
    ("r\u200bm -rf /", "safe", False), ("ｒｍ -rf /", "safe", False), ("r\u00adm x", "safe", False),
    ("uptime", "for\u200dce", False), ("uptime", "ｆｏｒｃｅ", False), ("uptime", "Force", True),
    ("ls -l é", "safe", True),
])
def test_kind6_strings_are_judged_as_sent_and_after_nfkc(envoy, stub, command, mode, allowed):
    args = json.dumps({"vmid": 7, "command": command, "mode": mode}, ensure_ascii=False)
    r, upstream = send(envoy, stub, call("vm_agent_exec", args))
    assert (r.status, upstream) == ((200, 1) if allowed else (200, 0))
    if not allowed:
        assert r.error["code"] == -31001


def test_kind6_the_servers_reading_of_a_string_is_bounded_by_the_body_limit(envoy, stub):
    # U+FDFA reads as 18 letters and spaces after NFKC: 3 bytes as 33. What the conditions read of
    # the arguments may take twice their text plus 64 bytes as the server reads it; 100,000 of them
    # (300 KB) would take 3.3 MB.
    args = {"vmid": 7, "command": "\ufdfa" * 100_000, "mode": "safe"}
    r, upstream = send(envoy, stub, call("vm_agent_exec", json.dumps(args, ensure_ascii=False)))
    assert (r.status, r.error["code"], r.error["data"]["rule"], r.error["message"], r.json()["id"], upstream) == (
        200, -31001, "tools.vm_agent_exec.deny_if[1]", "tool 'vm_agent_exec' denied: no rm", 7, 0)
    # One in a line of text is read, and judged.
    args["command"] = "echo peace be upon him: \ufdfa"
    r, upstream = send(envoy, stub, call("vm_agent_exec", json.dumps(args, ensure_ascii=False)))
    assert (r.status, upstream) == (200, 1), r.body


def test_kind1_folding_member_names_is_bounded_by_the_body(envoy, stub):
    # A name of 30,000 U+FDFA (90 KB) folds to 990 KB: past twice the body plus 64 bytes.
    args = '{"vmid":7,"' + "\ufdfa" * 30_000 + '":1}'
    r, upstream = send(envoy, stub, call("list_vms", args))
    assert (r.status, r.error["code"], r.json()["id"], upstream) == (400, -32700, None, 0)
    assert r.error["message"].startswith("Parse error: object keys too long to compare after case folding at byte ")
    # One such name of 3 (99 bytes folded) is read; under default: allow the call goes through.
    args = '{"vmid":7,"' + "\ufdfa" * 3 + '":1}'
    r, upstream = send(envoy, stub, call("list_vms", args))
    assert (r.status, upstream) == (200, 1), r.body
    # A tool name that folds to more than any of the policy's names is none of them, and is not
    # folded to the end: allowed by default here.
    r, upstream = send(envoy, stub, call("\ufdfa" * 100_000))
    assert (r.status, upstream) == (200, 1), r.body


def test_kind7_credentials_outside_the_grant_source_are_refused(envoy, stub, module_stack):
    for path in ["/mcp?access_token=x", "/mcp?ACCESS_TOKEN=x", "/mcp?a=1&access%5Ftoken=x", "/mcp?access.token=x"]:
        r, upstream = send(envoy, stub, call("list_vms"), path=path)
        assert (r.status, r.error["data"]["kind"], upstream) == (400, "stray_credential", 0), path
    r, upstream = send(envoy, stub, call("list_vms"), path="/mcp?token_type=x")
    assert (r.status, upstream) == (200, 1)
    policy = {**POLICY, "gateway": {"grant_header": "x-mcp-subject"}}
    grant = {"content-type": "application/json", "accept": "application/json, text/event-stream",
             "x-mcp-subject": "agent-1"}
    # As shipped, Envoy itself refuses any header name with '_' (headers_with_underscores_action).
    shipped = module_stack.envoy(policy, stub.port, name="envoy-grant-header")
    r, upstream = send(shipped, stub, call("list_vms"), headers={**grant, "x_mcp_subject": "admin"})
    assert (r.status, upstream) == (400, 0)
    # Without that setting, the filter refuses a '_' variant of its grant header on its own.
    cfg = yaml.safe_load(module_stack.render(policy, stub.port))
    manager = hcm(cfg)
    assert manager.pop("common_http_protocol_options") == {"headers_with_underscores_action": "REJECT_REQUEST"}
    lenient = start_envoy(yaml.safe_dump(cfg, sort_keys=False), log_dir=module_stack.log_dir,
                          name="envoy-underscores-allowed")
    module_stack.envoys.append(lenient)
    r, upstream = send(lenient, stub, call("list_vms"), headers={**grant, "x_mcp_subject": "admin"})
    assert (r.status, r.error["data"]["kind"], upstream) == (400, "stray_credential", 0)
    r, upstream = send(lenient, stub, call("list_vms"), headers=grant)
    assert (r.status, upstream) == (200, 1)


@pytest.mark.parametrize("field", ["Data", " data", "data ", "DATA", "\ufeffdata"])
def test_kind8_sse_lines_that_lenient_clients_read_as_data_never_pass(envoy, stub, field):
    listing = '{"jsonrpc":"2.0","id":"L1","result":{"tools":[{"name":"delete_vm"},{"name":"list_vms"}]}}'
    stream = f"event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}}\n\nevent: message\n{field}: {listing}\n\n"
    path = stub.route(f"/sse-lenient-{abs(hash(field))}", sse_canned(stream.encode()))
    r = post(envoy.url + path, b'{"jsonrpc":"2.0","id":"L1","method":"tools/list"}', headers_for(TOKEN))
    assert b"delete_vm" not in r.body
    assert b"-31006" in r.body


def test_kind9_minus_32600_replies_echo_a_valid_id(envoy, stub):
    cases = [
        ('{"jsonrpc":"1.0","id":41,"method":"tools/call","params":{"name":"list_vms"}}', 41),
        ('{"jsonrpc":"2.0","id":"s-1","method":"tools/call","result":{}}', "s-1"),
        ('{"jsonrpc":"2.0","id":42,"method":"notifications/initialized"}', 42),
        ('{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None),
        ('{"jsonrpc":"2.0","id":43,"ID":44,"method":"ping"}', None),
    ]
    for body, want in cases:
        r, upstream = send(envoy, stub, body)
        assert (r.status, r.error["code"], r.json()["id"], upstream) == (400, -32600, want, 0), body
