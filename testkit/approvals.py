"""Helpers for the approval tests, the browser test and the demo: the
`mcp-approvals` service (services/approvals/API.md) as a managed process, its bearer JSON API, policies
with `require_approval`, and stub approval services that misbehave. Plain Python, no pytest
dependency.

- `start_approvals` runs `target/release/mcp-approvals` (built by `make approvals`; or
  `$MCP_APPROVALS_BIN`) on a free port with a fresh SQLite file, `--public-url` its own address and
  one approver (`alice` with `APPROVER_TOKEN` unless told otherwise), and waits for `/healthz`.
- `Approvals` is the running service: `pending()`, `listing(state)`, `get(id)`, `approve(id,
  note)`, `deny(id, note)`, `metrics()`.
- `stub(stack, mode)` is a stub approval service (the stub upstream of testkit/upstream.py): it keeps
  every request it receives (`stub_requests`: method, path, headers, body text) and answers
  according to its mode: `pending` (a well-formed pending answer), `never` (reads the request and
  never answers), `garbage` (200 that is not JSON), `status500` (a 500 carrying a well-formed
  approved body), `half_approved` (200 `{"status":"approved"}` without the other fields),
  `unknown_status` (200 with a status the contract does not have).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.envoy import APPROVALS_CLUSTER, Envoy
from testkit.paths import REPO_ROOT
from testkit.processes import HOST, ManagedProcess, ProcessFailed, answers, free_port, http_get, spawn
from testkit.stack import Stack
from testkit.upstream import Canned, StubUpstream, json_canned

APPROVALS_BIN = REPO_ROOT / "target" / "release" / "mcp-approvals"
APPROVER = "alice"
APPROVER_TOKEN = "alice-token-3f9a1c"
STUB_MODES = ("pending", "never", "garbage", "status500", "half_approved", "unknown_status")
STUB_APPROVAL_ID = "apr_01STUBSTUBSTUBSTUBSTUBSTUB"


def approvals_binary() -> Path:
    """`$MCP_APPROVALS_BIN`, else target/release/mcp-approvals."""
    env = os.environ.get("MCP_APPROVALS_BIN")
    return Path(env).resolve() if env else APPROVALS_BIN


# ----------------------------------------------------------------------------------- policies


def approval_tool(timeout: str | None = "10m", reason: str | None = "starting a VM costs money", **extra) -> dict:
    """A `tools.NAME` entry with `action: require_approval`."""
    rule: dict[str, Any] = {"action": "require_approval"}
    if timeout is not None:
        rule["approval_timeout"] = timeout
    if reason is not None:
        rule["reason"] = reason
    rule.update(extra)
    return rule


def approval_policy(tools: dict | None = None, *, mode: str = "retry", timeout: str | None = "5s",
                    path: str | None = "/v1/check", gateway: dict | None = None, **approval_extra) -> dict:
    """default deny; list_vms allowed; `start_vm` needs an approval (unless `tools` says otherwise);
    `gateway.approval` pointing at cluster mcp_approvals."""
    approval: dict[str, Any] = {"cluster": APPROVALS_CLUSTER, "mode": mode}
    if path is not None:
        approval["path"] = path
    if timeout is not None:
        approval["timeout"] = timeout
    approval.update(approval_extra)
    return {"version": "1", "default": "deny",
            "tools": {"list_vms": {}, **({"start_vm": approval_tool()} if tools is None else tools)},
            "gateway": {"approval": approval, **(gateway or {})}}


# ----------------------------------------------------------------------------------- the binding key


def upstream_of(envoy: Envoy, path: str = "/mcp", cluster: str = "mcp_upstream") -> dict:
    """The upstream an approval of a call through `envoy` is bound to (crates/core/src/approval.rs `Upstream`):
    the route's cluster, the `:authority` the tests' clients send (`127.0.0.1:PORT`) and the path."""
    return {"cluster": cluster, "authority": f"{HOST}:{envoy.listen_port}", "path": path}


def approval_key(grant_id: str, tool: str, arguments: Any, upstream: dict) -> str:
    """API.md: SHA-256 (hex) of the canonical JSON of {arguments, grant, tool, upstream}; `grant_id`
    is the full hex SHA-256 of the credential (crates/core/src/approval.rs), not the logged label."""
    canonical = json.dumps({"arguments": arguments, "grant": grant_id, "tool": tool, "upstream": upstream},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


# ----------------------------------------------------------------------------------- the service


class ApiError(RuntimeError):
    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status, self.body = status, body


@dataclass
class Approvals:
    """A running mcp-approvals: `url` is its base URL (also its --public-url), the page and the
    approvers' API; `check_port` is its --check-listen port, the one Envoy's cluster must use."""

    proc: ManagedProcess
    port: int
    db: Path | str
    token: str = APPROVER_TOKEN
    approver: str = APPROVER
    check_port: int = 0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = None,
                timeout: float = 10.0) -> tuple[int, Any]:
        """One API call with the approver's bearer token: (status, parsed JSON or text)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("authorization", f"Bearer {self.token if token is None else token}")
        if data is not None:
            req.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, text = r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode("utf-8", "replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def _ok(self, method: str, path: str, body: Any = None) -> Any:
        status, out = self.request(method, path, body)
        if status != 200:
            raise ApiError(status, out if isinstance(out, str) else json.dumps(out))
        return out

    def listing(self, state: str = "pending") -> list[dict]:
        """`GET /v1/approvals?state=...` (newest first)."""
        return self._ok("GET", f"/v1/approvals?state={state}")["approvals"]

    def pending(self) -> list[dict]:
        return self.listing("pending")

    def get(self, approval_id: str) -> dict:
        return self._ok("GET", f"/v1/approvals/{approval_id}")

    def approve(self, approval_id: str, note: str = "") -> dict:
        return self._ok("POST", f"/v1/approvals/{approval_id}/approve", {"note": note})

    def deny(self, approval_id: str, note: str = "") -> dict:
        return self._ok("POST", f"/v1/approvals/{approval_id}/deny", {"note": note})

    def wait_pending(self, count: int = 1, timeout: float = 10.0) -> list[dict]:
        """Poll until exactly `count` approvals are pending; returns them."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.pending()
            if len(got) == count:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(got)} pending approvals after {timeout} s, wanted {count}: {got}")
            time.sleep(0.05)

    def metrics(self) -> str:
        status, text = http_get(self.url + "/metrics", 2.0)
        if status != 200:
            raise ApiError(status, text)
        return text

    def running(self) -> bool:
        return self.proc.running()

    def stop(self) -> int | None:
        return self.proc.stop()


def page(svc: Approvals, path: str) -> str:
    """The HTML of page `path`, after logging in through the page's form as `svc.approver`."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    form = urllib.parse.urlencode({"name": svc.approver, "token": svc.token, "next": "/"}).encode()
    req = urllib.request.Request(svc.url + "/login", data=form, method="POST",
                                 headers={"content-type": "application/x-www-form-urlencoded", "origin": svc.url})
    try:
        urllib.request.build_opener(NoRedirect).open(req, timeout=10)
        raise AssertionError("login did not redirect")
    except urllib.error.HTTPError as e:
        assert e.code == 303, e.code
        cookie = e.headers["set-cookie"].split(";")[0]
    with urllib.request.urlopen(urllib.request.Request(svc.url + path, headers={"cookie": cookie}), timeout=10) as r:
        return r.read().decode()


def _healthy(port: int) -> bool:
    return answers(f"http://{HOST}:{port}/healthz", "ok")


def start_approvals(port: int, db: Path | str, *, log_dir: Path, name: str = "approvals",
                    approvers: dict[str, str] | None = None, public_url: str | None = None,
                    check_port: int | None = None, timeout: float = 20.0,
                    extra_args: list[str] | None = None) -> Approvals:
    """mcp-approvals on 127.0.0.1:`port` (page and API) and `check_port` (/v1/check only, for
    Envoy; a free port unless given) with `db` (a SQLite file, or a postgres:// URL), waited for
    until /healthz says ok. `extra_args` are appended to its command line."""
    binary = approvals_binary()
    if not binary.is_file():
        raise ProcessFailed(f"{binary} is missing (make approvals, or set MCP_APPROVALS_BIN)")
    approvers = approvers or {APPROVER: APPROVER_TOKEN}
    check_port = check_port or free_port()
    argv = [str(binary), "--listen", f"{HOST}:{port}", "--check-listen", f"{HOST}:{check_port}",
            "--db", str(db),
            "--public-url", public_url or f"http://{HOST}:{port}"]
    for who, token in approvers.items():
        argv += ["--approver", f"{who}={token}"]
    argv += extra_args or []
    env = {k: v for k, v in os.environ.items() if k not in ("MCP_APPROVALS_APPROVERS", "MCP_APPROVALS_DB")}
    proc = spawn(name, argv, log_dir / f"{name}.log", cwd=REPO_ROOT, env=env)
    proc.wait_until(lambda: _healthy(port) and _healthy(check_port), timeout, "healthy")
    (who, token), = list(approvers.items())[:1]
    return Approvals(proc, port, db, token=token, approver=who, check_port=check_port)


def approvals(stack: Stack, *, port: int | None = None, db: Path | str | None = None,
              name: str = "approvals", **kw) -> Approvals:
    """mcp-approvals as part of `stack` (stopped with it), on a free port with a DB in its log dir."""
    uniq = stack._unique(name)
    svc = start_approvals(port or free_port(), db or stack.log_dir / f"{uniq}.sqlite",
                          log_dir=stack.log_dir, name=uniq, **kw)
    stack.procs.append(svc.proc)
    return svc


def restart(stack: Stack, svc: Approvals, name: str = "approvals", **kw) -> Approvals:
    """Start mcp-approvals again on the same port and DB (after `svc.stop()`)."""
    return approvals(stack, port=svc.port, db=svc.db, name=name, approvers={svc.approver: svc.token},
                     check_port=svc.check_port, **kw)


# ----------------------------------------------------------------------------------- stub service


def stub_answer(mode: str) -> Canned:
    """What the stub approval service answers in `mode` (see the module doc)."""
    if mode == "never":
        return Canned(None, delay=3600)
    if mode == "pending":
        reply = {"status": "pending", "approval_id": STUB_APPROVAL_ID,
                 "approval_url": f"http://stub.invalid/approvals/{STUB_APPROVAL_ID}",
                 "expires_at": int(time.time()) + 600, "expires_in_seconds": 600}
        return json_canned(json.dumps(reply).encode())
    if mode == "garbage":
        return Canned(200, [("content-type", "text/html")], b"<html>approved</html>")
    if mode == "status500":
        return json_canned(json.dumps({"status": "approved", "approval_id": STUB_APPROVAL_ID, "approver": "x",
                                       "note": ""}).encode(), status=500)
    if mode == "half_approved":
        return json_canned(b'{"status":"approved"}')
    if mode == "unknown_status":
        return json_canned(json.dumps({"status": "maybe", "approval_id": STUB_APPROVAL_ID}).encode())
    raise ValueError(mode)


def stub(stack: Stack, mode: str, name: str = "approvals-stub") -> StubUpstream:
    """A stub approval service (the stub upstream of testkit/upstream.py) answering every request as
    `mode` says; `.port` is its port, `stub_requests(it)` what it received."""
    if mode not in STUB_MODES:
        raise ValueError(mode)
    return stack.upstream(name, lambda seen: stub_answer(mode))


def stub_requests(stub: StubUpstream) -> list[dict[str, Any]]:
    """What a stub has received so far: [{method, path, headers, body}] (headers lower-cased, body as text)."""
    return [{"method": s.method, "path": s.path, "headers": s.headers, "body": s.body.decode("utf-8", "replace")}
            for s in stub.requests()]
