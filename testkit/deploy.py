"""Helpers for the deploy tests (tests/envoy/test_deploy_istio.py, test_deploy_envoy_gateway.py,
test_deploy_native_image.py): the OCI layouts that `make oci` and `make oci-native` write, a local
OCI registry (Debian's `docker-registry`), `skopeo`, a pull by digest over the registry API the way
Istio's image fetcher does it, and the check that an Envoy rendered from the manifests refuses
header names with `_`. Plain Python.
"""

from __future__ import annotations

import gzip
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
OCI_NATIVE_DIR = REPO_ROOT / "target" / "oci-native"
OCI_SCRIPT = REPO_ROOT / "scripts" / "oci.sh"
NEIGHBOUR_WASM = (REPO_ROOT / "target" / "wasm-neighbour" / "wasm32-wasip1" / "release"
                  / "shared_data_neighbour.wasm")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
TAR_GZIP_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
REPOSITORY = "mcp-policy-filter"
NATIVE_REPOSITORY = "mcp-policy-native"


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


def one_layer(layout: Layout) -> tuple[dict, dict, bytes]:
    """The manifest, the image config and the one tar+gzip layer of `layout`'s image: its media
    types, and the config's diff_id for the layer, checked."""
    m = layout.manifest()
    # umoci leaves the manifest's optional mediaType out; the index descriptor and the registry's
    # Content-Type (checked in the round trips) carry it.
    assert layout.index()["manifests"][0]["mediaType"] == m.get("mediaType", OCI_MANIFEST) == OCI_MANIFEST
    assert m["config"]["mediaType"] == OCI_CONFIG
    (layer,) = m["layers"]
    assert layer["mediaType"] == TAR_GZIP_LAYER
    data = layout.blob(layer["digest"])
    config = json.loads(layout.blob(m["config"]["digest"]))
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(gzip.decompress(data)).hexdigest()]
    return m, config, data


def build_layout(module: Path, out: Path, tag: str | None = None) -> Layout:
    """Run scripts/oci.sh (what `make oci` and `make oci-native` run) on `module` into `out`."""
    argv = ["bash", str(OCI_SCRIPT), str(module), str(out)] + ([tag] if tag else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return Layout(out)


def plugin_wasm_from_layer(layer: bytes) -> bytes:
    """plugin.wasm from a tar+gzip layer, as Istio's fetcher reads a compat image: the entry whose
    base name is plugin.wasm. The whole archive must read cleanly (no truncated entries)."""
    found = [data for member, data in layer_files(layer) if Path(member.name).name == "plugin.wasm"]
    assert len(found) == 1, f"want exactly one plugin.wasm in the layer, found {len(found)}"
    return found[0]


def layer_files(layer: bytes) -> list[tuple[tarfile.TarInfo, bytes]]:
    """Every regular file of a tar+gzip layer, with its bytes. The whole archive must read cleanly
    (no truncated entries)."""
    files = []
    with tarfile.open(fileobj=io.BytesIO(layer), mode="r:gz") as tar:
        for member in tar:  # iterates to the end: a truncated archive raises here
            if member.isfile():
                f = tar.extractfile(member)
                assert f is not None
                files.append((member, f.read()))
    return files


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


def push_and_pull(layout: Layout, port: int, repository: str) -> Pulled:
    """`skopeo copy` of `layout`'s image into `repository` of the registry on `port`, the registry
    keeping the manifest's bytes (its digest), then the image pulled back by that digest
    (`pull_by_digest`), served as an OCI manifest."""
    ref = f"docker://{HOST}:{port}/{repository}:{layout.tag}"
    skopeo("copy", "--dest-tls-verify=false", f"oci:{layout.path}:{layout.tag}", ref)
    raw = skopeo("inspect", "--tls-verify=false", "--raw", ref).stdout.encode()
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == layout.manifest_digest
    pulled = pull_by_digest(port, repository, layout.manifest_digest)
    assert pulled.content_type == OCI_MANIFEST
    return pulled


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
