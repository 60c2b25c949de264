// The authorization server of `make run-oauth` and the OAuth tests: npm oidc-provider (a certified
// OpenID provider, pinned in package.json), configured for MCP authorization and started on 127.0.0.1.
//
//   node server.mjs --port 9400 --resource http://127.0.0.1:10000/mcp [--key key.jwk.json]
//
// - issuer http://127.0.0.1:PORT; metadata at /.well-known/openid-configuration, keys at /jwks;
// - open dynamic client registration (RFC 7591) at /reg;
// - authorization code flow, PKCE required for public clients (token_endpoint_auth_method "none");
// - resource indicators (RFC 8707): a token for RESOURCE is a JWT (RS256) with aud = RESOURCE,
//   sub = the login, scope "mcp", valid 10 minutes; any other resource is refused (invalid_target);
// - the development login and consent pages of oidc-provider: any login name, any password.
//   For local use only: never expose these pages.
// The signing key is --key (a private RSA JWK with "kid"; the tests write it so that they can also
// mint tokens with it), else a fresh one per start.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import Provider, { errors } from 'oidc-provider';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '9400' },
    resource: { type: 'string', default: 'http://127.0.0.1:10000/mcp' },
    key: { type: 'string' },
  },
});
const port = Number(args.port);
const issuer = `http://127.0.0.1:${port}`;
const { resource } = args;

function signingKey() {
  if (args.key) return JSON.parse(readFileSync(args.key, 'utf8'));
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomBytes(8).toString('hex'), alg: 'RS256', use: 'sig' };
}

const provider = new Provider(issuer, {
  jwks: { keys: [signingKey()] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', 'mcp'],
  features: {
    registration: { enabled: true },
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, indicator) {
        if (indicator !== resource) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        return {
          scope: 'mcp',
          audience: resource,
          accessTokenTTL: 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  ttl: { AccessToken: 600, AuthorizationCode: 60, Grant: 3600, Interaction: 600, Session: 3600 },
});

createServer(provider.callback()).listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider: issuer ${issuer}, resource ${resource}`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
