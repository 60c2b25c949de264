// Runs the filter's release module (the .wasm Envoy loads) in Node.js's V8 behind a small
// proxy-wasm ABI 0.2.1 host written here, and times one whole allowed request as Envoy drives it:
// context create, request headers, request body, response headers, response body, log, done,
// delete. The host calls answer from memory (headers, body, shared data, clock), so the time is the
// module's own work per request inside V8, which `run.mjs` (the decision alone) does not cover:
// the SDK's header-map and buffer copies, the request head, the decision, metrics, filter state,
// the audit record and the response side. What Envoy adds around each host call is not in it.
//
// Usage: node request.mjs MODULE.wasm POLICY BODY [ITERATIONS] [--profile]
// Prints {"us_per_request_best", "us_per_request_median", "iterations", "host_calls_per_request"}.
import { readFileSync } from 'node:fs';
import { WASI } from 'node:wasi';

const [modulePath, policyPath, bodyPath, itersArg] = process.argv.slice(2);
const iterations = Number(itersArg ?? 20000);
const policy = readFileSync(policyPath);
const body = readFileSync(bodyPath);
const enc = new TextEncoder();

// What Envoy hands the filter for the load benchmark's request (bench/wrk/post.lua through the
// front Envoy of bench/envoy/front.yaml).
const requestHeaders = [
  [':authority', '127.0.0.1:10000'], [':path', '/mcp'], [':method', 'POST'], [':scheme', 'http'],
  ['content-length', String(body.length)], ['content-type', 'application/json'],
  ['accept', 'application/json, text/event-stream'], ['authorization', 'Bearer bench-agent-token-0001'],
  ['x-forwarded-proto', 'http'], ['x-request-id', '5f0c3c9e-2b7a-4d0e-9a51-0d6a2f0e8c11'],
];
const responseHeaders = [[':status', '200'], ['content-type', 'application/json'], ['content-length', '64']];
const responseBody = enc.encode('{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}');

const OK = 0, NOT_FOUND = 1, CAS_MISMATCH = 8;
let memory, ex;
const shared = new Map(); // key -> {value: Uint8Array, cas}
let casCounter = 1;
let hostCalls = 0;
const u8 = () => new Uint8Array(memory.buffer);
const dv = () => new DataView(memory.buffer);
const str = (p, n) => Buffer.from(memory.buffer, p, n).toString('utf8');
// Copy bytes into memory the module allocates (proxy_on_memory_allocate), as the host does.
function give(bytes, dataPtr, sizePtr) {
  const p = ex.proxy_on_memory_allocate(bytes.length);
  u8().set(bytes, p);
  dv().setUint32(dataPtr, p, true);
  dv().setUint32(sizePtr, bytes.length, true);
  return OK;
}
function serializeMap(pairs) {
  const parts = pairs.map(([k, v]) => [enc.encode(k), enc.encode(v)]);
  let size = 4 + parts.length * 8;
  for (const [k, v] of parts) size += k.length + v.length + 2;
  const out = new Uint8Array(size);
  const d = new DataView(out.buffer);
  d.setUint32(0, parts.length, true);
  let p = 4 + parts.length * 8;
  parts.forEach(([k, v], i) => {
    d.setUint32(4 + i * 8, k.length, true);
    d.setUint32(8 + i * 8, v.length, true);
    out.set(k, p); p += k.length + 1;
    out.set(v, p); p += v.length + 1;
  });
  return out;
}
const maps = { 0: requestHeaders, 2: responseHeaders };
const serialized = { 0: serializeMap(requestHeaders), 2: serializeMap(responseHeaders) };
let phase = 'request';

