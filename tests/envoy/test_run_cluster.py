"""Tier 2: `make run-cluster` as an operator sees it (scripts/run-cluster.sh): Redis, two mcp-ratelimit
instances, two Envoys, mcp-approvals and the demo server start quietly (their logs go to files), the
terminal shows a banner and then one line per decision naming the Envoy that made it, the two Envoys
share one quota per grant, and Ctrl-C (SIGINT) stops everything with status 0.

The script's ports are the shipped ones (as the README shows them), except Redis (REDIS_PORT); the test
is skipped where one of them is taken, e.g. by a `make run` of the developer's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from testkit.jsonrpc import headers_for, post, rpc
from testkit.paths import REPO_ROOT
from testkit.processes import free_port, port_open, spawn

FIXED = (8000, 10000, 10001, 9901, 9902, 8095, 8096, 8081, 8082, 9091, 9092)
EXEC = {"name": "vm_agent_exec", "arguments": {"node": "pve1", "vmid": 100, "command": "uptime"}}


@pytest.fixture
def cluster(tmp_path, wasm):
    if subprocess.run(["which", "redis-server"], capture_output=True).returncode != 0:
        pytest.fail("redis-server is missing (make redis-deps)")
    taken = [p for p in FIXED if port_open(p)]
    if taken:
        pytest.skip(f"make run-cluster's ports {taken} are taken on this machine")
    subprocess.run(["make", "-s", "native"], cwd=REPO_ROOT, check=True, timeout=900, capture_output=True)
    env = {**os.environ, "REDIS_PORT": str(free_port()), "APPROVALS_DB": str(tmp_path / "approvals.sqlite")}
    proc = spawn("run-cluster.sh", ["bash", "scripts/run-cluster.sh"], tmp_path / "terminal.txt",
                 cwd=REPO_ROOT, env=env)
    try:
        proc.wait_until(lambda: "Decisions (Envoy, time UTC" in proc.log_text(), 90, "showing its decision view")
        yield proc
    finally:
        proc.stop(timeout=10)


def test_quiet_terminal_one_line_per_decision_naming_the_envoy_and_ctrl_c(cluster):
    proc = cluster
    sent = []
    for i in range(12):
        port = 10000 + i % 2
        r = post(f"http://127.0.0.1:{port}/mcp", rpc("tools/call", i + 1, EXEC), headers_for("cluster-test-token"))
        sent.append((f"envoy-{1 + i % 2}", "error" not in r.json()))
    # One quota across both Envoys: 10 of the 12 calls are admitted.
    assert [admitted for _, admitted in sent] == [True] * 10 + [False] * 2

    def decision_lines() -> list[list[str]]:
        text = proc.log_text().split("Decisions (Envoy, time UTC", 1)[1]
        return [line.split() for line in text.splitlines() if re.match(r"envoy-[12] ", line)]

    deadline = time.monotonic() + 10
    while len(decision_lines()) < len(sent) and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = decision_lines()
    assert sorted((cells[0], cells[3], cells[4]) for cells in lines) == sorted(
        (envoy, "vm_agent_exec", "allowed" if admitted else "rate_limited") for envoy, admitted in sent)
    # Envoy's own log and the services' output are in files, not on the terminal.
    terminal = proc.log_text()
    assert "[info]" not in terminal and "[warning]" not in terminal, terminal[:2000]

    os.kill(proc.pid, signal.SIGINT)
    assert proc.popen.wait(20) == 0
    assert ("run-cluster: stopped both Envoys, both mcp-ratelimit instances, Redis, mcp-approvals and the demo server"
            in proc.log_text())
    deadline = time.monotonic() + 5
    while any(port_open(p) for p in FIXED) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in FIXED if port_open(p)] == []
