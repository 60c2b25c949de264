"""Tier 1 (no Envoy), deploy: every manifest under deploy/ is valid, consistent and
listed in its kustomization; the mcp-approvals and mcp-ratelimit Dockerfiles pass hadolint.

- Custom resources: tools/deploy-validate/validate.mjs, against the CRD schemas of pinned npm
  packages (@kubernetes-models/istio 3.0.1 = Istio 1.29.2's CRDs, @kubernetes-models/envoy-gateway
  2.0.0, @kubernetes-models/gateway-api 2.0.0), plus a TypeScript check that refuses unknown fields.
- Kubernetes kinds: PyPI kubernetes-validate 1.37.0 (the Kubernetes OpenAPI schemas), strict
  (unknown fields refused), for Kubernetes 1.31 and 1.37.
- Each validator is shown to refuse a broken copy, so a pass means something.
- The policy in the Istio and Envoy Gateway manifests is the seed policy (envoy/policy.json) but
  for the approval cluster, and that cluster names the Service of deploy/kubernetes.
- Header names with '_' are refused by Envoy on both platforms, as in envoy/envoy.yaml:
  Envoy Gateway's ClientTrafficPolicy `withUnderscoresAction: RejectRequest` on the Gateway, Istio's
  EnvoyFilter merging `headers_with_underscores_action: REJECT_REQUEST` into the inbound HCM.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from testkit.envoy import POLICY_JSON, load_policy
from testkit.paths import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
VALIDATOR = REPO_ROOT / "tools" / "deploy-validate" / "validate.mjs"
DOCKERFILE = REPO_ROOT / "services" / "approvals" / "Dockerfile"
HADOLINT = REPO_ROOT / ".venv" / "bin" / "hadolint"
K8S_VERSIONS = ["1.31.0", "1.37.0"]
# The kustomizations a user applies: deploy/kubernetes (mcp-approvals on SQLite, the default) or
# deploy/kubernetes/postgres (on PostgreSQL), then deploy/istio or deploy/envoy-gateway (the wasm
# build), or their native/ folders (the native build, an Envoy dynamic module).
# deploy/istio/identity and deploy/envoy-gateway/identity are applied after their platform's base:
# each replaces the base's filter resource (same name) with a policy set on verified identities.
OVERLAYS = ["istio/identity", "envoy-gateway/identity"]
DIRS = ["istio", "envoy-gateway", "kubernetes", "kubernetes/postgres", "istio/native", "envoy-gateway/native",
        *OVERLAYS]
ISTIO_NATIVE, EG_NATIVE = "istio/native", "envoy-gateway/native"
# Envoy Gateway fields newer than the pinned models (dynamic modules, Envoy Gateway v1.8+): their
# schemas from Envoy Gateway v1.9.0's CRDs.
NEWER_FIELDS = REPO_ROOT / "tools" / "deploy-validate" / "envoy-gateway-v1.9.0-newer-fields.json"
SQLITE, POSTGRES = "kubernetes", "kubernetes/postgres"
SEED = load_policy(POLICY_JSON)


def listed(d: str) -> list[Path]:
    """The files the kustomization of deploy/`d` lists, through the directories it lists (each a
    kustomization of its own, as kustomize reads them), in order."""
    root = (DEPLOY / d).resolve()
    k = yaml.safe_load((root / "kustomization.yaml").read_text(encoding="utf-8"))
    assert k["apiVersion"] == "kustomize.config.k8s.io/v1beta1" and k["kind"] == "Kustomization"
    assert set(k) == {"apiVersion", "kind", "resources"}, "only plain resources: no generators or patches to check"
    out: list[Path] = []
    for r in k["resources"]:
        p = (root / r).resolve()
        if p.is_dir():
            out += listed(str(p.relative_to(DEPLOY.resolve())))
        else:
            # kustomize loads files only from the kustomization's own directory tree.
            assert p.is_relative_to(root), f"{d}: {r} is outside its kustomization root"
            out.append(p)
    return out


def docs(paths: list[Path]) -> list[tuple[Path, dict]]:
    return [(p, d) for p in paths for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]


def all_docs() -> list[tuple[Path, dict]]:
    """Every document of every kustomization, each file once (the variants share files)."""
    return docs(list(dict.fromkeys(p for d in DIRS for p in listed(d))))


def by_kind(kind: str, name: str | None = None, variant: str | None = None) -> dict:
    """The one resource of `kind` (and `name`), among the files of kustomization `variant` if given,
    else among those of every kustomization but the identity overlays."""
    bases = [d for d in DIRS if d not in OVERLAYS]
    pool = docs(listed(variant)) if variant else docs(list(dict.fromkeys(p for d in bases for p in listed(d))))
    found = [d for _, d in pool if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, variant, len(found))
    return found[0]


def node() -> str:
    found = shutil.which("node")
    assert found, "node is missing"
    return found


def run_validator(paths: list[Path]) -> subprocess.CompletedProcess:
    if not (VALIDATOR.parent / "node_modules" / ".installed").is_file():
        pytest.fail("tools/deploy-validate is not installed (make deploy-deps)", pytrace=False)
    return subprocess.run([node(), str(VALIDATOR), *map(str, paths)], capture_output=True, text=True, timeout=120)


# ----------------------------------------------------------------------------------- kustomizations


@pytest.mark.parametrize("d", ["istio", "envoy-gateway", "kubernetes"])
def test_kustomization_lists_every_manifest_of_its_folder(d):
    files = [p for v in DIRS if v.split("/")[0] == d for p in listed(v)]
    assert all(p.is_file() for p in files), files
    on_disk = {p.resolve() for p in (DEPLOY / d).rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert set(files) == on_disk


@pytest.mark.parametrize("d", DIRS)
def test_no_resource_twice_in_a_kustomization(d):
    """kustomize refuses two resources with one kind, namespace and name in one build."""
    ids = [(x["kind"], x["metadata"].get("namespace"), x["metadata"]["name"]) for _, x in docs(listed(d))]
    assert len(ids) == len(set(ids)), ids


def test_every_resource_names_its_namespace():
    for path, d in all_docs():
        if d["kind"] != "Namespace":
            assert d["metadata"].get("namespace"), f"{path}: {d['kind']}/{d['metadata']['name']} has no namespace"


# ----------------------------------------------------------------------------------- schemas


def is_custom(d: dict) -> bool:
    """A custom resource: Istio's, Envoy Gateway's or Gateway API's (not built into Kubernetes)."""
    group = d["apiVersion"].split("/")[0]
    return group.endswith(".istio.io") or group in ("gateway.envoyproxy.io", "gateway.networking.k8s.io")


