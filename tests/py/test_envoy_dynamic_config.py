"""Tier 1: envoy/envoy-dynamic.yaml, the bootstrap of the native build (no Envoy run)."""

import yaml

from testkit.envoy import ENVOY_YAML, POLICY_JSON, http_filters
from testkit.native import DYNAMIC_FILTER_TYPE, MODULE_NAME, to_native
from testkit.paths import REPO_ROOT

DYNAMIC_YAML = REPO_ROOT / "envoy" / "envoy-dynamic.yaml"


def test_dynamic_bootstrap_is_envoy_yaml_with_the_module():
    """Everything but the filter and the stats tags' prefix is envoy/envoy.yaml's, so the two stay in step."""
    shipped = yaml.safe_load(DYNAMIC_YAML.read_text(encoding="utf-8"))
    assert shipped == yaml.safe_load(to_native(ENVOY_YAML.read_text(encoding="utf-8")))


def test_dynamic_bootstrap_loads_the_module_with_the_shipped_policy():
    cfg = yaml.safe_load(DYNAMIC_YAML.read_text(encoding="utf-8"))
    first, buffer, router = http_filters(cfg)
    assert (first["name"], buffer["name"], router["name"]) == ("mcp_policy", "envoy.filters.http.buffer",
                                                              "envoy.filters.http.router")
    tc = first["typed_config"]
    assert tc["@type"] == DYNAMIC_FILTER_TYPE
    assert tc["dynamic_module_config"] == {"name": MODULE_NAME}
    assert tc["filter_name"] == "mcp_policy"
    assert tc["filter_config"]["value"] == POLICY_JSON.read_text(encoding="utf-8")
    assert [t["regex"].split("\\.")[0] for t in cfg["stats_config"]["stats_tags"]] == ["^dynamicmodulescustom"] * 2
