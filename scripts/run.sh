#!/usr/bin/env bash
# `make run`: the demo MCP server on 127.0.0.1:8000 behind Envoy on 127.0.0.1:10000 (admin 9901),
# using envoy/envoy.yaml exactly as shipped (run from the repository root: its wasm path is relative),
# and the approval service mcp-approvals: its page and approvers' API on 127.0.0.1:8095, its check
# endpoint for Envoy on 127.0.0.1:8096 (envoy.yaml's cluster mcp_approvals; the policy makes start_vm
# wait for an approval). Ctrl-C stops all three.
#
# The demo server runs stateless with JSON responses so a single curl works; set
# DEMO_ARGS="" for the SDK defaults (stateful sessions, SSE responses).
# Environment: VENV (default .venv), DEMO_ARGS (default "--stateless --json-response"),
# APPROVER (default demo) and APPROVER_TOKEN (default demo-approver-token): the approver's login,
# APPROVALS_DB (default .run/approvals.sqlite, kept between runs).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="${VENV:-$root/.venv}"
python="$venv/bin/python"
envoy="$venv/bin/envoy"
wasm="target/wasm32-wasip1/release/mcp_policy_filter.wasm"  # the path envoy/envoy.yaml loads
approvals="target/release/mcp-approvals"
approver="${APPROVER:-demo}"
approver_token="${APPROVER_TOKEN:-demo-approver-token}"
approvals_db="${APPROVALS_DB:-$root/.run/approvals.sqlite}"

[ -x "$python" ] || { echo "run: no Python at $python (create the venv: make venv)" >&2; exit 2; }
[ -x "$envoy" ] || { echo "run: no Envoy at $envoy (pip install -r tests/requirements.txt)" >&2; exit 2; }
[ -f "$wasm" ] || { echo "run: $wasm is missing (make build)" >&2; exit 2; }
[ -x "$approvals" ] || { echo "run: $approvals is missing (make approvals)" >&2; exit 2; }
for port in 8000 10000 9901 8095 8096; do
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

mkdir -p "$(dirname "$approvals_db")"
"$approvals" --listen 127.0.0.1:8095 --check-listen 127.0.0.1:8096 --db "$approvals_db" --public-url http://127.0.0.1:8095 \
  --approver "$approver=$approver_token" &
pids+=($!)
for _ in $(seq 100); do
  [ "$(curl -s http://127.0.0.1:8095/healthz 2>/dev/null)" = ok ] && break
  sleep 0.1
done
[ "$(curl -s http://127.0.0.1:8095/healthz 2>/dev/null)" = ok ] || { echo "run: mcp-approvals did not come up" >&2; exit 1; }

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
Approvals (start_vm needs one):           http://127.0.0.1:8095  log in as '$approver' with token '$approver_token'

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
and (needs an approval, JSON-RPC error -31007 with an approval_url: open it, approve, send it again):
  curl -s http://127.0.0.1:10000/mcp \\
    -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \\
    -H 'authorization: Bearer demo-token' \\
    -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"start_vm","arguments":{"node":"pve2","vmid":200}}}'
or approve from the command line:
  curl -s http://127.0.0.1:8095/v1/approvals -H 'authorization: Bearer $approver_token'
  curl -s -X POST http://127.0.0.1:8095/v1/approvals/APPROVAL_ID/approve \\
    -H 'authorization: Bearer $approver_token' -H 'content-type: application/json' -d '{"note":"ok"}'

Ctrl-C stops all three.
EOF
status=0
wait -n "${pids[@]}" || status=$?
echo "run: a process exited (status $status); stopping the others" >&2
exit 1