def newer_fields(d: dict) -> dict:
    """The fields of `d` that the pinned Envoy Gateway models predate: `{field: value}` of its spec."""
    schemas = json.loads(NEWER_FIELDS.read_text(encoding="utf-8"))
    spec = d.get("spec", {})
    newer = dict(schemas.get(d["kind"], {})) if d["apiVersion"].startswith("gateway.envoyproxy.io/") else {}
    # filterOrder is as old as the models, but its filter names grew with dynamic modules: an
    # EnvoyProxy that registers modules has it checked against v1.9.0's list.
    return {f: spec[f] for f in newer if f in spec and (f != "filterOrder" or "dynamicModules" in spec)}


def without_newer_fields(d: dict) -> dict:
    out = json.loads(json.dumps(d))
    for f in newer_fields(d):
        out["spec"].pop(f)
    return out


def test_custom_resources_match_the_pinned_crd_schemas(tmp_path):
    """Every custom resource against the pinned models; a resource with fields newer than them
    (deploy/envoy-gateway/native's dynamic modules) is checked here without those fields, and the
    fields by `test_newer_envoy_gateway_fields_match_envoy_gateway_1_9`."""
    crds = [d for _, d in all_docs() if is_custom(d)]
    paths = sorted({p for p, d in all_docs() if is_custom(d) and not newer_fields(d)})
    for i, d in enumerate(d for d in crds if newer_fields(d)):
        stripped = tmp_path / f"newer-{i}-{d['kind']}.yaml"
        stripped.write_text(yaml.safe_dump(without_newer_fields(d), sort_keys=False), encoding="utf-8")
        paths.append(stripped)
    done = run_validator(paths)
    assert done.returncode == 0, done.stdout + done.stderr
    oks = [line for line in done.stdout.splitlines() if line.startswith("ok   ")]
    assert len(oks) == len(crds) == 21, done.stdout
    assert done.stdout.splitlines()[-1] == f"deploy-validate: {len(crds)} of {len(crds)} resources valid"


