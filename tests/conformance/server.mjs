// An MCP server for the official conformance suite's server scenarios (npm
// @modelcontextprotocol/conformance), written against the official TypeScript SDK
// (npm @modelcontextprotocol/sdk, pinned in package.json). The suite's own reference server
// lives only in its GitHub repository, which CI cannot reach; this one serves the same tool,
// resource and prompt names the scenarios call.
//
// Two wires on one endpoint, /mcp:
// - 2025-06-18 and 2025-11-25: the SDK's Streamable HTTP transport with sessions (initialize, GET
//   stream, DELETE). Requests the server sends while a tool runs (sampling, elicitation) go on that
//   tool call's own POST stream (`extra.sendRequest`), never on the standalone GET stream: a client
//   that has not opened its GET stream yet would never see them.
// - 2026-07-28 (no sessions; every request carries MCP-Protocol-Version and
//   `_meta["io.modelcontextprotocol/protocolVersion"]`): validated here, then dispatched to the same
//   McpServer through an in-memory client, the result stamped with `resultType` and the caching hints.
//   Multi-round-trip requests (`input_required`, SEP-2322) are served by mrtr.mjs.
//
// Usage: node server.mjs PORT   (prints "listening PORT" when ready)
import { randomUUID } from 'node:crypto';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { mrtr } from './mrtr.mjs';

const DRAFT = '2026-07-28';
const LEGACY = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
// The versions this server is tested in and lists in `server/discover`; the gateway in front of it
// accepts the same (gateway.protocol_versions), so its −32022 names only versions served here.
const SUPPORTED = ['2025-03-26', '2025-06-18', '2025-11-25', DRAFT];
// A 1x1 PNG and a short WAV header: content the scenarios check by type and MIME type only.
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ content: [{ type: 'text', text: t }] });

