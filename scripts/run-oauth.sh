#!/usr/bin/env bash
# `make run-oauth`: MCP authorization in front of the demo MCP server, as in docs/src/identity/identify-agents.md.
#   127.0.0.1:8000   the demo MCP server (stateful, SSE: what MCP clients expect)
#   127.0.0.1:9400   the authorization server: npm oidc-provider (tests/oauth/server.mjs), issuer
#                    http://127.0.0.1:9400, dynamic client registration, PKCE, development login pages
#                    (any login name, any password; the login name becomes the token's `sub`)
#   127.0.0.1:10000  Envoy with envoy/envoy-oauth.yaml exactly as shipped: jwt_authn, then the policy
#                    filter with the verified `sub` as the grant (admin on 127.0.0.1:9901)
# Then: .venv/bin/python scripts/oauth_demo.py (or any MCP client with OAuth support) against
# http://127.0.0.1:10000/mcp. Ctrl-C stops all three. Environment: VENV (default .venv).
set -euo pipefail

me=run-oauth
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ -x "$python" ] || { echo "run-oauth: no Python at $python (make venv)" >&2; exit 2; }
[ -x "$envoy" ] || { echo "run-oauth: no Envoy at $envoy (make venv)" >&2; exit 2; }
need_file "$wasm" "make build"
[ -d tests/oauth/node_modules/oidc-provider ] || { echo "run-oauth: oidc-provider missing (make oauth-deps)" >&2; exit 2; }
command -v node >/dev/null || { echo "run-oauth: node is needed for the authorization server" >&2; exit 2; }
bash scripts/preflight.sh run-oauth -=8000 -=9400 -=10000 -=9901 || exit 2

int_status=130
arm_cleanup

"$python" demo/proxmox_server.py --port 8000 &
pids+=($!)
wait_for "the demo server" tcp_open 8000

node tests/oauth/server.mjs --port 9400 --resource http://127.0.0.1:10000/mcp &
pids+=($!)
wait_for "oidc-provider" curl -sf http://127.0.0.1:9400/.well-known/openid-configuration

session_key

"$envoy" -c envoy/envoy-oauth.yaml --disable-hot-restart --concurrency 2 &
pids+=($!)
wait_for "Envoy" http_is http://127.0.0.1:9901/ready LIVE

cat <<INFO

MCP endpoint (jwt_authn, then the policy filter): http://127.0.0.1:10000/mcp
Protected resource metadata (RFC 9728):           http://127.0.0.1:10000/.well-known/oauth-protected-resource
Authorization server (oidc-provider, dev login):  http://127.0.0.1:9400/.well-known/openid-configuration
Envoy admin:                                      http://127.0.0.1:9901

Try:  curl -si -X POST http://127.0.0.1:10000/mcp -H 'content-type: application/json' -d '{}'   (401 and the challenge)
      $python scripts/oauth_demo.py --login alice       (the whole OAuth flow with the MCP SDK, consent automated)
      $python scripts/oauth_demo.py --browser           (you log in and consent in a browser)
Ctrl-C stops.
INFO
status=0
wait -n "${pids[@]}" || status=$?
echo "run-oauth: a process exited (status $status); stopping the others" >&2
exit 1
