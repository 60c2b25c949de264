"""Tier 3: a rug pull stopped by pins, end to end with the official MCP Python SDK.

The demo server's tools are pinned with `mcp-policy pin --write` (the CLI speaks MCP to the server
itself); the server then changes one description (`--rug-pull list_vms`: an instruction to the
model is appended). Through Envoy, the SDK client no longer sees `list_vms`, and calling it gets
−31013 `pin_mismatch`; every other tool is listed and callable as before.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import MCPError

from testkit.demo import DEMO_TOOLS, demo_argv
from testkit.mcp_session import open_session, result_json
from testkit.paths import REPO_ROOT
from testkit.processes import HOST, free_port, port_open, spawn

STEP_TIMEOUT = 60


def cli() -> Path:
    path = Path(os.environ.get("MCP_POLICY_CLI", REPO_ROOT / "target" / "release" / "mcp-policy"))
    if not path.is_file():
        pytest.fail(f"mcp-policy not built: {path} is missing (make cli, or set MCP_POLICY_CLI)", pytrace=False)
    return path


def test_a_changed_description_leaves_the_list_and_its_calls_get_pin_mismatch(stack, tmp_path):
    _, port = stack.demo_server(json_response=False)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"version": "1", "default": "allow", "tools": {}}))
    r = subprocess.run([str(cli()), "pin", "--write", str(policy), f"http://{HOST}:{port}/mcp"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pinned = json.loads(policy.read_text())
    # Not listed under tools: recorded under pins with their annotations (which allows nothing).
    assert pinned["tools"] == {}
    assert sorted(pinned["pins"]) == sorted(DEMO_TOOLS)
    assert all(rule["pin"].startswith("sha256:") for rule in pinned["pins"].values())
    # Printed, the same pins.
    printed = subprocess.run([str(cli()), "pin", f"http://{HOST}:{port}/mcp"], capture_output=True, text=True,
                             timeout=60)
    assert json.loads(printed.stdout) == {"tools": {n: {"pin": r["pin"]} for n, r in pinned["pins"].items()}}

    # The legacy way (initialize): through an Envoy that accepts 2025-11-25 only, so server/discover
    # at 2026-07-28 is refused (−32022) and the CLI falls back; it needs the bearer token there.
    legacy = stack.envoy({"version": "1", "default": "allow", "gateway": {"protocol_versions": ["2025-11-25"]}},
                         port, name="envoy-legacy-only")
    via = subprocess.run([str(cli()), "pin", "--bearer", "pin-grant", "-H", "X-Pin-Run: 1", legacy.mcp_url],
                         capture_output=True, text=True, timeout=60)
    assert via.returncode == 0, via.stderr
    assert json.loads(via.stdout) == json.loads(printed.stdout)
    missing = subprocess.run([str(cli()), "pin", legacy.mcp_url], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no_grant" in missing.stderr, missing.stderr

    poisoned = free_port()
    proc = spawn("demo-rug-pull", demo_argv(poisoned, False) + ["--rug-pull", "list_vms"],
                 stack.log_dir / "demo-rug-pull.log", cwd=REPO_ROOT)
    stack.procs.append(proc)
    proc.wait_until(lambda: port_open(poisoned), 20, "accepting connections")
    envoy = stack.envoy(pinned, poisoned)

    async def scenario():
        async with open_session(envoy.mcp_url, "e2e-rug-pull") as s:
            names = [t.name for t in (await s.list_tools()).tools]
            assert names == [n for n in DEMO_TOOLS if n != "list_vms"]
            with pytest.raises(MCPError) as refused:
                await s.call_tool("list_vms", {})
            assert refused.value.error.code == -31013
            assert refused.value.error.data["kind"] == "pin_mismatch"
            assert result_json(await s.call_tool("vm_status", {"node": "pve1", "vmid": 101}))["vmid"] == 101

    async def bounded():
        with anyio.fail_after(STEP_TIMEOUT):
            await scenario()
    anyio.run(bounded)
