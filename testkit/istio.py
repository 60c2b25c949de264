"""The Envoy configuration Istio renders for a WasmPlugin, for the deploy tests (tests/envoy/
test_deploy_istio.py). Plain Python, no pytest dependency.

What Istio (pilot/pkg/model/extensions.go, `convertToWasmPluginWrapper`, `buildVMConfig`) emits for
`extensions.istio.io/v1alpha1` WasmPlugin NAMESPACE/NAME, delivered to the proxy by ECDS:

- filter name `NAMESPACE.NAME`, `root_id` = `spec.pluginName`;
- `configuration`: a `google.protobuf.StringValue` holding `pluginConfig` marshalled to JSON by
  `protomarshal.ToJSON` (golang/protobuf `jsonpb`, compact). `pluginConfig` is a
  `google.protobuf.Struct`, so every number is a double; `struct_json` reproduces that text;
- `vm_config`: runtime `envoy.wasm.runtime.v8`, the code (after istio-agent fetched the image: a
  local file), `environment_variables`: `key_values` with `ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION`
  and each `vmConfig.env` entry of `valueFrom: INLINE` (the default), `host_env_keys` with each of
  `valueFrom: HOST` (read from the proxy's own environment); and **no `vm_id`**: every plugin on the
  proxy shares one shared-data namespace;
- `failure_policy`: FAIL_CLOSE -> FAIL_CLOSED, FAIL_OPEN -> FAIL_OPEN, FAIL_RELOAD -> FAIL_RELOAD.

ECDS here is Envoy's file-based config source (one file per filter), standing in for Istio's ADS.
"""

from __future__ import annotations

import json
import math
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from testkit.envoy import HCM_TYPE
from testkit.paths import REPO_ROOT
from testkit.processes import HOST

WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
FAILURE_POLICY = {"FAIL_CLOSE": "FAIL_CLOSED", "FAIL_OPEN": "FAIL_OPEN", "FAIL_RELOAD": "FAIL_RELOAD"}
ISTIO_DIR = REPO_ROOT / "deploy" / "istio"
# Istio's name of the upstream cluster of an inbound sidecar listener on port 8000.
INBOUND_CLUSTER = "inbound|8000||"


# ----------------------------------------------------------------------------------- Struct JSON


def _go_float(f: float) -> str:
    """A double as Go's encoding/json writes it (what jsonpb falls back to for Struct numbers):
    shortest round-trip digits, plain notation for 1e-6 <= |f| < 1e21, else exponent notation with
    at least one exponent digit kept ("1e+21", "1e-7")."""
    if math.isnan(f) or math.isinf(f):
        raise ValueError("a Struct cannot hold NaN or infinities in JSON")
    a = abs(f)
    if a == 0 or 1e-6 <= a < 1e21:
        text = repr(f)
        if "e" in text:  # Python writes exponents from 1e16 and below 1e-4: expand them
            text = format(Decimal(text), "f")
        return text[:-2] if text.endswith(".0") else text  # -0.0 -> "-0", as Go writes it
    text = repr(f)  # shortest digits, two exponent digits at least, like Go's strconv 'e'
    if re.search(r"e-0[0-9]$", text):  # encoding/json: "e-07" -> "e-7"
        text = text[:-2] + text[-1]
    return text


