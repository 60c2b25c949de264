"""Child processes and ports for the tests, the benchmarks and the demo.

- Every child runs in its own process group, with stdout and stderr going to one log file, and
  is killed (SIGTERM, then SIGKILL) by `stop()`, by `Stack.close()` and, as a last resort, at
  interpreter exit.
- `free_port` never hands out the same port twice in one process; `answers` is the readiness probe
  of every service the tests start; `wait_for` polls any condition.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from testkit.paths import REPO_ROOT

HOST = "127.0.0.1"

_handed_out: set[int] = set()
_live: list["ManagedProcess"] = []


def new_log_dir(prefix: str = "mcp-policy-") -> Path:
    """A fresh temporary directory for logs and rendered configs."""
    return Path(tempfile.mkdtemp(prefix=prefix))


# ------------------------------------------------------------------------------------------- ports


def _worker_share() -> tuple[int, int]:
    """(index, count) of this pytest-xdist worker (`gw1` of 2: (1, 2)); (0, 1) outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or not worker[2:].isdigit() or count < 2:
        return 0, 1
    return int(worker[2:]) % count, count


def _below_ephemeral() -> range:
    """Ports the kernel never picks on its own: outside the range it takes the local port of every
    outgoing connection (and of `bind` to port 0) from, `net.ipv4.ip_local_port_range`. Below it
    when there are a thousand or more from 10000 up, else above it; a range that leaves neither
    gives every port from 10000 (the race is then back, as the kernel leaves no port out)."""
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[:2])
    except (OSError, ValueError):
        low, high = 32768, 60999
    if low - 10000 >= 1000:
        return range(10000, low)
    if 65535 - high >= 1000:
        return range(high + 1, 65536)
    return range(10000, 65536)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and not handed out before by this process.

    It is taken below the kernel's ephemeral range, so no connection made in the meantime (an
    Envoy's to its upstream, a client's to a server) can take it as its local port before the
    process it is meant for binds it: tests choose ports well before they start what listens.
    Under pytest-xdist each worker takes only its share of the ports (half the port number, modulo
    the worker count, is its index), so two workers never hand out the same port (each only knows
    its own)."""
    index, count = _worker_share()
    ports = _below_ephemeral()
    for _ in range(200):
        port = random.randrange(ports.start, ports.stop)
        if port // 2 % count != index or port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"could not find a free port in {ports.start}-{ports.stop - 1}")


def port_open(port: int, host: str = HOST, timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------------------- processes


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


def forget(proc: ManagedProcess) -> None:
    """Stop tracking a process that exited on its own (`stop()` also forgets the processes it stops)."""
    if proc in _live:
        _live.remove(proc)


def proc_status(pid: int) -> dict[str, int]:
    """Memory lines of /proc/PID/status in KiB: {"VmRSS": ..., "RssAnon": ..., ...}."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[key] = int(parts[0])
    return out


def cargo_build(args: list[str], timeout: float = 900.0) -> subprocess.CompletedProcess:
    """Run `cargo ARGS` in the repository root, capturing output."""
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    return subprocess.run([cargo, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)


# ----------------------------------------------------------------------------------------- waiting


def http_get(url: str, timeout: float) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def answers(url: str, body: str | None = None, timeout: float = 0.5) -> bool:
    """Whether GET `url` answers 200 (with `body`, surrounding white space aside, when given); a
    connection error is False. The readiness probe of every service the tests start."""
    try:
        status, text = http_get(url, timeout)
    except OSError:
        return False
    return status == 200 and (body is None or text.strip() == body)


def wait_for(predicate, timeout: float, interval: float = 0.05, what: str = "condition"):
    """Poll `predicate()` until it returns a truthy value (returned) or `timeout` s pass (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
