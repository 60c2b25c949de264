"""Tier 2, deploy: the OCI image of the native module (`make oci-native`), pushed to and pulled back
from a real registry, and the module from it loaded by Envoy.

- The layout: an image FROM scratch whose one tar+gzip layer holds exactly
  /libmcp_policy_native.so (root-owned, 0644, time 0), byte-equal to the built module; the OS and
  architecture of the ELF file in the image config; OCI annotations, the description naming the
  dynamic-module ABI of crates/filter-native/src/ffi/hooks.rs and whether the module was built
  profile-guided (as `make dynamic-module` chooses here); reproducible (same module, same
  digest; another module, another digest).
- Round trip: Debian's docker-registry on 127.0.0.1, `skopeo copy` in, a pull by digest over the
  registry API, and the .so from the pulled layer loaded by Envoy through deploy/istio/native's
  EnvoyFilter (its load line naming its build): allowed and denied calls decided.
- What else `scripts/oci.sh` refuses: a file that is neither a .wasm nor a .so, a .so that is not a
  64-bit little-endian x86-64 or AArch64 ELF file, a module that does not record how it was built
  or that was built instrumented for profiling.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess

import pytest

from testkit import deploy as hd
from testkit import istio as ir
from testkit.jsonrpc import call_tool
from testkit.native import native_path
from testkit.paths import REPO_ROOT
from testkit.processes import free_port
from testkit.upstream import recorder_lines, recorder_reply

SO = "libmcp_policy_native.so"
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}[platform.machine()]


def abi_version() -> str:
    hooks = (REPO_ROOT / "crates" / "filter-native" / "src" / "ffi" / "hooks.rs").read_text(encoding="utf-8")
    (version,) = re.findall(r'^pub const ABI_VERSION: &str = "(.*)";$', hooks, re.M)
    return version


def build() -> str:
    """How `make dynamic-module` builds the module here, found apart from build.rs: profile-guided when
    `PGO` is 1 (the default) and this rustc's LLVM major version is the one the committed profile was
    taken with (crates/filter-native/pgo/llvm-version), "with a stale profile" when the sources'
    hash differs from the one taken with it (pgo/sources), otherwise without a profile."""
    rustc = subprocess.run([os.environ.get("RUSTC", "rustc"), "-vV"], capture_output=True, text=True,
                           check=True).stdout
    (llvm,) = re.findall(r"^LLVM version: (\d+)", rustc, re.M)
    pgo = REPO_ROOT / "crates" / "filter-native" / "pgo"
    if llvm != (pgo / "llvm-version").read_text(encoding="utf-8").strip() or os.environ.get("PGO", "1") != "1":
        return "without a profile"
    # The Makefile's hash: `sha256sum` of each source in byte order, then of those lines.
    sources = sorted(p.relative_to(REPO_ROOT).as_posix() for d in ("crates/core/src", "crates/filter-native/src")
                     for p in (REPO_ROOT / d).rglob("*.rs") if p.is_file())
    lines = "".join(f"{hashlib.sha256((REPO_ROOT / f).read_bytes()).hexdigest()}  {f}\n" for f in sources)
    current = hashlib.sha256(lines.encode()).hexdigest() == (pgo / "sources").read_text(encoding="utf-8").strip()
    return "profile-guided" if current else "profile-guided with a stale profile"


@pytest.fixture(scope="module")
def module():
    path = native_path()
    if not path.is_file():
        pytest.fail(f"{path} is missing (make dynamic-module)", pytrace=False)
    return path


@pytest.fixture(scope="module")
def layout(module) -> hd.Layout:
    if not (hd.OCI_NATIVE_DIR / "index.json").is_file():
        pytest.fail(f"no OCI layout at {hd.OCI_NATIVE_DIR} (make oci-native)", pytrace=False)
    return hd.Layout(hd.OCI_NATIVE_DIR)


def test_layout_holds_the_module_alone_with_its_platform_and_annotations(layout, module):
    m, config, layer = hd.one_layer(layout)
    ((member, data),) = hd.layer_files(layer)
    assert (member.name.lstrip("./"), member.mode, member.uid, member.gid, member.mtime) == (SO, 0o644, 0, 0, 0)
    assert data == module.read_bytes(), f"{hd.OCI_NATIVE_DIR} holds another build of the module (make oci-native)"
    assert m["annotations"] == {
        "org.opencontainers.image.title": "mcp-policy-filter-native",
        "org.opencontainers.image.description":
            "Envoy dynamic module (HTTP filter mcp_policy) that enforces policies on MCP tool calls; "
            f"dynamic-module ABI {abi_version()} of Envoy 1.40, loads in Envoy 1.40 and 1.41; built {build()}",
        "org.opencontainers.image.version": hd.crate_version(),
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.source": m["annotations"]["org.opencontainers.image.source"],
        "org.opencontainers.image.created": "1970-01-01T00:00:00Z",
    }
    assert m["annotations"]["org.opencontainers.image.source"]
    assert layout.tag == hd.crate_version()
    assert (config["os"], config["architecture"], config["created"]) == ("linux", ARCH, "1970-01-01T00:00:00Z")
    assert config["history"] == [{"created": "1970-01-01T00:00:00Z", "created_by": "make oci-native"}]


def test_layout_is_reproducible(layout, module, tmp_path):
    again = hd.build_layout(module, tmp_path / "again")
    assert again.manifest_digest == layout.manifest_digest
    other = tmp_path / SO
    other.write_bytes(module.read_bytes() + b"\0")
    assert hd.build_layout(other, tmp_path / "other").manifest_digest != layout.manifest_digest


def test_other_files_are_refused(module, tmp_path):
    def run(path) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(hd.OCI_SCRIPT), str(path), str(tmp_path / "out")],
                              capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)

    text = tmp_path / "module.txt"
    text.write_bytes(module.read_bytes())
    not_elf = tmp_path / "libx.so"
    not_elf.write_bytes(b"#!/bin/sh\n" + bytes(64))
    # x86-64's e_machine where an ELF header has it, without the ELF magic; and a 32-bit ELF file.
    machine_only = tmp_path / "liby.so"
    machine_only.write_bytes(bytes(18) + b"\x3e\x00" + bytes(44))
    elf32 = tmp_path / "libz.so"
    elf32.write_bytes(b"\x7fELF\x01\x01" + bytes(12) + b"\x3e\x00" + bytes(44))
    # The module without its record of how it was built, and the module as if built instrumented.
    unmarked = tmp_path / "libw.so"
    data = module.read_bytes()
    marker = f"mcp-policy-native build: {build()};".encode()
    assert data.count(b"mcp-policy-native build: ") == 1 and marker in data
    unmarked.write_bytes(data.replace(b"mcp-policy-native build: ", b"mcp-policy-native built: "))
    instrumented = tmp_path / "libv.so"
    instrumented.write_bytes(data.replace(marker, b"mcp-policy-native build: instrumented for profiling;"))
    for path, said in [(text, f"oci.sh: {text} is neither a .wasm nor a .so module"),
                       (not_elf, f"oci.sh: {not_elf} is not an x86-64 or AArch64 ELF file"),
                       (machine_only, f"oci.sh: {machine_only} is not an x86-64 or AArch64 ELF file"),
                       (elf32, f"oci.sh: {elf32} is not an x86-64 or AArch64 ELF file"),
                       (unmarked, f"oci.sh: {unmarked} records no build (mcp-policy-native build: ...); is it this "
                                  "project's module? (make dynamic-module)"),
                       (instrumented, f"oci.sh: {instrumented} is instrumented for profiling (make "
                                      "dynamic-module-profile); build the module to ship with make dynamic-module"),
                       (tmp_path / "missing.so", f"oci.sh: no module at {tmp_path / 'missing.so'} (make dynamic-module)")]:
        done = run(path)
        assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (1, said)
    assert not (tmp_path / "out").exists()


def test_registry_round_trip_by_digest_loads_in_envoy(layout, module, stack, tmp_path):
    _, port = hd.start_registry(stack)
    pulled = hd.push_and_pull(layout, port, hd.NATIVE_REPOSITORY)
    ((member, data),) = hd.layer_files(pulled.layer)
    assert member.name.lstrip("./") == SO and data == module.read_bytes()

    fetched = tmp_path / "modules" / SO  # where the proxy's container has it
    fetched.parent.mkdir()
    fetched.write_bytes(data)
    _, upstream_port, log = stack.recorder()
    config = ir.bootstrap([], stack.log_dir / stack._unique("ecds"), free_port(), free_port(), upstream_port,
                          native=ir.native_filters_from_envoyfilter(fetched))
    envoy = stack.start_envoy(config, name="envoy-native-image")
    assert f"Dynamic module ABI version {abi_version()} matched" in envoy.log_text()
    loaded = f"mcp-policy-filter {hd.crate_version()} (dynamic module, ABI {abi_version()} of Envoy 1.40, {build()}) loaded"
    assert loaded in envoy.log_text()
    ok = call_tool(envoy.mcp_url, "list_vms", "grant-image", id=1)
    assert (ok.status, ok.body) == (200, recorder_reply(1))
    assert call_tool(envoy.mcp_url, "delete_vm", "grant-image", id=2).error["data"]["kind"] == "denied"
    assert len(recorder_lines(log, settle=0.3)) == 1
