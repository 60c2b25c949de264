"""Tier 2, deploy: the OCI image of `make oci`, pushed to and pulled back from a real
registry, and the module run in the Envoy configuration Istio renders for deploy/istio/wasmplugin.yaml.

- The layout: the compat wasm image format (one tar+gzip layer holding plugin.wasm, variant
  annotation), OCI annotations, and reproducibility (same module, same digest; another module,
  another digest).
- Round trip: Debian's docker-registry on 127.0.0.1, `skopeo copy` in, a pull by digest over the
  registry API (as Istio's fetcher does), plugin.wasm byte-equal to the built module, loaded in Envoy.
- Istio rendering (testkit/istio.py): no vm_id, pluginConfig as protobuf-Struct JSON (numbers
  as doubles), delivered by ECDS; every shared case (tests/cases) replays through it.
- Shared data: a second wasm plugin (tests/wasm-neighbour) in the same namespace writes the
  filter's key names without its prefix and counts requests; both stay exact.
- Numbers: an integer beyond 2^53 in pluginConfig reaches the module rounded; 1e21 is refused.
- Cluster-wide limits (the rate limit service): the pluginConfig's `rate_limit_service.cluster`
  is the outbound cluster Istio builds for the h2c Service port of mcp-ratelimit (HTTP/2 options as
  Istio sets them); the filter's gRPC callout reaches the real mcp-ratelimit through it (exactly 10 of 12
  calls of one grant admitted). Two controls fail as they must: the same cluster without HTTP/2
  (what a Service port Istio reads as HTTP/1.1 gets), and without `authority` (the `:authority` is
  then the cluster name, whose '|' makes mcp-ratelimit's HTTP/2 server reset the stream): every
  limited call is refused with `limiter_unavailable`.
- Header names with '_' (which CGI-style servers read as '-'): envoyfilter-underscores.yaml merged
  into the inbound HTTP connection manager; an allowed call carrying `x_mcp_grant` is answered 400
  by Envoy and reaches no server.
"""

from __future__ import annotations

import json

import pytest

from testkit import approvals as ha
from testkit import cases as shared_cases
from testkit import deploy as hd
from testkit import istio as ir
from testkit import rls as hr
from testkit.clock import avoid_minute_boundary
from testkit.envoy import POLICY_JSON, Envoy, load_policy
from testkit.jsonrpc import call_tool, get, parallel_posts, tool_call
from testkit.processes import HOST, free_port
from testkit.stack import Stack
from testkit.upstream import recorder_lines, recorder_reply

CASES = shared_cases.CASE_FILES
EXEC = {"node": "pve1", "vmid": 100, "command": "uptime"}
SEED = load_policy(POLICY_JSON)
PLUGIN = ir.load_manifest()
FILTER_NAME = f"{PLUGIN['metadata']['namespace']}.{PLUGIN['metadata']['name']}"
APPROVAL_CLUSTER = PLUGIN["spec"]["pluginConfig"]["gateway"]["approval"]["cluster"]
RLS_CLUSTER = PLUGIN["spec"]["pluginConfig"]["gateway"]["rate_limit_service"]["cluster"]


def local_limits(plugin_config: dict) -> dict:
    """The manifest's pluginConfig counting in shared data (without rate_limit_service)."""
    p = json.loads(json.dumps(plugin_config))
    p["gateway"].pop("rate_limit_service")
    return p


@pytest.fixture(scope="module")
def layout() -> hd.Layout:
    if not (hd.OCI_DIR / "index.json").is_file():
        pytest.fail(f"no OCI layout at {hd.OCI_DIR} (make oci)", pytrace=False)
    return hd.Layout(hd.OCI_DIR)


@pytest.fixture(scope="module")
def neighbour():
    if not hd.NEIGHBOUR_WASM.is_file():
        pytest.fail(f"{hd.NEIGHBOUR_WASM} is missing (make test-wasm-neighbour)", pytrace=False)
    return hd.NEIGHBOUR_WASM