def strict(schema):
    """An OpenAPI v3 schema of a CRD as a JSON Schema that refuses unknown fields, as the API server
    prunes them (but where the schema preserves them, e.g. a dynamic module's `config`)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
        if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(x) for x in schema]
    return schema


def newer_field_errors(d: dict) -> list[str]:
    import jsonschema

    schemas = json.loads(NEWER_FIELDS.read_text(encoding="utf-8"))[d["kind"]]
    errors = []
    for field, value in newer_fields(d).items():
        v = jsonschema.Draft7Validator(strict(schemas[field]))
        errors += [f"/spec/{field}/{'/'.join(map(str, e.path))}: {e.message}" for e in v.iter_errors(value)]
    return errors


def test_newer_envoy_gateway_fields_match_envoy_gateway_1_9():
    proxy, policy = by_kind("EnvoyProxy", variant=EG_NATIVE), by_kind("EnvoyExtensionPolicy", variant=EG_NATIVE)
    assert set(newer_fields(proxy)) == {"dynamicModules", "filterOrder"}
    assert set(newer_fields(policy)) == {"dynamicModule"}
    assert newer_field_errors(proxy) == newer_field_errors(policy) == []


def test_newer_field_check_refuses_bad_values_and_unknown_fields():
    proxy = json.loads(json.dumps(by_kind("EnvoyProxy", variant=EG_NATIVE)))
    proxy["spec"]["dynamicModules"][0]["source"]["local"]["pth"] = "/x.so"
    proxy["spec"]["filterOrder"][0]["after"] = "envoy.filters.http.dynamic_module"
    policy = json.loads(json.dumps(by_kind("EnvoyExtensionPolicy", variant=EG_NATIVE)))
    policy["spec"]["dynamicModule"][0]["name"] = "MCP_Policy"
    errors = newer_field_errors(proxy) + newer_field_errors(policy)
    assert len(errors) == 3, errors
    assert "Additional properties are not allowed ('pth' was unexpected)" in errors[0]
    assert errors[1].startswith("/spec/filterOrder/0/after: 'envoy.filters.http.dynamic_module' is not one of")
    assert errors[2].startswith("/spec/dynamicModule/0/name: 'MCP_Policy' does not match")


def test_crd_validator_refuses_bad_enums_and_unknown_fields(tmp_path):
    plugin = (DEPLOY / "istio" / "wasmplugin.yaml").read_text(encoding="utf-8")
    (tmp_path / "enum.yaml").write_text(plugin.replace("failStrategy: FAIL_CLOSE", "failStrategy: FAIL_SOMETIMES"))
    (tmp_path / "field.yaml").write_text(plugin.replace("  phase: AUTHZ", "  phaze: AUTHZ"))
    route = (DEPLOY / "envoy-gateway" / "common" / "httproute.yaml").read_text(encoding="utf-8")
    (tmp_path / "nested.yaml").write_text(route.replace("      request: 0s", "      requets: 0s"))
    done = run_validator(sorted(tmp_path.glob("*.yaml")))
    out = done.stdout
    assert done.returncode == 1, out
    assert "enum.yaml WasmPlugin/mcp-policy-filter: schema: /spec/failStrategy must be equal to one of the allowed values" in out
    assert "field.yaml WasmPlugin/mcp-policy-filter: fields:" in out and "'\"phaze\"' does not exist" in out
    assert "nested.yaml HTTPRoute/mcp: fields:" in out and "'\"requets\"' does not exist" in out
    assert out.splitlines()[-1] == "deploy-validate: 0 of 3 resources valid"


def core_docs() -> list[tuple[Path, dict]]:
    return [(p, d) for p, d in all_docs() if not is_custom(d)]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubernetes_resources_match_the_openapi_schemas_strictly(version):
    checked = []
    for path, d in core_docs():
        kubernetes_validate.validate(d, version, strict=True)  # raises ValidationError
        checked.append(f"{d['kind']}/{d['metadata']['name']}")
    assert sorted(checked) == ["ConfigMap/mcp-approvals-postgres-init",
                               "Deployment/mcp-approvals", "Deployment/mcp-approvals",  # SQLite, PostgreSQL
                               "Deployment/mcp-ratelimit",
                               "Deployment/mcp-ratelimit-redis", "Namespace/mcp-system",
                               "NetworkPolicy/mcp-approvals", "NetworkPolicy/mcp-approvals-postgres",
                               "NetworkPolicy/mcp-ratelimit",
                               "NetworkPolicy/mcp-ratelimit-redis", "PersistentVolumeClaim/mcp-approvals-data",
                               "PersistentVolumeClaim/mcp-ratelimit-redis-data", "PodDisruptionBudget/mcp-approvals",
                               "Service/mcp-approvals", "Service/mcp-approvals-check",
                               "Service/mcp-approvals-postgres", "Service/mcp-ratelimit", "Service/mcp-ratelimit-redis",
                               "StatefulSet/mcp-approvals-postgres"]


def test_kubernetes_validator_refuses_unknown_fields_and_bad_types():
    dep = json.loads(json.dumps(by_kind("Deployment", "mcp-approvals", SQLITE)))
    dep["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsNonroot"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, K8S_VERSIONS[-1], strict=True)
    dep = json.loads(json.dumps(by_kind("Deployment", "mcp-approvals", SQLITE)))
    dep["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, K8S_VERSIONS[-1], strict=True)


# ----------------------------------------------------------------------------------- consistency


def without_approval_cluster(policy: dict) -> dict:
    """`policy` without the platform's cluster names: the approval cluster, and the rate limit
    service (the seed policy counts in shared data; the manifests use mcp-ratelimit)."""
    p = json.loads(json.dumps(policy))
    p["gateway"]["approval"].pop("cluster")
    p["gateway"]["approval"].pop("authority", None)
    p["gateway"].pop("rate_limit_service", None)
    return p


def test_manifests_carry_the_seed_policy_and_name_the_check_service():
    istio = by_kind("WasmPlugin")["spec"]["pluginConfig"]
    eg = by_kind("EnvoyExtensionPolicy", variant="envoy-gateway")["spec"]["wasm"][0]["config"]
    assert without_approval_cluster(istio) == without_approval_cluster(eg) == without_approval_cluster(SEED)
    svc = by_kind("Service", "mcp-approvals-check")
    (port,) = svc["spec"]["ports"]
    fqdn = f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local"
    assert istio["gateway"]["approval"]["cluster"] == f"outbound|{port['port']}||{fqdn}"
    assert istio["gateway"]["approval"]["authority"] == fqdn  # Istio's cluster name is no valid host
    patch = by_kind("EnvoyPatchPolicy", "mcp-approvals-cluster")["spec"]["jsonPatches"][0]
    cluster = patch["operation"]["value"]
    assert eg["gateway"]["approval"]["cluster"] == patch["name"] == cluster["name"] == SEED["gateway"]["approval"]["cluster"]
    (ep,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert ep["endpoint"]["address"]["socket_address"] == {"address": fqdn, "port_value": port["port"]}


@pytest.mark.parametrize("variant", [SQLITE, POSTGRES])
def test_check_port_is_reachable_only_from_the_gateway_pods(variant):
    dep = by_kind("Deployment", "mcp-approvals", variant)
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert f"--check-listen=0.0.0.0:{ports['check']}" in c["args"] and f"--listen=0.0.0.0:{ports['page']}" in c["args"]
    np = by_kind("NetworkPolicy", "mcp-approvals", variant)
    assert np["spec"]["podSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    assert np["spec"]["policyTypes"] == ["Ingress"]
    (check_rule,) = [r for r in np["spec"]["ingress"] if r["ports"] == [{"protocol": "TCP", "port": ports["check"]}]]
    sources = check_rule["from"]
    assert sources and all("namespaceSelector" in s and "podSelector" in s for s in sources)
    wasm_selector = by_kind("WasmPlugin")["spec"]["selector"]["matchLabels"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": by_kind("WasmPlugin")["metadata"]["namespace"]}},
            "podSelector": {"matchLabels": wasm_selector}} in sources
    # Every other rule is for the page port only.
    assert all(r["ports"] == [{"protocol": "TCP", "port": ports["page"]}] for r in np["spec"]["ingress"] if r is not check_rule)


@pytest.mark.parametrize("variant", [SQLITE, POSTGRES])
def test_approvals_pod_runs_non_root_with_probes_and_resources(variant):
    spec = by_kind("Deployment", "mcp-approvals", variant)["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 65532
    # The approvers' Secret is mounted 0440: readable by the pod's uid only through fsGroup.
    assert spec["securityContext"]["fsGroup"] == 65532
    (approvers,) = [v for v in spec["volumes"] if v["name"] == "approvers"]
    assert approvers["secret"] == {"secretName": "mcp-approvals-approvers", "defaultMode": 0o440}
    sc = c["securityContext"]
    assert sc == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "check"}
    if variant == SQLITE:
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    else:  # a database outage must not restart every replica (readiness takes them out)
        assert c["livenessProbe"] == {"tcpSocket": {"port": "page"}, "initialDelaySeconds": 5, "periodSeconds": 10,
                                      "failureThreshold": 3}
    assert set(c["resources"]["requests"]) == {"cpu", "memory"} and "memory" in c["resources"]["limits"]


def test_istio_and_envoy_gateway_settings():
    plugin = by_kind("WasmPlugin")["spec"]
    assert (plugin["failStrategy"], plugin["phase"], plugin["type"]) == ("FAIL_CLOSE", "AUTHZ", "HTTP")
    assert plugin["selector"]["matchLabels"] == {"app": "mcp-server"}
    (route,) = by_kind("VirtualService")["spec"]["http"]
    assert route["timeout"] == "0s"
    assert by_kind("HTTPRoute")["spec"]["rules"][0]["timeouts"] == {"request": "0s"}
    assert by_kind("EnvoyExtensionPolicy", variant="envoy-gateway")["spec"]["wasm"][0]["failOpen"] is False
    assert by_kind("EnvoyProxy", variant="envoy-gateway")["spec"]["filterOrder"] == [
        {"name": "envoy.filters.http.buffer", "after": "envoy.filters.http.wasm"}]
    # Both buffers stay above the policy's default 1 MiB body limit (the filter answers oversize).
    assert by_kind("BackendTrafficPolicy")["spec"]["requestBuffer"]["limit"] == "4Mi"
    patch = by_kind("EnvoyFilter", "mcp-policy-buffer")["spec"]["configPatches"][0]["patch"]["value"]
    assert patch["typed_config"]["max_request_bytes"] == 4 * 1024 * 1024


# ----------------------------------------------------------------------------------- the native build


def native_istio_patches() -> tuple[dict, dict]:
    """The module's and the buffer's patch of deploy/istio/native's EnvoyFilter, in that order."""
    module, buffer = by_kind("EnvoyFilter", "mcp-policy-native", ISTIO_NATIVE)["spec"]["configPatches"]
    return module, buffer


