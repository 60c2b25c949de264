"""Tier 3: MCP authorization through the shipped recipe envoy/envoy-oauth.yaml.

One authorization server (npm oidc-provider, tests/oauth/server.mjs) signs with a key this module
made; one Envoy runs the recipe in front of the demo MCP server. The official Python SDK's OAuth
client (`mcp.client.auth.OAuthClientProvider`) then does the whole MCP authorization flow on its own:
401 -> protected resource metadata -> authorization server metadata -> dynamic client registration
-> authorization code with PKCE (the user's login and consent played over HTTP by
`testkit.oauth.automated_consent`) -> token -> calls, where the grant is the verified `sub`.
The refusal, forgery and quota tests use tokens minted here with PyJWT, with the server's key or
with others.
"""

from __future__ import annotations

import json
import time
import urllib.parse

import anyio
import httpx
import httpx2
import jwt
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult
from mcp import MCPError

from testkit import oauth as ho
from testkit.clock import boundary_wait
from testkit.envoy import Envoy
from testkit.jsonrpc import headers_for, post, tool_call
from testkit.logs import audit_records, grant_label
from testkit.mcp_session import open_session, result_json
from testkit.processes import HOST, free_port, wait_for
from testkit.stack import Stack

STEP_TIMEOUT = 60
EXEC = {"node": "pve1", "vmid": 100, "command": "uptime"}


class Env:
    """The module's stack: authorization server, demo server, Envoy on the recipe."""

    def __init__(self, stack: Stack):
        self.stack = stack
        self.key = ho.new_signing_key("test-key-1")
        self.as_port = free_port()
        self.issuer = f"http://{HOST}:{self.as_port}"
        listen_port = free_port()
        self.resource = f"http://{HOST}:{listen_port}/mcp"
        self.metadata_url = f"http://{HOST}:{listen_port}{ho.METADATA_PATH}"
        ho.start_authorization_server(stack, self.as_port, self.resource, self.key)
        _, self.upstream_port = stack.demo_server(json_response=True)
        config = ho.render_oauth_config(stack.wasm, listen_port, free_port(), self.upstream_port, self.as_port)
        self.envoy = stack.start_envoy(config, name="envoy-oauth")

    def token(self, sub: str | None, **changes) -> str:
        return ho.mint(self.key, ho.claims(self.issuer, self.resource, sub, **changes))

    def upstream_requests(self, envoy: Envoy | None = None) -> int:
        _, text = (envoy or self.envoy).admin_get("/stats?filter=^cluster%5C.mcp_upstream%5C.upstream_rq_total$")
        return int(text.strip().rsplit(": ", 1)[1])

    def challenge(self, error: str | None = None) -> str:
        extra = f', error="{error}"' if error else ""
        return f'Bearer resource_metadata="{self.metadata_url}"{extra}'


@pytest.fixture(scope="module")
def env(module_stack) -> Env:
    return Env(module_stack)


def run(coro_fn, *args):
    async def bounded():
        with anyio.fail_after(STEP_TIMEOUT):
            return await coro_fn(*args)
    return anyio.run(bounded)


def grant_records(envoy: Envoy, tool: str, at_least: int = 1) -> list[str]:
    """The grant labels of the filter's audit lines for `tools/call` to `tool`, in order, once there
    are `at_least` (the audit line is written as the filter decides; the access log only every 10 s)."""
    def labels():
        out = [r["grant"] for r in audit_records(envoy.log_text()) if r.get("tool") == tool and "grant" in r]
        return out if len(out) >= at_least else None
    return wait_for(labels, timeout=10, what=f"{at_least} audit lines for {tool}")


# ----------------------------------------------------------------------------------- discovery


