"""Tier 2, deploy: the module in the Envoy configuration Envoy Gateway renders for
deploy/envoy-gateway (and the native build's for deploy/envoy-gateway/native), next to the real
mcp-approvals.

What Envoy Gateway emits (internal/xds/translator/wasm.go, httpfilters.go, jsonpatch.go), rebuilt
from the manifests:
- EnvoyExtensionPolicy -> an HTTP filter `envoy.filters.http.wasm/envoyextensionpolicy/NS/NAME/wasm/0`,
  disabled on the HCM and enabled on the route, with its own `vm_id` (that same name), root_id
  `rootID`, `configuration` = the JSON text of `config` (no Struct conversion), fail_open = failOpen,
  `env.hostKeys` -> `vm_config.environment_variables.host_env_keys` (the session key, which the
  EnvoyProxy sets in the proxy's environment from a Secret; here the harness sets it);
- BackendTrafficPolicy requestBuffer -> envoy.filters.http.buffer, placed after the wasm filter by
  the EnvoyProxy's filterOrder (Envoy Gateway's default order puts it before);
- HTTPRoute timeouts.request 0s -> route timeout 0s;
- ClientTrafficPolicy headers.withUnderscoresAction on the Gateway -> the listener's HCM
  `common_http_protocol_options.headers_with_underscores_action` (listener.go,
  buildHeadersWithUnderscoresAction: Allow/RejectRequest/DropHeader -> ALLOW/REJECT_REQUEST/DROP_HEADER);
  a request with a header name holding '_' (`x_mcp_grant`) is answered 400 and reaches no server;
- EnvoyPatchPolicy (op add, empty path) -> the clusters `mcp_approvals` and `mcp_ratelimit` (HTTP/2,
  for the filter's gRPC callout to mcp-ratelimit) as written (their DNS names replaced by 127.0.0.1
  here). With the real mcp-ratelimit behind `mcp_ratelimit`, the policy's limit (10 a minute per
  grant) is decided by the service: 10 of 12 calls admitted.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from testkit import approvals as ha
from testkit import deploy as hd
from testkit import rls as hr
from testkit.clock import avoid_minute_boundary
from testkit.envoy import HCM_TYPE, POLICY_JSON, load_policy
from testkit.jsonrpc import call_tool
from testkit.paths import REPO_ROOT
from testkit.processes import HOST, free_port
from testkit.upstream import recorder_lines, recorder_reply

EG = REPO_ROOT / "deploy" / "envoy-gateway"
SEED = load_policy(POLICY_JSON)


# Envoy Gateway's translation of withUnderscoresAction (internal/xds/translator/listener.go).
UNDERSCORES_ACTION = {"Allow": "ALLOW", "RejectRequest": "REJECT_REQUEST", "DropHeader": "DROP_HEADER"}


def load(name: str, build: str = "wasm") -> dict:
    """A manifest of deploy/envoy-gateway (`build="native"`: of its native/ folder), or of the
    common/ folder both list."""
    own = EG / name if build == "wasm" else EG / "native" / name
    return yaml.safe_load((own if own.is_file() else EG / "common" / name).read_text(encoding="utf-8"))


def patched_cluster(file: str, port: int) -> dict:
    """The Cluster an EnvoyPatchPolicy adds (op add, empty path), its one endpoint on 127.0.0.1:`port`."""
    (patch,) = load(file)["spec"]["jsonPatches"]
    assert (patch["operation"]["op"], patch["operation"]["path"]) == ("add", "")
    cluster = json.loads(json.dumps(patch["operation"]["value"]))
    (ep,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    ep["endpoint"]["address"]["socket_address"] = {"address": HOST, "port_value": port}
    return cluster


def native_filter(module: Path) -> tuple[str, dict]:
    """What Envoy Gateway renders for deploy/envoy-gateway/native (internal/gatewayapi/
    envoyextensionpolicy.go buildDynamicModules, internal/xds/translator/dynamicmodule.go): the filter
    `envoy.filters.http.dynamic_modules/envoyextensionpolicy/NS/NAME/dynamic-module/0`, disabled on the
    HCM and enabled on the route, a DynamicModuleFilter whose module is the EnvoyProxy entry's local
    path (here the built module), `do_not_close` from it, no module name, `filter_name` and the JSON
    text of `config` as a StringValue. Returns (name, filter)."""
    policy = load("envoyextensionpolicy.yaml", "native")
    (dm,) = policy["spec"]["dynamicModule"]
    (entry,) = [e for e in load("envoyproxy.yaml", "native")["spec"]["dynamicModules"] if e["name"] == dm["name"]]
    assert Path(entry["source"]["local"]["path"]).name == module.name
    ns, name = policy["metadata"]["namespace"], policy["metadata"]["name"]
    filter_name = f"envoy.filters.http.dynamic_modules/envoyextensionpolicy/{ns}/{name}/dynamic-module/0"
    return filter_name, {"name": filter_name, "disabled": True, "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
        "dynamic_module_config": {"do_not_close": entry["doNotClose"], "module": {"local": {"filename": str(module)}}},
        "filter_name": dm["filterName"],
        "filter_config": {"@type": "type.googleapis.com/google.protobuf.StringValue",
                          "value": json.dumps(dm["config"], sort_keys=True, separators=(",", ":"))}}}


def render(wasm: Path, listen_port: int, admin_port: int, upstream_port: int, approvals_check_port: int,
           rls_port: int | None = None, *, native: Path | None = None) -> str:
    """The configuration Envoy Gateway renders for deploy/envoy-gateway, or (with `native`, the
    module's path) for deploy/envoy-gateway/native."""
    build = "native" if native else "wasm"
    policy = load("envoyextensionpolicy.yaml")
    (ext,) = policy["spec"]["wasm"]
    ns, name = policy["metadata"]["namespace"], policy["metadata"]["name"]
    ir_name = f"envoyextensionpolicy/{ns}/{name}/wasm/0"
    filter_name = f"envoy.filters.http.wasm/{ir_name}"
    wasm_filter = {"name": filter_name, "disabled": True, "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
        "config": {
            "name": ext["name"],
            "root_id": ext["rootID"],
            "vm_config": {"vm_id": ir_name, "runtime": "envoy.wasm.runtime.v8",
                          "code": {"local": {"filename": str(wasm)}},
                          # env.hostKeys: the proxy's own environment variables, for the session key.
                          "environment_variables": {"host_env_keys": ext["env"]["hostKeys"]}},
            # The API server keeps `config` as JSON (object keys sorted); Envoy Gateway passes the
            # raw bytes on.
            "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue",
                              "value": json.dumps(ext["config"], sort_keys=True, separators=(",", ":"))},
            "fail_open": ext["failOpen"],
        }}}
    limit = load("backendtrafficpolicy.yaml")["spec"]["requestBuffer"]["limit"]
    assert limit.endswith("Mi")
    buffer_filter = [{"name": "envoy.filters.http.buffer", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
        "max_request_bytes": int(limit[:-2]) * 1024 * 1024}}]
    if native:
        # No BackendTrafficPolicy in native/ (so no buffer filter) and no filterOrder.
        filter_name, wasm_filter = native_filter(native)
        assert "filterOrder" not in load("envoyproxy.yaml", build)["spec"]
        buffer_filter = []
    else:
        order = load("envoyproxy.yaml", build)["spec"]["filterOrder"]
        assert order == [{"name": "envoy.filters.http.buffer", "after": "envoy.filters.http.wasm"}]
    router = {"name": "envoy.filters.http.router", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}
    (rule,) = load("httproute.yaml")["spec"]["rules"]
    route = {"match": {"prefix": rule["matches"][0]["path"]["value"]},
             "route": {"cluster": "httproute/mcp/mcp/rule/0", "timeout": rule["timeouts"]["request"]},
             "typed_per_filter_config": {filter_name: {
                 "@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", "config": {}}}}
    approvals = patched_cluster("envoypatchpolicy-approvals.yaml", approvals_check_port)
    # The native build has no rate limit service: deploy/envoy-gateway/native adds no such cluster.
    ratelimit = [] if native else [patched_cluster("envoypatchpolicy-ratelimit.yaml", rls_port or free_port())]
    upstream = {"name": "httproute/mcp/mcp/rule/0", "type": "STATIC", "connect_timeout": "2s",
                "load_assignment": {"cluster_name": "httproute/mcp/mcp/rule/0", "endpoints": [{"lb_endpoints": [
                    {"endpoint": {"address": {"socket_address": {"address": HOST, "port_value": upstream_port}}}}]}]}}
    ctp = load("clienttrafficpolicy.yaml")["spec"]
    assert ctp["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                  "name": load("gateway.yaml")["metadata"]["name"]}]
    underscores = UNDERSCORES_ACTION[ctp["headers"]["withUnderscoresAction"]]
    cfg = {
        "admin": {"address": {"socket_address": {"address": HOST, "port_value": admin_port}}},
        "static_resources": {
            "listeners": [{"name": "mcp/mcp-gateway/http", "address": {"socket_address": {
                "address": HOST, "port_value": listen_port}},
                "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
                    "@type": HCM_TYPE, "stat_prefix": "http-80",
                    "common_http_protocol_options": {"headers_with_underscores_action": underscores},
                    "route_config": {"name": "mcp/mcp-gateway/http", "virtual_hosts": [
                        {"name": "mcp/mcp-gateway/http/*", "domains": ["*"], "routes": [route]}]},
                    "http_filters": [wasm_filter, *buffer_filter, router]}}]}]}],
            "clusters": [upstream, approvals, *ratelimit],
        },
    }
    return yaml.safe_dump(cfg, sort_keys=False, width=1000)


