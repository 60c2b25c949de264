"""Helpers for the deploy tests (tests/envoy/test_deploy_istio.py, test_deploy_envoy_gateway.py):
the OCI layout that `make oci` writes, a local OCI registry (Debian's `docker-registry`), `skopeo`, a
pull by digest over the registry API the way Istio's image fetcher does it, and the check that an
Envoy rendered from the manifests refuses header names with `_`. Plain Python.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from testkit.envoy import Envoy
from testkit.jsonrpc import headers_for, post, tool_call
from testkit.paths import REPO_ROOT
from testkit.processes import HOST, ManagedProcess, answers, free_port
from testkit.stack import Stack
from testkit.upstream import recorder_lines, recorder_reply

OCI_DIR = REPO_ROOT / "target" / "oci"
OCI_SCRIPT = REPO_ROOT / "scripts" / "oci.sh"
NEIGHBOUR_WASM = (REPO_ROOT / "target" / "wasm-neighbour" / "wasm32-wasip1" / "release"
                  / "shared_data_neighbour.wasm")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
TAR_GZIP_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
REPOSITORY = "mcp-policy-filter"


def crate_version() -> str:
    """`version` of the root Cargo.toml's `[workspace.package]`."""
    for line in (REPO_ROOT / "Cargo.toml").read_text(encoding="utf-8").splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise ValueError("no version in Cargo.toml")


@dataclass
class Layout:
    """An OCI image layout directory with one tagged image."""

    path: Path

    def index(self) -> dict:
        return json.loads((self.path / "index.json").read_text(encoding="utf-8"))

    def blob(self, digest: str) -> bytes:
        algo, hexd = digest.split(":", 1)
        data = (self.path / "blobs" / algo / hexd).read_bytes()
        assert hashlib.sha256(data).hexdigest() == hexd, f"blob {digest} does not match its digest"
        return data

    @property
    def manifest_digest(self) -> str:
        (desc,) = self.index()["manifests"]
        return desc["digest"]

    @property
    def tag(self) -> str:
        (desc,) = self.index()["manifests"]
        return desc["annotations"]["org.opencontainers.image.ref.name"]

    def manifest(self) -> dict:
        return json.loads(self.blob(self.manifest_digest))


def build_layout(wasm: Path, out: Path, tag: str | None = None) -> Layout:
    """Run scripts/oci.sh (what `make oci` runs) on `wasm` into `out`."""
    argv = ["bash", str(OCI_SCRIPT), str(wasm), str(out)] + ([tag] if tag else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return Layout(out)


def plugin_wasm_from_layer(layer: bytes) -> bytes:
    """plugin.wasm from a tar+gzip layer, as Istio's fetcher reads a compat image: the entry whose
    base name is plugin.wasm. The whole archive must read cleanly (no truncated entries)."""
    found = []
    with tarfile.open(fileobj=io.BytesIO(layer), mode="r:gz") as tar:
        for member in tar:  # iterates to the end: a truncated archive raises here
            if member.isfile() and Path(member.name).name == "plugin.wasm":
                f = tar.extractfile(member)
                assert f is not None
                found.append(f.read())
    assert len(found) == 1, f"want exactly one plugin.wasm in the layer, found {len(found)}"
    return found[0]


# ----------------------------------------------------------------------------------- registry


def tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise RuntimeError(f"{name} is missing: make deploy-tools (apt-get install skopeo umoci docker-registry)")
    return path


def start_registry(stack: Stack) -> tuple[ManagedProcess, int]:
    """Debian's docker-registry (distribution) on a free 127.0.0.1 port, storage in the stack's
    log dir, with its own config file; waits until GET /v2/ answers 200."""
    port = free_port()
    root = stack.log_dir / "registry"
    (root / "data").mkdir(parents=True, exist_ok=True)
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: info\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n  delete:\n    enabled: false\n"
        f"http:\n  addr: {HOST}:{port}\n",
        encoding="utf-8")
    proc = stack.spawn("registry", [tool("docker-registry"), "serve", str(config)],
                       lambda: answers(f"http://{HOST}:{port}/v2/"), "serving /v2/")
    return proc, port


def skopeo(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([tool("skopeo"), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"skopeo {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


@dataclass
class Pulled:
    """What a pull by digest over the registry API returned."""

    manifest_bytes: bytes
    manifest: dict
    content_type: str
    layer: bytes


def pull_by_digest(port: int, repository: str, digest: str) -> Pulled:
    """GET the manifest by digest and its last layer, as Istio's fetcher (go-containerregistry)
    does; both checked against their digests."""
    base = f"http://{HOST}:{port}/v2/{repository}"
    r = httpx.get(f"{base}/manifests/{digest}", timeout=10, headers={"accept": OCI_MANIFEST})
    assert r.status_code == 200, (r.status_code, r.text)
    assert "sha256:" + hashlib.sha256(r.content).hexdigest() == digest
    assert r.headers["docker-content-digest"] == digest
    manifest = r.json()
    layer_digest = manifest["layers"][-1]["digest"]
    b = httpx.get(f"{base}/blobs/{layer_digest}", timeout=10, follow_redirects=True)
    assert b.status_code == 200, (b.status_code, b.text[:200])
    assert "sha256:" + hashlib.sha256(b.content).hexdigest() == layer_digest
    return Pulled(r.content, manifest, r.headers["content-type"], b.content)


def assert_underscore_headers_refused(envoy: Envoy, log: Path, grant: str) -> None:
    """An allowed `list_vms` call carrying a header name with `_` (`x_mcp_grant`, `x-mcp_grant`) is
    answered 400 by Envoy and reaches no server (`log`: the recorder's); the same call without it
    passes, and Envoy counted the two refusals. The caller checks which upstream requests were
    opened: the cluster names differ between renderings."""
    body = tool_call("list_vms", id=7)
    for extra in ({"x_mcp_grant": "grant-admin"}, {"x-mcp_grant": "grant-admin"}):
        r = post(envoy.mcp_url, body, {**headers_for(grant), **extra})
        assert r.status == 400, (extra, r.status, r.body[:160])
    assert recorder_lines(log, settle=0.3) == []
    ok = post(envoy.mcp_url, body, headers_for(grant))
    assert (ok.status, ok.body) == (200, recorder_reply(7))
    assert len(recorder_lines(log, settle=0.3)) == 1
    stat = "http1.requests_rejected_with_underscores_in_headers"
    assert envoy.admin_get(f"/stats?filter=^{stat}$")[1].strip() == f"{stat}: 2"
