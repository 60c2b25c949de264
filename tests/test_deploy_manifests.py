"""Tier 1 (no Envoy), deploy (issue 17): every manifest under deploy/ is valid, consistent and
listed in its kustomization; the mcp-approvals and mcp-ratelimit Dockerfiles pass hadolint.

- Custom resources: tools/deploy-validate/validate.mjs, against the CRD schemas of pinned npm
  packages (@kubernetes-models/istio 3.0.1 = Istio 1.29.2's CRDs, @kubernetes-models/envoy-gateway
  2.0.0, @kubernetes-models/gateway-api 2.0.0), plus a TypeScript check that refuses unknown fields.
- Kubernetes kinds: PyPI kubernetes-validate 1.37.0 (the Kubernetes OpenAPI schemas), strict
  (unknown fields refused), for Kubernetes 1.31 and 1.37.
- Each validator is shown to refuse a broken copy, so a pass means something.
- The policy in the Istio and Envoy Gateway manifests is the seed policy (envoy/policy.json) but
  for the approval cluster, and that cluster names the Service of deploy/kubernetes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

import harness

DEPLOY = harness.REPO_ROOT / "deploy"
VALIDATOR = harness.REPO_ROOT / "tools" / "deploy-validate" / "validate.mjs"
DOCKERFILE = harness.REPO_ROOT / "approvals" / "Dockerfile"
HADOLINT = harness.REPO_ROOT / ".venv" / "bin" / "hadolint"
K8S_VERSIONS = ["1.31.0", "1.37.0"]
DIRS = ["istio", "envoy-gateway", "kubernetes"]
SEED = harness.load_policy(harness.POLICY_JSON)


def listed(d: str) -> list[Path]:
    """The files the kustomization of deploy/`d` lists."""
    k = yaml.safe_load((DEPLOY / d / "kustomization.yaml").read_text(encoding="utf-8"))
    assert k["apiVersion"] == "kustomize.config.k8s.io/v1beta1" and k["kind"] == "Kustomization"
    assert set(k) == {"apiVersion", "kind", "resources"}, "only plain resources: no generators or patches to check"
    return [DEPLOY / d / r for r in k["resources"]]


def docs(paths: list[Path]) -> list[tuple[Path, dict]]:
    return [(p, d) for p in paths for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]


def all_docs() -> list[tuple[Path, dict]]:
    return docs([p for d in DIRS for p in listed(d)])


def by_kind(kind: str, name: str | None = None) -> dict:
    found = [d for _, d in all_docs() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
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


@pytest.mark.parametrize("d", DIRS)
def test_kustomization_lists_every_manifest_of_its_folder(d):
    files = listed(d)
    assert all(p.is_file() for p in files), files
    on_disk = {p for p in (DEPLOY / d).rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert set(files) == on_disk


def test_every_resource_names_its_namespace():
    for path, d in all_docs():
        if d["kind"] != "Namespace":
            assert d["metadata"].get("namespace"), f"{path}: {d['kind']}/{d['metadata']['name']} has no namespace"


# ----------------------------------------------------------------------------------- schemas


def is_custom(d: dict) -> bool:
    """A custom resource: Istio's, Envoy Gateway's or Gateway API's (not built into Kubernetes)."""
    group = d["apiVersion"].split("/")[0]
    return group.endswith(".istio.io") or group in ("gateway.envoyproxy.io", "gateway.networking.k8s.io")


def test_custom_resources_match_the_pinned_crd_schemas():
    crds = [d for _, d in all_docs() if is_custom(d)]
    paths = sorted({p for p, d in all_docs() if is_custom(d)})
    done = run_validator(paths)
    assert done.returncode == 0, done.stdout + done.stderr
    oks = [line for line in done.stdout.splitlines() if line.startswith("ok   ")]
    assert len(oks) == len(crds) == 9, done.stdout
    assert done.stdout.splitlines()[-1] == f"deploy-validate: {len(crds)} of {len(crds)} resources valid"


def test_crd_validator_refuses_bad_enums_and_unknown_fields(tmp_path):
    plugin = (DEPLOY / "istio" / "wasmplugin.yaml").read_text(encoding="utf-8")
    (tmp_path / "enum.yaml").write_text(plugin.replace("failStrategy: FAIL_CLOSE", "failStrategy: FAIL_SOMETIMES"))
    (tmp_path / "field.yaml").write_text(plugin.replace("  phase: AUTHZ", "  phaze: AUTHZ"))
    route = (DEPLOY / "envoy-gateway" / "httproute.yaml").read_text(encoding="utf-8")
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
    assert sorted(checked) == ["Deployment/mcp-approvals", "Deployment/mcp-ratelimit",
                               "Deployment/mcp-ratelimit-redis", "Namespace/mcp-system",
                               "NetworkPolicy/mcp-approvals", "NetworkPolicy/mcp-ratelimit",
                               "NetworkPolicy/mcp-ratelimit-redis", "PersistentVolumeClaim/mcp-approvals-data",
                               "PersistentVolumeClaim/mcp-ratelimit-redis-data", "Service/mcp-approvals",
                               "Service/mcp-approvals-check", "Service/mcp-ratelimit", "Service/mcp-ratelimit-redis"]


