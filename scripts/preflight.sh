#!/usr/bin/env bash
# Checks made before `make run`, `make run-cluster` and `make run-oauth` build anything, so that a
# taken port or a missing tool is reported in seconds, not after a first build of several minutes.
# usage: scripts/preflight.sh TARGET NAME=PORT...   (NAME: the variable that moves that port)
# Every error says the fix. Exit 0: go on; exit 2: something to fix first.
set -uo pipefail
target=$1; shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fail=0
say() { echo "$target: $*" >&2; fail=1; }

# npm and node install wasm-opt, which only the wasm build needs.
tools="cargo rustup python3"
[ "${FILTER:-wasm}" = native ] || tools="$tools npm node"
for tool in $tools; do
  command -v "$tool" >/dev/null || say "'$tool' is not on PATH; see the README's Requirements"
done

# A first build (cargo target/, the venv with Envoy, wasm-opt, cargo's registry) takes about 1.5 GB;
# asking for 3 GB leaves room for logs and a rebuild.
if [ ! -d "$root/target/release" ]; then
  free_kb=$(df -Pk "$root" | awk 'NR == 2 {print $4}')
  if [ -n "$free_kb" ] && [ "$free_kb" -lt $((3 * 1024 * 1024)) ]; then
    say "the first build needs about 3 GB free under $root; $((free_kb / 1024)) MB are (free some, e.g. old clones or 'cargo clean' elsewhere)"
  fi
fi

for spec in "$@"; do
  name=${spec%%=*}; port=${spec#*=}
  [ -n "$port" ] || continue
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    if [ "$name" = "-" ]; then
      say "127.0.0.1:$port is already in use: make $target's ports are fixed; stop what holds it first (a 'make run' or another 'make $target'?)"
    else
      say "127.0.0.1:$port ($name) is already in use: stop what holds it, or choose another port, e.g. make $target $name=$((port + 1000))"
    fi
  fi
done
exit $((fail * 2))
