"""MCP authorization in tests: the recipe envoy/envoy-oauth.yaml, its authorization server, tokens.

- `render_oauth_config` runs the shipped recipe with only its ports and the wasm path changed: the
  URLs inside it (metadata, issuer, audience, JWKS) are rewritten from the shipped ports to the test's.
- `start_authorization_server` runs npm oidc-provider (tests/oauth/server.mjs, installed by
  `make oauth-deps`) with a signing key the test made, so that the test can also mint tokens with
  the same key (`mint`) or with keys the server never published.
- `automated_consent` plays the user in the provider's development login and consent pages over
  plain HTTP, for the SDK's `redirect_handler`.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from testkit.envoy import cluster_endpoint, hcm, set_ports, wasm_filter
from testkit.paths import REPO_ROOT, TESTS_DIR
from testkit.processes import HOST, ManagedProcess, answers
from testkit.stack import Stack

OAUTH_YAML = REPO_ROOT / "envoy" / "envoy-oauth.yaml"
OAUTH_DIR = TESTS_DIR / "oauth"
SHIPPED_LISTENER = "127.0.0.1:10000"
SHIPPED_AS = "127.0.0.1:9400"
GRANT_HEADER = "x-mcp-grant"
METADATA_PATH = "/.well-known/oauth-protected-resource"


# ----------------------------------------------------------------------------------- Envoy


def render_oauth_config(wasm: Path, listen_port: int, admin_port: int, upstream_port: int, as_port: int,
                        *, public_port: int | None = None, strip_grant_header: bool = True) -> str:
    """envoy/envoy-oauth.yaml on other ports. The URLs in it (resource, audience, metadata) name
    `public_port` (default: `listen_port`), so a second Envoy can accept the first one's tokens.
    `strip_grant_header=False` drops the early header mutation, to show what the filter does on its
    own when a client's copy of the grant header gets through."""
    text = OAUTH_YAML.read_text(encoding="utf-8")
    text = text.replace(SHIPPED_LISTENER, f"{HOST}:{public_port or listen_port}").replace(SHIPPED_AS, f"{HOST}:{as_port}")
    cfg = yaml.safe_load(text)
    set_ports(cfg, listen_port, admin_port, upstream_port)
    cluster_endpoint(cfg, "oauth_as")["port_value"] = as_port
    wasm_filter(cfg)["config"]["vm_config"]["code"]["local"]["filename"] = str(Path(wasm).resolve())
    if not strip_grant_header:
        del hcm(cfg)["early_header_mutation_extensions"]
    return yaml.safe_dump(cfg, sort_keys=False, width=1000)


# ----------------------------------------------------------------------------------- keys and tokens


@dataclass
class SigningKey:
    """An RSA key: `kid`, the private key as PEM (for PyJWT) and as a private JWK (for oidc-provider)."""

    kid: str
    pem: bytes
    jwk: dict[str, Any]


def new_signing_key(kid: str) -> SigningKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    jwk = dict(jwt.algorithms.RSAAlgorithm.to_jwk(key, as_dict=True), kid=kid, alg="RS256", use="sig")
    return SigningKey(kid, pem, jwk)


def claims(issuer: str, audience: str, sub: str | None, *, lifetime: int = 600, **extra: Any) -> dict[str, Any]:
    """Access-token claims as oidc-provider issues them (`sub` left out when None)."""
    now = int(time.time())
    out = {"iss": issuer, "aud": audience, "iat": now, "exp": now + lifetime, "scope": "mcp",
           "client_id": "minted-by-test", "jti": base64.urlsafe_b64encode(os.urandom(9)).decode()}
    if sub is not None:
        out["sub"] = sub
    out.update(extra)
    return out


def mint(key: SigningKey, payload: dict[str, Any]) -> str:
    """An RS256 JWT access token signed with `key` (header kid = key.kid, typ at+jwt, RFC 9068)."""
    return jwt.encode(payload, key.pem, algorithm="RS256", headers={"kid": key.kid, "typ": "at+jwt"})


