"""`Stack`: the pieces of one test setup (stub upstreams, the demo server, Envoys, services) started
under one log directory and stopped together. Plain Python with no pytest dependency, so the
benchmarks and `scripts/demo.py` use it too."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from testkit.demo import demo_server_name, start_demo_server
from testkit.envoy import Envoy, EnvoyExit, render_envoy_config, run_envoy_expect_failure, start_envoy
from testkit.native import filter_build, to_native
from testkit.paths import wasm_path
from testkit.processes import ManagedProcess, free_port, new_log_dir, spawn
from testkit.upstream import Responder, StubUpstream


@dataclass
class Stack:
    """Starts the pieces of one test setup under one log directory and stops them all on `close()`."""

    log_dir: Path = field(default_factory=new_log_dir)
    wasm: Path = field(default_factory=wasm_path)
    # "wasm" or "native" (testkit.native): which build of the filter `render` and `envoy` run.
    build: str = field(default_factory=filter_build)
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
        """The stub upstream (testkit/upstream.py) on a port of its own, logging to `<name>.jsonl` in
        the log dir; `responder(seen)` may answer instead of the recorder (None: the recorder)."""
        stub = StubUpstream(self.log_dir / f"{self._unique(name)}.jsonl", responder)
        self.upstreams.append(stub)
        return stub

    def recorder(self, name: str = "received") -> tuple[StubUpstream, int, Path]:
        """The recorder (tests/cases/recorder.py's handler, in process): (stub, port, JSONL log path)."""
        stub = self.upstream(name)
        return stub, stub.port, stub.log

    def demo_server(self, json_response: bool, catalog: int | None = None,
                    trifecta: bool = False) -> tuple[ManagedProcess, int]:
        """The demo MCP server (with `--catalog N` when `catalog` is given, `--trifecta`) on a free
        port: (process, port)."""
        port = free_port()
        name = self._unique(demo_server_name(json_response, catalog) + ("-trifecta" if trifecta else ""))
        proc = start_demo_server(port, json_response, catalog=catalog, log_dir=self.log_dir, name=name,
                                 trifecta=trifecta)
        self.procs.append(proc)
        return proc, port

    def render(self, policy: dict | str, upstream_port: int, *, approvals_port: int | None = None) -> str:
        """The shipped bootstrap for this stack's build of the filter with fresh listener and admin ports."""
        text = render_envoy_config(policy, self.wasm, free_port(), free_port(), upstream_port,
                                   approvals_port=approvals_port)
        return to_native(text) if self.build == "native" else text

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
