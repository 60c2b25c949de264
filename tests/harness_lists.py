"""Harness additions for the tools/list, argument-condition and hot-reload tests.

Plain Python on top of `harness` (no pytest dependency):

- The stub upstream (`StubUpstream`, `Canned`, `Seen`, `json_canned`, `sse_canned`, `compact`) lives
  in tests/upstream.py, the reply type and `post` in tests/jsonrpc.py; they are re-exported here.
- `sse_filtered`: the documented SSE rewrite, computed independently of the filter from a stream and
  a set of hidden names.
- `proxmox_catalog`: a deterministic Proxmox-VE-shaped catalogue of tool objects, named as the demo
  server's generated catalogue (demo/proxmox_server.py `catalog_names`).
- `render_ecds_config`: envoy/envoy-ecds.yaml with test ports and its ECDS file moved to a temp
  directory; `set_policy` writes a policy there (envoy/ecds/mcp_policy.yaml with the policy, wasm path
  and vm_id replaced; atomic replace). `mcp-policy apply` is tested on its own (test_run.py).
- `admin_counter`: one counter from Envoy's admin /stats.
- `mcp_stub`: a responder that is just enough of an MCP server for the SDK client.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

import harness
from jsonrpc import ACCEPT, Reply, headers_for, post, rpc  # noqa: F401 - re-exported
from upstream import Canned, Seen, StubUpstream, compact, json_canned, sse_canned  # noqa: F401 - re-exported

ENVOY_ECDS_YAML = harness.REPO_ROOT / "envoy" / "envoy-ecds.yaml"
ECDS_FILE = harness.REPO_ROOT / "envoy" / "ecds" / "mcp_policy.yaml"
CONDITIONS_POLICY = harness.REPO_ROOT / "envoy" / "policy-conditions.json"

# The names this module used before the harness had one reply type, one post helper and one stub
# upstream; kept so that test files importing them from here keep working.
RawReply = Reply
raw_post = post


def mcp_headers(token: str = "lists-grant", **extra: str) -> dict[str, str]:
    """`jsonrpc.headers_for` with this module's default grant."""
    return headers_for(token, **extra)


# ------------------------------------------------------------------------------------ SSE model


def _lines(stream: str) -> list[str]:
    """Lines with their terminators (CRLF, LF or CR)."""
    out, i, start = [], 0, 0
    while i < len(stream):
        c = stream[i]
        if c == "\r" and stream[i + 1:i + 2] == "\n":
            out.append(stream[start:i + 2])
            i += 2
            start = i
        elif c in "\r\n":
            out.append(stream[start:i + 1])
            i += 1
            start = i
        else:
            i += 1
    if start < len(stream):
        out.append(stream[start:])
    return out


def sse_events(stream: bytes) -> list[list[str]]:
    """The stream split into events (each a list of lines with terminators, the blank line last)."""
    events, cur = [], []
    for line in _lines(stream.decode("utf-8")):
        cur.append(line)
        if line.rstrip("\r\n") == "":
            events.append(cur)
            cur = []
    if cur:
        events.append(cur)
    return events


def sse_data(event: list[str]) -> str | None:
    """The data of one event (data lines joined with LF, one leading space stripped), or None."""
    parts = []
    for line in event:
        bare = line.rstrip("\r\n")
        name, sep, value = bare.partition(":")
        if name == "data":
            parts.append(value[1:] if value.startswith(" ") else value)
    return "\n".join(parts) if parts else None


