"""Tier 1: scripts/decisions.py, the one-line-per-decision view of `make run` (no Envoy run)."""

import importlib.util

import harness

spec = importlib.util.spec_from_file_location("decisions", harness.REPO_ROOT / "scripts" / "decisions.py")
decisions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(decisions)

# envoy/envoy.yaml's access log format, as Envoy 1.40 printed it.
DENIED = ('[2026-11-30T22:57:35.373Z] "POST /mcp" 200 via_upstream mcp_decision=denied mcp_tool=delete_vm '
          'mcp_grant=sha256:7c43ef5ae21d mcp_rule=default mcp_error=denied up=- rid=84f13ef5')
ALLOWED = DENIED.replace("decision=denied", "decision=allowed").replace("rule=default", "rule=tools.list_vms") \
    .replace("tool=delete_vm", "tool=list_vms").replace("error=denied", "error=-")


def test_one_line_per_decision_without_colour():
    assert decisions.decision_line(DENIED, colour=False) == (
        "22:57:35.373  sha256:7c43ef5ae21d   delete_vm           denied                default")
    assert decisions.decision_line(ALLOWED, colour=False).split() == [
        "22:57:35.373", "sha256:7c43ef5ae21d", "list_vms", "allowed", "tools.list_vms"]


def test_colours_by_outcome():
    assert "\033[31mdenied" in decisions.decision_line(DENIED, colour=True)
    assert "\033[32mallowed" in decisions.decision_line(ALLOWED, colour=True)
    limited = DENIED.replace("decision=denied", "decision=rate_limited")
    assert "\033[33mrate_limited" in decisions.decision_line(limited, colour=True)


def test_requests_without_a_decision_are_skipped():
    assert decisions.decision_line(DENIED.replace("mcp_decision=denied", "mcp_decision=-"), colour=False) is None
    assert decisions.decision_line("[2026-11-30 22:53:01.019][22663][warning][main] something", colour=False) is None
