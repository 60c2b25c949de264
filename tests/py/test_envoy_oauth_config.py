"""Tier 1: envoy/envoy-oauth.yaml is consistent with itself (no Envoy run). Its URLs and names appear
in several places (jwt_authn, the metadata document, the challenge, the policy); a user who edits one
must edit all, and these tests say which."""

import json

import yaml

from testkit import oauth as ho
from testkit.envoy import cluster_endpoint, hcm, http_filters, wasm_filter
from testkit.paths import DEFAULT_WASM

RESOURCE = "http://127.0.0.1:10000/mcp"
ISSUER = "http://127.0.0.1:9400"
METADATA_URL = "http://127.0.0.1:10000/.well-known/oauth-protected-resource"


def shipped():
    return yaml.safe_load(ho.OAUTH_YAML.read_text(encoding="utf-8"))


def jwt_filter(cfg):
    (f,) = [f for f in http_filters(cfg) if f["name"] == "envoy.filters.http.jwt_authn"]
    return f["typed_config"]


def test_filter_order_jwt_authn_then_policy_then_buffer():
    names = [f["name"] for f in http_filters(shipped())]
    assert names == ["envoy.filters.http.jwt_authn", "mcp_policy", "envoy.filters.http.buffer",
                     "envoy.filters.http.router"]


def test_provider_metadata_policy_and_challenge_agree():
    cfg = shipped()
    provider = jwt_filter(cfg)["providers"]["mcp_as"]
    (route_md, _) = hcm(cfg)["route_config"]["virtual_hosts"][0]["routes"]
    metadata = json.loads(route_md["direct_response"]["body"]["inline_string"])
    policy = json.loads(wasm_filter(cfg)["config"]["configuration"]["value"])
    assert route_md["match"] == {"prefix": ho.METADATA_PATH}
    assert metadata["resource"] == RESOURCE == provider["audiences"][0]
    assert metadata["authorization_servers"] == [ISSUER] == [provider["issuer"]]
    assert provider["remote_jwks"]["http_uri"]["uri"] == f"{ISSUER}/jwks"
    assert cluster_endpoint(cfg, provider["remote_jwks"]["http_uri"]["cluster"]) == {
        "address": "127.0.0.1", "port_value": 9400}
    assert policy["gateway"] == {"grant_header": ho.GRANT_HEADER, "resource_metadata_url": METADATA_URL,
                                 "session_key": {"current_env": "MCPF_SESSION_KEY"}}
    assert provider["claim_to_headers"] == [{"header_name": ho.GRANT_HEADER, "claim_name": "sub"}]
    # The metadata route needs no token and no grant.
    assert {k: v["disabled"] for k, v in route_md["typed_per_filter_config"].items()} == {
        "envoy.filters.http.jwt_authn": True, "mcp_policy": True}
    # Every other path requires the provider.
    assert jwt_filter(cfg)["rules"] == [{"match": {"prefix": "/"}, "requires": {"provider_name": "mcp_as"}}]
    # jwt_authn's refusals carry the same challenge as the filter's (with error=invalid_token for a bad token).
    mappers = hcm(cfg)["local_reply_config"]["mappers"]
    values = [m["headers_to_add"][0]["header"]["value"] for m in mappers]
    assert values == [f'Bearer resource_metadata="{METADATA_URL}"',
                      f'Bearer resource_metadata="{METADATA_URL}", error="invalid_token"']
    assert [m.get("status_code") for m in mappers] == [None, 401]
    assert provider["failed_status_in_metadata"] == "jwt_failure"
    # The token only from Authorization: Bearer (never from the access_token query parameter).
    assert provider["from_headers"] == [{"name": "authorization", "value_prefix": "Bearer "}]
    assert "from_params" not in provider


def test_grant_header_is_stripped_at_the_edge():
    manager = hcm(shipped())
    (mutation,) = manager["early_header_mutation_extensions"]
    # The grant header, and the verified payload a policy set's gateway.identity reads: only
    # jwt_authn may write either, never the client.
    assert mutation["typed_config"]["mutations"] == [{"remove": ho.GRANT_HEADER}, {"remove": "x-jwt-payload"}]
    assert manager["common_http_protocol_options"]["headers_with_underscores_action"] == "REJECT_REQUEST"


def test_render_changes_only_ports_and_wasm():
    text = ho.render_oauth_config(DEFAULT_WASM, 20001, 20002, 20003, 20004)
    assert "127.0.0.1:10000" not in text and "127.0.0.1:9400" not in text
    cfg = yaml.safe_load(text)
    provider = jwt_filter(cfg)["providers"]["mcp_as"]
    assert (provider["issuer"], provider["audiences"]) == ("http://127.0.0.1:20004", ["http://127.0.0.1:20001/mcp"])
    assert cluster_endpoint(cfg, "oauth_as")["port_value"] == 20004
    assert cluster_endpoint(cfg, "mcp_upstream")["port_value"] == 20003
