"""Tier 1 (no Envoy): every shipped recipe binds sessions to grants with a generated key.

A policy without `gateway.session_key` serves one grant's `Mcp-Session-Id` to another (the book,
docs/src/identity/sessions.md), so every recipe a user starts from sets
`gateway.session_key.current_env: MCPF_SESSION_KEY` and hands that variable to the wasm VM:

- the Envoy bootstraps under envoy/ (every wasm filter, inline or through the ECDS resource), with
  `vm_config.environment_variables.host_env_keys`, and the example policies;
- the scripts behind `make run`, `make run-cluster` and `make run-oauth`: a random key generated
  at start (unless MCPF_SESSION_KEY is set), exported before the first Envoy starts, one for both
  Envoys of run-cluster;
- deploy/: Istio's WasmPlugin (`vmConfig.env` from the sidecar's environment) and Envoy Gateway's
  EnvoyExtensionPolicy (`env.hostKeys`), with the EnvoyProxy filling the variable from a Secret,
  whose one-line `kubectl create secret` is written next to it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from testkit.envoy import WASM_FILTER_TYPE, http_filters
from testkit.paths import REPO_ROOT

ENVOY_DIR = REPO_ROOT / "envoy"
DEPLOY = REPO_ROOT / "deploy"
SCRIPTS = REPO_ROOT / "scripts"
VAR = "MCPF_SESSION_KEY"
SECRET = "mcp-policy-session-key"


def wasm_configs(node) -> list[dict]:
    """Every Wasm plugin `config` (with `vm_config` and `configuration`) anywhere in a parsed document."""
    found = []
    if isinstance(node, dict):
        if node.get("@type") == WASM_FILTER_TYPE and "config" in node:
            found.append(node["config"])
        for v in node.values():
            found += wasm_configs(v)
    elif isinstance(node, list):
        for v in node:
            found += wasm_configs(v)
    return found


def binds_sessions(policy: dict) -> bool:
    return policy.get("gateway", {}).get("session_key") == {"current_env": VAR}


def test_every_wasm_filter_of_every_envoy_recipe_binds_sessions():
    checked = []
    for path in sorted(ENVOY_DIR.rglob("*.yaml")):
        for cfg in wasm_configs(yaml.safe_load(path.read_text(encoding="utf-8"))):
            policy = json.loads(cfg["configuration"]["value"])
            assert binds_sessions(policy), path
            assert cfg["vm_config"]["environment_variables"] == {"host_env_keys": [VAR]}, path
            checked.append(path.relative_to(ENVOY_DIR).as_posix())
    assert checked == ["ecds/mcp_policy.yaml", "envoy-cluster.yaml", "envoy-oauth.yaml", "envoy.yaml"]
    # envoy-ecds.yaml (`make run`) takes its filter from that ECDS resource and inlines none.
    ecds = yaml.safe_load((ENVOY_DIR / "envoy-ecds.yaml").read_text(encoding="utf-8"))
    assert wasm_configs(ecds) == []
    (entry,) = [f for f in http_filters(ecds) if f["name"] == "mcp_policy"]
    assert entry["config_discovery"]["config_source"]["path_config_source"]["path"] == ".run/mcp_policy.yaml"


@pytest.mark.parametrize("name", ["policy.json", "policy-conditions.json"])
def test_the_example_policies_bind_sessions(name):
    assert binds_sessions(json.loads((ENVOY_DIR / name).read_text(encoding="utf-8")))


# ----------------------------------------------------------------------------------- scripts


def key_block(script: Path) -> tuple[str, int]:
    """The lines of `script` that set and export MCPF_SESSION_KEY, and the line number of the first."""
    lines = script.read_text(encoding="utf-8").splitlines()
    (start,) = [i for i, ln in enumerate(lines) if ln.strip().startswith(f'if [ -z "${{{VAR}:-}}" ]; then')]
    end = [ln.strip() for ln in lines].index(f"export {VAR}", start)
    return "\n".join(lines[start:end + 1]), start


def run_block(block: str, env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", f'{block}\nprintf %s "${VAR}"'],
                          env=env, capture_output=True, text=True, timeout=10, check=True)
    return done.stdout


@pytest.mark.parametrize("script", ["run.sh", "run-cluster.sh", "run-oauth.sh"])
def test_each_make_run_script_sets_the_key_once_before_its_envoys_start(script):
    lines = (SCRIPTS / script).read_text(encoding="utf-8").splitlines()
    calls = [i for i, ln in enumerate(lines) if ln.strip() == "session_key"]
    envoy_starts = [i for i, ln in enumerate(lines) if ln.lstrip().startswith('"$envoy" ')]
    # One key for all the script's Envoys (run-cluster starts two): set once, before the first.
    assert len(calls) == 1 and envoy_starts and all(i > calls[0] for i in envoy_starts), script
    assert VAR not in (SCRIPTS / script).read_text(encoding="utf-8"), script  # only through lib.sh


def test_the_scripts_key_is_random_unless_the_operator_sets_one():
    block, _ = key_block(SCRIPTS / "lib.sh")
    env = {k: v for k, v in os.environ.items() if k != VAR}
    first, second = run_block(block, env), run_block(block, env)
    assert len(first) >= 32 and first != second  # random, at least 32 bytes
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", first)
    assert run_block(block, {**env, VAR: "an operator's own key, kept as given"}) == "an operator's own key, kept as given"


# ----------------------------------------------------------------------------------- deploy/


def manifest(path: str) -> dict:
    (doc,) = [d for d in yaml.safe_load_all((DEPLOY / path).read_text(encoding="utf-8")) if d]
    return doc


def secret_command(path: str) -> str:
    """The `kubectl create secret` written in the comments of a manifest, joined into one line."""
    text = (DEPLOY / path).read_text(encoding="utf-8")
    m = re.search(r"#\s+(kubectl -n \S+ create secret generic .*?\\\n\s*#\s+.*?)\n", text)
    assert m, path
    return re.sub(r"\s*\\\n\s*#\s+", " ", m.group(1))


def test_istio_wasmplugin_reads_the_key_from_the_sidecars_environment():
    spec = manifest("istio/wasmplugin.yaml")["spec"]
    assert binds_sessions(spec["pluginConfig"])
    assert spec["vmConfig"] == {"env": [{"name": VAR, "valueFrom": "HOST"}]}
    cmd = secret_command("istio/wasmplugin.yaml")
    assert cmd == (f'kubectl -n {manifest("istio/wasmplugin.yaml")["metadata"]["namespace"]} create secret generic '
                   f'{SECRET} --from-literal={VAR}="$(openssl rand -base64 48)"')
    # The sidecar's environment: a container named istio-proxy in the MCP server's pod template
    # (merged by Istio's injector), written next to it and in the book (docs/src/deploy/istio.md).
    text = (DEPLOY / "istio/wasmplugin.yaml").read_text(encoding="utf-8")
    assert f"valueFrom: {{secretKeyRef: {{name: {SECRET}, key: {VAR}}}}}" in text
    assert "- name: istio-proxy" in text


def test_envoy_gateway_passes_the_key_from_a_secret():
    (ext,) = manifest("envoy-gateway/envoyextensionpolicy.yaml")["spec"]["wasm"]
    assert binds_sessions(ext["config"])
    assert ext["env"] == {"hostKeys": [VAR]}
    container = manifest("envoy-gateway/envoyproxy.yaml")["spec"]["provider"]["kubernetes"]["envoyDeployment"]["container"]
    assert container["env"] == [{"name": VAR, "valueFrom": {"secretKeyRef": {"name": SECRET, "key": VAR}}}]
    assert secret_command("envoy-gateway/envoyproxy.yaml") == (
        f'kubectl -n envoy-gateway-system create secret generic {SECRET} '
        f'--from-literal={VAR}="$(openssl rand -base64 48)"')


def test_the_book_says_how_to_make_each_secret():
    book = REPO_ROOT / "docs" / "src" / "deploy"
    for path, chapter in (("istio/wasmplugin.yaml", "istio.md"), ("envoy-gateway/envoyproxy.yaml", "envoy-gateway.md")):
        assert secret_command(path) in (book / chapter).read_text(encoding="utf-8"), (path, chapter)
