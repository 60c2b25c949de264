#!/usr/bin/env bash
# `make run-cluster`: cluster-wide limits on one machine. Redis (Debian's redis-server, no persistence)
# on 127.0.0.1:6380, two mcp-ratelimit instances sharing it (gRPC 127.0.0.1:8081 and :8082, /metrics
# on :9091 and :9092), and two Envoys from envoy/envoy-cluster.yaml in front of the demo MCP server
# (127.0.0.1:8000): the first on :10000 (admin :9901) exactly as shipped, the second on :10001
# (admin :9902). Both Envoys ask both instances (cluster mcp_ratelimit), so vm_agent_exec's 10 per
# minute per grant is one quota across the two endpoints. mcp-approvals runs as in `make run`.
# Ctrl-C stops everything. Environment: VENV, DEMO_ARGS, REDIS_PORT (default 6380), APPROVER,
# APPROVER_TOKEN, APPROVALS_DB, as in scripts/run.sh.
set -euo pipefail

me=run-cluster
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
redis_port="${REDIS_PORT:-6380}"
approver="${APPROVER:-demo}"
approver_token="${APPROVER_TOKEN:-demo-approver-token}"
approvals_db="${APPROVALS_DB:-$root/.run/approvals.sqlite}"
run_dir="$root/.run/cluster"

[ -x "$python" ] || { echo "run-cluster: no Python at $python (make venv)" >&2; exit 2; }
[ -x "$envoy" ] || { echo "run-cluster: no Envoy at $envoy (make venv)" >&2; exit 2; }
need_file "$wasm" "make build"
need_exec "$approvals" "make approvals"
need_exec "$ratelimit" "make ratelimit"
command -v redis-server >/dev/null || { echo "run-cluster: redis-server is missing (apt-get install redis-server)" >&2; exit 2; }
bash scripts/preflight.sh run-cluster REDIS_PORT="$redis_port" $(printf -- '-=%s ' 8000 10000 10001 9901 9902 8095 8096 8081 8082 9091 9092) || exit 2

stopped="stopped both Envoys, both mcp-ratelimit instances, Redis, mcp-approvals and the demo server"
# Ctrl-C is how this is meant to end: stop everything and exit 0 (a failure exits non-zero).
int_status=0
arm_cleanup
logs_hint="logs: $run_dir"

mkdir -p "$run_dir" "$(dirname "$approvals_db")"
session_key

redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$run_dir" >"$run_dir/redis.log" 2>&1 &
pids+=($!)
wait_for "redis-server" tcp_open "$redis_port"

for i in 1 2; do
  "$ratelimit" --listen "127.0.0.1:808$i" --metrics-listen "127.0.0.1:909$i" --redis "redis://127.0.0.1:$redis_port/0" \
    >"$run_dir/ratelimit-$i.log" 2>&1 &
  pids+=($!)
done
wait_for "mcp-ratelimit 1" http_is http://127.0.0.1:9091/healthz ok
wait_for "mcp-ratelimit 2" http_is http://127.0.0.1:9092/healthz ok

[ -n "${DEMO_ARGS+set}" ] || DEMO_ARGS="--stateless --json-response"
# shellcheck disable=SC2086  # DEMO_ARGS is a word list
"$python" demo/proxmox_server.py --port 8000 $DEMO_ARGS >"$run_dir/demo-server.log" 2>&1 &
pids+=($!)
wait_for "the demo server" tcp_open 8000

"$approvals" --listen 127.0.0.1:8095 --check-listen 127.0.0.1:8096 --db "$approvals_db" --public-url http://127.0.0.1:8095 \
  --approver "$approver=$approver_token" >"$run_dir/approvals.log" 2>&1 &
pids+=($!)
wait_for "mcp-approvals" http_is http://127.0.0.1:8095/healthz ok

# The second Envoy: the same bootstrap on other listener and admin ports.
sed -e 's/port_value: 10000}/port_value: 10001}/' -e 's/port_value: 9901}/port_value: 9902}/' \
  envoy/envoy-cluster.yaml >"$run_dir/envoy-2.yaml"
# Each Envoy's own log (stderr) to envoy-N.log, its access log (stdout) to access-N.log, flushed every
# 200 ms so that decisions show up at once.
: >"$run_dir/access-1.log"; : >"$run_dir/access-2.log"
"$envoy" -c envoy/envoy-cluster.yaml --disable-hot-restart --concurrency 2 --base-id 141 --file-flush-interval-msec 200 \
  >"$run_dir/access-1.log" 2>"$run_dir/envoy-1.log" &
pids+=($!)
"$envoy" -c "$run_dir/envoy-2.yaml" --disable-hot-restart --concurrency 2 --base-id 142 --file-flush-interval-msec 200 \
  >"$run_dir/access-2.log" 2>"$run_dir/envoy-2.log" &
pids+=($!)
wait_for "Envoy 1" http_is http://127.0.0.1:9901/ready LIVE
wait_for "Envoy 2" http_is http://127.0.0.1:9902/ready LIVE

cat <<EOF

MCP endpoints (two Envoys, one quota per grant):
  http://127.0.0.1:10000/mcp   (Envoy 1, admin http://127.0.0.1:9901)
  http://127.0.0.1:10001/mcp   (Envoy 2, admin http://127.0.0.1:9902)
Rate limit service: mcp-ratelimit gRPC 127.0.0.1:8081 and :8082 (metrics http://127.0.0.1:9091/metrics, :9092)
Redis:              127.0.0.1:$redis_port (keys mcprl:*)
Policy:             inlined in envoy/envoy-cluster.yaml (vm_agent_exec: 10 per minute per grant)
Approvals:          http://127.0.0.1:8095  log in as '$approver' with token '$approver_token'

Try: 12 calls of vm_agent_exec alternating between the two Envoys; exactly 10 are admitted:
  for i in \$(seq 12); do port=\$((10000 + i % 2)); curl -s http://127.0.0.1:\$port/mcp \\
    -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \\
    -H 'authorization: Bearer demo-token' \\
    -d '{"jsonrpc":"2.0","id":'\$i',"method":"tools/call","params":{"name":"vm_agent_exec","arguments":{"node":"pve1","vmid":100,"command":"uptime"}}}'; echo; done

Logs:               $run_dir/*.log
Ctrl-C stops everything.

EOF
decision_view "$run_dir/.exited" "scripts/decisions.py --from-start --title" \
  "$python" scripts/decisions.py --from-start --title "Decisions (Envoy, time UTC, grant, tool or method, decision, rule):" \
  "envoy-1=$run_dir/access-1.log" "envoy-2=$run_dir/access-2.log" \
  --envoy-log "envoy-1=$run_dir/envoy-1.log" --envoy-log "envoy-2=$run_dir/envoy-2.log"
