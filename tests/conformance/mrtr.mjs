// The 2026-07-28 multi-round-trip requests (SEP-2322) of the conformance server (server.mjs): the
// tools and the prompt the suite's input-required-result scenarios call. A first call gets
// `resultType: "input_required"` with its `inputRequests` (and a `requestState` sealed with
// HMAC-SHA-256 under a per-process key); the retry carrying the answers completes.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const STATE_KEY = randomBytes(32);
function seal(payload) {
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${body}.${createHmac('sha256', STATE_KEY).update(body).digest('base64url')}`;
}
function unseal(state) {
  if (typeof state !== 'string') return null;
  const [body, mac] = state.split('.');
  const want = createHmac('sha256', STATE_KEY).update(body ?? '').digest();
  const got = Buffer.from(mac ?? '', 'base64url');
  if (got.length !== want.length || !timingSafeEqual(got, want)) return null;
  return JSON.parse(Buffer.from(body, 'base64url').toString());
}
const ask = (message, property) => ({
  method: 'elicitation/create',
  params: {
    message,
    requestedSchema: { type: 'object', properties: { [property]: { type: 'string' } }, required: [property] }
  }
});
const sample = (text, maxTokens) => ({
  method: 'sampling/createMessage',
  params: { messages: [{ role: 'user', content: { type: 'text', text } }], maxTokens }
});
const ROOTS = { method: 'roots/list', params: {} };
const needInput = (inputRequests, requestState) => ({
  resultType: 'input_required',
  inputRequests,
  ...(requestState ? { requestState } : {})
});
const answerText = (r) => r?.content?.text ?? r?.content?.name ?? JSON.stringify(r?.content ?? r ?? null);

// name -> (inputResponses, requestState payload or null, client capabilities) -> result. Each asks
// again for what is missing rather than failing: the client may answer only some requests.
const MRTR_TOOLS = {
  test_input_required_result_elicitation: (inp) =>
    inp.user_name ? text(`Hello, ${inp.user_name.content?.name}!`) : needInput({ user_name: ask('What is your name?', 'name') }),
  test_input_required_result_sampling: (inp) =>
    inp.capital_question
      ? text(`Sampling answer: ${answerText(inp.capital_question)}`)
      : needInput({ capital_question: sample('What is the capital of France?', 100) }),
  test_input_required_result_list_roots: (inp) =>
    inp.client_roots
      ? text(`Roots: ${(inp.client_roots.roots ?? []).map((r) => r.uri).join(', ')}`)
      : needInput({ client_roots: ROOTS }),
  test_input_required_result_request_state: (inp, state) =>
    inp.confirm && state?.step === 'confirm'
      ? text('state-ok: confirmed')
      : needInput(
          {
            confirm: {
              method: 'elicitation/create',
              params: {
                message: 'Please confirm',
                requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] }
              }
            }
          },
          seal({ step: 'confirm' })
        ),
  test_input_required_result_multiple_inputs: (inp, state) =>
    inp.user_name && inp.greeting && inp.client_roots && state?.step === 'all'
      ? text(`Hello ${inp.user_name.content?.name}: ${answerText(inp.greeting)}`)
      : needInput(
          {
            user_name: ask('What is your name?', 'name'),
            greeting: sample('Generate a greeting', 50),
            client_roots: ROOTS
          },
          seal({ step: 'all' })
        ),
  test_input_required_result_multi_round: (inp, state) => {
    if (state?.step === 2 && inp.step2) return text(`Done: ${state.name}, ${inp.step2.content?.color}`);
    if (state?.step === 1 && inp.step1) {
      return needInput(
        { step2: ask('Step 2: What is your favorite color?', 'color') },
        seal({ step: 2, name: inp.step1.content?.name })
      );
    }
    return needInput({ step1: ask('Step 1: What is your name?', 'name') }, seal({ step: 1 }));
  },
  test_input_required_result_tampered_state: (inp, state) =>
    state?.step === 'sealed' && inp.confirm
      ? text('state verified')
      : needInput({ confirm: ask('Please confirm', 'ok') }, seal({ step: 'sealed' })),
  test_input_required_result_capabilities: (inp, _state, caps) => {
    if (Object.keys(inp).length > 0) return text('capabilities respected');
    const requests = {};
    if (caps.sampling) requests.sampled = sample('Summarize', 50);
    if (caps.elicitation) requests.elicited = ask('Your name?', 'name');
    if (caps.roots) requests.roots = ROOTS;
    return Object.keys(requests).length ? needInput(requests) : text('no input needed');
  }
};
const MRTR_PROMPT = 'test_input_required_result_prompt';

/** The result of an `input_required` tool or prompt, or null when `method`/`params` name none. */
export function mrtr(method, params, caps) {
  const name = params.name;
  const handler =
    method === 'tools/call'
      ? MRTR_TOOLS[name]
      : method === 'prompts/get' && name === MRTR_PROMPT
        ? (inp) =>
            inp.user_context
              ? {
                  messages: [
                    { role: 'user', content: { type: 'text', text: `Context: ${inp.user_context.content?.context}` } }
                  ]
                }
              : needInput({ user_context: ask('What context should the prompt use?', 'context') })
        : undefined;
  if (!handler) return null;
  const inp = params.inputResponses;
  const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (inp !== undefined && (!isObject(inp) || !Object.values(inp).every(isObject))) {
    return { error: { code: -32602, message: 'Invalid params: inputResponses must be an object' } };
  }
  let state = null;
  if (params.requestState !== undefined) {
    state = unseal(params.requestState);
    if (!state) return { error: { code: -32602, message: 'Invalid params: requestState failed its integrity check' } };
  }
  return { result: handler(inp ?? {}, state, caps) };
}