def test_discovery_starts_from_the_401(env):
    r = post(env.envoy.mcp_url, tool_call("list_vms"), headers_for(None))
    assert (r.status, r.headers["www-authenticate"], r.body) == (401, env.challenge(), b"Jwt is missing")
    metadata_url = r.headers["www-authenticate"].split('resource_metadata="', 1)[1].rstrip('"')
    assert metadata_url == env.metadata_url
    for url in (metadata_url, metadata_url + "/mcp"):  # RFC 9728 §3.1: the path-suffixed form too
        m = httpx.get(url, timeout=5)
        assert (m.status_code, m.headers["content-type"], "www-authenticate" in m.headers) == (200, "application/json", False)
        assert m.json() == {"resource": env.resource, "authorization_servers": [env.issuer], "scopes_supported": ["mcp"],
                            "bearer_methods_supported": ["header"], "resource_name": "MCP server behind mcp-policy-filter"}
    asm = httpx.get(f"{env.issuer}/.well-known/openid-configuration", timeout=5).json()
    assert (asm["issuer"], asm["code_challenge_methods_supported"]) == (env.issuer, ["S256"])
    assert asm["registration_endpoint"] == f"{env.issuer}/reg"
    assert env.upstream_requests() == 0


# ----------------------------------------------------------------------------------- the SDK's OAuth flow


def test_sdk_oauth_flow_end_to_end(env):
    """OAuthClientProvider discovers, registers, authorizes with PKCE and calls as the user `alice`."""
    redirect_uri = f"http://{HOST}:{free_port()}/callback"  # never contacted: the code is read from the redirect
    storage = ho.MemoryStorage()
    seen: dict = {}

    async def redirect_handler(authorization_url: str) -> None:
        seen["authorization_url"] = authorization_url
        seen["trace"] = await ho.automated_consent(authorization_url, redirect_uri, login="alice")

    async def callback_handler() -> AuthorizationCodeResult:
        return ho.code_result(seen["trace"].redirect)

    provider = OAuthClientProvider(server_url=env.envoy.mcp_url, client_metadata=ho.client_metadata(redirect_uri),
                                   storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
    before = env.upstream_requests()

    async def scenario():
        async with httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(10.0, read=30.0)) as http:
            async with streamable_http_client(env.envoy.mcp_url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = result_json(await session.call_tool("list_vms", {}))
                    assert [vm["name"] for vm in listed["vms"]] == ["web-01", "db-01", "build-runner", "backup-01"]
                    with pytest.raises(MCPError) as denied:
                        await session.call_tool("delete_vm", {"node": "pve1", "vmid": 102})
                    assert denied.value.error.data["kind"] == "denied"

    run(scenario)
    # Registration (RFC 7591) happened at the advertised endpoint, as a public client.
    assert storage.client_info is not None and storage.client_info.client_id
    assert storage.client_info.token_endpoint_auth_method == "none"
    # The authorization request: code flow, PKCE S256, the resource (RFC 8707) and the scope from the metadata.
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(seen["authorization_url"]).query)
    assert seen["authorization_url"].startswith(f"{env.issuer}/auth?")
    assert (q["response_type"], q["code_challenge_method"], q["resource"], q["scope"]) == (
        ["code"], ["S256"], [env.resource], ["mcp"])
    assert q["client_id"] == [storage.client_info.client_id]
    assert seen["trace"].prompts == ["login", "consent"]
    # The token: a JWT for this resource, for user alice, signed with the server's key.
    token = storage.tokens.access_token
    payload = jwt.decode(token, key=jwt.algorithms.RSAAlgorithm.from_jwk(json.dumps(env.key.jwk)).public_key(),
                         algorithms=["RS256"], audience=env.resource, issuer=env.issuer)
    assert (payload["sub"], payload["scope"], payload["client_id"]) == ("alice", "mcp", storage.client_info.client_id)
    # The grant is the verified subject, not the token: the label is the hash of "alice".
    assert grant_records(env.envoy, "list_vms")[-1] == grant_label("alice")
    assert grant_records(env.envoy, "delete_vm")[-1] == grant_label("alice")
    assert env.upstream_requests() > before


# ----------------------------------------------------------------------------------- refused tokens


def _other_key_token(env: Env) -> str:
    return ho.mint(ho.new_signing_key("test-key-1"), ho.claims(env.issuer, env.resource, "alice"))