def test_native_manifests_carry_the_seed_policy_without_the_rate_limit_service():
    """The native build refuses `gateway.rate_limit_service` (a gRPC callout), so its manifests carry
    the seed policy without it, and the approval cluster of their platform's wasm manifest."""
    module, _ = native_istio_patches()
    istio = json.loads(module["patch"]["value"]["typed_config"]["filter_config"]["value"])
    (dm,) = by_kind("EnvoyExtensionPolicy", variant=EG_NATIVE)["spec"]["dynamicModule"]
    eg = dm["config"]
    for native in (istio, eg):
        assert "rate_limit_service" not in native["gateway"]
        assert without_approval_cluster(native) == without_approval_cluster(SEED)
    assert istio["gateway"]["approval"] == by_kind("WasmPlugin")["spec"]["pluginConfig"]["gateway"]["approval"]
    wasm_eg = by_kind("EnvoyExtensionPolicy", variant="envoy-gateway")["spec"]["wasm"][0]["config"]
    assert eg["gateway"]["approval"] == wasm_eg["gateway"]["approval"]


def test_native_istio_filter_loads_the_module_before_the_buffer():
    module, buffer = native_istio_patches()
    wasm_buffer = by_kind("EnvoyFilter", "mcp-policy-buffer", "istio")["spec"]["configPatches"][0]
    # Both before the router, module first: the buffer then holds what the module let through.
    for patch in (module, buffer):
        assert patch["applyTo"] == "HTTP_FILTER" and patch["patch"]["operation"] == "INSERT_BEFORE"
        assert patch["match"] == wasm_buffer["match"]
    assert buffer == wasm_buffer
    tc = module["patch"]["value"]["typed_config"]
    assert module["patch"]["value"]["name"] == "mcp_policy"
    assert tc["@type"] == "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter"
    assert (tc["filter_name"], tc["filter_config"]["@type"]) == ("mcp_policy", "type.googleapis.com/google.protobuf.StringValue")
    assert tc["dynamic_module_config"] == {"name": "mcp_policy_native", "do_not_close": True,
                                           "module": {"local": {"filename": "/etc/istio/modules/libmcp_policy_native.so"}}}
    ef = by_kind("EnvoyFilter", "mcp-policy-native", ISTIO_NATIVE)
    plugin = by_kind("WasmPlugin", variant="istio")
    assert ef["spec"]["workloadSelector"] == {"labels": plugin["spec"]["selector"]["matchLabels"]}
    assert ef["metadata"]["namespace"] == plugin["metadata"]["namespace"]


def test_native_envoy_gateway_registers_mounts_and_orders_the_module():
    proxy = by_kind("EnvoyProxy", variant=EG_NATIVE)["spec"]
    (dm,) = by_kind("EnvoyExtensionPolicy", variant=EG_NATIVE)["spec"]["dynamicModule"]
    (entry,) = proxy["dynamicModules"]
    assert (dm["name"], dm["filterName"]) == (entry["name"], "mcp_policy")
    assert entry["doNotClose"] is True and entry["source"]["type"] == "Local"
    path = Path(entry["source"]["local"]["path"])
    assert path.name == "libmcp_policy_native.so"
    dep = proxy["provider"]["kubernetes"]["envoyDeployment"]
    (mount,) = dep["container"]["volumeMounts"]
    assert (Path(mount["mountPath"]), mount["readOnly"]) == (path.parent, True)
    (init,) = dep["initContainers"]
    (init_mount,) = init["volumeMounts"]
    assert init_mount["name"] == mount["name"] and init["command"][-1] == f"{init_mount['mountPath']}/{path.name}"
    assert [v["name"] for v in dep["pod"]["volumes"]] == [mount["name"]]
    # A module built for Envoy 1.40 loads in 1.40 and 1.41 only.
    assert dep["container"]["image"].rsplit(":", 1)[1].startswith(("distroless-v1.40.", "distroless-v1.41."))
    assert proxy["filterOrder"] == [{"name": "envoy.filters.http.buffer", "after": "envoy.filters.http.dynamic_modules"}]
    # The Gateway of ../common uses this EnvoyProxy, by name.
    gw = by_kind("Gateway", variant=EG_NATIVE)
    assert gw["spec"]["infrastructure"]["parametersRef"]["name"] == by_kind("EnvoyProxy", variant=EG_NATIVE)["metadata"]["name"]
    wasm_env = by_kind("EnvoyProxy", variant="envoy-gateway")["spec"]["provider"]["kubernetes"]["envoyDeployment"]
    assert dep["container"]["env"] == wasm_env["container"]["env"]


# ----------------------------------------------------------------------------------- header names with '_'