const env = {
  proxy_log: () => OK,
  proxy_get_log_level: (p) => { dv().setUint32(p, 2, true); return OK; }, // info, Envoy's default
  proxy_get_current_time_nanoseconds: (p) => {
    dv().setBigUint64(p, BigInt(Date.now()) * 1000000n, true);
    return OK;
  },
  proxy_get_buffer_bytes: (type, start, max, dataPtr, sizePtr) => {
    const buf = type === 7 ? policy : type === 0 ? body : type === 1 ? responseBody : null;
    if (!buf) return NOT_FOUND;
    return give(buf.subarray(start, Math.min(buf.length, start + max)), dataPtr, sizePtr);
  },
  proxy_get_header_map_pairs: (type, dataPtr, sizePtr) => give(serialized[type] ?? serializeMap([]), dataPtr, sizePtr),
  proxy_get_header_map_value: (type, kp, kn, dataPtr, sizePtr) => {
    const key = str(kp, kn);
    const hit = (maps[type] ?? []).find(([k]) => k === key);
    return hit ? give(enc.encode(hit[1]), dataPtr, sizePtr) : NOT_FOUND;
  },
  proxy_replace_header_map_value: () => OK,
  proxy_remove_header_map_value: () => OK,
  proxy_add_header_map_value: () => OK,
  proxy_get_property: () => NOT_FOUND,
  proxy_set_property: () => OK,
  proxy_get_shared_data: (kp, kn, dataPtr, sizePtr, casPtr) => {
    const e = shared.get(str(kp, kn));
    if (!e) return NOT_FOUND;
    dv().setUint32(casPtr, e.cas, true);
    return give(e.value, dataPtr, sizePtr);
  },
  proxy_set_shared_data: (kp, kn, vp, vn, cas) => {
    const key = str(kp, kn);
    const e = shared.get(key);
    if (e && cas !== 0 && e.cas !== cas) return CAS_MISMATCH;
    shared.set(key, { value: u8().slice(vp, vp + vn), cas: ++casCounter });
    return OK;
  },
  proxy_define_metric: (type, np, nn, idPtr) => { dv().setUint32(idPtr, 1, true); return OK; },
  proxy_increment_metric: () => OK,
  proxy_record_metric: () => OK,
  proxy_set_tick_period_milliseconds: () => OK,
  proxy_continue_stream: () => OK,
  proxy_set_effective_context: () => OK,
};

const compiled = new WebAssembly.Module(readFileSync(modulePath));
const wasi = new WASI({ version: 'preview1', args: [], env: {}, returnOnExit: true });
const imports = wasi.getImportObject();
imports.env = {};
for (const i of WebAssembly.Module.imports(compiled)) {
  if (i.module !== 'env') continue;
  const f = env[i.name];
  imports.env[i.name] = f
    ? (...a) => { hostCalls++; return f(...a); }
    : () => { throw new Error(`host call ${i.name} is not emulated`); };
}
const instance = new WebAssembly.Instance(compiled, imports);
ex = instance.exports;
memory = ex.memory;
wasi.initialize(instance);

const ROOT = 1;
ex.proxy_on_context_create(ROOT, 0);
if (!ex.proxy_on_vm_start(ROOT, 0)) throw new Error('vm start failed');
if (!ex.proxy_on_configure(ROOT, policy.length)) throw new Error('configure failed (the policy?)');

let next = 2;
function request() {
  const id = next++;
  ex.proxy_on_context_create(id, ROOT);
  const h = ex.proxy_on_request_headers(id, requestHeaders.length, 0);
  const b = ex.proxy_on_request_body(id, body.length, 1);
  if (h !== 0 || b !== 0) throw new Error(`request not continued (headers ${h}, body ${b}): not allowed?`);
  ex.proxy_on_response_headers(id, responseHeaders.length, 0);
  ex.proxy_on_response_body(id, responseBody.length, 1);
  ex.proxy_on_log(id);
  ex.proxy_on_done(id);
  ex.proxy_on_delete(id);
}

for (let i = 0; i < 2000; i++) request(); // warm up: TurboFan, the counter key created
const before = hostCalls;
request();
const perRequest = hostCalls - before;
const times = [];
for (let round = 0; round < 5; round++) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) request();
  times.push(Number(process.hrtime.bigint() - t0) / 1000 / iterations);
}
times.sort((a, b) => a - b);
console.log(JSON.stringify({
  us_per_request_best: Number(times[0].toFixed(3)),
  us_per_request_median: Number(times[2].toFixed(3)),
  iterations,
  host_calls_per_request: perRequest,
}));