def istio_envoy(stack: Stack, wasm, upstream_port: int, *, plugin_config=None, neighbour=None,
                concurrency: int = 2, approvals_port: int | None = None, rls_port: int | None = None,
                rls_http2: bool = True) -> Envoy:
    """Envoy on the Istio rendering of deploy/istio (the neighbour plugin first when given); the
    rate limit service's outbound cluster on `rls_port` (HTTP/2 unless `rls_http2` is false)."""
    plugins = []
    if neighbour is not None:
        plugins.append(("mcp.shared-data-neighbour", {"config": {
            "name": "mcp.shared-data-neighbour", "root_id": "",
            "vm_config": {"runtime": "envoy.wasm.runtime.v8", "code": {"local": {"filename": str(neighbour)}}},
            "failure_policy": "FAIL_CLOSED"}}))
    plugins.append((FILTER_NAME, ir.wasm_filter_config(PLUGIN, wasm, plugin_config=plugin_config)))
    rls = {RLS_CLUSTER: rls_port or free_port()}
    config = ir.bootstrap(plugins, stack.log_dir / stack._unique("ecds"), free_port(), free_port(),
                          upstream_port, clusters={APPROVAL_CLUSTER: approvals_port or free_port(),
                                                   **({} if rls_http2 else rls)},
                          h2_clusters=rls if rls_http2 else None)
    return stack.start_envoy(config, concurrency=concurrency, name="envoy-istio")


# ----------------------------------------------------------------------------------- image


