"""The shipped Envoy bootstraps (envoy/*.yaml) parsed and re-rendered for tests: test ports, the
wasm under test, another policy; everything else as shipped, so the tests exercise what users run.
Plain Python; `harness` re-exports every name here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
ENVOY_YAML = REPO_ROOT / "envoy" / "envoy.yaml"
POLICY_JSON = REPO_ROOT / "envoy" / "policy.json"
WASM_FILTER_TYPE = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
APPROVALS_CLUSTER = "mcp_approvals"  # the cluster of envoy/envoy.yaml the filter asks for approvals


def policy_text(policy: dict | str) -> str:
    """The policy as the JSON text the plugin receives (a str is passed through unchanged)."""
    return policy if isinstance(policy, str) else json.dumps(policy, indent=2) + "\n"


def load_policy(path: Path = POLICY_JSON) -> dict:
    """A policy file parsed, for tests that derive a variant of it."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def wasm_filter(cfg: dict) -> dict:
    """The `typed_config` of the one wasm HTTP filter of the shipped bootstrap."""
    found = [f["typed_config"] for f in http_filters(cfg) if f.get("typed_config", {}).get("@type") == WASM_FILTER_TYPE]
    if len(found) != 1:
        raise ValueError(f"{ENVOY_YAML} must have exactly one wasm HTTP filter, found {len(found)}")
    return found[0]


def http_filters(cfg: dict) -> list[dict]:
    return hcm(cfg)["http_filters"]


def hcm(cfg: dict) -> dict:
    (listener,) = cfg["static_resources"]["listeners"]
    (chain,) = listener["filter_chains"]
    (hcm,) = [f["typed_config"] for f in chain["filters"] if f["typed_config"]["@type"] == HCM_TYPE]
    return hcm


def shipped_config() -> dict:
    """envoy/envoy.yaml parsed."""
    return yaml.safe_load(ENVOY_YAML.read_text(encoding="utf-8"))


def shipped_policy_text() -> str:
    """The policy text inlined in envoy/envoy.yaml."""
    return wasm_filter(shipped_config())["config"]["configuration"]["value"]


def cluster_endpoint(cfg: dict, name: str) -> dict:
    """The `socket_address` of the one endpoint of static cluster `name`."""
    (cluster,) = [c for c in cfg["static_resources"]["clusters"] if c["name"] == name]
    (endpoints,) = cluster["load_assignment"]["endpoints"]
    (lb,) = endpoints["lb_endpoints"]
    return lb["endpoint"]["address"]["socket_address"]


def set_ports(cfg: dict, listen_port: int, admin_port: int, upstream_port: int, *,
              approvals_port: int | None = None) -> None:
    """Point a parsed single-listener bootstrap at test ports: admin, listener, cluster
    `mcp_upstream` and, when `approvals_port` is given, cluster `mcp_approvals` (all on 127.0.0.1)."""
    cfg["admin"]["address"]["socket_address"]["port_value"] = admin_port
    (listener,) = cfg["static_resources"]["listeners"]
    listener["address"]["socket_address"]["port_value"] = listen_port
    cluster_endpoint(cfg, "mcp_upstream")["port_value"] = upstream_port
    if approvals_port is not None:
        cluster_endpoint(cfg, APPROVALS_CLUSTER)["port_value"] = approvals_port


def render_envoy_config(policy: dict | str, wasm_path: str | os.PathLike, listen_port: int, admin_port: int,
                        upstream_port: int, *, source: Path = ENVOY_YAML, approvals_port: int | None = None) -> str:
    """envoy/envoy.yaml with the listener, admin and upstream (cluster `mcp_upstream`) ports, the wasm
    file (made absolute) and the plugin's `configuration.value` (the policy JSON text) replaced, and,
    when `approvals_port` is given, the port of cluster `mcp_approvals`; everything else as shipped."""
    cfg = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
    set_ports(cfg, listen_port, admin_port, upstream_port, approvals_port=approvals_port)
    wasm = wasm_filter(cfg)["config"]
    wasm["vm_config"]["code"]["local"]["filename"] = str(Path(wasm_path).resolve())
    wasm["configuration"]["value"] = policy_text(policy)
    return yaml.safe_dump(cfg, sort_keys=False, width=1000)


def config_ports(config: str) -> tuple[int, int]:
    """(listener port, admin port) of a rendered single-listener bootstrap."""
    cfg = yaml.safe_load(config)
    (listener,) = cfg["static_resources"]["listeners"]
    return (listener["address"]["socket_address"]["port_value"],
            cfg["admin"]["address"]["socket_address"]["port_value"])
