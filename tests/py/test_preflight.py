"""Tier 1: scripts/preflight.sh, the checks `make run` and `make run-cluster` make before building:
a taken port is reported in seconds, with the variable that moves it, and nothing is built."""

import socket
import subprocess

from testkit.paths import REPO_ROOT
from testkit.processes import free_port


def test_a_taken_port_is_named_with_the_variable_that_moves_it():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        free = free_port()
        done = subprocess.run(["bash", "scripts/preflight.sh", "run", f"MCP_PORT={port}", f"ADMIN_PORT={free}"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (f"run: 127.0.0.1:{port} (MCP_PORT) is already in use: stop what holds it, or choose "
                               f"another port, e.g. make run MCP_PORT={port + 1000}\n")
        # A port no variable moves (make run-cluster's fixed ones) says what probably holds it.
        done = subprocess.run(["bash", "scripts/preflight.sh", "run-cluster", f"-={port}"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
        assert (done.returncode, done.stderr) == (
            2, f"run-cluster: 127.0.0.1:{port} is already in use: make run-cluster's ports are fixed; stop what holds "
               f"it first (a 'make run' or another 'make run-cluster'?)\n")


def test_make_run_stops_at_a_taken_port_before_building():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(["make", "--no-print-directory", "run", f"MCP_PORT={port}", "CARGO=false"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert f"run: 127.0.0.1:{port} (MCP_PORT) is already in use" in done.stderr
    # Nothing was built: CARGO=false would have failed the first build command, and make echoes it.
    assert "false build" not in done.stdout + done.stderr
