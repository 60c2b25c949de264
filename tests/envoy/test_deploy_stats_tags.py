"""Tier 2: the per-tool counter's tags as the platform recipes give them (deploy/istio/common's
bootstrap override, the EnvoyProxy bootstraps of deploy/envoy-gateway; tests/py/test_deploy_platforms.py
checks that the three carry the same tags) label the counter in real Envoy on either build, as the
shipped bootstraps' own tags do: the dashboard's per-tool row and the McpRefusalSpike alert read
those labels.
"""

from __future__ import annotations

import json

import pytest
import yaml

from testkit.jsonrpc import headers_for, post, tool_call
from testkit.manifests import by_kind
from testkit.stats import prom_family, prometheus

pytestmark = pytest.mark.both_builds

POLICY = {"version": "1", "default": "deny", "tools": {"list_vms": {}, "delete_vm": {"action": "deny"}}}


def recipe_tags() -> list[dict]:
    cm = by_kind("ConfigMap", "mcp-policy-bootstrap", "istio")
    return json.loads(cm["data"]["custom_bootstrap.json"])["stats_config"]["stats_tags"]


def test_the_recipes_tags_label_the_per_tool_counter(stack):
    stub = stack.upstream()
    cfg = yaml.safe_load(stack.render(POLICY, stub.port))
    cfg["stats_config"]["stats_tags"] = recipe_tags()
    envoy = stack.start_envoy(yaml.safe_dump(cfg))
    for i, tool in enumerate(["list_vms", "list_vms", "delete_vm", "reboot_vm"]):
        assert post(envoy.mcp_url, tool_call(tool, id=i), headers_for("tok-tags")).status == 200
    family = prom_family(prometheus(envoy), "mcp_policy_tool_decisions_total")
    assert {k: v for k, v in family.items() if v} == {
        '{mcp_tool="list_vms",mcp_decision="allowed"}': 2,
        '{mcp_tool="delete_vm",mcp_decision="denied"}': 1,
        '{mcp_tool="other",mcp_decision="denied"}': 1,
    }
    # No untagged leftovers: every series of the counter carries both labels.
    assert all(k.startswith('{mcp_tool="') and ',mcp_decision="' in k for k in family), sorted(family)
