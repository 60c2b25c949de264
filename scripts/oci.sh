#!/usr/bin/env bash
# Packs the filter module into an OCI image layout that Istio (WasmPlugin) and Envoy Gateway
# (EnvoyExtensionPolicy, type Image) pull: one application/vnd.oci.image.layer.v1.tar+gzip layer
# whose tar holds plugin.wasm, with the manifest annotation module.wasm.image/variant=compat
# (the "compat" wasm image variant; Istio's fetcher, pkg/wasm/imagefetcher.go, reads it).
#
# Usage: scripts/oci.sh WASM OUT_DIR [TAG]
#   WASM     the built module (make build: target/wasm32-wasip1/release/mcp_policy_filter.wasm)
#   OUT_DIR  the OCI image layout to (re)create (make oci: target/oci)
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
wasm="${1:?usage: oci.sh WASM OUT_DIR [TAG]}"
out="${2:?usage: oci.sh WASM OUT_DIR [TAG]}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)"
license="$(sed -n 's/^license = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)"
tag="${3:-$version}"
repository="$(sed -n 's/^repository = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)"
source_url="${OCI_SOURCE:-${repository:-mcp-policy-filter}}"
created="$(date -u -d "@${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)"
command -v umoci >/dev/null || { echo "oci.sh needs umoci: apt-get install umoci (make oci-tools)" >&2; exit 1; }
[ -f "$wasm" ] || { echo "oci.sh: no module at $wasm (make build)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$(dirname "$out")"
umoci init --layout "$out"
umoci new --image "$out:$tag"
umoci unpack --rootless --image "$out:$tag" "$work/bundle" >/dev/null
install -m 0644 "$wasm" "$work/bundle/rootfs/plugin.wasm"
touch -h -d "@0" "$work/bundle/rootfs/plugin.wasm" "$work/bundle/rootfs"
umoci repack --image "$out:$tag" --history.created "$created" --history.created_by "make oci" "$work/bundle"
umoci config --image "$out:$tag" --no-history --created "$created" --os wasip1 --architecture wasm \
  --manifest.annotation "module.wasm.image/variant=compat" \
  --manifest.annotation "org.opencontainers.image.title=mcp-policy-filter" \
  --manifest.annotation "org.opencontainers.image.description=Envoy proxy-wasm filter that enforces policies on MCP tool calls" \
  --manifest.annotation "org.opencontainers.image.version=$version" \
  --manifest.annotation "org.opencontainers.image.licenses=$license" \
  --manifest.annotation "org.opencontainers.image.source=$source_url" \
  --manifest.annotation "org.opencontainers.image.created=$created"
umoci gc --layout "$out"
digest="$(sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' "$out/index.json")"
echo "oci: $out:$tag $digest ($(stat -c %s "$wasm") byte module)"
