"""Tier 2: `make run` as an operator uses it: scripts/run.sh itself (demo server, mcp-approvals and Envoy
on envoy/envoy-ecds.yaml), a live policy edit put in force by `make reload`, broken edits refused while
the old policy keeps serving, the quiet terminal (banner, then one line per decision), and Ctrl-C.

RUN_DIR points run.sh at a temp directory (the developer's .run/ is never touched) and the *_PORT
variables at free ports; run.sh then renders envoy/envoy-ecds.yaml with those ports and that
directory, and nothing else changed (checked here).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from testkit.envoy import ENVOY_ECDS_YAML, POLICY_JSON, cluster_endpoint, config_ports, http_filters
from testkit.jsonrpc import headers_for, post, rpc
from testkit.paths import REPO_ROOT
from testkit.processes import default_signals, free_port, http_get, port_open, spawn

NAMES = ("MCP_PORT", "ADMIN_PORT", "DEMO_PORT", "APPROVALS_PORT", "APPROVALS_CHECK_PORT")
PORTS = {name: free_port() for name in NAMES}
MCP = f"http://127.0.0.1:{PORTS['MCP_PORT']}/mcp"
ADMIN = f"http://127.0.0.1:{PORTS['ADMIN_PORT']}"
RELOAD_DEADLINE = 2.0
FROZEN = "list_vms is frozen for the test"


CALLS = []  # every tools/call this module sent: each must show as one decision line


def outcome(tool: str, id_: int = 1) -> tuple:
    CALLS.append(tool)
    r = post(MCP, rpc("tools/call", id_, {"name": tool, "arguments": {}}), headers_for("run-test-token"))
    msg = r.json()
    if "error" in msg:
        return (r.status, msg["error"]["code"], msg["error"]["data"].get("reason"))
    return (r.status, "forwarded")


def make_reload(run_dir: Path, *, admin_port: bool = True) -> subprocess.CompletedProcess:
    port = [f"ADMIN_PORT={PORTS['ADMIN_PORT']}"] if admin_port else []
    return subprocess.run(["make", "-s", "reload", f"RUN_DIR={run_dir}", *port], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def stat(name: str) -> int:
    status, text = http_get(f"{ADMIN}/stats?filter=^{name}$", 2.0)
    assert status == 200
    for line in text.splitlines():
        k, _, v = line.partition(": ")
        if k == name:
            return int(v)
    return 0


@pytest.fixture
def run_sh(tmp_path, wasm):
    # `make reload` builds the CLI when it is stale (make test has built it): build it first, with the
    # Makefile's own command (any other feature set would rebuild the library), so that the reload is
    # timed, not the compiler.
    subprocess.run(["make", "-s", "native"], cwd=REPO_ROOT, check=True, timeout=900, capture_output=True)
    run_dir = tmp_path / "run"
    env = {**os.environ, "RUN_DIR": str(run_dir), "VENV": str(Path(sys.executable).parent.parent),
           **{name: str(port) for name, port in PORTS.items()}}
    proc = spawn("run.sh", ["bash", "scripts/run.sh"], tmp_path / "terminal.txt", cwd=REPO_ROOT,
                 env=env)
    try:
        proc.wait_until(lambda: "Decisions (time UTC" in proc.log_text(), 90, "showing its banner")
        yield proc, run_dir
    finally:
        proc.stop(timeout=10)


def test_the_rendered_bootstrap_changes_only_ports_and_the_ecds_path(run_sh):
    _, run_dir = run_sh
    rendered = yaml.safe_load((run_dir / "envoy-ecds.yaml").read_text(encoding="utf-8"))
    assert config_ports(yaml.safe_dump(rendered)) == (PORTS["MCP_PORT"], PORTS["ADMIN_PORT"])
    assert cluster_endpoint(rendered, "mcp_upstream")["port_value"] == PORTS["DEMO_PORT"]
    assert cluster_endpoint(rendered, "mcp_approvals")["port_value"] == PORTS["APPROVALS_CHECK_PORT"]
    (entry,) = [f for f in http_filters(rendered) if f["name"] == "mcp_policy"]
    source = entry["config_discovery"]["config_source"]["path_config_source"]
    assert source["path"] == f"{run_dir}/mcp_policy.yaml"
    source["path"] = ".run/mcp_policy.yaml"
    rendered["admin"]["address"]["socket_address"]["port_value"] = 9901
    rendered["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"] = 10000
    cluster_endpoint(rendered, "mcp_upstream")["port_value"] = 8000
    cluster_endpoint(rendered, "mcp_approvals")["port_value"] = 8096
    assert rendered == yaml.safe_load(ENVOY_ECDS_YAML.read_text(encoding="utf-8"))


def test_make_run_live_edit_reload_and_refused_edits(run_sh):
    proc, run_dir = run_sh
    banner = proc.log_text()
    # Quiet startup: a short banner, no Envoy log lines; the logs are in files.
    assert len(banner.splitlines()) <= 20, banner
    assert "[info]" not in banner and "[warning]" not in banner
    for piece in ("mcp-policy-filter is running, the wasm build (target/wasm32-wasip1/release/mcp_policy_filter.wasm)",
                  MCP, f"http://127.0.0.1:{PORTS['APPROVALS_PORT']}", "demo-approver-token", ADMIN,
                  f"make reload RUN_DIR={run_dir} ADMIN_PORT={PORTS['ADMIN_PORT']}",
                  f"{run_dir}/policy.json (copied from envoy/policy.json)", f"{run_dir}/envoy.log"):
        assert piece in banner, piece
    assert (run_dir / "policy.json").read_text(encoding="utf-8") == POLICY_JSON.read_text(encoding="utf-8")
    assert "starting" in (run_dir / "envoy.log").read_text(encoding="utf-8")
    pid = int((run_dir / "envoy.pid").read_text())

    assert outcome("list_vms") == (200, "forwarded")
    assert outcome("delete_vm") == (200, -31001, "not allowed by policy (default: deny)")

    # The edit: list_vms denied. `make reload` says "applied" once Envoy loaded it.
    policy = json.loads((run_dir / "policy.json").read_text(encoding="utf-8"))
    policy["tools"]["list_vms"] = {"action": "deny", "reason": FROZEN}
    (run_dir / "policy.json").write_text(json.dumps(policy, indent=2), encoding="utf-8")
    t0 = time.monotonic()
    # Without ADMIN_PORT: `make reload` finds the port `make run` recorded.
    assert (run_dir / "admin-port").read_text() == f"{PORTS['ADMIN_PORT']}\n"
    r = make_reload(run_dir, admin_port=False)
    assert (r.returncode, r.stderr) == (0, ""), r.stdout
    assert r.stdout.startswith(f"{run_dir}/policy.json: applied: Envoy loaded the new policy for mcp_policy in "), r.stdout
    while outcome("list_vms") != (200, -31001, FROZEN) and time.monotonic() - t0 < RELOAD_DEADLINE:
        time.sleep(0.02)
    took = time.monotonic() - t0
    for i in range(8):  # new connections: both workers
        assert outcome("list_vms", i) == (200, -31001, FROZEN)
    assert took < RELOAD_DEADLINE, took
    assert int((run_dir / "envoy.pid").read_text()) == pid
    os.kill(pid, 0)  # the same Envoy, still running

    # A syntax error: refused before Envoy, with line and column; the ECDS file is untouched.
    ecds_before = (run_dir / "mcp_policy.yaml").read_bytes()
    (run_dir / "policy.json").write_text('{"version": "1",\n  "tools": {"list_vms": {},}\n}\n', encoding="utf-8")
    r = make_reload(run_dir)
    assert r.returncode != 0
    assert r.stderr.startswith(f"{run_dir}/policy.json: invalid policy at . (the whole document): not a strict JSON document: "
                               "unexpected character at line 2, column 28 of the policy text\n"), r.stderr
    assert "not applied" in r.stderr
    assert (run_dir / "mcp_policy.yaml").read_bytes() == ecds_before

    # A policy the filter refuses, sent to Envoy anyway: reported rejected, the old rule still serves.
    rejected = stat("extension_config_discovery.http_filter.mcp_policy.update_rejected")
    (run_dir / "policy.json").write_text('{"version": "1", "tools": {"list_vms": {"acton": "allow"}}}\n',
                                         encoding="utf-8")
    r = subprocess.run(["target/release/mcp-policy", "apply", f"{run_dir}/policy.json", "--no-check", "--admin", ADMIN,
                        "--ecds", f"{run_dir}/mcp_policy.yaml", "--envoy-log", f"{run_dir}/envoy.log"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 5, r
    assert r.stderr.startswith(f"{run_dir}/policy.json: rejected: Envoy refused the new configuration of "
                               f"mcp_policy (update_rejected {rejected} -> {rejected + 1}); the previous policy "
                               "keeps serving\n"), r.stderr
    assert "invalid policy at tools.list_vms.acton: unknown field `acton`" in r.stderr
    assert "Plugin configured to fail closed failed to load" in r.stderr
    for i in range(8):
        assert outcome("list_vms", 100 + i) == (200, -31001, FROZEN)
    assert int((run_dir / "envoy.pid").read_text()) == pid

    # The syntax error sent to Envoy anyway: the filter's own log line names line and column too.
    (run_dir / "policy.json").write_text('{"version": "1",\n  "tools": {"list_vms": {},}\n}\n', encoding="utf-8")
    r = subprocess.run(["target/release/mcp-policy", "apply", f"{run_dir}/policy.json", "--no-check", "--admin", ADMIN,
                        "--ecds", f"{run_dir}/mcp_policy.yaml", "--envoy-log", f"{run_dir}/envoy.log"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 5, r
    assert ("] policy not loaded: invalid policy at . (the whole document): not a strict JSON document: unexpected character at line 2, "
            "column 28 of the policy text. Envoy refuses this configuration: on a reload the previous policy keeps serving") in r.stderr
    assert outcome("list_vms", 200) == (200, -31001, FROZEN)

    # A request that names no tool shows its method, read off its audit line in Envoy's log.
    post(MCP, rpc("tools/list", 300, {}), headers_for("run-test-token"))
    CALLS.append("tools/list")

    # One line per decision on the terminal: time, grant, tool or method, decision, rule.
    def decision_lines() -> list[list[str]]:
        text = proc.log_text().split("Decisions (time UTC, grant, tool or method, decision, rule):\n")[1]
        return [line.split() for line in text.splitlines() if not line.startswith("run:")]

    deadline = time.monotonic() + 10
    while len(decision_lines()) < len(CALLS) and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = decision_lines()
    assert [cells[2] for cells in lines] == CALLS
    grant = "sha256:" + hashlib.sha256(b"run-test-token").hexdigest()[:12]
    assert [cells[1:] for cells in lines[:2]] == [[grant, "list_vms", "allowed", "tools.list_vms"],
                                                  [grant, "delete_vm", "denied", "default"]]
    assert [grant, "list_vms", "denied", "tools.list_vms"] in [cells[1:] for cells in lines]
    assert lines[-1][1:] == [grant, "tools/list", "passed", "-"]
    assert all(len(cells) == 5 and len(cells[0]) == len("23:01:02.345") for cells in lines), lines

    # Ctrl-C (SIGINT to run.sh) stops everything.
    os.kill(proc.pid, signal.SIGINT)
    proc.popen.wait(15)
    assert "run: stopped" in proc.log_text()
    deadline = time.monotonic() + 5
    while any(port_open(p) for p in PORTS.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in PORTS.values() if port_open(p)]



def test_ctrl_c_on_a_terminal_ends_make_run_with_status_0(tmp_path, wasm):
    """On a terminal, Ctrl-C reaches the decision view alone (run.sh runs it as the foreground job):
    make sees its recipe end normally and exits 0, with no "Error 130", and everything is stopped."""
    import pty
    ports = {name: free_port() for name in NAMES}
    argv = ["make", "--no-print-directory", "run", f"RUN_DIR={tmp_path / 'run'}",
            *[f"{name}={port}" for name, port in ports.items()]]
    pid, fd = pty.fork()
    if pid == 0:  # the child: make on the terminal, as a person starts it
        try:
            default_signals()
            os.chdir(REPO_ROOT)
            os.execvp("make", argv)
        finally:
            os._exit(127)
    seen = b""

    def read_until(text: bytes, timeout: float) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while text not in seen and time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the terminal closed: every process on it is gone
                break
            if not chunk:
                break
            seen += chunk
        assert text in seen, seen.decode(errors="replace")[-3000:]

    try:
        read_until(b"Decisions (time UTC", 300)
        os.write(fd, b"\x03")
        read_until(b"run: stopped Envoy, mcp-approvals and the demo server", 20)
        _, status = os.waitpid(pid, 0)
        pid = 0
        read_until(b"", 1)
        assert os.waitstatus_to_exitcode(status) == 0, seen.decode(errors="replace")[-2000:]
        assert b"Error" not in seen and b"Interrupt" not in seen
        deadline = time.monotonic() + 5
        while any(port_open(p) for p in ports.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in ports.values() if port_open(p)]
    finally:
        if pid:  # make still runs: end run.sh the way a failure would (its cleanup stops the services)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(pid, sig)
                except ProcessLookupError:
                    break
                time.sleep(2)
            os.waitpid(pid, 0)
        os.close(fd)


def test_make_run_filter_native_serves_the_module_and_make_reload_puts_an_edit_live(tmp_path, wasm):
    """FILTER=native: run.sh serves envoy/envoy-dynamic-ecds.yaml (the module through ECDS) and
    `make reload` puts an edit live there exactly as for the wasm build."""
    subprocess.run(["make", "-s", "native", "dynamic-module"], cwd=REPO_ROOT, check=True, timeout=900,
                   capture_output=True)
    run_dir = tmp_path / "run"
    env = {**os.environ, "RUN_DIR": str(run_dir), "VENV": str(Path(sys.executable).parent.parent), "FILTER": "native",
           **{name: str(port) for name, port in PORTS.items()}}
    proc = spawn("run.sh", ["bash", "scripts/run.sh"], tmp_path / "terminal.txt", cwd=REPO_ROOT, env=env)
    try:
        proc.wait_until(lambda: "Decisions (time UTC" in proc.log_text(), 90, "showing its banner")
        assert f"make reload RUN_DIR={run_dir} ADMIN_PORT={PORTS['ADMIN_PORT']}" in proc.log_text()
        assert ("mcp-policy-filter is running, the native build (target/dynamic-module/libmcp_policy_native.so) "
                "(Ctrl-C stops it)") in proc.log_text()
        rendered = yaml.safe_load((run_dir / "envoy-dynamic-ecds.yaml").read_text(encoding="utf-8"))
        (entry,) = [f for f in http_filters(rendered) if f["name"] == "mcp_policy"]
        assert entry["config_discovery"]["type_urls"] == [
            "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter"]
        assert "Dynamic module ABI version" in (run_dir / "envoy.log").read_text(encoding="utf-8")
        assert outcome("list_vms", 300) == (200, "forwarded")
        policy = json.loads((run_dir / "policy.json").read_text(encoding="utf-8"))
        policy["tools"]["list_vms"] = {"action": "deny", "reason": FROZEN}
        (run_dir / "policy.json").write_text(json.dumps(policy, indent=2), encoding="utf-8")
        r = make_reload(run_dir)
        assert (r.returncode, r.stderr) == (0, ""), r.stdout
        assert r.stdout.startswith(f"{run_dir}/policy.json: applied: Envoy loaded the new policy for mcp_policy in ")
        deadline = time.monotonic() + RELOAD_DEADLINE
        while outcome("list_vms", 301) != (200, -31001, FROZEN) and time.monotonic() < deadline:
            time.sleep(0.02)
        for i in range(8):  # new connections: both workers
            assert outcome("list_vms", 310 + i) == (200, -31001, FROZEN)
    finally:
        proc.stop(timeout=10)


def test_make_run_refuses_a_filter_it_does_not_know():
    """A mistyped FILTER stops run.sh before it starts anything, naming the two builds."""
    env = {**os.environ, "FILTER": "Native", "VENV": str(Path(sys.executable).parent.parent)}
    r = subprocess.run(["bash", "scripts/run.sh"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "run: FILTER is wasm (the default) or native, not 'Native'\n")