def test_envoy_gateway_rejects_header_names_with_underscores_on_the_gateway():
    """A request with `x_mcp_grant` or `authorization` spelled with '_' is refused by Envoy, as in
    envoy/envoy.yaml (headers_with_underscores_action: REJECT_REQUEST), before the filter runs."""
    ctp = by_kind("ClientTrafficPolicy", variant="envoy-gateway")
    gw = by_kind("Gateway", variant="envoy-gateway")
    assert ctp["metadata"] == {"name": "mcp-reject-underscore-headers", "namespace": gw["metadata"]["namespace"]}
    assert ctp["spec"] == {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gw["metadata"]["name"]}],
        "headers": {"withUnderscoresAction": "RejectRequest",
                    # The verified token's payload header: only jwt_authn may write it (identity/).
                    "earlyRequestHeaders": {"remove": ["x-jwt-payload"]}}}


def test_istio_rejects_header_names_with_underscores_on_the_inbound_listener():
    ef = by_kind("EnvoyFilter", "mcp-reject-underscore-headers", "istio")
    buffer = by_kind("EnvoyFilter", "mcp-policy-buffer", "istio")
    plugin = by_kind("WasmPlugin", variant="istio")
    assert ef["metadata"]["namespace"] == buffer["metadata"]["namespace"] == plugin["metadata"]["namespace"]
    # The same workloads and listener as the filter and its buffer.
    assert ef["spec"]["workloadSelector"] == buffer["spec"]["workloadSelector"] == {
        "labels": plugin["spec"]["selector"]["matchLabels"]}
    buffer_listener = buffer["spec"]["configPatches"][0]["match"]["listener"]
    assert ef["spec"]["configPatches"] == [{
        "applyTo": "NETWORK_FILTER",
        "match": {"context": "SIDECAR_INBOUND", "listener": {
            "portNumber": buffer_listener["portNumber"],
            "filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager"}}}},
        "patch": {"operation": "MERGE", "value": {"typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "common_http_protocol_options": {"headers_with_underscores_action": "REJECT_REQUEST"}}}}}]
    assert buffer_listener["portNumber"] == 8000


def test_crd_validator_refuses_a_bad_underscores_action(tmp_path):
    ctp = (DEPLOY / "envoy-gateway" / "common" / "clienttrafficpolicy.yaml").read_text(encoding="utf-8")
    assert "withUnderscoresAction: RejectRequest\n" in ctp
    (tmp_path / "enum.yaml").write_text(ctp.replace("withUnderscoresAction: RejectRequest",
                                                    "withUnderscoresAction: REJECT_REQUEST"))
    done = run_validator([tmp_path / "enum.yaml"])
    out = done.stdout
    assert done.returncode == 1, out
    assert ("enum.yaml ClientTrafficPolicy/mcp-reject-underscore-headers: schema: /spec/headers/withUnderscoresAction "
            "must be equal to one of the allowed values") in out, out
    assert out.splitlines()[-1] == "deploy-validate: 0 of 1 resources valid"


# ----------------------------------------------------------------------------------- Dockerfile


def hadolint(path: Path) -> subprocess.CompletedProcess:
    if not HADOLINT.is_file():
        pytest.fail(f"{HADOLINT} is missing (make deploy-deps)", pytrace=False)
    return subprocess.run([str(HADOLINT), "--no-color", str(path)], capture_output=True, text=True, timeout=60)


def final_stage(dockerfile: Path) -> list[str]:
    """The lines (but blank and comment ones) of the last of `dockerfile`'s two stages, once hadolint
    finds nothing to say and the first stage is named `build`."""
    done = hadolint(dockerfile)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    lines = [ln.strip() for ln in dockerfile.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.startswith("#")]
    froms = [ln for ln in lines if ln.startswith("FROM ")]
    assert len(froms) == 2 and froms[0].endswith(" AS build")
    return lines[lines.index(froms[1]):]


def test_dockerfile_passes_hadolint_and_is_multi_stage_non_root():
    final = final_stage(DOCKERFILE)
    assert final[0] == "FROM gcr.io/distroless/cc-debian12:nonroot"
    assert "USER 65532:65532" in final
    uid = by_kind("Deployment", "mcp-approvals", SQLITE)["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert uid == 65532


def test_hadolint_refuses_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:latest\nRUN apt-get update && apt-get install -y curl\n")
    done = hadolint(bad)
    assert done.returncode == 1
    assert "DL3007" in done.stdout and "DL3008" in done.stdout, done.stdout


# ----------------------------------------------------------------------------------- rate limit service

RATELIMIT_DOCKERFILE = REPO_ROOT / "services" / "ratelimit" / "Dockerfile"


def test_ratelimit_dockerfile_passes_hadolint_and_is_multi_stage_non_root():
    assert "USER 65532:65532" in final_stage(RATELIMIT_DOCKERFILE)


def test_ratelimit_wiring_ports_redis_and_network_policies():
    dep = by_kind("Deployment", "mcp-ratelimit")
    spec = dep["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert spec["securityContext"]["runAsUser"] == 65532 and spec["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    assert dep["spec"]["replicas"] >= 2
    assert f"--listen=0.0.0.0:{ports['grpc']}" in c["args"] and f"--metrics-listen=0.0.0.0:{ports['metrics']}" in c["args"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert "tcpSocket" in c["livenessProbe"], "a Redis outage must not restart the service"
    redis_svc = by_kind("Service", "mcp-ratelimit-redis")
    fqdn = f"{redis_svc['metadata']['name']}.{redis_svc['metadata']['namespace']}.svc.cluster.local"
    assert f"--redis=redis://{fqdn}:{redis_svc['spec']['ports'][0]['port']}/0" in c["args"]
    svc = by_kind("Service", "mcp-ratelimit")
    (port,) = svc["spec"]["ports"]
    assert port["name"].startswith("grpc") and port["appProtocol"] == "kubernetes.io/h2c"
    assert port["targetPort"] == "grpc" and svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    # gRPC only from the gateway pods (the same sources as the approvals check port); Redis only from the service.
    np = by_kind("NetworkPolicy", "mcp-ratelimit")
    (grpc_rule,) = [r for r in np["spec"]["ingress"] if r["ports"] == [{"protocol": "TCP", "port": ports["grpc"]}]]
    approvals_np = by_kind("NetworkPolicy", "mcp-approvals")
    (check_rule,) = [r for r in approvals_np["spec"]["ingress"] if "from" in r]
    assert grpc_rule["from"] == check_rule["from"]
    rnp = by_kind("NetworkPolicy", "mcp-ratelimit-redis")
    assert rnp["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": 6379}],
                                       "from": [{"podSelector": {"matchLabels": dep["spec"]["selector"]["matchLabels"]}}]}]


# ----------------------------------------------------------------------------------- PostgreSQL variant

PG_README = DEPLOY / "kubernetes" / "postgres" / "README.md"


def fqdn(svc: dict) -> str:
    return f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local"


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def test_variants_share_everything_but_the_approvals_workload():
    sqlite, pg = set(listed(SQLITE)), set(listed(POSTGRES))
    k8s = (DEPLOY / "kubernetes").resolve()
    assert sorted(p.relative_to(k8s).as_posix() for p in sqlite - pg) == [
        "approvals-deployment.yaml", "approvals-pvc.yaml"]
    assert sorted(p.relative_to(k8s).as_posix() for p in pg - sqlite) == [
        "postgres/approvals-deployment.yaml", "postgres/approvals-pdb.yaml", "postgres/postgres-networkpolicy.yaml",
        "postgres/postgres.yaml"]
    # The same pods for the shared Services and NetworkPolicy, the same ports, image and approvers.
    a, b = by_kind("Deployment", "mcp-approvals", SQLITE), by_kind("Deployment", "mcp-approvals", POSTGRES)
    assert a["spec"]["selector"] == b["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": "mcp-approvals"}}
    (ca,), (cb,) = a["spec"]["template"]["spec"]["containers"], b["spec"]["template"]["spec"]["containers"]
    assert (ca["image"], ca["ports"]) == (cb["image"], cb["ports"])
    assert [x for x in ca["args"] if not x.startswith("--db")] == [x for x in cb["args"] if not x.startswith("--db")]


def test_postgres_variant_runs_replicas_on_the_database_url_from_the_secret():
    dep = by_kind("Deployment", "mcp-approvals", POSTGRES)
    spec = dep["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    # No --db flag (a password would show in the process list): the URL is MCP_APPROVALS_DB, from the Secret.
    assert not [x for x in c["args"] if x.startswith("--db=")]
    assert "--db-pool-size=10" in c["args"]
    assert env_of(c) == {"MCP_APPROVALS_DB": {"name": "MCP_APPROVALS_DB", "valueFrom": {
        "secretKeyRef": {"name": "mcp-approvals-db", "key": "url"}}}}
    # No volume for a database file: state is in PostgreSQL.
    assert [v["name"] for v in pod["volumes"]] == ["approvers"]
    assert c["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    assert pod["terminationGracePeriodSeconds"] > 5
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["labelSelector"] == spec["selector"] and spread["topologyKey"] == "kubernetes.io/hostname"
    pdb = by_kind("PodDisruptionBudget", "mcp-approvals", POSTGRES)
    assert pdb["spec"] == {"minAvailable": 1, "selector": spec["selector"]}
    assert pdb["spec"]["minAvailable"] < spec["replicas"]


def pg_parts() -> tuple[dict, dict, dict, dict]:
    return (by_kind("StatefulSet", "mcp-approvals-postgres", POSTGRES),
            by_kind("Service", "mcp-approvals-postgres", POSTGRES),
            by_kind("NetworkPolicy", "mcp-approvals-postgres", POSTGRES),
            by_kind("ConfigMap", "mcp-approvals-postgres-init", POSTGRES))


def test_bundled_postgres_statefulset_service_and_network_policy():
    sts, svc, np, init = pg_parts()
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["replicas"] == 1 and sts["spec"]["serviceName"] == svc["metadata"]["name"]
    assert sts["spec"]["selector"]["matchLabels"] == labels == svc["spec"]["selector"]
    pod = sts["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "docker.io/library/postgres:15-bookworm"
    assert pod["securityContext"]["runAsUser"] == pod["securityContext"]["fsGroup"] == 999
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    (port,) = svc["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (5432, "postgres") and c["ports"] == [
        {"name": "postgres", "containerPort": 5432}]
    env = env_of(c)
    assert env["POSTGRES_PASSWORD"]["valueFrom"] == {"secretKeyRef": {"name": "mcp-approvals-db", "key": "postgres-password"}}
    assert env["MCP_APPROVALS_DB_PASSWORD"]["valueFrom"] == {"secretKeyRef": {"name": "mcp-approvals-db", "key": "password"}}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert env["PGDATA"]["value"].startswith(mounts["data"] + "/")  # a subdirectory (lost+found)
    assert mounts["init"] == "/docker-entrypoint-initdb.d" and mounts["run"] == "/var/run/postgresql"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data" and claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    (cm_vol,) = [v for v in pod["volumes"] if v["name"] == "init"]
    assert cm_vol["configMap"] == {"name": init["metadata"]["name"], "defaultMode": 0o555}
    assert list(init["data"]) == ["10-mcp-approvals.sh"]
    # The startup probe holds liveness off while initdb runs on the Unix socket only.
    isready = ["pg_isready", "--host=127.0.0.1", "--port=5432", "--username=postgres"]
    assert c["startupProbe"]["exec"]["command"] == c["readinessProbe"]["exec"]["command"] == isready
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] == 300
    assert c["livenessProbe"]["tcpSocket"] == {"port": "postgres"}
    # 5432 only from the approval pods.
    approvals = by_kind("Deployment", "mcp-approvals", POSTGRES)
    assert np["spec"]["podSelector"]["matchLabels"] == labels and np["spec"]["policyTypes"] == ["Ingress"]
    assert np["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": 5432}],
                                      "from": [{"podSelector": approvals["spec"]["selector"]}]}]


