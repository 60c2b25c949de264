"""Harness additions for the tools/list, argument-condition and hot-reload tests.

Plain Python on top of `harness` (no pytest dependency):

- `StubUpstream`: an in-process HTTP/1.1 upstream that replays canned responses chosen by request
  path (or computed from the request by a function), byte for byte, optionally in chunks and
  optionally after a delay, and records every request it receives (method, path, headers with their
  original order and case, body) *before* answering. Paths without a canned response get the
  recorder's JSON-RPC answer (`harness.recorder_reply`).
- `raw_post`: one POST over `http.client`, returning the status, headers and the exact body bytes
  (no content decoding, chunked transfer decoded), so filtered streams can be compared byte for byte.
- `sse_filtered`: the documented SSE rewrite, computed independently of the filter from a stream and
  a set of hidden names.
- `proxmox_catalog`: a deterministic Proxmox-VE-shaped catalogue of tool objects (names generated).
- `render_ecds_config`: envoy/envoy-ecds.yaml with test ports and its ECDS file moved to a temp
  directory; `set_policy` writes a policy there (envoy/ecds/mcp_policy.yaml with the policy, wasm path
  and vm_id replaced; atomic replace). `mcp-policy apply` is tested on its own (test_run.py).
- `admin_counter`: one counter from Envoy's admin /stats.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import yaml

import harness

ENVOY_ECDS_YAML = harness.REPO_ROOT / "envoy" / "envoy-ecds.yaml"
ECDS_FILE = harness.REPO_ROOT / "envoy" / "ecds" / "mcp_policy.yaml"
CONDITIONS_POLICY = harness.REPO_ROOT / "envoy" / "policy-conditions.json"
ACCEPT = "application/json, text/event-stream"

# ------------------------------------------------------------------------------------ raw HTTP


@dataclass
class RawReply:
    """status, headers as sent (name case kept, order kept) and the body bytes as received."""

    status: int
    header_list: list[tuple[str, str]]
    body: bytes

    @property
    def headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.header_list}

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> dict[str, Any]:
        msg = self.json()
        if not isinstance(msg, dict) or not isinstance(msg.get("error"), dict):
            raise AssertionError(f"not a JSON-RPC error reply: HTTP {self.status} {self.body[:300]!r}")
        return msg["error"]


def raw_post(url: str, body: bytes, headers: dict[str, str], timeout: float = 10.0) -> RawReply:
    """POST `body` to `url` (http://host:port/path) and read the reply without any content decoding.

    http.client adds `Accept-Encoding: identity` unless `headers` carries an accept-encoding."""
    assert url.startswith("http://")
    hostport, _, path = url[len("http://"):].partition("/")
    host, _, port = hostport.partition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", "/" + path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return RawReply(resp.status, list(resp.getheaders()), data)
    finally:
        conn.close()


def mcp_headers(token: str = "lists-grant", **extra: str) -> dict[str, str]:
    h = {"content-type": "application/json", "accept": ACCEPT, "authorization": f"Bearer {token}"}
    h.update(extra)
    return h


def rpc(method: str, id: Any, params: dict | None = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg, separators=(",", ":")).encode()


def compact(obj: Any) -> bytes:
    """The filter's re-serialisation of a parsed message: compact, members in order, UTF-8 as is.

    Equal to the filter's bytes for documents without floats or control characters other than
    \\n \\r \\t (the only ones the canned data uses)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# ------------------------------------------------------------------------------------ stub upstream


@dataclass
class Canned:
    """One canned HTTP response, sent `delay` s after the request arrived: `chunks` (chunked transfer
    encoding, `chunk_delay` s apart) if given, else `body` with a content-length."""

    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    chunks: list[bytes] | None = None
    chunk_delay: float = 0.0
    delay: float = 0.0


@dataclass
class Seen:
    """A request as the stub received it."""

    method: str
    path: str
    header_list: list[tuple[str, str]]
    body: bytes
    at: float

    @property
    def headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.header_list}

    def has_header(self, name: str) -> bool:
        return any(k.lower() == name.lower() for k, _ in self.header_list)