def test_kubernetes_validator_refuses_unknown_fields_and_bad_types():
    dep = json.loads(json.dumps(by_kind("Deployment", "mcp-approvals")))
    dep["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsNonroot"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, K8S_VERSIONS[-1], strict=True)
    dep = json.loads(json.dumps(by_kind("Deployment", "mcp-approvals")))
    dep["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, K8S_VERSIONS[-1], strict=True)


# ----------------------------------------------------------------------------------- consistency


def without_approval_cluster(policy: dict) -> dict:
    p = json.loads(json.dumps(policy))
    p["gateway"]["approval"].pop("cluster")
    return p


def test_manifests_carry_the_seed_policy_and_name_the_check_service():
    istio = by_kind("WasmPlugin")["spec"]["pluginConfig"]
    eg = by_kind("EnvoyExtensionPolicy")["spec"]["wasm"][0]["config"]
    assert without_approval_cluster(istio) == without_approval_cluster(eg) == without_approval_cluster(SEED)
    svc = by_kind("Service", "mcp-approvals-check")
    (port,) = svc["spec"]["ports"]
    fqdn = f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local"
    assert istio["gateway"]["approval"]["cluster"] == f"outbound|{port['port']}||{fqdn}"
    patch = by_kind("EnvoyPatchPolicy")["spec"]["jsonPatches"][0]
    cluster = patch["operation"]["value"]
    assert eg["gateway"]["approval"]["cluster"] == patch["name"] == cluster["name"] == SEED["gateway"]["approval"]["cluster"]
    (ep,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert ep["endpoint"]["address"]["socket_address"] == {"address": fqdn, "port_value": port["port"]}


def test_check_port_is_reachable_only_from_the_gateway_pods():
    dep = by_kind("Deployment", "mcp-approvals")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert f"--check-listen=0.0.0.0:{ports['check']}" in c["args"] and f"--listen=0.0.0.0:{ports['page']}" in c["args"]
    np = by_kind("NetworkPolicy", "mcp-approvals")
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


def test_approvals_pod_runs_non_root_with_probes_and_resources():
    spec = by_kind("Deployment", "mcp-approvals")["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
    sc = c["securityContext"]
    assert sc == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    assert c["readinessProbe"]["httpGet"]["path"] == c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert set(c["resources"]["requests"]) == {"cpu", "memory"} and "memory" in c["resources"]["limits"]


def test_istio_and_envoy_gateway_settings():
    plugin = by_kind("WasmPlugin")["spec"]
    assert (plugin["failStrategy"], plugin["phase"], plugin["type"]) == ("FAIL_CLOSE", "AUTHZ", "HTTP")
    assert plugin["selector"]["matchLabels"] == {"app": "mcp-server"}
    (route,) = by_kind("VirtualService")["spec"]["http"]
    assert route["timeout"] == "0s"
    assert by_kind("HTTPRoute")["spec"]["rules"][0]["timeouts"] == {"request": "0s"}
    assert by_kind("EnvoyExtensionPolicy")["spec"]["wasm"][0]["failOpen"] is False
    assert by_kind("EnvoyProxy")["spec"]["filterOrder"] == [
        {"name": "envoy.filters.http.buffer", "after": "envoy.filters.http.wasm"}]
    # Both buffers stay above the policy's default 1 MiB body limit (the filter answers oversize).
    assert by_kind("BackendTrafficPolicy")["spec"]["requestBuffer"]["limit"] == "4Mi"
    patch = by_kind("EnvoyFilter")["spec"]["configPatches"][0]["patch"]["value"]
    assert patch["typed_config"]["max_request_bytes"] == 4 * 1024 * 1024


# ----------------------------------------------------------------------------------- Dockerfile


def hadolint(path: Path) -> subprocess.CompletedProcess:
    if not HADOLINT.is_file():
        pytest.fail(f"{HADOLINT} is missing (make deploy-deps)", pytrace=False)
    return subprocess.run([str(HADOLINT), "--no-color", str(path)], capture_output=True, text=True, timeout=60)


def test_dockerfile_passes_hadolint_and_is_multi_stage_non_root():
    done = hadolint(DOCKERFILE)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    lines = [ln.strip() for ln in DOCKERFILE.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.startswith("#")]
    froms = [ln for ln in lines if ln.startswith("FROM ")]
    assert len(froms) == 2 and froms[0].endswith(" AS build")
    assert froms[1] == "FROM gcr.io/distroless/cc-debian12:nonroot"
    final = lines[lines.index(froms[1]):]
    assert "USER 65532:65532" in final
    uid = by_kind("Deployment", "mcp-approvals")["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert uid == 65532


def test_hadolint_refuses_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:latest\nRUN apt-get update && apt-get install -y curl\n")
    done = hadolint(bad)
    assert done.returncode == 1
    assert "DL3007" in done.stdout and "DL3008" in done.stdout, done.stdout


# ----------------------------------------------------------------------------------- rate limit service (issue 14)

RATELIMIT_DOCKERFILE = harness.REPO_ROOT / "ratelimit" / "Dockerfile"


def test_ratelimit_dockerfile_passes_hadolint_and_is_multi_stage_non_root():
    done = hadolint(RATELIMIT_DOCKERFILE)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    lines = [ln.strip() for ln in RATELIMIT_DOCKERFILE.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.startswith("#")]
    froms = [ln for ln in lines if ln.startswith("FROM ")]
    assert len(froms) == 2 and froms[0].endswith(" AS build")
    assert "USER 65532:65532" in lines[lines.index(froms[1]):]


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