REFUSED = {
    "other_audience": lambda env: env.token("alice", aud="http://127.0.0.1:1/other-mcp"),
    "expired": lambda env: env.token("alice", lifetime=-3600),
    "not_yet_valid": lambda env: env.token("alice", nbf=int(time.time()) + 3600),
    "other_issuer": lambda env: env.token("alice", iss="http://127.0.0.1:1"),
    "unknown_key": lambda env: ho.mint(ho.new_signing_key("never-published"), ho.claims(env.issuer, env.resource, "alice")),
    # Same kid as the published key, other key material: the signature does not verify.
    "wrong_signature": _other_key_token,
    "alg_none": lambda env: ho.unsigned(ho.claims(env.issuer, env.resource, "alice"), env.key.kid),
    "not_a_jwt": lambda env: "opaque-token-the-agent-made-up",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_tokens_get_the_challenge_and_reach_nothing(env, case):
    token = REFUSED[case](env)
    before = env.upstream_requests()
    for method in ("POST", "GET"):
        r = httpx.request(method, env.envoy.mcp_url, headers=headers_for(token),
                          content=tool_call("list_vms") if method == "POST" else None, timeout=5)
        assert (r.status_code, r.headers["www-authenticate"]) == (401, env.challenge("invalid_token")), r.text
    assert env.upstream_requests() == before


def test_a_token_in_the_query_string_is_not_accepted(env):
    """MCP authorization forbids access tokens in the URI; jwt_authn would read `access_token` by default."""
    before = env.upstream_requests()
    r = post(f"{env.envoy.mcp_url}?access_token={env.token('alice')}", tool_call("list_vms"), headers_for(None))
    assert (r.status, r.headers["www-authenticate"], r.body) == (401, env.challenge(), b"Jwt is missing")
    assert env.upstream_requests() == before


def test_a_verified_token_without_sub_is_no_grant(env):
    """jwt_authn accepts it, sets no grant header, and the filter refuses with its own 401 and challenge."""
    before = env.upstream_requests()
    r = post(env.envoy.mcp_url, tool_call("list_vms", id=7), headers_for(env.token(None)))
    assert (r.status, r.headers["www-authenticate"]) == (401, env.challenge())
    assert (r.json()["id"], r.error["code"], r.error["data"]["kind"]) == (7, -31003, "no_grant")
    assert env.upstream_requests() == before


# ----------------------------------------------------------------------------------- header forgery


def test_a_forged_grant_header_is_stripped(env):
    async def scenario():
        # A valid token for alice, plus the grant header of a fresh identity.
        headers = {ho.GRANT_HEADER: "mallory-0001"}
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {env.token('alice')}", **headers}) as http:
            async with streamable_http_client(env.envoy.mcp_url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    assert result_json(await session.call_tool("list_vms", {}))["vms"]

    run(scenario)
    assert grant_records(env.envoy, "list_vms")[-1] == grant_label("alice")
    assert grant_label("mallory-0001") not in grant_records(env.envoy, "list_vms", 2)
    # Without a token the forged header is no grant either: jwt_authn refuses first.
    r = post(env.envoy.mcp_url, tool_call("list_vms"), headers_for(None, **{ho.GRANT_HEADER: "mallory-0001"}))
    assert (r.status, r.headers["www-authenticate"]) == (401, env.challenge())
    # The underscore spelling, which CGI-style servers fold into the same name, is refused outright.
    r = post(env.envoy.mcp_url, tool_call("list_vms"), headers_for(env.token("alice"), x_mcp_grant="mallory-0001"))
    assert r.status == 400


def test_jwt_authn_also_sanitizes_the_grant_header(env):
    """The recipe without its early header mutation: Envoy 1.40's jwt_authn removes a client's copy
    of every claim_to_headers header before it verifies (and then sets the verified claim), so even
    then the client's copy is never the grant. The recipe still strips it at the edge, for routes
    and paths where jwt_authn does not run."""
    stack = env.stack
    config = ho.render_oauth_config(stack.wasm, free_port(), free_port(), env.upstream_port,
                                    env.as_port, public_port=urllib.parse.urlsplit(env.resource).port,
                                    strip_grant_header=False)
    envoy = stack.start_envoy(config, name="envoy-oauth-nostrip")
    try:
        forged = {ho.GRANT_HEADER: "mallory-0002"}
        r = post(envoy.mcp_url, tool_call("list_vms", id=3), headers_for(env.token("alice"), **forged))
        assert r.status != 401, r.body
        assert grant_records(envoy, "list_vms") == [grant_label("alice")]
        r = post(envoy.mcp_url, tool_call("list_vms", id=4), headers_for(env.token(None), **forged))
        assert (r.status, r.error["data"]["kind"]) == (401, "no_grant")
    finally:
        envoy.stop()
    # The shipped recipe: the same.
    before = env.upstream_requests()
    r = post(env.envoy.mcp_url, tool_call("list_vms", id=4), headers_for(env.token(None), **forged))
    assert (r.status, r.headers["www-authenticate"], r.error["data"]["kind"]) == (401, env.challenge(), "no_grant")
    assert env.upstream_requests() == before


# ----------------------------------------------------------------------------------- quota per identity


def test_quota_is_per_identity_not_per_token(env):
    """vm_agent_exec: 10 a minute per grant. Two tokens of carol share 10; dave has his own 10."""
    carol_1, carol_2, dave = env.token("carol"), env.token("carol"), env.token("dave")
    assert carol_1 != carol_2

    async def calls(token: str, n: int) -> list[str]:
        out = []
        async with open_session(env.envoy.mcp_url, token) as s:
            for _ in range(n):
                try:
                    result_json(await s.call_tool("vm_agent_exec", EXEC))
                    out.append("ok")
                except MCPError as e:
                    out.append(e.error.data["kind"])
        return out

    async def scenario():
        await anyio.sleep(boundary_wait(margin=8))
        first = await calls(carol_1, 6)
        second = await calls(carol_2, 6)
        third = await calls(dave, 11)
        return first, second, third

    first, second, third = run(scenario)
    assert first == ["ok"] * 6
    assert second == ["ok"] * 4 + ["rate_limited"] * 2
    assert third == ["ok"] * 10 + ["rate_limited"]
    labels = grant_records(env.envoy, "vm_agent_exec", 23)
    assert labels == [grant_label("carol")] * 12 + [grant_label("dave")] * 11


# ----------------------------------------------------------------------------------- the JWKS cache


def test_jwks_cache_and_an_unreachable_authorization_server(env):
    """remote_jwks with cache_duration: keys fetched at startup keep verifying tokens while the
    authorization server is down; an Envoy that never got the keys refuses every token (fail closed)."""
    stack = env.stack
    as_port = free_port()
    issuer = f"http://{HOST}:{as_port}"
    server = ho.start_authorization_server(stack, as_port, env.resource, env.key)
    public_port = urllib.parse.urlsplit(env.resource).port

    def start(name: str) -> Envoy:
        config = ho.render_oauth_config(stack.wasm, free_port(), free_port(), env.upstream_port,
                                        as_port, public_port=public_port)
        return stack.start_envoy(config, name=name)

    def status(envoy: Envoy) -> int:
        token = ho.mint(env.key, ho.claims(issuer, env.resource, "erin"))
        return post(envoy.mcp_url, tool_call("list_vms"), headers_for(token)).status

    cached = start("envoy-oauth-cache")
    try:
        assert status(cached) != 401
        server.stop()
        assert status(cached) != 401  # keys from the cache
        cold = start("envoy-oauth-cold")
        try:
            r = post(cold.mcp_url, tool_call("list_vms"), headers_for(ho.mint(env.key, ho.claims(issuer, env.resource, "erin"))))
            assert (r.status, r.headers["www-authenticate"]) == (401, env.challenge("invalid_token"))
            assert env.upstream_requests(cold) == 0
        finally:
            cold.stop()
    finally:
        cached.stop()
