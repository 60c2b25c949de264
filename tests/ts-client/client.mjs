// The official MCP TypeScript SDK client (@modelcontextprotocol/sdk), one session against URL with
// `Authorization: Bearer TOKEN`. Prints one JSON report on stdout for tests/e2e/test_sdk_typescript.py:
// the negotiated protocol version, the listed tool names, and the outcome of each call.
//   node client.mjs URL TOKEN [TOOL JSON_ARGS]...
// With MCP_TS_URL_ELICITATION=1 the client declares URL-mode elicitation (capabilities.elicitation.url);
// with MCP_TS_APPROVER_TOKEN also set, a call refused with UrlElicitationRequiredError (-32042) is
// approved through the approvals API at the elicitation URL's origin, as a person would on that
// page, and retried once (the outcome in the call's `retry`).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UrlElicitationRequiredError } from "@modelcontextprotocol/sdk/types.js";

const [url, token, ...calls] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const urlElicitation = process.env.MCP_TS_URL_ELICITATION === "1";
const approverToken = process.env.MCP_TS_APPROVER_TOKEN;
const client = new Client(
  { name: "mcp-policy-filter-ts-e2e", version: "1.0.0" },
  urlElicitation ? { capabilities: { elicitation: { url: {} } } } : undefined,
);
const outcome = async (name, args) => {
  try {
    const result = await client.callTool({ name, arguments: args });
    return { tool: name, ok: true, is_error: result.isError ?? false, text: result.content?.[0]?.text ?? null };
  } catch (e) {
    return { tool: name, ok: false, code: e.code ?? null, message: e.message, data: e.data ?? null, error: e.constructor?.name ?? null,
             elicitations: e instanceof UrlElicitationRequiredError ? e.elicitations : null };
  }
};
const approve = async (elicitation) => {
  const origin = new URL(elicitation.url).origin;
  const r = await fetch(`${origin}/v1/approvals/${elicitation.elicitationId}/approve`, {
    method: "POST", headers: { authorization: `Bearer ${approverToken}`, "content-type": "application/json" },
    body: JSON.stringify({ note: "ts e2e" }),
  });
  if (!r.ok) throw new Error(`approve: HTTP ${r.status}`);
};
const report = { calls: [] };
try {
  await client.connect(transport);
  report.protocol_version = transport.protocolVersion ?? null;
  report.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  for (let i = 0; i + 1 < calls.length; i += 2) {
    const [name, args] = [calls[i], JSON.parse(calls[i + 1])];
    const entry = await outcome(name, args);
    if (approverToken && entry.elicitations) {
      for (const elicitation of entry.elicitations) await approve(elicitation);
      entry.retry = await outcome(name, args);
    }
    report.calls.push(entry);
  }
} catch (e) {
  report.error = { code: e.code ?? null, message: String(e.message ?? e) };
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(report) + "\n");