def test_config_is_the_seed_policy_as_written():
    (ext,) = load("envoyextensionpolicy.yaml")["spec"]["wasm"]
    config = json.loads(json.dumps(ext["config"]))
    assert config["gateway"].pop("rate_limit_service") == {"cluster": "mcp_ratelimit", "domain": "mcp",
                                                           "timeout": "250ms", "failure_mode": "deny"}
    assert config == SEED


def test_rate_limit_cluster_of_the_patch_policy_reaches_mcp_ratelimit(stack, wasm):
    """12 calls of vm_agent_exec (max 10 a minute per grant): the real mcp-ratelimit behind the
    patched HTTP/2 cluster decides; 10 reach the server, 2 are rate_limited."""
    svc = ha.approvals(stack)
    rls = hr.start_rls(stack, None)
    _, upstream_port, log = stack.recorder()
    config = render(wasm, free_port(), free_port(), upstream_port, svc.check_port, rls.port)
    envoy = stack.start_envoy(config, name="envoy-eg")
    avoid_minute_boundary(margin=10)
    args = {"node": "pve1", "vmid": 100, "command": "uptime"}
    replies = [call_tool(envoy.mcp_url, "vm_agent_exec", "grant-eg-rls", args, id=i) for i in range(12)]
    kinds = [r.error["data"]["kind"] if b'"error"' in r.body else "ok" for r in replies]
    assert kinds == ["ok"] * 10 + ["rate_limited"] * 2, [r.body[:160] for r in replies]
    assert len(recorder_lines(log, settle=0.3)) == 10
    metrics = rls.metrics()
    assert 'mcp_ratelimit_decisions_total{code="ok"} 10' in metrics, metrics
    assert 'mcp_ratelimit_decisions_total{code="over_limit"} 2' in metrics, metrics