def test_layout_is_the_compat_wasm_image_with_annotations(layout, wasm):
    m, config, layer = hd.one_layer(layout)
    assert hd.plugin_wasm_from_layer(layer) == wasm.read_bytes()
    a = m["annotations"]
    assert a["module.wasm.image/variant"] == "compat"
    assert a["org.opencontainers.image.version"] == hd.crate_version() == layout.tag
    assert a["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert a["org.opencontainers.image.source"]
    assert a["org.opencontainers.image.created"] == "1970-01-01T00:00:00Z"
    assert (config["os"], config["architecture"], config["created"]) == ("wasip1", "wasm", "1970-01-01T00:00:00Z")


def test_layout_is_reproducible(layout, wasm, tmp_path):
    again = hd.build_layout(wasm, tmp_path / "again")
    assert again.manifest_digest == layout.manifest_digest
    other_module = tmp_path / "other.wasm"
    other_module.write_bytes(wasm.read_bytes() + b"\x00\x04test")  # one more (custom) section
    assert hd.build_layout(other_module, tmp_path / "other").manifest_digest != layout.manifest_digest


def test_registry_round_trip_by_digest_loads_in_envoy(layout, wasm, stack, tmp_path):
    _, port = hd.start_registry(stack)
    pulled = hd.push_and_pull(layout, port, hd.REPOSITORY)
    digest = layout.manifest_digest
    assert pulled.manifest["annotations"]["module.wasm.image/variant"] == "compat"
    assert [x["mediaType"] for x in pulled.manifest["layers"]] == [hd.TAR_GZIP_LAYER]
    module = hd.plugin_wasm_from_layer(pulled.layer)
    assert module == wasm.read_bytes()
    # skopeo pulls the same digest back into a layout too (what `crane`/`oras`-style tools see).
    hd.skopeo("copy", "--src-tls-verify=false", f"docker://{HOST}:{port}/{hd.REPOSITORY}@{digest}",
              f"oci:{tmp_path / 'pulled'}:x")
    assert hd.Layout(tmp_path / "pulled").manifest_digest == digest

    fetched = tmp_path / "fetched.wasm"  # what istio-agent hands Envoy: a local file
    fetched.write_bytes(module)
    _, upstream_port, log = stack.recorder()
    envoy = istio_envoy(stack, fetched, upstream_port)
    ok = call_tool(envoy.mcp_url, "list_vms", "grant-a", id=1)
    assert (ok.status, ok.body) == (200, recorder_reply(1))
    denied = call_tool(envoy.mcp_url, "delete_vm", "grant-a", id=2)
    assert denied.error["data"]["kind"] == "denied"
    assert len(recorder_lines(log, settle=0.3)) == 1


# ----------------------------------------------------------------------------------- rendering


def test_plugin_config_is_the_seed_policy_as_struct_json():
    text = ir.wasm_filter_config(PLUGIN, "/x.wasm")["config"]["configuration"]["value"]
    assert '"max":10,' in text and "10.0" not in text
    seed = json.loads(json.dumps(SEED))
    seed["gateway"]["approval"]["cluster"] = APPROVAL_CLUSTER
    seed["gateway"]["approval"]["authority"] = "mcp-approvals-check.mcp-system.svc.cluster.local"
    seed["gateway"]["rate_limit_service"] = {"cluster": RLS_CLUSTER, "authority": "mcp-ratelimit.mcp-system.svc.cluster.local",
                                             "domain": "mcp", "timeout": "250ms", "failure_mode": "deny"}
    assert json.loads(text) == seed
    assert "vm_id" not in json.dumps(ir.wasm_filter_config(PLUGIN, "/x.wasm"))
    assert ir.wasm_filter_config(PLUGIN, "/x.wasm")["config"]["failure_policy"] == "FAIL_CLOSED"


def test_istio_cluster_name_of_the_check_service_reaches_mcp_approvals(stack, wasm):
    """The manifest's pluginConfig names the approval cluster the way Istio names a Service's
    cluster (`outbound|8096||FQDN`); the filter calls the real mcp-approvals through it."""
    svc = ha.approvals(stack)
    _, upstream_port, log = stack.recorder()
    envoy = istio_envoy(stack, wasm, upstream_port, approvals_port=svc.check_port)
    held = call_tool(envoy.mcp_url, "start_vm", "grant-i", {"node": "pve1", "vmid": 101}, id=7)
    assert held.error["data"]["kind"] == "approval_required", held.body
    (pending,) = svc.wait_pending(1)
    assert (pending["tool"], held.error["data"]["approval_url"].rsplit("/", 1)[-1]) == ("start_vm", pending["id"])
    svc.approve(pending["id"])
    again = call_tool(envoy.mcp_url, "start_vm", "grant-i", {"node": "pve1", "vmid": 101}, id=8)
    assert (again.status, again.body) == (200, recorder_reply(8))
    assert len(recorder_lines(log)) == 1


def test_shared_cases_replay_through_the_istio_rendering(stack, wasm, neighbour):
    ran = 0
    for policy, paths, control in shared_cases.by_policy():
        _, upstream_port, upstream_log = stack.recorder()
        envoy = istio_envoy(stack, wasm, upstream_port, plugin_config=policy, neighbour=neighbour)
        done = shared_cases.replay(envoy.listen_port, upstream_log, paths, control=control)
        assert done.stdout.splitlines()[-1:] == [f"{len(paths)} passed, 0 failed"], done.stdout + done.stderr
        ran += len(paths)
        envoy.stop()
    assert ran == len(CASES) >= 23


def test_neighbour_plugin_shares_the_namespace_without_collisions(stack, wasm, neighbour):
    """Both plugins without vm_id on one proxy, 2 workers: the neighbour's `lock`/`grants` (the
    filter's names without prefix) stay junk, its request count stays exact, and the filter's rate
    limit stays exact (10 of 14 calls of one grant admitted, the rest rate_limited)."""
    _, upstream_port, log = stack.recorder()
    envoy = istio_envoy(stack, wasm, upstream_port, neighbour=neighbour,
                        plugin_config=local_limits(PLUGIN["spec"]["pluginConfig"]))
    before = get(f"{envoy.url}/neighbour", {}).json()
    assert before == {"count": 0, "lock": "junk", "grants": "junk", "filter_grants": None}, before
    avoid_minute_boundary(margin=10)
    calls = [("grant-n", tool_call("vm_agent_exec", EXEC, id=i)) for i in range(14)]
    calls += [("grant-m", tool_call("list_vms", {}, id=100 + i)) for i in range(6)]
    replies = parallel_posts(envoy.mcp_url, calls, threads=10)
    ok = [i for i, r in enumerate(replies) if r.status == 200 and r.body == recorder_reply(json.loads(calls[i][1])["id"])]
    limited = [i for i, r in enumerate(replies) if r.status == 200 and b'"rate_limited"' in r.body]
    assert len([i for i in ok if i < 14]) == 10 and len(limited) == 4 and len(ok) == 16, [r.body[:120] for r in replies]
    assert len(recorder_lines(log, settle=0.3)) == 16
    after = get(f"{envoy.url}/neighbour", {}).json()
    # Each grant that called a limited tool is tracked once (grant-m only called list_vms).
    assert after == {"count": 20, "lock": "junk", "grants": "junk", "filter_grants": 1}, after


# ----------------------------------------------------------------------------------- numbers


def test_integer_beyond_2_53_reaches_the_module_rounded(stack, wasm):
    """pluginConfig value 9007199254740993 (2^53 + 1) arrives as 9007199254740992: the deny rule
    fires for vmid 2^53, and for the number the operator wrote only because conditions are also
    judged on the binary64 reading of the argument (as servers read it), where 2^53 + 1 is 2^53;
    vmid 2^53 + 2 (a double of its own) passes."""
    policy = {"version": "1", "default": "deny", "tools": {"vm_agent_exec": {"deny_if": [
        {"path": "args.vmid", "op": "eq", "value": 2**53 + 1, "reason": "protected VM"}]}}}
    assert '"value":9007199254740992' in ir.struct_json(policy)
    _, upstream_port, _ = stack.recorder()
    envoy = istio_envoy(stack, wasm, upstream_port, plugin_config=policy)
    hit = call_tool(envoy.mcp_url, "vm_agent_exec", "g", {**EXEC, "vmid": 2**53}, id=1)
    assert hit.error["data"]["kind"] == "denied"
    also = call_tool(envoy.mcp_url, "vm_agent_exec", "g", {**EXEC, "vmid": 2**53 + 1}, id=2)
    assert also.error["data"]["kind"] == "denied"
    missed = call_tool(envoy.mcp_url, "vm_agent_exec", "g", {**EXEC, "vmid": 2**53 + 2}, id=3)
    assert (missed.status, missed.body) == (200, recorder_reply(3))


def test_integer_at_1e21_becomes_an_exponent_and_the_plugin_fails_closed(stack, wasm):
    """`max: 1e21` reaches the module as "1e+21", which the policy refuses (not an integer). Over
    ECDS the update is rejected, Envoy keeps running without the filter's config, and the chain
    answers 500 with nothing forwarded (Istio's FAIL_CLOSE would serve its deny-all default)."""
    policy = {"version": "1", "tools": {"x": {"limits": [{"counter": "c", "window": "minute", "max": 10**21}]}}}
    assert '"max":1e+21' in ir.struct_json(policy)
    _, upstream_port, log = stack.recorder()
    envoy = istio_envoy(stack, wasm, upstream_port, plugin_config=policy)
    r = call_tool(envoy.mcp_url, "x", "g", id=1)
    assert (r.status, r.body) == (500, b"")
    assert recorder_lines(log, settle=0.3) == []
    assert "invalid policy at tools.x.limits[0].max: invalid type: floating point `1e+21`, expected u64" in envoy.log_text()
    stat = f"extension_config_discovery.http_filter.{FILTER_NAME}.update_rejected"
    assert envoy.admin_get(f"/stats?filter=^{stat}$")[1].strip() == f"{stat}: 1"


# ----------------------------------------------------------------------------------- cluster-wide limits


def test_rate_limit_service_cluster_reaches_mcp_ratelimit_over_http2(stack, wasm):
    """12 calls of vm_agent_exec (max 10 a minute per grant) through the Istio rendering: the real
    mcp-ratelimit decides; 10 reach the server, 2 are rate_limited; a second grant has its own."""
    rls = hr.start_rls(stack, None)
    _, upstream_port, log = stack.recorder()
    envoy = istio_envoy(stack, wasm, upstream_port, rls_port=rls.port)
    avoid_minute_boundary(margin=10)
    replies = [call_tool(envoy.mcp_url, "vm_agent_exec", "grant-rls", EXEC, id=i) for i in range(12)]
    kinds = [r.error["data"]["kind"] if b'"error"' in r.body else "ok" for r in replies]
    assert kinds == ["ok"] * 10 + ["rate_limited"] * 2, [r.body[:160] for r in replies]
    other = call_tool(envoy.mcp_url, "vm_agent_exec", "grant-other", EXEC, id=99)
    assert (other.status, other.body) == (200, recorder_reply(99))
    assert len(recorder_lines(log, settle=0.3)) == 11
    metrics = rls.metrics()
    assert 'mcp_ratelimit_decisions_total{code="ok"} 11' in metrics, metrics
    assert 'mcp_ratelimit_decisions_total{code="over_limit"} 2' in metrics, metrics


@pytest.mark.parametrize("broken", ["no HTTP/2", "no authority"])
def test_rate_limit_service_cluster_without_http2_or_authority_refuses_limited_calls(stack, wasm, broken):
    """The same cluster as Istio builds it for a port it reads as HTTP/1.1 (e.g. named `http-rls`),
    or the manifest without `authority`: the gRPC callout cannot work, every limited call is refused
    (failure_mode deny), nothing is counted and nothing forwarded; calls without limits pass."""
    rls = hr.start_rls(stack, None)
    _, upstream_port, log = stack.recorder()
    config = json.loads(json.dumps(PLUGIN["spec"]["pluginConfig"]))
    if broken == "no authority":
        config["gateway"]["rate_limit_service"].pop("authority")
    envoy = istio_envoy(stack, wasm, upstream_port, rls_port=rls.port, rls_http2=broken != "no HTTP/2",
                        plugin_config=config)
    r = call_tool(envoy.mcp_url, "vm_agent_exec", "grant-h1", EXEC, id=1)
    assert r.error["data"]["kind"] == "limiter_unavailable", r.body
    ok = call_tool(envoy.mcp_url, "list_vms", "grant-h1", id=2)
    assert (ok.status, ok.body) == (200, recorder_reply(2))
    assert len(recorder_lines(log, settle=0.3)) == 1
    assert 'mcp_ratelimit_decisions_total{code="ok"} 0' in rls.metrics()


def test_native_envoyfilter_loads_the_module_and_reaches_mcp_approvals(stack):
    """deploy/istio/native: the DynamicModuleFilter its EnvoyFilter inserts (and no buffer), in this
    Envoy 1.40 (the module from its path, as the sidecar mounts it), with the approval cluster named
    as Istio names it: allowed, denied and held calls as in the wasm rendering."""
    from testkit.native import native_path

    module = native_path()
    assert module.is_file(), f"{module} is missing (make dynamic-module)"
    svc = ha.approvals(stack)
    _, upstream_port, log = stack.recorder()
    config = ir.bootstrap([], stack.log_dir / stack._unique("ecds"), free_port(), free_port(), upstream_port,
                          clusters={APPROVAL_CLUSTER: svc.check_port},
                          native=ir.native_filters_from_envoyfilter(module))
    envoy = stack.start_envoy(config, name="envoy-istio-native")
    assert "Dynamic module ABI version" in envoy.log_text() and "matched" in envoy.log_text()
    ok = call_tool(envoy.mcp_url, "list_vms", "grant-istio", id=1)
    assert (ok.status, ok.body) == (200, recorder_reply(1))
    assert call_tool(envoy.mcp_url, "delete_vm", "grant-istio", id=2).error["data"]["kind"] == "denied"
    held = call_tool(envoy.mcp_url, "start_vm", "grant-istio", {"node": "pve1", "vmid": 101}, id=3)
    assert held.error["data"]["kind"] == "approval_required", held.body
    (pending,) = svc.wait_pending(1)
    assert pending["tool"] == "start_vm"
    assert len(recorder_lines(log, settle=0.3)) == 1


def test_header_names_with_underscores_are_answered_400_before_any_server(stack, wasm):
    """envoyfilter-underscores.yaml's REJECT_REQUEST: an allowed call carrying `x_mcp_grant` (or
    `x-mcp_grant`) is refused by Envoy (400) and no upstream request is opened; the same call
    without that header passes."""
    _, upstream_port, log = stack.recorder()
    envoy = istio_envoy(stack, wasm, upstream_port)
    hd.assert_underscore_headers_refused(envoy, log, "grant-istio")
    upstream = f"cluster.{ir.INBOUND_CLUSTER}.upstream_rq_total"
    assert envoy.admin_get(f"/stats?filter=^{upstream}$".replace("|", "[|]"))[1].strip() == f"{upstream}: 1"
