"""The deploy/ manifests as the tier-1 deploy tests (tests/py/test_deploy_*.py) read them: the
kustomizations a user applies, their documents, and the validator of custom resources
(tools/deploy-validate). testkit/deploy.py holds what the Envoy-tier deploy tests run."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

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

def without_approval_cluster(policy: dict) -> dict:
    """`policy` without the platform's cluster names: the approval cluster, and the rate limit
    service (the seed policy counts in shared data; the manifests use mcp-ratelimit)."""
    p = json.loads(json.dumps(policy))
    p["gateway"]["approval"].pop("cluster")
    p["gateway"]["approval"].pop("authority", None)
    p["gateway"].pop("rate_limit_service", None)
    return p


def fqdn(svc: dict) -> str:
    return f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local"