def test_envoy_gateway_rendering_filters_buffers_and_reaches_mcp_approvals(stack, wasm):
    svc = ha.approvals(stack)
    _, upstream_port, log = stack.recorder()
    config = render(wasm, free_port(), free_port(), upstream_port, svc.check_port)
    envoy = stack.start_envoy(config, name="envoy-eg")
    ok = call_tool(envoy.mcp_url, "list_vms", "grant-eg", id=1)
    assert (ok.status, ok.body) == (200, recorder_reply(1))
    denied = call_tool(envoy.mcp_url, "delete_vm", "grant-eg", id=2)
    assert denied.error["data"]["kind"] == "denied"
    held = call_tool(envoy.mcp_url, "start_vm", "grant-eg", {"node": "pve1", "vmid": 101}, id=3)
    assert held.error["data"]["kind"] == "approval_required", held.body
    (pending,) = svc.wait_pending(1)
    assert pending["tool"] == "start_vm"
    assert held.error["data"]["approval_url"].endswith(pending["id"]), held.body
    # Only the allowed call reached the MCP server, and Envoy opened no upstream request for the
    # refused and held calls (the buffer after the filter holds them until the filter decides).
    assert len(recorder_lines(log, settle=0.3)) == 1
    stat = "cluster.httproute/mcp/mcp/rule/0.upstream_rq_total"
    assert envoy.admin_get(f"/stats?filter=^{stat}$")[1].strip() == f"{stat}: 1"
    assert envoy.admin_get("/stats?filter=^http.http-80.downstream_rq_total$")[1].strip() == \
        "http.http-80.downstream_rq_total: 3"


