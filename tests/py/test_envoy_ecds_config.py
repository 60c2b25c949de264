"""Tier 1: envoy/envoy-ecds.yaml (what `make run` serves, with live policy edits) agrees with the
static envoy/envoy.yaml in everything except how the policy arrives, and its ECDS resource
envoy/ecds/mcp_policy.yaml is envoy.yaml's filter configuration with envoy/policy.json (no Envoy run)."""

import copy
import json

import yaml

from testkit.envoy import (ECDS_FILE, ENVOY_ECDS_YAML, POLICY_JSON, WASM_FILTER_TYPE, cluster_endpoint, hcm,
                           http_filters, shipped_config, wasm_filter)

TYPED_EXTENSION_CONFIG = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"


def ecds_config() -> dict:
    return yaml.safe_load(ENVOY_ECDS_YAML.read_text(encoding="utf-8"))


def ecds_resource() -> dict:
    (res,) = json.loads(ECDS_FILE.read_text(encoding="utf-8"))["resources"]
    return res


def test_the_bootstraps_differ_only_in_how_the_policy_arrives():
    static, dynamic = shipped_config(), ecds_config()
    # ECDS needs the node; the static bootstrap has none.
    assert dynamic.pop("node") == {"id": "mcp-policy-filter", "cluster": "mcp-policy-filter"}
    assert "node" not in static
    # The filter entry: inline typed_config there, config_discovery from the .run file here.
    (entry,) = [f for f in http_filters(dynamic) if f["name"] == "mcp_policy"]
    assert entry == {"name": "mcp_policy", "config_discovery": {
        "config_source": {"path_config_source": {"path": ".run/mcp_policy.yaml"}, "resource_api_version": "V3"},
        "type_urls": [WASM_FILTER_TYPE]}}
    (static_entry,) = [f for f in http_filters(static) if f["name"] == "mcp_policy"]
    swapped = copy.deepcopy(dynamic)
    (entry,) = [f for f in http_filters(swapped) if f["name"] == "mcp_policy"]
    entry.clear()
    entry.update(static_entry)
    # Everything else, listener, access log, stats tags, both clusters, is the same.
    assert swapped == static


def test_both_bootstraps_keep_the_access_log_stats_tags_and_approvals_cluster():
    """The parts `make run` relies on, named, so a drift in both at once is caught too."""
    for cfg in (shipped_config(), ecds_config()):
        assert [t["tag_name"] for t in cfg["stats_config"]["stats_tags"]] == ["mcp_tool", "mcp_decision"]
        (log,) = hcm(cfg)["access_log"]
        fmt = log["typed_config"]["log_format"]["text_format_source"]["inline_string"]
        for field in ("mcp_decision", "mcp_tool", "mcp_grant", "mcp_rule", "mcp_error"):
            assert f"{field}=%FILTER_STATE(wasm.{field}:PLAIN)%" in fmt
        assert cluster_endpoint(cfg, "mcp_approvals") == {"address": "127.0.0.1", "port_value": 8096}
        assert cluster_endpoint(cfg, "mcp_upstream") == {"address": "127.0.0.1", "port_value": 8000}


def test_the_ecds_resource_is_the_static_filter_config_with_policy_json():
    res = ecds_resource()
    static = wasm_filter(shipped_config())
    assert res["@type"] == TYPED_EXTENSION_CONFIG
    assert res["name"] == "mcp_policy"
    assert res["typed_config"] == static
    assert res["typed_config"]["config"]["configuration"]["value"] == POLICY_JSON.read_text(encoding="utf-8")
