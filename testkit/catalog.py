"""Tool catalogues and the stub-upstream responders that serve them.

- `start_tools_upstream`: a recorder that also answers `tools/list` with `TOOLS`, so that a forwarded
  `tools/list` is a clean `passed` decision instead of an unfilterable response.
- `proxmox_catalog`: a deterministic Proxmox-VE-shaped catalogue of tool objects, named as the demo
  server's generated catalogue (demo/proxmox_server.py `catalog_names`).
- `mcp_stub`: a responder that is just enough of an MCP server for the SDK client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from testkit.demo import demo_module
from testkit.stack import Stack
from testkit.upstream import Canned, Seen, StubUpstream, json_canned, rpc_request


# ----------------------------------------------------------------------------- a tools/list answer


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


def start_tools_upstream(stack: Stack, name: str = "tools-upstream") -> tuple[StubUpstream, int, Path]:
    """Like `Stack.recorder()` (same JSONL log), but `tools/list` gets a result listing `TOOLS`."""
    stub = stack.upstream(name, tools_list_answer)
    return stub, stub.port, stub.log


# --------------------------------------------------------------------------------------- catalogue


CATALOG_SIZE = 286
_DESTRUCTIVE = {"create", "update", "delete"}


def catalog_names(n: int = CATALOG_SIZE) -> list[str]:
    """The first `n` tool names of the demo server's generated catalogue (demo/proxmox_server.py
    `catalog_names`), e.g. `pve_qemu_snapshots_delete`."""
    return demo_module().catalog_names(n)


def catalog_tool(i: int, name: str) -> dict[str, Any]:
    """One tool object with every field a real server might send (MCP `Tool`)."""
    _, scope, *rest = name.split("_")
    verb = rest[-1]
    props: dict[str, Any] = {}
    required: list[str] = []
    if scope in ("node", "qemu", "lxc", "storage"):
        props["node"] = {"type": "string", "description": "Cluster node name", "pattern": "^[a-z0-9-]+$"}
        required.append("node")
    if scope in ("qemu", "lxc"):
        props["vmid"] = {"type": "integer", "minimum": 100, "maximum": 999999999999999999999}
        required.append("vmid")
    if verb in ("create", "update"):
        props["options"] = {"type": "object", "additionalProperties": {"type": ["string", "integer", "boolean"]}}
    props["timeout"] = {"type": "integer", "default": 30, "minimum": 1}
    tool: dict[str, Any] = {
        "name": name,
        "title": " ".join(w.capitalize() for w in name.split("_")[1:]),
        "description": f"Proxmox VE API: {verb} {' '.join(rest[:-1])} ({scope}).\nNœud-aware, ✓ idempotent={verb != 'create'}",
        "inputSchema": {"type": "object", "properties": props, "required": required,
                        "additionalProperties": False},
        "annotations": {"title": name, "readOnlyHint": verb in ("list", "get", "status"),
                        "destructiveHint": verb in _DESTRUCTIVE, "idempotentHint": verb != "create",
                        "openWorldHint": False},
    }
    if i % 3 == 0:
        tool["outputSchema"] = {"type": "object", "properties": {"data": {"type": "array", "items": {}}},
                                "required": ["data"]}
    if i % 5 == 0:
        tool["_meta"] = {"pve/api-path": f"/api2/json/{scope}/{'/'.join(rest[:-1])}", "pve/privileges": ["Sys.Audit"],
                         "seq": i}
    if i % 7 == 0:
        tool["icons"] = [{"src": f"https://pve.example/icons/{scope}.svg", "mimeType": "image/svg+xml"}]
    return tool


def proxmox_catalog(n: int = CATALOG_SIZE) -> list[dict[str, Any]]:
    return [catalog_tool(i, name) for i, name in enumerate(catalog_names(n))]


# ---------------------------------------------------------------------------- a minimal MCP server


def mcp_stub(on_tools_list: Callable[[Any], Canned]) -> Callable[[Seen], Canned]:
    """A responder for `StubUpstream.route` that is just enough of a Streamable HTTP MCP server for
    the official SDK client: initialize (echoing the client's protocol version, with a session id),
    202 for notifications, 405 for the GET stream, and `on_tools_list(request_id)` for tools/list."""
    def respond(seen: Seen) -> Canned:
        if seen.method == "GET":
            return Canned(405, [("allow", "POST, DELETE")], b"")
        if seen.method == "DELETE":
            return Canned(200, [], b"")
        msg = json.loads(seen.body)
        if "id" not in msg:
            return Canned(202, [], b"")
        if msg.get("method") == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "stub", "version": "1"}}
            return json_canned({"jsonrpc": "2.0", "id": msg["id"], "result": result},
                               extra=[("mcp-session-id", "stub-session-1")])
        if msg.get("method") == "tools/list":
            return on_tools_list(msg["id"])
        return json_canned({"jsonrpc": "2.0", "id": msg["id"],
                            "error": {"code": -32601, "message": "method not found"}})
    return respond