def _go_string(s: str) -> str:
    """A string as Go's encoding/json writes it: HTML-safe (<, >, & escaped) and U+2028/2029 escaped."""
    out = json.dumps(s, ensure_ascii=False)
    return (out.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def struct_json(value: Any) -> str:
    """`value` (parsed YAML/JSON) as the compact JSON text Istio hands the module: a protobuf
    Struct marshalled by jsonpb. Keys sorted, numbers through binary64, booleans and null kept."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _go_float(float(value))
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, list):
        return "[" + ",".join(struct_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_go_string(str(k))}:{struct_json(v)}" for k, v in sorted(value.items())) + "}"
    raise TypeError(f"not representable in a protobuf Struct: {type(value).__name__}")


# ----------------------------------------------------------------------------------- WasmPlugin


def load_manifest(path: Path = ISTIO_DIR / "wasmplugin.yaml") -> dict:
    """The WasmPlugin resource of `path` (the one document of kind WasmPlugin)."""
    docs = [d for d in yaml.safe_load_all(Path(path).read_text(encoding="utf-8")) if d]
    (plugin,) = [d for d in docs if d.get("kind") == "WasmPlugin"]
    return plugin


def wasm_filter_config(plugin: dict, wasm_file: os.PathLike | str, *, plugin_config: Any = None,
                       resource_version: str = "1") -> dict:
    """The `envoy.extensions.filters.http.wasm.v3.Wasm` Istio builds for `plugin`, with the code
    already fetched to `wasm_file`. `plugin_config` replaces `spec.pluginConfig` when given."""
    spec = plugin["spec"]
    cfg = spec.get("pluginConfig") if plugin_config is None else plugin_config
    env = spec.get("vmConfig", {}).get("env", [])
    key_values = {e["name"]: e.get("value", "") for e in env if e.get("valueFrom", "INLINE") == "INLINE"}
    key_values["ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION"] = resource_version
    environment: dict[str, Any] = {"key_values": key_values}
    if any(e.get("valueFrom") == "HOST" for e in env):
        environment["host_env_keys"] = [e["name"] for e in env if e.get("valueFrom") == "HOST"]
    config: dict[str, Any] = {
        "name": f"{plugin['metadata']['namespace']}.{plugin['metadata']['name']}",
        "root_id": spec.get("pluginName", ""),
        "vm_config": {
            "runtime": "envoy.wasm.runtime.v8",
            "code": {"local": {"filename": str(Path(wasm_file).resolve())}},
            "environment_variables": environment,
        },
        "failure_policy": FAILURE_POLICY[spec.get("failStrategy", "FAIL_CLOSE")],
    }
    if cfg:
        config["configuration"] = {"@type": "type.googleapis.com/google.protobuf.StringValue",
                                   "value": struct_json(cfg)}
    return {"config": config}


def ecds_file(path: Path, name: str, wasm: dict) -> None:
    """Write the ECDS resource file for filter `name` (atomically: Envoy only reacts to a move)."""
    doc = {"resources": [{"@type": "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig",
                          "name": name, "typed_config": {"@type": WASM_TYPE, **wasm}}]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False, width=1000), encoding="utf-8")
    tmp.replace(path)


def buffer_filter_from_envoyfilter(path: Path = ISTIO_DIR / "envoyfilter-buffer.yaml") -> dict:
    """The HTTP filter that deploy/istio/envoyfilter-buffer.yaml inserts before the router."""
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    (patch,) = doc["spec"]["configPatches"]
    assert patch["patch"]["operation"] == "INSERT_BEFORE"
    assert patch["match"]["listener"]["filterChain"]["filter"]["subFilter"]["name"] == "envoy.filters.http.router"
    return patch["patch"]["value"]


def native_filters_from_envoyfilter(module: Path,
                                    path: Path = ISTIO_DIR / "native" / "envoyfilter-native.yaml") -> list[dict]:
    """The HTTP filters deploy/istio/native/envoyfilter-native.yaml inserts before the router (the
    module's alone: it needs no buffer filter), the module loaded from `module` instead of the
    sidecar's mounted path."""
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    filters = []
    for patch in doc["spec"]["configPatches"]:
        assert (patch["applyTo"], patch["patch"]["operation"]) == ("HTTP_FILTER", "INSERT_BEFORE")
        assert patch["match"]["listener"]["filterChain"]["filter"]["subFilter"]["name"] == "envoy.filters.http.router"
        value = json.loads(json.dumps(patch["patch"]["value"]))
        local = value.get("typed_config", {}).get("dynamic_module_config", {}).get("module", {}).get("local")
        if local:
            local["filename"] = str(module)
        filters.append(value)
    return filters


def hcm_merge_from_envoyfilter(path: Path = ISTIO_DIR / "common" / "envoyfilter-underscores.yaml") -> dict:
    """The fields deploy/istio/common/envoyfilter-underscores.yaml merges into the inbound HTTP connection
    manager's typed_config (without its `@type`, which must be the HCM's)."""
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    (patch,) = doc["spec"]["configPatches"]
    assert (patch["applyTo"], patch["patch"]["operation"]) == ("NETWORK_FILTER", "MERGE")
    assert patch["match"]["listener"]["filterChain"]["filter"]["name"] == "envoy.filters.network.http_connection_manager"
    merged = dict(patch["patch"]["value"]["typed_config"])
    assert merged.pop("@type") == HCM_TYPE
    return merged


# What Istio adds to the outbound cluster of a Service port whose protocol is HTTP2 or GRPC (port
# name `grpc-*`/`http2-*`, or appProtocol `kubernetes.io/h2c`/`grpc`/`http2`):
# pilot/pkg/networking/core/cluster_builder.go, setUpstreamProtocol -> setH2Options.
H2_OPTIONS = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
    "explicit_http_config": {"http2_protocol_options": {}}}}


