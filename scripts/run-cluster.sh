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

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="${VENV:-$root/.venv}"
python="$venv/bin/python"
envoy="$venv/bin/envoy"
wasm="target/wasm32-wasip1/release/mcp_policy_filter.wasm"
approvals="target/release/mcp-approvals"
ratelimit="target/release/mcp-ratelimit"
redis_port="${REDIS_PORT:-6380}"
approver="${APPROVER:-demo}"
approver_token="${APPROVER_TOKEN:-demo-approver-token}"
approvals_db="${APPROVALS_DB:-$root/.run/approvals.sqlite}"
run_dir="$root/.run/cluster"

[ -x "$python" ] || { echo "run-cluster: no Python at $python (make venv)" >&2; exit 2; }
[ -x "$envoy" ] || { echo "run-cluster: no Envoy at $envoy (make venv)" >&2; exit 2; }
[ -f "$wasm" ] || { echo "run-cluster: $wasm is missing (make build)" >&2; exit 2; }
[ -x "$approvals" ] || { echo "run-cluster: $approvals is missing (make approvals)" >&2; exit 2; }
[ -x "$ratelimit" ] || { echo "run-cluster: $ratelimit is missing (make ratelimit)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "run-cluster: redis-server is missing (apt-get install redis-server)" >&2; exit 2; }
bash scripts/preflight.sh run-cluster REDIS_PORT="$redis_port" $(printf -- '-=%s ' 8000 10000 10001 9901 9902 8095 8096 8081 8082 9091 9092) || exit 2

pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "run-cluster: stopped both Envoys, both mcp-ratelimit instances, Redis, mcp-approvals and the demo server"
}
trap cleanup EXIT
# Ctrl-C is how this is meant to end: stop everything and exit 0 (a failure exits non-zero).
trap 'exit 0' INT
trap 'exit 143' TERM

wait_for() {  # wait_for WHAT COMMAND...: up to 10 s
  local what="$1"; shift
  for _ in $(seq 100); do "$@" && return 0; sleep 0.1; done
  echo "run-cluster: $what did not come up (logs: $run_dir)" >&2; exit 1
}
http_is() { [ "$(curl -s "$1" 2>/dev/null)" = "$2" ]; }
tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

mkdir -p "$run_dir" "$(dirname "$approvals_db")"
# The key that binds each Mcp-Session-Id to its grant (the policy's gateway.session_key.current_env,
# handed to the wasm VM by vm_config.environment_variables.host_env_keys): MCPF_SESSION_KEY if you set
# one (at least 32 bytes), else a new random key for this run, one for both Envoys (a session
# opened through one is accepted by the other). Never printed.
if [ -z "${MCPF_SESSION_KEY:-}" ]; then
  MCPF_SESSION_KEY="$(head -c 48 /dev/urandom | base64 -w0)"
fi
export MCPF_SESSION_KEY

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
view=("$python" scripts/decisions.py --from-start --title "Decisions (Envoy, time UTC, grant, tool, decision, rule):" "envoy-1=$run_dir/access-1.log" "envoy-2=$run_dir/access-2.log")
if [ -t 0 ]; then
  # As in scripts/run.sh: the view is the terminal's foreground job, so Ctrl-C reaches it alone, and a
  # watcher ends it if a service exits.
  rm -f "$run_dir/.exited"
  ( while kill -0 "${pids[@]}" 2>/dev/null; do sleep 0.5; done
    touch "$run_dir/.exited"; pkill -TERM -f "scripts/decisions.py --from-start --title" ) &
  pids+=($!)
  "${view[@]}" --foreground || true
  if [ -e "$run_dir/.exited" ]; then
    echo "run-cluster: a process exited (logs: $run_dir); stopping the others" >&2
    exit 1
  fi
  exit 0
fi
"${view[@]}" &
pids+=($!)
status=0
wait -n "${pids[@]}" || status=$?
echo "run-cluster: a process exited (status $status; logs: $run_dir); stopping the others" >&2
exit 1