def test_init_script_role_database_and_the_documented_url_agree():
    """The README's Secret command builds the URL from the Service, the role and the database the
    init script creates; the approval pods read that URL."""
    sts, svc, _, init = pg_parts()
    script = init["data"]["10-mcp-approvals.sh"]
    assert script.startswith("#!/bin/bash\n") and "set -euo pipefail" in script
    assert "CREATE ROLE mcp_approvals LOGIN PASSWORD :'pw';" in script
    assert "CREATE DATABASE mcp_approvals OWNER mcp_approvals ENCODING 'UTF8' TEMPLATE template0;" in script
    assert "\\getenv pw MCP_APPROVALS_DB_PASSWORD\n" in script and "SUPERUSER" not in script.upper()
    assert "MCP_APPROVALS_DB_PASSWORD" not in script.split("<<'SQL'")[0]  # on no command line
    url = f"postgres://mcp_approvals:$PW@{fqdn(svc)}:{svc['spec']['ports'][0]['port']}/mcp_approvals"
    readme = PG_README.read_text(encoding="utf-8")
    assert f'--from-literal=url="{url}"' in readme
    assert '--from-literal=password="$PW"' in readme and "--from-literal=postgres-password=" in readme
    assert "kubectl -n mcp-system create secret generic mcp-approvals-db" in readme


