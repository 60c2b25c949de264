"""Tier 1 (no Envoy), deploy: the services' manifests and images: the mcp-approvals and
mcp-ratelimit Dockerfiles pass hadolint, the rate limit service's wiring, and the PostgreSQL variant
of mcp-approvals.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from testkit.manifests import DEPLOY, DOCKERFILE, HADOLINT, SQLITE, POSTGRES, listed, by_kind, fqdn
from testkit.paths import REPO_ROOT


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
