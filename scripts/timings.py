#!/usr/bin/env python3
"""`make timings`: how long a newcomer waits, measured the way the README states it.

In a fresh clone of this repository (a temporary directory, removed afterwards unless --keep), on
free ports, it times:

  1. the first `make run`, from the command to its decision view ("Decisions (time UTC ...")
  2. a second `make run` with no source change (Ctrl-C ends each run)
  3. `make demo`
  4. `make reload` of an edited policy, with `make run` running
  5. `make test` (with --test; the longest step)

It prints a Markdown table with the machine (CPU model, cores, memory) and its load average when each
step started, so that a number can be read against how busy the machine was. Everything runs as a
person would run it, on a terminal (a pseudo-terminal here), so Ctrl-C is the terminal's.
"""
from __future__ import annotations

import argparse
import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# Ports below the kernel's ephemeral range, as the tests take them: one chosen here is not handed
# out as a connection's local port before `make run` binds it.
from testkit.processes import free_port  # noqa: E402
READY = b"Decisions (time UTC"


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    mem_kb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                      if line.startswith("MemTotal")))
    return f"{model}, {os.cpu_count()} cores, {mem_kb / 1024 / 1024:.0f} GiB"


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


class Terminal:
    """A command on a pseudo-terminal: its output is kept, and Ctrl-C is typed, not signalled."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.chdir(cwd)
            os.execvp(argv[0], argv)
        self.out = b""

    def wait_for(self, text: bytes, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while text not in self.out and time.monotonic() < deadline:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return False
            if not chunk:
                return False
            self.out += chunk
        return text in self.out

    def ctrl_c(self) -> int:
        os.write(self.fd, b"\x03")
        self.wait_for(b"\x00never", 30)  # until the terminal closes
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


def run_argv(ports: dict[str, int]) -> list[str]:
    return ["make", "--no-print-directory", "run", *[f"{k}={v}" for k, v in ports.items()]]


def timed_run(clone: Path, ports: dict[str, int], then=None) -> tuple[float, str]:
    start = time.monotonic()
    term = Terminal(run_argv(ports), clone)
    if not term.wait_for(READY, 3600):
        term.ctrl_c()
        sys.exit("timings: make run did not get ready:\n" + term.out.decode(errors="replace")[-3000:])
    took = time.monotonic() - start
    extra = then() if then else ""
    status = term.ctrl_c()
    if status != 0:
        sys.exit(f"timings: make run ended with status {status} after Ctrl-C")
    return took, extra


def timed(argv: list[str], clone: Path) -> float:
    start = time.monotonic()
    done = subprocess.run(argv, cwd=clone, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"timings: {' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.monotonic() - start


def fmt(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{seconds:.1f} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--test", action="store_true", help="also time `make test` (about half an hour)")
    ap.add_argument("--keep", action="store_true", help="keep the clone")
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="mcpf-timings-"))
    clone = base / "mcp-policy-filter"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    ports = {"MCP_PORT": free_port(), "ADMIN_PORT": free_port(), "DEMO_PORT": free_port(),
             "APPROVALS_PORT": free_port(), "APPROVALS_CHECK_PORT": free_port()}
    rows = []
    try:
        l0 = load()
        first, _ = timed_run(clone, ports)
        rows.append(("first `make run` to ready (fresh clone)", first, l0))
        l0 = load()
        second, _ = timed_run(clone, ports)
        rows.append(("second `make run` to ready", second, l0))

        def reload() -> str:
            policy = clone / ".run" / "policy.json"
            doc = json.loads(policy.read_text())
            doc.setdefault("tools", {})["vm_status"] = {"action": "deny", "reason": "edited for make timings"}
            policy.write_text(json.dumps(doc, indent=2) + "\n")
            l1 = load()
            took = timed(["make", "--no-print-directory", "reload", f"ADMIN_PORT={ports['ADMIN_PORT']}"], clone)
            rows.append(("`make reload` of an edited policy", took, l1))
            return ""

        timed_run(clone, ports, then=reload)
        l0 = load()
        rows.append(("`make demo`", timed(["make", "--no-print-directory", "demo"], clone), l0))
        if a.test:
            l0 = load()
            rows.append(("`make test`", timed(["make", "--no-print-directory", "test"], clone), l0))
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"Machine: {machine()}; measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| step | time | load average (1 min) at its start |\n|---|---|---|")
    for name, took, l0 in rows:
        print(f"| {name} | {fmt(took)} | {l0} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
