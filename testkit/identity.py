"""Policy sets behind real `jwt_authn`: an RS256 issuer whose public key is inlined as the JWKS
(`Issuer`), and Envoy on envoy/envoy-ecds.yaml (or, for the native build, envoy-dynamic-ecds.yaml) with `jwt_authn` before the policy filter
(`forward_payload_header: x-jwt-payload`) and the payload header stripped at the edge, as
envoy/envoy-oauth.yaml does (`start_identity_envoy`). The set is written to the ECDS file, so a
test reloads it with `testkit.envoy.set_policy`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from testkit.envoy import Envoy, hcm, render_ecds_config, set_policy
from testkit.stack import Stack

ISSUER = "https://issuer.test"
AUDIENCE = "mcp-identity-test"
PAYLOAD_HEADER = "x-jwt-payload"


class Issuer:
    """An RS256 key whose public half is the JWKS inlined in the bootstrap; `token` signs claims."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.pem = self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption())
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        self.jwks = {"keys": [dict(public, kid="k1", alg="RS256", use="sig")]}

    def token(self, sub: str, **claims: Any) -> str:
        now = int(time.time())
        payload = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, "sub": sub, **claims}
        return jwt.encode(payload, self.pem, algorithm="RS256", headers={"kid": "k1"})


def start_identity_envoy(stack: Stack, upstream_port: int, issuer: Issuer, policy: dict,
                         name: str = "envoy-identity", approvals_port: int | None = None,
                         strip_filter: dict | None = None, allow_missing: bool = False) -> tuple[Envoy, Path]:
    """Envoy with jwt_authn (local JWKS of `issuer`) in front of the policy filter serving `policy`
    through ECDS (and cluster `mcp_approvals` on `approvals_port`, when given): (envoy, the ECDS file).

    The client's payload header is removed by an early header mutation, as envoy/envoy-oauth.yaml
    does; or, with `strip_filter`, by that HTTP filter put first on the chain instead (the Istio
    recipe's Lua filter). `allow_missing`: a request without a token passes jwt_authn, as Istio
    renders a RequestAuthentication (`requires_any: [provider, allow_missing]`)."""
    setup = render_ecds_config(stack.log_dir / name, upstream_port, approvals_port=approvals_port,
                               build=stack.build)
    cfg = yaml.safe_load(setup.config)
    h = hcm(cfg)
    if strip_filter is None:
        h["early_header_mutation_extensions"] = [{
            "name": "envoy.http.early_header_mutation.header_mutation",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation",
                "mutations": [{"remove": PAYLOAD_HEADER}]},
        }]
    requires: dict = {"provider_name": "test"}
    if allow_missing:
        requires = {"requires_any": {"requirements": [{"provider_name": "test"}, {"allow_missing": {}}]}}
    h["http_filters"].insert(0, {
        "name": "envoy.filters.http.jwt_authn",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication",
            "providers": {"test": {
                "issuer": ISSUER,
                "audiences": [AUDIENCE],
                "from_headers": [{"name": "authorization", "value_prefix": "Bearer "}],
                "local_jwks": {"inline_string": json.dumps(issuer.jwks)},
                "forward_payload_header": PAYLOAD_HEADER,
                "forward": False,
            }},
            "rules": [{"match": {"prefix": "/"}, "requires": requires}],
        },
    })
    if strip_filter is not None:
        h["http_filters"].insert(0, strip_filter)
    set_policy(policy, setup.ecds_file, wasm=stack.wasm)
    return stack.start_envoy(yaml.safe_dump(cfg, sort_keys=False, width=1000), name), setup.ecds_file
