"""Tier 3: `make demo` (scripts/demo.py) as a user runs it: every step matches, ending with the lethal
trifecta (read a secret, then try to post it: refused `flow_denied`), printed clearly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from testkit import approvals as ha
from testkit.paths import REPO_ROOT


@pytest.mark.parametrize("build", ["wasm", "native"])
def test_make_demo_runs_every_step_and_shows_the_lethal_trifecta_refused(wasm, build):
    """`make demo` and `make demo FILTER=native`: the same session, step for step, on either build."""
    if not ha.approvals_binary().is_file():
        pytest.fail(f"{ha.approvals_binary()} is missing (make approvals)")
    env = {**os.environ, "MCP_POLICY_WASM": str(wasm), "PYTHONPATH": str(REPO_ROOT),
           "MCP_POLICY_FILTER_BUILD": build}
    run = subprocess.run([sys.executable, "scripts/demo.py"], cwd=REPO_ROOT, env=env, capture_output=True,
                         text=True, timeout=180)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert f"(policy envoy/policy.json, the {build} build)" in out, out
    assert "all steps matched (13/13)" in out
    assert "[ok] 10. http_post before any secret is allowed\n       posted 5 bytes to https://example.com/hook" in out
    assert "[ok] 11. read_secret is allowed, and marks the grant 'secret'\n       db_password=demo-secret-7f3a9c" in out
    assert ("[ok] 12. http_post with the secret is refused (lethal trifecta)\n"
            "       refused: -31014 tool 'http_post' denied by flow 'no-egress-after-secrets': no outbound tools for 10 "
            "minutes after reading secrets; retry in 600 s" in out), out
    assert "flow 'no-egress-after-secrets', mark 'secret', lifts in 600 s" in out
    assert "[ok] 13. http_post as a second grant (agent-dave) is still allowed" in out
