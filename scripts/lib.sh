# Shared by scripts/run.sh, run-cluster.sh and run-oauth.sh (sourced, never run): the paths every
# stack uses, the checks before anything starts, the process list that one EXIT trap stops in
# order, waiting for a port or a health answer, the session key, and the decision view.
# Each script sets `me` (the name its messages start with) before sourcing this file.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="${VENV:-$root/.venv}"
python="$venv/bin/python"
envoy="$venv/bin/envoy"
wasm="target/wasm32-wasip1/release/mcp_policy_filter.wasm"  # the path the shipped bootstraps load
approvals="target/release/mcp-approvals"
ratelimit="target/release/mcp-ratelimit"
cli="target/release/mcp-policy"

# need_file PATH HINT / need_exec PATH HINT: exit 2 with "<me>: PATH is missing (HINT)".
need_file() { [ -f "$1" ] || { echo "$me: $1 is missing ($2)" >&2; exit 2; }; }
need_exec() { [ -x "$1" ] || { echo "$me: $1 is missing ($2)" >&2; exit 2; }; }

# The processes started so far; the EXIT trap stops them all, then waits for each, then says
# `$stopped`. Ctrl-C exits with $int_status (0 where Ctrl-C is how a stack is meant to end).
pids=()
stopped="stopped"
int_status=0
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ -z "${on_stop:-}" ] || "$on_stop"
  echo "$me: $stopped"
}
arm_cleanup() {
  trap cleanup EXIT
  # shellcheck disable=SC2064  # the status is fixed when the trap is set
  trap "exit $int_status" INT
  trap 'exit 143' TERM
}

# wait_for WHAT COMMAND...: up to 10 s, then exit 1 naming WHAT (and $logs_hint, if set).
wait_for() {
  local what="$1"; shift
  for _ in $(seq 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "$me: $what did not come up${logs_hint:+ ($logs_hint)}" >&2; exit 1
}
http_is() { [ "$(curl -s "$1" 2>/dev/null)" = "$2" ]; }
tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The key that binds each Mcp-Session-Id to its grant (the policy's gateway.session_key.current_env,
# handed to the wasm VM by vm_config.environment_variables.host_env_keys): MCPF_SESSION_KEY if you set
# one (at least 32 bytes), else a new random key for this run, one for every Envoy the script starts
# (a session opened through one is accepted by the others). Never printed.
session_key() {
  if [ -z "${MCPF_SESSION_KEY:-}" ]; then
    MCPF_SESSION_KEY="$(head -c 48 /dev/urandom | base64 -w0)"
  fi
  export MCPF_SESSION_KEY
}

# decision_view EXITED_FILE PKILL_PATTERN VIEW...: the decision view (scripts/decisions.py) until
# Ctrl-C or until a started process exits. On a terminal the view takes the terminal for a process
# group of its own (--foreground), so the terminal's Ctrl-C reaches the view alone: not make, which
# would report "Error 130", and not the services, which cleanup stops in order. A watcher ends the
# view if a service exits. Without a terminal the view runs beside the services until one exits.
decision_view() {
  local exited="$1" pattern="$2"; shift 2
  if [ -t 0 ]; then
    rm -f "$exited"
    ( while kill -0 "${pids[@]}" 2>/dev/null; do sleep 0.5; done
      touch "$exited"; pkill -TERM -f "$pattern" ) &
    pids+=($!)
    "$@" --foreground || true
    if [ -e "$exited" ]; then
      echo "$me: a process exited (its log is in $(dirname "$exited")); stopping the others" >&2
      exit 1
    fi
    exit 0
  fi
  "$@" &
  pids+=($!)
  local status=0
  wait -n "${pids[@]}" || status=$?
  # Ctrl-C reaches the services too, and they may exit before the INT trap runs: give it time.
  sleep 0.3
  # Status 0 is a clean stop asked from outside (Envoy and the services exit 0 on SIGINT and
  # SIGTERM), as from a shell that started this in the background, where SIGINT cannot be trapped.
  if [ "$status" -eq 0 ]; then
    echo "$me: a process was asked to stop (it exited cleanly); stopping the others" >&2
    exit 0
  fi
  echo "$me: a process exited (status $status${logs_hint:+; $logs_hint}); stopping the others" >&2
  exit 1
}
