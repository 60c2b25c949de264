// The official MCP TypeScript SDK client (@modelcontextprotocol/sdk), one session against URL with
// `Authorization: Bearer TOKEN`. Prints one JSON report on stdout for tests/e2e/test_sdk_typescript.py:
// the negotiated protocol version, the listed tool names, and the outcome of each call.
//   node client.mjs URL TOKEN [TOOL JSON_ARGS]...
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, ...calls] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "mcp-policy-filter-ts-e2e", version: "1.0.0" });
const report = { calls: [] };
try {
  await client.connect(transport);
  report.protocol_version = transport.protocolVersion ?? null;
  report.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  for (let i = 0; i + 1 < calls.length; i += 2) {
    const [name, args] = [calls[i], JSON.parse(calls[i + 1])];
    try {
      const result = await client.callTool({ name, arguments: args });
      report.calls.push({ tool: name, ok: true, text: result.content?.[0]?.text ?? null });
    } catch (e) {
      report.calls.push({ tool: name, ok: false, code: e.code ?? null, message: e.message, data: e.data ?? null });
    }
  }
} catch (e) {
  report.error = { code: e.code ?? null, message: String(e.message ?? e) };
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(report) + "\n");
