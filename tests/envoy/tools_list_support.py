"""Shared parts of the tools/list filtering tests (tests/envoy/test_tools_list.py and
test_tools_list_fail_closed.py): the policy and the tool lists they filter, the exact -31006 error, and
the module-scoped `envoy` fixture (one Envoy per importing test module, in front of its `stub`)."""

from __future__ import annotations

import anyio
import pytest

from testkit.catalog import proxmox_catalog
from testkit.demo import demo_module
from testkit.jsonrpc import Reply, headers_for, post, rpc

HIDDEN_DEMO = ["delete_vm", "vm_agent_exec_status"]
CATALOG = proxmox_catalog()
CATALOG_NAMES = [t["name"] for t in CATALOG]
CATALOG_HIDDEN = [n for i, n in enumerate(CATALOG_NAMES) if i % 9 == 4]
POLICY = {"version": "1", "default": "allow", "hide": HIDDEN_DEMO + CATALOG_HIDDEN}
HIDDEN = set(POLICY["hide"])
BAD = "bad_upstream_response"
ENCODED_REASON = "the response is content-encoded and its tool list cannot be filtered"
TOO_BIG_REASON = "the tools/list response exceeds gateway.max_response_bytes"


def _demo_tools() -> list[dict]:
    """The demo server's eight tools exactly as the MCP SDK lists them (its `list_tools`, dumped)."""
    tools = anyio.run(demo_module().build_server().list_tools)
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]


DEMO_TOOLS = _demo_tools()
DEMO_NAMES = [t["name"] for t in DEMO_TOOLS]


def bad_gateway(id_, reason: str) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": -31006, "message": f"Bad gateway: {reason}",
                                                  "data": {"kind": BAD, "reason": reason}}}


def assert_no_tool_names(body: bytes, names) -> None:
    leaked = [n for n in names if n.encode() in body]
    assert not leaked, f"tool names reached the client: {leaked[:5]}; body {body[:300]!r}"


@pytest.fixture(scope="module")
def envoy(module_stack, stub):
    """Envoy hiding delete_vm, vm_agent_exec_status and 32 catalogue tools (default allow)."""
    return module_stack.envoy(POLICY, stub.port, name="envoy-lists")


def list_via(envoy, path: str, id_, params: dict | None = None, **headers) -> Reply:
    return post(envoy.url + path, rpc("tools/list", id_, {} if params is None else params),
                headers_for("lists-grant", **headers))