function build() {
  const server = new McpServer(
    { name: 'mcp-policy-filter-conformance-server', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {}
      }
    }
  );
  const tool = (name, description, cb, inputSchema = {}) =>
    server.registerTool(name, { description, inputSchema }, cb);

  tool('test_simple_text', 'Returns simple text', async () =>
    text('This is a simple text response for testing.')
  );
  tool('test_image_content', 'Returns an image', async () => ({
    content: [{ type: 'image', data: PNG, mimeType: 'image/png' }]
  }));
  tool('test_audio_content', 'Returns audio', async () => ({
    content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }]
  }));
  tool('test_embedded_resource', 'Returns an embedded resource', async () => ({
    content: [
      {
        type: 'resource',
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' }
      }
    ]
  }));
  tool('test_multiple_content_types', 'Returns text, image and resource', async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      {
        type: 'resource',
        resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' }
      }
    ]
  }));
  tool('test_tool_with_logging', 'Sends three log messages', async (_args, extra) => {
    for (const data of ['Tool execution started', 'Tool processing data', 'Tool execution completed']) {
      await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
      await sleep(20);
    }
    return text('Tool with logging executed successfully');
  });
  tool('test_tool_with_progress', 'Reports progress 0, 50, 100', async (_args, extra) => {
    const progressToken = extra._meta?.progressToken;
    for (const progress of [0, 50, 100]) {
      if (progressToken !== undefined) {
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` }
        });
      }
      await sleep(20);
    }
    return text('Tool with progress executed successfully');
  });
  // On the 2026-07-28 wire it needs the client's sampling capability (`draft` answers −32021 without);
  // on the session wire the capability was negotiated at initialize.
  tool('test_missing_capability', 'Needs the client to declare sampling', async () => text('sampling declared'));
  tool('test_error_handling', 'Always fails', async () => ({
    isError: true,
    content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }]
  }));
  tool(
    'test_sampling',
    'Asks the client for a completion',
    async ({ prompt }, extra) => {
      const result = await extra.sendRequest(
        {
          method: 'sampling/createMessage',
          params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 }
        },
        CreateMessageResultSchema
      );
      const reply = result.content?.type === 'text' ? result.content.text : '';
      return text(`LLM response: ${reply}`);
    },
    { prompt: z.string() }
  );
  tool(
    'test_elicitation',
    'Asks the user for input',
    async ({ message }, extra) => {
      const result = await extra.sendRequest(
        {
          method: 'elicitation/create',
          params: {
            message,
            requestedSchema: {
              type: 'object',
              properties: { username: { type: 'string', description: "User's response" }, email: { type: 'string' } },
              required: ['username', 'email']
            }
          }
        },
        ElicitResultSchema
      );
      return text(`User response: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
    },
    { message: z.string() }
  );
  tool('test_elicitation_sep1034_defaults', 'Elicitation with a default for every field', async (_args, extra) => {
    const result = await extra.sendRequest(
      {
        method: 'elicitation/create',
        params: {
          message: 'Please review and update the form fields with defaults',
          requestedSchema: {
            type: 'object',
            properties: {
              name: { type: 'string', description: 'User name', default: 'John Doe' },
              age: { type: 'integer', description: 'User age', default: 30 },
              score: { type: 'number', description: 'User score', default: 95.5 },
              status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
              verified: { type: 'boolean', description: 'Verification status', default: true }
            },
            required: []
          }
        }
      },
      ElicitResultSchema
    );
    return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
  });
  tool('test_elicitation_sep1330_enums', 'Elicitation with every enum form', async (_args, extra) => {
    const options = ['option1', 'option2', 'option3'];
    const titled = options.map((o, i) => ({ const: o, title: `Option ${i + 1}` }));
    const result = await extra.sendRequest(
      {
        method: 'elicitation/create',
        params: {
          message: 'Please select options from the enum fields',
          requestedSchema: {
            type: 'object',
            properties: {
              untitledSingle: { type: 'string', description: 'Select one option', enum: options },
              titledSingle: { type: 'string', description: 'Select one option with titles', oneOf: titled },
              legacyEnum: {
                type: 'string',
                description: 'Select one option (legacy)',
                enum: options,
                enumNames: ['Option One', 'Option Two', 'Option Three']
              },
              untitledMulti: { type: 'array', description: 'Select multiple options', minItems: 1, maxItems: 3, items: { type: 'string', enum: options } },
              titledMulti: { type: 'array', description: 'Select multiple options with titles', minItems: 1, maxItems: 3, items: { anyOf: titled } }
            },
            required: []
          }
        }
      },
      ElicitResultSchema
    );
    return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
  });

  const resource = (name, uri, mimeType, body) =>
    server.registerResource(name, uri, { mimeType }, async () => ({ contents: [{ uri, mimeType, ...body }] }));
  resource('Static Text Resource', 'test://static-text', 'text/plain', {
    text: 'This is the content of the static text resource.'
  });
  resource('Static Binary Resource', 'test://static-binary', 'image/png', { blob: PNG });
  resource('Watched Resource', 'test://watched-resource', 'text/plain', { text: 'Watched resource content' });
  server.registerResource(
    'Resource Template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [
        { uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }
      ]
    })
  );
  server.server.setRequestHandler(SubscribeRequestSchema, async () => ({}));
  server.server.setRequestHandler(UnsubscribeRequestSchema, async () => ({}));

  server.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments' }, async () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }]
  }));
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with arguments',
      argsSchema: {
        arg1: completable(z.string().describe('First test argument'), (v) =>
          ['paris', 'park', 'party'].filter((c) => c.startsWith(v ?? ''))
        ),
        arg2: z.string().describe('Second test argument')
      }
    },
    async ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }]
    })
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    { description: 'A prompt with an embedded resource', argsSchema: { resourceUri: z.string() } },
    async ({ resourceUri }) => ({
      messages: [
        { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } }
      ]
    })
  );
  server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, async () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } }
    ]
  }));
  return server;
}

// ---- 2026-07-28: per-request metadata, no sessions ----
let dispatchClient;
async function dispatcher() {
  if (!dispatchClient) {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await build().connect(serverSide);
    const client = new Client({ name: 'draft-dispatch', version: '1.0.0' });
    await client.connect(clientSide);
    dispatchClient = client;
  }
  return dispatchClient;
}
const DISPATCHED = new Set([
  'tools/list', 'tools/call', 'resources/list', 'resources/templates/list', 'resources/read',
  'prompts/list', 'prompts/get', 'completion/complete'
]);
const CACHEABLE = new Set(['server/discover', 'tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']);

/** A tools/call answered as an SSE stream: three progress notifications, then the result. */
async function progressStream(res, id, progressToken) {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  const send = (message) => res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', ...message })}\n\n`);
  for (const progress of [0, 50, 100]) {
    send({ method: 'notifications/progress', params: { progressToken, progress, total: 100 } });
    await sleep(20);
  }
  send({ id, result: { resultType: 'complete', ...text('Tool with progress executed successfully') } });
  res.end();
}