def unsigned(payload: dict[str, Any], kid: str) -> str:
    """A JWT with `alg: none` and an empty signature (RFC 7519 §6), naming a published kid."""
    def b64(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{b64({'alg': 'none', 'typ': 'JWT', 'kid': kid})}.{b64(payload)}."


# ----------------------------------------------------------------------------------- authorization server


def node_binary() -> str:
    found = shutil.which("node")
    if not found:
        raise RuntimeError("node is needed for the authorization server (npm oidc-provider)")
    return found


def start_authorization_server(stack: Stack, port: int, resource: str, key: SigningKey,
                               timeout: float = 20.0) -> ManagedProcess:
    """oidc-provider on 127.0.0.1:`port` for `resource`, signing with `key`; waited for until its
    discovery document answers."""
    if not (OAUTH_DIR / "node_modules" / "oidc-provider").is_dir():
        raise RuntimeError("oidc-provider is not installed: run make oauth-deps")
    key_path = stack.log_dir / "as-key.jwk.json"
    key_path.write_text(json.dumps(key.jwk), encoding="utf-8")
    argv = [node_binary(), str(OAUTH_DIR / "server.mjs"), "--port", str(port), "--resource", resource,
            "--key", str(key_path)]
    return stack.spawn("oidc-provider", argv,
                       lambda: answers(f"http://{HOST}:{port}/.well-known/openid-configuration"),
                       "serving its discovery document", timeout=timeout, cwd=OAUTH_DIR)


# ----------------------------------------------------------------------------------- the SDK client


class MemoryStorage:
    """`mcp.client.auth.TokenStorage` in memory: the registration and the tokens of one client."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def client_metadata(redirect_uri: str):
    """What the SDK registers (RFC 7591): a public client (no secret; PKCE) with one redirect URI."""
    from mcp.shared.auth import OAuthClientMetadata

    return OAuthClientMetadata(client_name="mcp-policy-filter example", redirect_uris=[redirect_uri],
                               grant_types=["authorization_code"], response_types=["code"],
                               token_endpoint_auth_method="none")


def code_result(redirect: str):
    """The SDK's AuthorizationCodeResult from the redirect URL the authorization server sent."""
    from mcp.shared.auth import AuthorizationCodeResult

    query = urllib.parse.parse_qs(urllib.parse.urlsplit(redirect).query)
    if "code" not in query:
        raise RuntimeError(f"the authorization server refused: {query}")
    return AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0],
                                   iss=query.get("iss", [None])[0])


# ----------------------------------------------------------------------------------- the user


_FORM = re.compile(r'<form[^>]*action="([^"]+)"[^>]*>(.*?)</form>', re.S)
_PROMPT = re.compile(r'name="prompt" value="([a-z]+)"')


@dataclass
class ConsentTrace:
    """What the automated user saw: the prompts answered, in order, and the final redirect."""

    prompts: list[str]
    redirect: str


async def automated_consent(authorization_url: str, redirect_uri: str, login: str) -> ConsentTrace:
    """Follow `authorization_url` through oidc-provider's development interaction pages as user
    `login` (any password): sign in, then consent, until the redirect to `redirect_uri`, which is
    returned with the prompts seen. Raises AssertionError on anything unexpected (an error page, a
    loop)."""
    prompts: list[str] = []
    async with httpx.AsyncClient(follow_redirects=False, timeout=10.0) as client:
        response = await client.get(authorization_url)
        for _ in range(12):
            if response.is_redirect:
                location = urllib.parse.urljoin(str(response.url), response.headers["location"])
                if location.startswith(redirect_uri):
                    return ConsentTrace(prompts, location)
                response = await client.get(location)
                continue
            forms = _FORM.findall(response.text) if response.status_code == 200 else []
            prompt = _PROMPT.search(forms[0][1]).group(1) if forms and _PROMPT.search(forms[0][1]) else None
            if prompt not in ("login", "consent"):
                raise AssertionError(f"unexpected page from the authorization server: HTTP {response.status_code} "
                                     f"{response.text[:500]!r}")
            prompts.append(prompt)
            data = {"prompt": "login", "login": login, "password": "any"} if prompt == "login" else {"prompt": "consent"}
            response = await client.post(urllib.parse.urljoin(str(response.url), forms[0][0]), data=data)
    raise AssertionError(f"no redirect to {redirect_uri} after {prompts}")
