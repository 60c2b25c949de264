"""Tier 1: envoy/envoy-dynamic.yaml, the bootstrap of the native build, and envoy/envoy-dynamic-ecds.yaml
with its ECDS resource envoy/ecds/mcp_policy_native.yaml (`make run FILTER=native`) (no Envoy run)."""

import json

import yaml

from testkit.envoy import (ENVOY_DYNAMIC_ECDS_YAML, ENVOY_ECDS_YAML, ENVOY_YAML, NATIVE_ECDS_FILE, POLICY_JSON,
                           http_filters)
from testkit.native import DYNAMIC_FILTER_TYPE, MODULE_NAME, to_native
from testkit.paths import REPO_ROOT

DYNAMIC_YAML = REPO_ROOT / "envoy" / "envoy-dynamic.yaml"


def test_dynamic_bootstrap_is_envoy_yaml_with_the_module():
    """Everything but the filter and the stats tags' prefix is envoy/envoy.yaml's, so the two stay in step."""
    shipped = yaml.safe_load(DYNAMIC_YAML.read_text(encoding="utf-8"))
    assert shipped == yaml.safe_load(to_native(ENVOY_YAML.read_text(encoding="utf-8")))


def test_dynamic_bootstrap_loads_the_module_with_the_shipped_policy():
    cfg = yaml.safe_load(DYNAMIC_YAML.read_text(encoding="utf-8"))
    # No buffer filter: the module holds the request and raises the stream's buffer limit itself.
    first, router = http_filters(cfg)
    assert (first["name"], router["name"]) == ("mcp_policy", "envoy.filters.http.router")
    tc = first["typed_config"]
    assert tc["@type"] == DYNAMIC_FILTER_TYPE
    assert tc["dynamic_module_config"] == {"name": MODULE_NAME}
    assert tc["filter_name"] == "mcp_policy"
    assert tc["filter_config"]["value"] == POLICY_JSON.read_text(encoding="utf-8")
    assert [t["regex"].split("\\.")[0] for t in cfg["stats_config"]["stats_tags"]] == ["^dynamicmodulescustom"] * 2


def test_dynamic_ecds_bootstrap_is_envoy_ecds_yaml_for_the_module():
    """The native build's reloadable bootstrap is the wasm build's (envoy/envoy-ecds.yaml) with the
    module's config type asked for and its stats tags: the same ECDS path, so `make reload` is the same."""
    shipped = yaml.safe_load(ENVOY_DYNAMIC_ECDS_YAML.read_text(encoding="utf-8"))
    assert shipped == yaml.safe_load(to_native(ENVOY_ECDS_YAML.read_text(encoding="utf-8")))
    (entry,) = [f for f in http_filters(shipped) if f["name"] == "mcp_policy"]
    assert entry["config_discovery"]["type_urls"] == [DYNAMIC_FILTER_TYPE]
    assert entry["config_discovery"]["config_source"]["path_config_source"]["path"] == ".run/mcp_policy.yaml"


def test_native_ecds_resource_is_the_static_filter_config_with_policy_json():
    (res,) = json.loads(NATIVE_ECDS_FILE.read_text(encoding="utf-8"))["resources"]
    static = yaml.safe_load(DYNAMIC_YAML.read_text(encoding="utf-8"))
    (first, _) = http_filters(static)
    assert res["@type"] == "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
    assert res["name"] == first["name"] == "mcp_policy"
    assert res["typed_config"] == first["typed_config"]
    assert res["typed_config"]["filter_config"]["value"] == POLICY_JSON.read_text(encoding="utf-8")
