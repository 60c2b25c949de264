"""Tier 1 (no Envoy), deploy: every manifest under deploy/ is valid, consistent and
listed in its kustomization.

- Custom resources: tools/deploy-validate/validate.mjs, against the CRD schemas of pinned npm
  packages (@kubernetes-models/istio 3.0.1 = Istio 1.29.2's CRDs, @kubernetes-models/envoy-gateway
  2.0.0, @kubernetes-models/gateway-api 2.0.0), plus a TypeScript check that refuses unknown fields.
- Kubernetes kinds: PyPI kubernetes-validate 1.37.0 (the Kubernetes OpenAPI schemas), strict
  (unknown fields refused), for Kubernetes 1.31 and 1.37.
- Each validator is shown to refuse a broken copy, so a pass means something.
- The policy in the Istio and Envoy Gateway manifests is the seed policy (envoy/policy.json) but
  for the approval cluster, and that cluster names the Service of deploy/kubernetes.

The native build, header names with '_', the rate limit service's cluster and the identity
overlays: test_deploy_platforms.py; the Dockerfiles and the PostgreSQL variant: test_deploy_services.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from testkit.manifests import (DEPLOY, K8S_VERSIONS, DIRS, EG_NATIVE, NEWER_FIELDS, SQLITE, POSTGRES, SEED,
                            listed, docs, all_docs, by_kind, run_validator, without_approval_cluster)


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
    assert set(newer_fields(proxy)) == {"dynamicModules"}
    assert set(newer_fields(policy)) == {"dynamicModule"}
    assert newer_field_errors(proxy) == newer_field_errors(policy) == []


def test_newer_field_check_refuses_bad_values_and_unknown_fields():
    proxy = json.loads(json.dumps(by_kind("EnvoyProxy", variant=EG_NATIVE)))
    proxy["spec"]["dynamicModules"][0]["source"]["local"]["pth"] = "/x.so"
    # The native EnvoyProxy orders no filter; a filterOrder naming a filter that does not exist is refused.
    proxy["spec"]["filterOrder"] = [{"name": "envoy.filters.http.buffer", "after": "envoy.filters.http.dynamic_module"}]
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
    assert sorted(checked) == ["ConfigMap/mcp-approvals-postgres-init", "ConfigMap/mcp-policy-bootstrap",
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
