"""Cluster-wide limits: Redis, mcp-ratelimit instances and Envoys rendered from
envoy/envoy-cluster.yaml (cluster `mcp_ratelimit`), as plain processes on free 127.0.0.1 ports, with
the stack's build of the filter (wasm or native)."""

from __future__ import annotations

import queue
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from testkit.envoy import policy_text, render_envoy_config
from testkit.native import to_native
from testkit.paths import REPO_ROOT
from testkit.processes import HOST, ManagedProcess, answers, free_port, http_get, port_open
from testkit.stack import Stack

CLUSTER_YAML = REPO_ROOT / "envoy" / "envoy-cluster.yaml"
RLS_BIN = REPO_ROOT / "target" / "release" / "mcp-ratelimit"
RLS_CLUSTER = "mcp_ratelimit"


def redis_server() -> str:
    path = shutil.which("redis-server")
    if not path:
        raise RuntimeError("redis-server is missing (make test installs Debian's redis-server when run as root)")
    return path


def start_redis(stack: Stack, port: int | None = None, name: str = "redis") -> tuple[ManagedProcess, int]:
    """redis-server on 127.0.0.1:`port` (free if None), no persistence: (process, port)."""
    port = port or free_port()
    data = stack.log_dir / f"redis-{port}"
    data.mkdir(exist_ok=True)
    argv = [redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(data)]
    return stack.spawn(name, argv, lambda: port_open(port), "listening", timeout=10), port


@dataclass
class Rls:
    """One mcp-ratelimit instance: gRPC on `port`, /metrics and /healthz on `metrics_port`."""

    proc: ManagedProcess
    port: int
    metrics_port: int
    redis_port: int | None

    def metrics(self) -> str:
        return http_get(f"http://{HOST}:{self.metrics_port}/metrics", 2.0)[1]


def start_rls(stack: Stack, redis_port: int | None, *, port: int | None = None,
              metrics_port: int | None = None, name: str = "rls", extra: tuple[str, ...] = ()) -> Rls:
    """mcp-ratelimit with `--redis redis://127.0.0.1:redis_port/0` (memory without) and `extra`
    flags, waited for until /healthz answers 200."""
    if not RLS_BIN.is_file():
        raise RuntimeError(f"{RLS_BIN} is missing (make ratelimit)")
    port = port or free_port()
    metrics_port = metrics_port or free_port()
    argv = [str(RLS_BIN), "--listen", f"127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{metrics_port}"]
    if redis_port is not None:
        argv += ["--redis", f"redis://127.0.0.1:{redis_port}/0"]
    argv += list(extra)
    proc = stack.spawn(name, argv, lambda: answers(f"http://{HOST}:{metrics_port}/healthz"),
                       "healthy", timeout=15)
    return Rls(proc, port, metrics_port, redis_port)


def render(stack: Stack, policy: dict | str, upstream_port: int, rls_ports: list[int], *,
           approvals_port: int | None = None) -> str:
    """envoy/envoy-cluster.yaml for `policy` with fresh listener/admin ports, the upstream, and
    cluster `mcp_ratelimit` holding exactly the endpoints 127.0.0.1:`rls_ports` (may be none); and,
    if given, cluster `mcp_approvals` on 127.0.0.1:`approvals_port`; for the stack's build (the native
    build: the wasm filter replaced by the module, everything else unchanged)."""
    text = render_envoy_config(policy, stack.wasm, free_port(), free_port(), upstream_port,
                               source=CLUSTER_YAML, approvals_port=approvals_port)
    cfg = yaml.safe_load(text)
    (cluster,) = [c for c in cfg["static_resources"]["clusters"] if c["name"] == RLS_CLUSTER]
    cluster["load_assignment"]["endpoints"] = [{"lb_endpoints": [
        {"endpoint": {"address": {"socket_address": {"address": HOST, "port_value": p}}}} for p in rls_ports]}]
    text = yaml.safe_dump(cfg, sort_keys=False, width=1000)
    return to_native(text) if stack.build == "native" else text


class SilentServer:
    """Accepts TCP connections and never answers (an RLS endpoint that hangs). A subclass serves
    each accepted connection in `_accepted` (testkit/rls_stub.py)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            self._accepted(c)

    def _accepted(self, c: socket.socket):
        """Nothing: the connection stays open and unanswered."""

    def close(self):
        self.closed = True
        for s in [self.sock, *self.conns]:
            try:
                s.close()
            except OSError:
                pass


class DelayProxy:
    """A TCP proxy on 127.0.0.1 to 127.0.0.1:`upstream` that holds every chunk of the upstream's
    replies for `delay` seconds (changeable while it runs) and passes it on in order; requests pass
    at once. In front of Redis: a Redis that runs commands at once but answers late."""

    def __init__(self, upstream: int):
        self.upstream = upstream
        self.delay = 0.0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.socks: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.sock.accept()
                server = socket.create_connection((HOST, self.upstream))
            except OSError:
                return
            self.socks += [client, server]
            held: queue.Queue = queue.Queue()
            threading.Thread(target=self._pipe, args=(client, server), daemon=True).start()
            threading.Thread(target=self._read_replies, args=(server, held), daemon=True).start()
            threading.Thread(target=self._write_replies, args=(held, client), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def _read_replies(self, server: socket.socket, held: queue.Queue):
        try:
            while data := server.recv(65536):
                held.put((time.monotonic() + self.delay, data))
        except OSError:
            pass
        held.put(None)

    @staticmethod
    def _write_replies(held: queue.Queue, client: socket.socket):
        while (item := held.get()) is not None:
            at, data = item
            time.sleep(max(0.0, at - time.monotonic()))
            try:
                client.sendall(data)
            except OSError:
                return

    def close(self):
        self.closed = True
        for s in [self.sock, *self.socks]:
            s.close()


def cluster_policy(tools: dict, *, cluster: str = RLS_CLUSTER, timeout: str = "200ms", failure_mode: str = "deny",
                   all_tools: dict | None = None, **gateway) -> dict:
    p = {"version": "1", "default": "deny", "tools": {"list_vms": {}, **tools},
         "gateway": {"rate_limit_service": {"cluster": cluster, "domain": "mcp", "timeout": timeout,
                                            "failure_mode": failure_mode}, **gateway}}
    if all_tools:
        p["all_tools"] = all_tools
    return p


def write_policy(path: Path, policy: dict) -> None:
    path.write_text(policy_text(policy), encoding="utf-8")