def sse_filtered(stream: bytes, request_id: Any, hidden: set[str]) -> bytes:
    """What the filter must make of `stream` (README / crates/core/src/response/toolslist/): every event and line byte
    for byte, except the event whose JSON-RPC response has id `request_id`: its data lines become one
    `data: ` line (at the first data line, with that line's terminator) holding the compact response
    with the `hidden` tools removed."""
    out = []
    for event in sse_events(stream):
        data = sse_data(event)
        msg = json.loads(data) if data and data.strip() else None
        if not (isinstance(msg, dict) and msg.get("id") == request_id and "result" in msg):
            out.extend(event)
            continue
        msg["result"]["tools"] = [t for t in msg["result"]["tools"] if t["name"] not in hidden]
        wrote = False
        for line in event:
            bare = line.rstrip("\r\n")
            if bare == "data" or bare.startswith("data:"):
                if not wrote:
                    out.append("data: " + compact(msg).decode("utf-8") + (line[len(bare):] or "\n"))
                    wrote = True
            else:
                out.append(line)
    return "".join(out).encode("utf-8")


# ------------------------------------------------------------------------------------ catalogue

CATALOG_SIZE = 286
_DESTRUCTIVE = {"create", "update", "delete"}


def catalog_names(n: int = CATALOG_SIZE) -> list[str]:
    """The first `n` tool names of the demo server's generated catalogue (demo/proxmox_server.py
    `catalog_names`), e.g. `pve_qemu_snapshots_delete`."""
    return harness.demo_module().catalog_names(n)


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


# ------------------------------------------------------------------------------------ ECDS


@dataclass
class EcdsSetup:
    config: str          # the rendered bootstrap
    ecds_file: Path      # the ECDS resource file Envoy watches (in the temp dir)


def render_ecds_config(log_dir: Path, upstream_port: int, *, listen_port: int | None = None,
                       admin_port: int | None = None, approvals_port: int | None = None) -> EcdsSetup:
    """envoy/envoy-ecds.yaml with fresh listener/admin ports, the upstream port (and the approvals
    cluster's, when given), and path_config_source pointing at a copy of envoy/ecds/mcp_policy.yaml
    in `log_dir`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    ecds_dir = log_dir / "ecds"
    ecds_dir.mkdir(exist_ok=True)
    ecds_file = ecds_dir / "mcp_policy.yaml"
    shutil.copyfile(ECDS_FILE, ecds_file)
    cfg = yaml.safe_load(ENVOY_ECDS_YAML.read_text(encoding="utf-8"))
    harness.set_ports(cfg, listen_port or harness.free_port(), admin_port or harness.free_port(), upstream_port,
                      approvals_port=approvals_port)
    filters = harness.hcm(cfg)["http_filters"]
    (entry,) = [f for f in filters if "config_discovery" in f]
    entry["config_discovery"]["config_source"]["path_config_source"]["path"] = str(ecds_file)
    return EcdsSetup(yaml.safe_dump(cfg, sort_keys=False, width=1000), ecds_file)


def set_policy(policy: dict | str, ecds_file: Path, *, wasm: Path | None = None, vm_id: str = "mcp_policy") -> None:
    """Write `policy` into `ecds_file` (envoy/ecds/mcp_policy.yaml with the policy, the wasm path and
    the vm_id replaced): a temp file in the same directory, then a rename, which Envoy reloads."""
    doc = json.loads(ECDS_FILE.read_text(encoding="utf-8"))
    (res,) = doc["resources"]
    cfg = res["typed_config"]["config"]
    cfg["vm_config"]["vm_id"] = vm_id
    cfg["vm_config"]["code"]["local"]["filename"] = str(wasm or harness.wasm_path())
    cfg["configuration"]["value"] = harness.policy_text(policy)
    tmp = ecds_file.parent / f".mcp_policy-{time.monotonic_ns()}.tmp"
    tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    tmp.replace(ecds_file)


def admin_counter(envoy: harness.Envoy, name: str) -> int:
    """The value of counter `name` in /stats (0 if absent)."""
    regex = "^" + re.escape(name) + "$"
    status, text = envoy.admin_get("/stats?filter=" + urllib.parse.quote(regex))
    assert status == 200, text
    for line in text.splitlines():
        k, _, v = line.partition(": ")
        if k == name:
            return int(v)
    return 0


# ------------------------------------------------------------------------------------ a minimal MCP server


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
