"""The demo MCP server (demo/proxmox_server.py) as the tests see it: what it starts with, how to run
it, the module itself for in-process use, and the process (`start_demo_server`, `Stack.demo_server`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from testkit.paths import REPO_ROOT
from testkit.processes import ManagedProcess, new_log_dir, port_open, spawn

DEMO_SERVER = REPO_ROOT / "demo" / "proxmox_server.py"
# The eight tools of the demo server, in the order it lists them.
DEMO_TOOLS = ["list_nodes", "list_vms", "vm_status", "start_vm", "stop_vm", "delete_vm",
              "vm_agent_exec", "vm_agent_exec_status"]


# The VMs every demo server process starts with, as `list_vms` reports them.
DEMO_VMS = [
    {"node": "pve1", "vmid": 100, "name": "web-01", "status": "running"},
    {"node": "pve1", "vmid": 101, "name": "db-01", "status": "running"},
    {"node": "pve1", "vmid": 102, "name": "build-runner", "status": "stopped"},
    {"node": "pve2", "vmid": 200, "name": "backup-01", "status": "stopped"},
]

# The flow of the demo server's `--trifecta` tools: a grant that read a secret is refused `http_post`
# for 10 minutes.
TRIFECTA_FLOW = "no-egress-after-secrets"
TRIFECTA_POLICY = {
    "version": "1",
    "default": "deny",
    "tools": {"read_secret": {"marks": ["secret"]}, "http_post": {}},
    "flows": [{"name": TRIFECTA_FLOW, "if_marked": ["secret"], "deny": ["http_post"], "for": "10m",
               "reason": "no outbound tools for 10 minutes after reading secrets"}],
}


def demo_module():
    """demo/proxmox_server.py imported (once) as module `proxmox_server`: its `build_server`,
    `catalog_names`, `Cluster`... (importing it loads the MCP SDK)."""
    module = sys.modules.get("proxmox_server")
    if module is None:
        spec = importlib.util.spec_from_file_location("proxmox_server", DEMO_SERVER)
        module = importlib.util.module_from_spec(spec)
        sys.modules["proxmox_server"] = module
        spec.loader.exec_module(module)
    return module


def demo_argv(port: int, json_response: bool, catalog: int | None = None, trifecta: bool = False) -> list[str]:
    """The command line of the demo server on 127.0.0.1:`port` (with `--catalog N` when given, and
    `--trifecta`)."""
    argv = [sys.executable, str(DEMO_SERVER), "--port", str(port)]
    argv += ["--json-response"] if json_response else []
    argv += ["--catalog", str(catalog)] if catalog else []
    argv += ["--trifecta"] if trifecta else []
    return argv


def demo_server_name(json_response: bool, catalog: int | None = None) -> str:
    """The process (and log file) name of a demo server."""
    return ("demo-json" if json_response else "demo-sse") + (f"-catalog{catalog}" if catalog else "")


def start_demo_server(port: int, json_response: bool, *, catalog: int | None = None, log_dir: Path | None = None,
                      name: str | None = None, timeout: float = 20.0, trifecta: bool = False) -> ManagedProcess:
    """demo/proxmox_server.py (with `--catalog N` when `catalog` is given) on 127.0.0.1:`port`,
    waited for until it accepts connections."""
    log_dir = log_dir or new_log_dir()
    name = name or demo_server_name(json_response, catalog)
    proc = spawn(name, demo_argv(port, json_response, catalog, trifecta), log_dir / f"{name}.log", cwd=REPO_ROOT)
    proc.wait_until(lambda: port_open(port), timeout, "accepting connections")
    return proc