function reply(res, status, id, body) {
  res.status(status).json({ jsonrpc: '2.0', id, ...body });
}
function result(res, id, method, value) {
  const out = { resultType: 'complete', ...value };
  if (CACHEABLE.has(method)) {
    out.ttlMs ??= 0;
    out.cacheScope ??= 'private';
  }
  reply(res, 200, id, { result: out });
}

async function draft(req, res) {
  const body = req.body ?? {};
  const id = body.id ?? null;
  const method = body.method;
  const params = body.params ?? {};
  const meta = params._meta;
  const header = req.headers['mcp-protocol-version'];
  if (!header) return reply(res, 400, id, { error: { code: -32020, message: 'Missing MCP-Protocol-Version header' } });
  const version = meta?.['io.modelcontextprotocol/protocolVersion'];
  if (!version || !meta['io.modelcontextprotocol/clientCapabilities']) {
    return reply(res, 400, id, { error: { code: -32602, message: 'Invalid params: _meta needs protocolVersion and clientCapabilities' } });
  }
  if (header !== version) return reply(res, 400, id, { error: { code: -32020, message: 'MCP-Protocol-Version header does not match _meta' } });
  if (version !== DRAFT) {
    return reply(res, 400, id, {
      error: { code: -32022, message: 'Unsupported protocol version', data: { supported: SUPPORTED, requested: String(version) } }
    });
  }
  if (body.id === undefined) return res.status(202).end();
  if (method === 'server/discover') {
    return result(res, id, method, {
      supportedVersions: SUPPORTED,
      capabilities: { tools: {}, resources: {}, prompts: {}, completions: {} },
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'mcp-policy-filter-conformance-server', version: '1.0.0' } }
    });
  }
  if (!DISPATCHED.has(method)) return reply(res, 404, id, { error: { code: -32601, message: `Method not found: ${method}` } });
  const caps = meta['io.modelcontextprotocol/clientCapabilities'];
  if (method === 'tools/call' && params.name === 'test_missing_capability' && !caps.sampling) {
    return reply(res, 400, id, {
      error: {
        code: -32021,
        message: 'Missing required client capability: sampling',
        data: { requiredCapabilities: { sampling: {} } }
      }
    });
  }
  if (method === 'tools/call' && params.name === 'test_tool_with_progress' && meta.progressToken !== undefined) {
    return progressStream(res, id, meta.progressToken);
  }
  const multiRound = mrtr(method, params, caps);
  if (multiRound?.error) return reply(res, 200, id, multiRound);
  if (multiRound) return result(res, id, method, multiRound.result);
  const { _meta, ...rest } = params;
  try {
    const client = await dispatcher();
    const value = await client.request({ method, params: rest }, z.object({}).passthrough());
    if (method === 'tools/list') for (const t of value.tools ?? []) t.inputSchema ??= { type: 'object' };
    return result(res, id, method, value);
  } catch (err) {
    const code = typeof err?.code === 'number' ? err.code : -32603;
    // SEP-2164: a resource that does not exist is −32602 naming its URI.
    const data = method === 'resources/read' ? { uri: rest.uri, ...(err?.data ?? {}) } : err?.data;
    return reply(res, 200, id, { error: { code, message: String(err?.message ?? err), ...(data ? { data } : {}) } });
  }
}

// ---- 2025-06-18 / 2025-11-25: sessions ----
const sessions = new Map();
const app = createMcpExpressApp();

app.post('/mcp', async (req, res) => {
  const sid = req.headers['mcp-session-id'];
  const header = req.headers['mcp-protocol-version'];
  const meta = req.body?.params?._meta;
  const legacy = meta?.['io.modelcontextprotocol/protocolVersion'] === undefined && LEGACY.includes(header);
  if (!sid && (header || meta?.['io.modelcontextprotocol/protocolVersion']) && !legacy) return draft(req, res);
  let transport = sid ? sessions.get(sid) : undefined;
  if (!transport) {
    if (sid || req.body?.method !== 'initialize') {
      return reply(res, sid ? 404 : 400, req.body?.id ?? null, { error: { code: -32000, message: 'No valid session' } });
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, transport)
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await build().connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});

for (const verb of ['get', 'delete']) {
  app[verb]('/mcp', async (req, res) => {
    const transport = sessions.get(req.headers['mcp-session-id']);
    if (!transport) return res.status(req.headers['mcp-session-id'] ? 404 : 400).send('Unknown or missing session');
    await transport.handleRequest(req, res);
  });
}

const port = Number(process.argv[2] ?? 0);
const listener = app.listen(port, '127.0.0.1', () => console.log(`listening ${listener.address().port}`));
