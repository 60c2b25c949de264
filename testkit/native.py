"""The native build of the filter (crates/filter-native, an Envoy dynamic module) in the tests.

- `filter_build()`: the build the tests run by default, `$MCP_POLICY_FILTER_BUILD` (`wasm` or `native`);
  test modules that run on both builds are parametrized in tests/conftest.py.
- `native_path()`: the module, `$MCP_POLICY_NATIVE` or `make dynamic-module`'s release build;
  Envoy finds it through `ENVOY_DYNAMIC_MODULES_SEARCH_PATH` (set by `testkit.envoy.envoy_env`).
- `to_native(text)`: a rendered wasm bootstrap with its wasm filter replaced by the module (an ECDS
  entry asks for the module's config type) and no buffer filter in its chain, the same policy text,
  the stats tags of envoy/envoy-dynamic.yaml and its runtime flag `STRIP_STAT_PREFIX` (the wasm
  build's names in /stats/prometheus); everything else unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from testkit.paths import REPO_ROOT

BUILDS = ("wasm", "native")
DEFAULT_NATIVE = REPO_ROOT / "target" / "dynamic-module" / "libmcp_policy_native.so"
# Envoy 1.39.3, the release before the pinned 1.40 (`make envoy-previous`): it must refuse the module
# (tests/envoy/test_envoy_versions.py), and run the wasm build.
PREVIOUS_ENVOY = REPO_ROOT / "tools" / "envoy-1.39" / "envoy" / "_bin" / "envoy"
MODULE_NAME = "mcp_policy_native"
DYNAMIC_FILTER_TYPE = "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter"
WASM_FILTER_TYPE = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
STRING_VALUE_TYPE = "type.googleapis.com/google.protobuf.StringValue"
BUFFER_FILTER = "envoy.filters.http.buffer"


def filter_build() -> str:
    build = os.environ.get("MCP_POLICY_FILTER_BUILD", "wasm")
    if build not in BUILDS:
        raise ValueError(f"MCP_POLICY_FILTER_BUILD must be one of {BUILDS}, not {build!r}")
    return build


def native_path() -> Path:
    env = os.environ.get("MCP_POLICY_NATIVE")
    return Path(env).resolve() if env else DEFAULT_NATIVE


def native_filter(policy_text: str) -> dict:
    """The `typed_config` of the module's HTTP filter with `policy_text`."""
    return {"@type": DYNAMIC_FILTER_TYPE, "dynamic_module_config": {"name": MODULE_NAME},
            "filter_name": "mcp_policy", "filter_config": {"@type": STRING_VALUE_TYPE, "value": policy_text}}


def _is_module(entry: dict) -> bool:
    return (entry.get("typed_config", {}).get("@type") == DYNAMIC_FILTER_TYPE
            or DYNAMIC_FILTER_TYPE in entry.get("config_discovery", {}).get("type_urls", []))


def _swap_filters(node) -> None:
    """Replace every wasm HTTP filter under `node` by the module, in place (an ECDS entry's type),
    and remove the buffer filter from each chain that then holds the module: the module holds the
    request itself and raises the stream's buffer limit to its body limit (the wasm build needs the
    buffer filter for both)."""
    if isinstance(node, dict):
        tc = node.get("typed_config")
        if isinstance(tc, dict) and tc.get("@type") == WASM_FILTER_TYPE:
            node["typed_config"] = native_filter(tc["config"]["configuration"]["value"])
        urls = node.get("config_discovery", {}).get("type_urls")
        if urls:
            node["config_discovery"]["type_urls"] = [DYNAMIC_FILTER_TYPE if u == WASM_FILTER_TYPE else u
                                                     for u in urls]
        for v in node.values():
            _swap_filters(v)
        chain = node.get("http_filters")
        if isinstance(chain, list) and any(isinstance(f, dict) and _is_module(f) for f in chain):
            chain[:] = [f for f in chain if not (isinstance(f, dict) and f.get("name") == BUFFER_FILTER)]
    elif isinstance(node, list):
        for v in node:
            _swap_filters(v)


# Envoy 1.40 prints a dynamic module's stat NAME as `envoy_dynamicmodulescustom_NAME` in
# /stats/prometheus unless this runtime flag is on: then as `NAME`, the wasm build's name.
STRIP_STAT_PREFIX = "envoy.reloadable_features.dynamic_modules_strip_custom_stat_prefix"


def strip_stat_prefix(cfg: dict) -> None:
    """Turn `STRIP_STAT_PREFIX` on in the bootstrap `cfg` (in its first static runtime layer, or a
    new one ahead of the others), in place."""
    layers = cfg.setdefault("layered_runtime", {}).setdefault("layers", [])
    static = next((layer for layer in layers if "static_layer" in layer), None)
    if static is None:
        static = {"name": "static", "static_layer": {}}
        layers.insert(0, static)
    static["static_layer"][STRIP_STAT_PREFIX] = True


def to_native(text: str) -> str:
    """A rendered bootstrap with its wasm filter(s) replaced by the native module (and, in their
    chains, no buffer filter), and the runtime flag that gives the module's stats the wasm build's
    names in /stats/prometheus."""
    cfg = yaml.safe_load(text)
    _swap_filters(cfg.get("static_resources", {}))
    for tag in cfg.get("stats_config", {}).get("stats_tags", []):
        tag["regex"] = tag["regex"].replace("^wasmcustom", "^dynamicmodulescustom")
    strip_stat_prefix(cfg)
    return yaml.safe_dump(cfg, sort_keys=False, width=1000)