def bootstrap(plugins: list[tuple[str, dict]], ecds_dir: Path, listen_port: int, admin_port: int,
              upstream_port: int, *, clusters: dict[str, int] | None = None,
              h2_clusters: dict[str, int] | None = None, native: list[dict] | None = None) -> str:
    """A bootstrap shaped like an Istio inbound sidecar listener: the wasm plugins `plugins`
    ((name, Wasm config) in chain order, each from its own ECDS file), then the buffer filter of
    envoyfilter-buffer.yaml, then the router to cluster `inbound|8000||` on `upstream_port`; the
    HTTP connection manager carries what envoyfilter-underscores.yaml merges into it.
    `clusters` adds static clusters (name -> port on 127.0.0.1), e.g. the approval service's;
    `h2_clusters` the same with Istio's HTTP/2 options (H2_OPTIONS), e.g. the rate limit service's.
    `native`: the filters of deploy/istio/native (`native_filters_from_envoyfilter`) instead of the
    plugins and the buffer."""
    ecds_dir.mkdir(parents=True, exist_ok=True)
    http_filters = []
    for name, wasm in plugins:
        path = ecds_dir / f"{name}.yaml"
        ecds_file(path, name, wasm)
        http_filters.append({"name": name, "config_discovery": {
            "config_source": {"path_config_source": {"path": str(path)}, "resource_api_version": "V3"},
            "type_urls": [WASM_TYPE]}})
    http_filters += native if native is not None else [buffer_filter_from_envoyfilter()]
    http_filters.append({"name": "envoy.filters.http.router", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}})

    def cluster(name: str, port: int) -> dict:
        return {"name": name, "type": "STATIC", "connect_timeout": "2s", "load_assignment": {
            "cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                "socket_address": {"address": HOST, "port_value": port}}}}]}]}}

    cfg = {
        "node": {"id": "sidecar~127.0.0.1~mcp-server-0.mcp~mcp.svc.cluster.local", "cluster": "mcp-server.mcp"},
        "admin": {"address": {"socket_address": {"address": HOST, "port_value": admin_port}}},
        "static_resources": {
            "listeners": [{"name": "virtualInbound", "address": {"socket_address": {
                "address": HOST, "port_value": listen_port}},
                "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                                "typed_config": {"@type": HCM_TYPE, **hcm_merge_from_envoyfilter(),
                                                                 "stat_prefix": "inbound_0.0.0.0_8000",
                    "route_config": {"name": "inbound|8000||", "virtual_hosts": [{"name": "inbound|http|8000", "domains": ["*"],
                        "routes": [{"match": {"prefix": "/"}, "route": {"cluster": INBOUND_CLUSTER, "timeout": "0s"}}]}]},
                    "http_filters": http_filters}}]}]}],
            "clusters": [cluster(INBOUND_CLUSTER, upstream_port)]
            + [cluster(n, p) for n, p in (clusters or {}).items()]
            + [{**cluster(n, p), "typed_extension_protocol_options": H2_OPTIONS} for n, p in (h2_clusters or {}).items()],
        },
    }
    return yaml.safe_dump(cfg, sort_keys=False, width=1000)
