"""testkit: the harness of the Python test tiers (tests/py, tests/envoy, tests/e2e), the benchmarks
(bench/) and the demo scripts (scripts/). Plain Python with no pytest dependency.

One module per concern, each name imported from the module it lives in:

- `paths`: the repository, the test data, the filter under test
- `processes`: child processes in their own process groups, free ports, readiness probes, `wait_for`
- `envoy`: the shipped bootstraps re-rendered for tests, Envoy processes
- `stack`: `Stack`, the pieces of one setup started under one log directory and stopped together
- `upstream`: the stub upstream built on the case recorder; the recorder's log
- `jsonrpc`: raw JSON-RPC over HTTP, exact bytes both ways; `sse`: the SSE model of the filter
- `catalog`: tool catalogues and the responders that serve them
- `stats`: Envoy's admin statistics; `logs`: the filter's audit and access-log lines
- `clock`: fixed-window alignment
- `demo`: the demo MCP server; `mcp_session`: the official SDK client on a session
- `approvals`, `rls`, `postgres`, `oauth`, `deploy`, `istio`: the approval service, the rate limit
  service and Redis, a throwaway PostgreSQL, the OAuth authorization server, the OCI image and
  registry, Istio's rendering of the filter
- `identity`: policy sets behind real `jwt_authn` (an RS256 issuer, its JWKS inlined)
"""