# ----------------------------------------------------------------------------------- the rate limit service's cluster


def istio_protocol(port: dict) -> str:
    """The protocol Istio gives a Service port (pkg/config/kube/conversion.go, ConvertProtocol, Istio
    1.29): appProtocol first (kubernetes.io/h2c is HTTP2), else the port name's prefix before '-'."""
    app = port.get("appProtocol")
    if app is not None:
        if app == "kubernetes.io/h2c":
            return "HTTP2"
        if app in ("kubernetes.io/ws", "kubernetes.io/wss"):
            return {"kubernetes.io/ws": "HTTP", "kubernetes.io/wss": "HTTPS"}[app]
        name = app
    else:
        name = port.get("name", "")
    if name.lower().startswith("grpc-web"):
        return "GRPC-Web"
    prefix = name.split("-", 1)[0].lower()
    return {"grpc": "GRPC", "http2": "HTTP2", "http": "HTTP", "tcp": "TCP", "https": "HTTPS",
            "tls": "TLS"}.get(prefix, "UnsupportedProtocol")


def test_istio_protocol_rule_tells_http2_from_the_rest():
    assert istio_protocol({"name": "grpc-rls", "appProtocol": "kubernetes.io/h2c"}) == "HTTP2"
    assert istio_protocol({"name": "tcp-rls", "appProtocol": "grpc"}) == "GRPC"
    assert istio_protocol({"name": "grpc-rls"}) == "GRPC"
    assert istio_protocol({"name": "http-rls"}) == "HTTP"        # HTTP/1.1: a gRPC callout would fail
    assert istio_protocol({"name": "rls"}) == "UnsupportedProtocol"  # sniffed: not HTTP/2 either
    assert istio_protocol({"name": "grpc-x", "appProtocol": "http"}) == "HTTP"  # appProtocol wins


def test_istio_rate_limit_service_is_the_http2_outbound_cluster_of_mcp_ratelimit():
    rls = by_kind("WasmPlugin")["spec"]["pluginConfig"]["gateway"]["rate_limit_service"]
    svc = by_kind("Service", "mcp-ratelimit")
    (port,) = svc["spec"]["ports"]
    # pilot/pkg/model/service.go BuildSubsetKey: outbound|PORT|SUBSET|HOST; HTTP/2 options only for
    # HTTP2/GRPC ports (cluster_builder.go setUpstreamProtocol -> setH2Options).
    # The authority is the Service's host: '|' is not valid in an :authority (HTTP/2 servers reset
    # the stream; tests/envoy/test_deploy_istio.py shows both).
    assert rls == {"cluster": f"outbound|{port['port']}||{fqdn(svc)}", "authority": fqdn(svc), "domain": "mcp",
                   "timeout": "250ms", "failure_mode": "deny"}
    assert rls["cluster"] == "outbound|8081||mcp-ratelimit.mcp-system.svc.cluster.local"
    assert istio_protocol(port) in ("HTTP2", "GRPC")
    dep = by_kind("Deployment", "mcp-ratelimit")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]}[port["targetPort"]] == 8081