class StubUpstream:
    """An in-process upstream on 127.0.0.1:`port` replaying `routes[path]`; see the module doc."""

    def __init__(self) -> None:
        self.routes: dict[str, Canned] = {}
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self.port = harness.free_port()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _read_body(self) -> bytes:
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    data = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return data
                        data += self.rfile.read(size)
                        self.rfile.readline()
                n = int(self.headers.get("content-length") or 0)
                return self.rfile.read(n) if n else b""

            def _handle(self) -> None:
                body = self._read_body()
                seen = Seen(self.command, self.path, list(self.headers.items()), body, time.monotonic())
                with stub._lock:
                    stub.seen.append(seen)
                    canned = stub.routes.get(self.path.split("?")[0])
                if callable(canned):
                    canned = canned(seen)
                if canned is None:
                    canned = _echo(body)
                if canned.delay:
                    time.sleep(canned.delay)
                self.send_response(canned.status)
                for k, v in canned.headers:
                    self.send_header(k, v)
                if canned.chunks is not None:
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    for i, chunk in enumerate(canned.chunks):
                        if i and canned.chunk_delay:
                            time.sleep(canned.chunk_delay)
                        if chunk:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.send_header("content-length", str(len(canned.body)))
                    self.end_headers()
                    self.wfile.write(canned.body)
                self.wfile.flush()

            do_POST = do_GET = do_DELETE = _handle

        self._server = ThreadingHTTPServer((harness.HOST, self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-upstream", daemon=True)
        self._thread.start()

    def route(self, path: str, canned: "Canned | Callable[[Seen], Canned | None]") -> str:
        """Serve `canned` on `path` (or what `canned(request)` returns; None: the echo); returns `path`."""
        with self._lock:
            self.routes[path] = canned
        return path

    def requests(self, path: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if path is None or s.path == path]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "StubUpstream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _echo(body: bytes) -> Canned:
    """The recorder's answer: a JSON-RPC result for a request, else 202 with no body."""
    try:
        msg = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        msg = None
    if isinstance(msg, dict) and "id" in msg and "method" in msg:
        return Canned(200, [("content-type", "application/json")], harness.recorder_reply(msg["id"]))
    return Canned(202, [("content-type", "application/json")], b"")


def json_canned(obj_or_bytes: Any, status: int = 200, extra: list[tuple[str, str]] | None = None) -> Canned:
    body = obj_or_bytes if isinstance(obj_or_bytes, bytes) else compact(obj_or_bytes)
    return Canned(status, [("content-type", "application/json")] + (extra or []), body)


def sse_canned(stream: bytes, *, pieces: int = 1, chunk_delay: float = 0.0, status: int = 200) -> Canned:
    """`stream` as a chunked text/event-stream response, split into `pieces` roughly equal chunks."""
    step = max(1, -(-len(stream) // pieces))
    chunks = [stream[i:i + step] for i in range(0, len(stream), step)]
    return Canned(status, [("content-type", "text/event-stream"), ("cache-control", "no-cache")],
                  chunks=chunks, chunk_delay=chunk_delay)


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
    """What the filter must make of `stream` (README / src/toolslist.rs): every event and line byte
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
_RESOURCES = [
    ("cluster", "status"), ("cluster", "resources"), ("cluster", "tasks"), ("cluster", "options"),
    ("cluster", "backup_jobs"), ("cluster", "replication"), ("cluster", "ha_groups"), ("cluster", "ha_resources"),
    ("cluster", "firewall_rules"), ("cluster", "firewall_aliases"), ("cluster", "firewall_ipsets"),
    ("cluster", "sdn_zones"), ("cluster", "sdn_vnets"), ("cluster", "acme_accounts"), ("cluster", "metrics_servers"),
    ("cluster", "notification_targets"), ("cluster", "mapping_pci"), ("cluster", "mapping_usb"),
    ("node", "services"), ("node", "network"), ("node", "disks"), ("node", "apt_updates"), ("node", "certificates"),
    ("node", "storage"), ("node", "syslog"), ("node", "time"), ("node", "dns"), ("node", "ceph_osd"),
    ("node", "ceph_mon"), ("node", "ceph_pool"), ("node", "subscription"),
    ("qemu", "config"), ("qemu", "snapshots"), ("qemu", "cloudinit"), ("qemu", "firewall_rules"),
    ("qemu", "agent_network"), ("qemu", "agent_fsinfo"), ("qemu", "disks"), ("qemu", "migrate"),
    ("lxc", "config"), ("lxc", "snapshots"), ("lxc", "firewall_rules"), ("lxc", "migrate"),
    ("access", "users"), ("access", "groups"), ("access", "roles"), ("access", "tokens"), ("access", "domains"),
    ("pool", "members"), ("storage", "content"),
]
_VERBS = ["list", "get", "create", "update", "delete", "status"]
_DESTRUCTIVE = {"create", "update", "delete"}


def catalog_names(n: int = CATALOG_SIZE) -> list[str]:
    """`n` distinct Proxmox-API-shaped tool names, e.g. `pve_qemu_snapshots_delete`."""
    names = [f"pve_{scope}_{res}_{verb}" for scope, res in _RESOURCES for verb in _VERBS]
    if n > len(names):
        raise ValueError(f"at most {len(names)} generated names")
    return names[:n]


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


# ------------------------------------------------------------------------------------ demo server


def start_demo_server(stack: harness.Stack, json_response: bool, catalog: int | None = None,
                      timeout: float = 20.0) -> tuple[harness.ManagedProcess, int]:
    """demo/proxmox_server.py (optionally `--catalog N`) on a free port, owned by `stack`."""
    port = harness.free_port()
    argv = [sys.executable, str(harness.DEMO_SERVER), "--port", str(port)]
    argv += ["--json-response"] if json_response else []
    argv += ["--catalog", str(catalog)] if catalog else []
    name = stack._unique(("demo-json" if json_response else "demo-sse") + (f"-catalog{catalog}" if catalog else ""))
    proc = harness.spawn(name, argv, stack.log_dir / f"{name}.log", cwd=harness.REPO_ROOT)
    stack.procs.append(proc)
    proc.wait_until(lambda: harness.port_open(port), timeout, "accepting connections")
    return proc, port


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
    cfg["admin"]["address"]["socket_address"]["port_value"] = admin_port or harness.free_port()
    (listener,) = cfg["static_resources"]["listeners"]
    listener["address"]["socket_address"]["port_value"] = listen_port or harness.free_port()
    harness.cluster_endpoint(cfg, "mcp_upstream")["port_value"] = upstream_port
    if approvals_port is not None:
        harness.cluster_endpoint(cfg, harness.APPROVALS_CLUSTER)["port_value"] = approvals_port
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
