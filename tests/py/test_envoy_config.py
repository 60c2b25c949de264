"""Tier 1: the shipped envoy/envoy.yaml, and `testkit.envoy.render_envoy_config` built on it (no Envoy run)."""

import json

import yaml

from testkit.envoy import (POLICY_JSON, cluster_endpoint, config_ports, http_filters, render_envoy_config,
                           shipped_config, shipped_policy_text, wasm_filter)
from testkit.paths import REPO_ROOT


def test_inlined_policy_is_policy_json():
    assert shipped_policy_text() == POLICY_JSON.read_text(encoding="utf-8")


def test_shipped_policy_is_valid_json_with_default_deny():
    policy = json.loads(shipped_policy_text())
    assert policy["default"] == "deny"
    assert sorted(policy["tools"]) == ["list_vms", "start_vm", "vm_agent_exec"]


def test_shipped_policy_asks_the_shipped_approvals_cluster():
    """start_vm needs an approval; gateway.approval names the cluster envoy/envoy.yaml defines for
    mcp-approvals' check endpoint on 127.0.0.1:8096 (where `make run` starts it)."""
    policy = json.loads(shipped_policy_text())
    assert policy["tools"]["start_vm"] == {"action": "require_approval", "approval_timeout": "10m",
                                           "reason": "starting a VM costs money"}
    assert policy["gateway"]["approval"] == {"cluster": "mcp_approvals", "path": "/v1/check", "timeout": "5s",
                                             "mode": "retry"}
    cfg = shipped_config()
    (cluster,) = [c for c in cfg["static_resources"]["clusters"] if c["name"] == "mcp_approvals"]
    assert (cluster["type"], cluster["connect_timeout"]) == ("STATIC", "1s")
    assert "typed_extension_protocol_options" not in cluster  # HTTP/1.1
    assert cluster_endpoint(cfg, "mcp_approvals") == {"address": "127.0.0.1", "port_value": 8096}


def test_shipped_wasm_filter_never_fails_open():
    cfg = wasm_filter(shipped_config())["config"]
    assert cfg["failure_policy"] != "FAIL_OPEN"
    assert cfg.get("fail_open", False) is False


def test_wasm_filter_is_followed_by_buffer_then_router():
    names = [f["name"] for f in http_filters(shipped_config())]
    assert names == ["mcp_policy", "envoy.filters.http.buffer", "envoy.filters.http.router"]


def test_render_changes_only_ports_wasm_and_policy(tmp_path):
    wasm = tmp_path / "f.wasm"
    policy = {"version": "1", "default": "allow"}
    rendered = yaml.safe_load(render_envoy_config(policy, wasm, 11111, 22222, 33333))
    shipped = shipped_config()

    assert rendered["admin"]["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 22222}
    listener = rendered["static_resources"]["listeners"][0]
    assert listener["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 11111}
    endpoint = rendered["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    assert endpoint["endpoint"]["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 33333}
    assert cluster_endpoint(rendered, "mcp_approvals")["port_value"] == 8096  # not asked to change
    plugin = wasm_filter(rendered)["config"]
    assert plugin["vm_config"]["code"]["local"]["filename"] == str(wasm.resolve())
    assert json.loads(plugin["configuration"]["value"]) == policy

    # Put the shipped values back: what remains must be the shipped bootstrap, unchanged.
    rendered["admin"]["address"]["socket_address"]["port_value"] = 9901
    listener["address"]["socket_address"]["port_value"] = 10000
    endpoint["endpoint"]["address"]["socket_address"]["port_value"] = 8000
    plugin["vm_config"]["code"]["local"]["filename"] = "target/wasm32-wasip1/release/mcp_policy_filter.wasm"
    plugin["configuration"]["value"] = shipped_policy_text()
    assert rendered == shipped


def test_render_points_the_approvals_cluster_at_a_port(tmp_path):
    rendered = yaml.safe_load(render_envoy_config({"version": "1"}, tmp_path / "f.wasm", 1, 2, 3,
                                                  approvals_port=44444))
    assert cluster_endpoint(rendered, "mcp_approvals") == {"address": "127.0.0.1", "port_value": 44444}
    assert cluster_endpoint(rendered, "mcp_upstream") == {"address": "127.0.0.1", "port_value": 3}
    cluster_endpoint(rendered, "mcp_approvals")["port_value"] = 8096
    shipped = yaml.safe_load(render_envoy_config({"version": "1"}, tmp_path / "f.wasm", 1, 2, 3))
    assert rendered == shipped


def test_render_passes_policy_text_through_verbatim(tmp_path):
    text = '{"version":"1","default":"deny","tools":{"x":{"actoin":"deny"}}}'
    rendered = yaml.safe_load(render_envoy_config(text, tmp_path / "f.wasm", 1, 2, 3))
    assert wasm_filter(rendered)["config"]["configuration"]["value"] == text
    assert config_ports(render_envoy_config(text, tmp_path / "f.wasm", 1, 2, 3)) == (1, 2)


def _strings(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)
    elif isinstance(node, str):
        yield node


def test_shipped_access_logs_print_the_path_without_its_query():
    """A query string can carry a session id (the 2024-11-05 HTTP+SSE transport's `session_id`), so
    every access-log format shipped in envoy/ prints the request path as `%PATH(NQ:…)%` (no query;
    Envoy 1.40 prints `/messages/` for `/messages/?session_id=…`, tests/envoy/test_session_streams.py)
    and never through `%REQ(…PATH)%` or a bare `%PATH%`."""
    configs = sorted((REPO_ROOT / "envoy").rglob("*.yaml"))
    formats = []
    for path in configs:
        for text in _strings(yaml.safe_load(path.read_text(encoding="utf-8"))):
            if "%START_TIME%" in text or "%RESPONSE_CODE%" in text:
                formats.append((path.name, text))
    assert sorted({name for name, _ in formats}) == ["envoy-cluster.yaml", "envoy-dynamic-ecds.yaml", "envoy-dynamic.yaml",
                                                     "envoy-ecds.yaml",
                                                     "envoy-oauth.yaml", "envoy.yaml"]
    for name, text in formats:
        assert "%PATH(NQ:ORIG_OR_PATH)%" in text, name
        assert "PATH)%" not in text.replace("%PATH(NQ:ORIG_OR_PATH)%", ""), name
        assert "%PATH%" not in text and "%PATH(WQ" not in text, name