def test_native_rendering_loads_the_module_without_a_buffer_and_reaches_mcp_approvals(stack, wasm):
    """deploy/envoy-gateway/native as Envoy Gateway renders it, in this Envoy 1.40: the module loaded
    from its path (no module name), its policy from `config`, and no buffer filter: the refused and
    held calls open no upstream request all the same."""
    from testkit.native import native_path

    module = native_path()
    assert module.is_file(), f"{module} is missing (make dynamic-module)"
    svc = ha.approvals(stack)
    _, upstream_port, log = stack.recorder()
    config = render(wasm, free_port(), free_port(), upstream_port, svc.check_port, native=module)
    envoy = stack.start_envoy(config, name="envoy-eg-native")
    assert "Dynamic module ABI version" in envoy.log_text() and "matched" in envoy.log_text()
    ok = call_tool(envoy.mcp_url, "list_vms", "grant-eg", id=1)
    assert (ok.status, ok.body) == (200, recorder_reply(1))
    assert call_tool(envoy.mcp_url, "delete_vm", "grant-eg", id=2).error["data"]["kind"] == "denied"
    held = call_tool(envoy.mcp_url, "start_vm", "grant-eg", {"node": "pve1", "vmid": 101}, id=3)
    assert held.error["data"]["kind"] == "approval_required", held.body
    (pending,) = svc.wait_pending(1)
    assert pending["tool"] == "start_vm"
    assert len(recorder_lines(log, settle=0.3)) == 1
    stat = "cluster.httproute/mcp/mcp/rule/0.upstream_rq_total"
    assert envoy.admin_get(f"/stats?filter=^{stat}$")[1].strip() == f"{stat}: 1"


def test_header_names_with_underscores_are_answered_400_before_any_server(stack, wasm):
    """The ClientTrafficPolicy's RejectRequest: an allowed call carrying `x_mcp_grant` is refused
    by Envoy (400), and neither the filter's callouts nor the MCP server see it; the same call
    without that header passes."""
    _, upstream_port, log = stack.recorder()
    config = render(wasm, free_port(), free_port(), upstream_port, free_port())
    envoy = stack.start_envoy(config, name="envoy-eg-underscores")
    hd.assert_underscore_headers_refused(envoy, log, "grant-eg")
    assert envoy.admin_get("/stats?filter=upstream_rq_total$")[1].split() == [
        "cluster.httproute/mcp/mcp/rule/0.upstream_rq_total:", "1", "cluster.mcp_approvals.upstream_rq_total:", "0",
        "cluster.mcp_ratelimit.upstream_rq_total:", "0"]