def test_envoy_gateway_rate_limit_cluster_is_http2_and_points_at_mcp_ratelimit():
    rls = by_kind("EnvoyExtensionPolicy", variant="envoy-gateway")["spec"]["wasm"][0]["config"]["gateway"]["rate_limit_service"]
    assert rls == {"cluster": "mcp_ratelimit", "domain": "mcp", "timeout": "250ms", "failure_mode": "deny"}
    epp = by_kind("EnvoyPatchPolicy", "mcp-ratelimit-cluster")
    assert epp["spec"]["targetRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                        "name": by_kind("Gateway")["metadata"]["name"]}
    (patch,) = epp["spec"]["jsonPatches"]
    assert (patch["type"], patch["name"]) == ("type.googleapis.com/envoy.config.cluster.v3.Cluster", rls["cluster"])
    assert (patch["operation"]["op"], patch["operation"]["path"]) == ("add", "")
    cluster = patch["operation"]["value"]
    assert cluster["name"] == cluster["load_assignment"]["cluster_name"] == rls["cluster"]
    assert cluster["typed_extension_protocol_options"] == {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "explicit_http_config": {"http2_protocol_options": {}}}}
    svc = by_kind("Service", "mcp-ratelimit")
    (ep,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert ep["endpoint"]["address"]["socket_address"] == {"address": fqdn(svc), "port_value": svc["spec"]["ports"][0]["port"]}
    assert cluster["type"] == "STRICT_DNS"


# ----------------------------------------------------------------------------------- identity overlays

PAYLOAD_HEADER = "x-jwt-payload"


def seed_member() -> dict:
    """The seed policy as a member of a set (without its gateway)."""
    return {k: v for k, v in SEED.items() if k != "gateway"}


def check_identity_config(base: dict, overlay: dict) -> None:
    """An overlay's filter config: the base's gateway plus identity, the seed policy as `ops`, a
    read-only policy for the scope vms:read, and no catch-all (anyone else has no policy)."""
    assert overlay["gateway"]["identity"] == {"payload_header": PAYLOAD_HEADER, "grant_claim": "sub"}
    assert {k: v for k, v in overlay["gateway"].items() if k != "identity"} == base["gateway"]
    assert set(overlay) == {"version", "policies", "attach", "gateway"}
    assert overlay["policies"]["ops"] == seed_member()
    assert overlay["policies"]["readonly"] == {"version": "1", "default": "deny", "hide": ["vm_agent_exec"],
                                              "tools": {"list_vms": {}}}
    assert overlay["attach"] == [{"policy": "ops", "when": [{"claim": "groups", "includes": "ops"}]},
                                 {"policy": "readonly", "when": [{"claim": "scope", "includes": "vms:read"}]}]


def test_istio_identity_verifies_the_token_and_forwards_its_payload_stripped_first():
    base = by_kind("WasmPlugin", variant="istio")
    plugin = by_kind("WasmPlugin", variant="istio/identity")
    # The same plugin (name, image, phase, fail-closed, port, env) with another configuration.
    assert plugin["metadata"] == base["metadata"]
    assert {k: v for k, v in plugin["spec"].items() if k != "pluginConfig"} == \
        {k: v for k, v in base["spec"].items() if k != "pluginConfig"}
    check_identity_config(base["spec"]["pluginConfig"], plugin["spec"]["pluginConfig"])
    ra = by_kind("RequestAuthentication", variant="istio/identity")
    assert ra["metadata"]["namespace"] == plugin["metadata"]["namespace"]
    assert ra["spec"]["selector"] == plugin["spec"]["selector"]
    (rule,) = ra["spec"]["jwtRules"]
    assert rule["outputPayloadToHeader"] == PAYLOAD_HEADER
    assert rule["fromHeaders"] == [{"name": "authorization", "prefix": "Bearer "}]
    assert "fromParams" not in rule and rule["forwardOriginalToken"] is False
    assert rule["issuer"] and rule["audiences"] and rule["jwksUri"].startswith("https://")
    # The client's copy is removed first thing on the same inbound listener, in the base (so that
    # turning identity on later cannot open the gap).
    strip = by_kind("EnvoyFilter", "mcp-strip-jwt-payload", "istio")
    assert strip["spec"]["workloadSelector"]["labels"] == plugin["spec"]["selector"]["matchLabels"]
    (p,) = strip["spec"]["configPatches"]
    assert p["applyTo"] == "HTTP_FILTER" and p["patch"]["operation"] == "INSERT_FIRST"
    assert p["match"]["context"] == "SIDECAR_INBOUND"
    assert p["match"]["listener"]["portNumber"] == plugin["spec"]["match"][0]["ports"][0]["number"]
    lua = p["patch"]["value"]["typed_config"]
    assert lua["@type"] == "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua"
    assert lua["default_source_code"]["inline_string"] == (
        "function envoy_on_request(request_handle)\n"
        f"  request_handle:headers():remove(\"{PAYLOAD_HEADER}\")\n"
        "end\n")


def test_envoy_gateway_identity_verifies_the_token_and_forwards_its_payload_stripped_first():
    base = by_kind("EnvoyExtensionPolicy", variant="envoy-gateway")
    ext = by_kind("EnvoyExtensionPolicy", variant="envoy-gateway/identity")
    assert ext["metadata"] == base["metadata"]
    assert ext["spec"]["targetRefs"] == base["spec"]["targetRefs"]
    (w,), (bw,) = ext["spec"]["wasm"], base["spec"]["wasm"]
    assert {k: v for k, v in w.items() if k != "config"} == {k: v for k, v in bw.items() if k != "config"}
    check_identity_config(bw["config"], w["config"])
    sp = by_kind("SecurityPolicy", variant="envoy-gateway/identity")
    assert sp["spec"]["targetRefs"] == ext["spec"]["targetRefs"]
    (provider,) = sp["spec"]["jwt"]["providers"]
    assert "optional" not in sp["spec"]["jwt"], "a request without a token is refused by jwt_authn"
    assert provider["extractFrom"] == {"headers": [{"name": "authorization", "valuePrefix": "Bearer "}]}
    assert provider["remoteJWKS"]["uri"].startswith("https://") and provider["issuer"] and provider["audiences"]
    # jwt_authn's forward_payload_header, added by a patch on the Gateway's listener.
    gw = by_kind("Gateway", variant="envoy-gateway")
    epp = by_kind("EnvoyPatchPolicy", "mcp-jwt-payload-header", "envoy-gateway/identity")
    assert epp["spec"]["targetRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                        "name": gw["metadata"]["name"]}
    (patch,) = epp["spec"]["jsonPatches"]
    (listener,) = gw["spec"]["listeners"]
    assert patch["type"] == "type.googleapis.com/envoy.config.listener.v3.Listener"
    assert patch["name"] == f"{gw['metadata']['namespace']}/{gw['metadata']['name']}/{listener['name']}"
    assert patch["operation"] == {
        "op": "add",
        "jsonPath": "..http_filters[?(@.name=='envoy.filters.http.jwt_authn')].typed_config.providers.*",
        "path": "/forward_payload_header",
        "value": PAYLOAD_HEADER,
    }
    # The client's copy is removed before routing and every filter, in the base.
    ctp = by_kind("ClientTrafficPolicy", variant="envoy-gateway")
    assert ctp["spec"]["headers"]["earlyRequestHeaders"] == {"remove": [PAYLOAD_HEADER]}


def test_identity_policy_sets_pass_mcp_policy_check(tmp_path):
    cli = Path(REPO_ROOT / "target" / "release" / "mcp-policy")
    if not cli.is_file():
        pytest.fail(f"mcp-policy not built: {cli} is missing (make cli)", pytrace=False)
    configs = {
        "istio": by_kind("WasmPlugin", variant="istio/identity")["spec"]["pluginConfig"],
        "envoy-gateway": by_kind("EnvoyExtensionPolicy", variant="envoy-gateway/identity")["spec"]["wasm"][0]["config"],
    }
    for name, config in configs.items():
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps(config), encoding="utf-8")
        r = subprocess.run([str(cli), "check", str(f)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
