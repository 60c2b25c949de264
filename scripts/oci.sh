#!/usr/bin/env bash
# Packs a build of the filter into an OCI image layout, by the module's kind:
# - the wasm module (.wasm), for Istio (WasmPlugin) and Envoy Gateway (EnvoyExtensionPolicy, type
#   Image): one application/vnd.oci.image.layer.v1.tar+gzip layer whose tar holds plugin.wasm, with
#   the manifest annotation module.wasm.image/variant=compat (the "compat" wasm image variant;
#   Istio's fetcher, pkg/wasm/imagefetcher.go, reads it);
# - the native module (.so, make dynamic-module): an image FROM scratch whose one layer holds
#   /libmcp_policy_native.so, for the OS and architecture of the ELF file itself, for `COPY --from`
#   into a proxy or init image (docs/src/deploy/native.md, The module as an image); the description
#   names the dynamic-module ABI it was built against (ABI_VERSION of crates/filter-native/src/ffi/hooks.rs)
#   and whether it was built profile-guided, as the module records it (BUILD, same file).
#
# Usage: scripts/oci.sh MODULE OUT_DIR [TAG]
#   MODULE   the built module: target/wasm32-wasip1/release/mcp_policy_filter.wasm (make oci) or
#            target/dynamic-module/libmcp_policy_native.so (make oci-native)
#   OUT_DIR  the OCI image layout to (re)create (target/oci, target/oci-native)
#   TAG      its tag (default: the crate version from Cargo.toml)
# Environment: OCI_SOURCE (org.opencontainers.image.source; default: `repository` of Cargo.toml,
#   else the project name: taken from the tree, never from the machine, so that the digest depends
#   on the module and the tree only), SOURCE_DATE_EPOCH (the created time; default 0, 1970-01-01).
#
# Reproducible: the same module and the same annotations give the same manifest digest. The
# layer is written by umoci (Debian), not by hand: the file's mtime, uid/gid (0/0, --rootless)
# and mode (0644) are fixed before packing, umoci's gzip header carries no time, there is one
# history entry with the fixed created time, and the created annotation is SOURCE_DATE_EPOCH.
set -euo pipefail
module="${1:?usage: oci.sh MODULE OUT_DIR [TAG]}"
out="${2:?usage: oci.sh MODULE OUT_DIR [TAG]}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)"
license="$(sed -n 's/^license = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)"
tag="${3:-$version}"
repository="$(sed -n 's/^repository = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)"
source_url="${OCI_SOURCE:-${repository:-mcp-policy-filter}}"
created="$(date -u -d "@${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)"
command -v umoci >/dev/null || { echo "oci.sh needs umoci: apt-get install umoci (make deploy-tools)" >&2; exit 1; }
case "$module" in
  *.wasm)
    [ -f "$module" ] || { echo "oci.sh: no module at $module (make build)" >&2; exit 1; }
    file=plugin.wasm os=wasip1 arch=wasm title=mcp-policy-filter by="make oci"
    description="Envoy proxy-wasm filter that enforces policies on MCP tool calls"
    extra=(--manifest.annotation "module.wasm.image/variant=compat")
    ;;
  *.so)
    [ -f "$module" ] || { echo "oci.sh: no module at $module (make dynamic-module)" >&2; exit 1; }
    # A 64-bit little-endian ELF file (magic, class 2, data 1) and its e_machine (bytes 18-19), as
    # OCI names the architecture.
    case "$(od -An -tx1 -N6 "$module" | tr -d ' \n'):$(od -An -tx1 -j18 -N2 "$module" | tr -d ' \n')" in
      7f454c460201:3e00) arch=amd64 ;;
      7f454c460201:b700) arch=arm64 ;;
      *) echo "oci.sh: $module is not an x86-64 or AArch64 ELF file" >&2; exit 1 ;;
    esac
    abi="$(sed -n 's/^pub const ABI_VERSION: &str = "\(.*\)";$/\1/p' "$root/crates/filter-native/src/ffi/hooks.rs")"
    [ -n "$abi" ] || { echo "oci.sh: no ABI_VERSION in crates/filter-native/src/ffi/hooks.rs" >&2; exit 1; }
    # How it was built (profile-guided or not), as the module records it (ffi::hooks::BUILD).
    build="$({ LC_ALL=C grep -a -o -m1 'mcp-policy-native build: [a-z -]*;' "$module" || true; } | head -n1 | sed 's/^mcp-policy-native build: //; s/;$//')"
    [ -n "$build" ] || { echo "oci.sh: $module records no build (mcp-policy-native build: ...); is it this project's module? (make dynamic-module)" >&2; exit 1; }
    # An instrumented module writes its profile counts to the build machine's path when Envoy exits.
    [ "$build" != "instrumented for profiling" ] || { echo "oci.sh: $module is instrumented for profiling (make dynamic-module-profile); build the module to ship with make dynamic-module" >&2; exit 1; }
    file=libmcp_policy_native.so os=linux title=mcp-policy-filter-native by="make oci-native"
    description="Envoy dynamic module (HTTP filter mcp_policy) that enforces policies on MCP tool calls; dynamic-module ABI $abi of Envoy 1.40, loads in Envoy 1.40 and 1.41; built $build"
    extra=()
    ;;
  *) echo "oci.sh: $module is neither a .wasm nor a .so module" >&2; exit 1 ;;
esac

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$(dirname "$out")"
umoci init --layout "$out"
umoci new --image "$out:$tag"
umoci unpack --rootless --image "$out:$tag" "$work/bundle" >/dev/null
install -m 0644 "$module" "$work/bundle/rootfs/$file"
touch -h -d "@0" "$work/bundle/rootfs/$file" "$work/bundle/rootfs"
umoci repack --image "$out:$tag" --history.created "$created" --history.created_by "$by" "$work/bundle"
umoci config --image "$out:$tag" --no-history --created "$created" --os "$os" --architecture "$arch" \
  "${extra[@]}" \
  --manifest.annotation "org.opencontainers.image.title=$title" \
  --manifest.annotation "org.opencontainers.image.description=$description" \
  --manifest.annotation "org.opencontainers.image.version=$version" \
  --manifest.annotation "org.opencontainers.image.licenses=$license" \
  --manifest.annotation "org.opencontainers.image.source=$source_url" \
  --manifest.annotation "org.opencontainers.image.created=$created"
umoci gc --layout "$out"
digest="$(sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' "$out/index.json")"
echo "oci: $out:$tag $digest ($(stat -c %s "$module") byte module)"
