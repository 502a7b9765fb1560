// Drives `invar serve` with the official OpenAI Node client, the way users point existing
// code at it: completions, chat, streaming (+ include_usage), logprobs in both shapes,
// streamed = whole, cached_tokens on a repeated document, cache_salt isolation, auth, and the
// error classes the client raises for 400/401/404/413, and structured output (response_format).
// Usage: node openai_client_test.mjs INVAR_BINARY MODEL_GGUF   (openai resolved from NODE_PATH)
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer as startServerOf } from './node_server.mjs';

const [bin, model] = process.argv.slice(2);
const KEY = 'node-key';

function startServer() {
  return startServerOf(bin, ['--model', model, '--api-key', KEY, '--block-size', '16', '--ctx', '1024',
                             '--max-body-bytes', '65536', '--threads', '1']);
}

const { proc, port } = await startServer();
const client = new OpenAI({ apiKey: KEY, baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
const results = [];
async function check(name, fn) {
  try {
    await fn();
    results.push([name, 'ok']);
  } catch (e) {
    results.push([name, 'FAIL: ' + (e.stack || e)]);
  }
}
async function expectStatus(status, cls, fn) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status);
    assert.ok(e.error && typeof e.error.message === 'string' && e.error.message.length > 0, 'error message');
    return e;
  }
  assert.fail(`expected HTTP ${status}`);
}

const doc = 'Report 9.' + Array.from({ length: 30 }, (_, k) => ` the value of item ${(k * 7) % 97} is ${k}`).join('');

await check('models', async () => {
  const list = await client.models.list();
  assert.equal(list.data[0].id, 'qwen3next-tiny');
});

await check('completion', async () => {
  const r = await client.completions.create({ model: 'qwen3next-tiny', prompt: 'Hello', max_tokens: 5, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.match(r.system_fingerprint, /^fp_[0-9a-f]{16}$/);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

await check('chat', async () => {
  const r = await client.chat.completions.create({
    model: 'qwen3next-tiny', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }],
    max_completion_tokens: 5,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
});

await check('chat stream with include_usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'qwen3next-tiny', messages: [{ role: 'user', content: 'Count' }], max_tokens: 6, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '', usage = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    if (c.choices.length) text += c.choices[0].delta.content ?? '';
  }
  assert.ok(chunks >= 2);
  assert.ok(usage && usage.completion_tokens > 0);
  assert.equal(typeof usage.prompt_tokens_details.cached_tokens, 'number');
});

async function logprobsOf(kind, stream) {
  const common = { model: 'qwen3next-tiny', max_tokens: 10, ignore_eos: true, stream, seed: 3,
                   cache_salt: `node-eq-${kind}` };
  const req = kind === 'chat'
    ? { ...common, messages: [{ role: 'user', content: 'Item 7?' }], logprobs: true, top_logprobs: 20 }
    : { ...common, prompt: 'Item 7?', logprobs: 20 };
  const api = kind === 'chat' ? client.chat.completions : client.completions;
  const out = [];
  const push = (lp) => {
    if (!lp) return;
    if (kind === 'chat') for (const e of lp.content) out.push(JSON.stringify(e));
    else lp.tokens.forEach((t, i) => out.push(JSON.stringify([t, lp.token_logprobs[i], lp.top_logprobs[i]])));
  };
  const r = await api.create(req);
  if (!stream) { push(r.choices[0].logprobs); return out; }
  for await (const c of r) if (c.choices.length) push(c.choices[0].logprobs);
  return out;
}

await check('logprobs shapes, streamed equals whole', async () => {
  for (const kind of ['completions', 'chat']) {
    const whole = await logprobsOf(kind, false);
    const streamed = await logprobsOf(kind, true);
    assert.equal(whole.length, 10);
    assert.deepEqual(streamed, whole, kind);
    if (kind === 'chat') assert.equal(JSON.parse(whole[0]).top_logprobs.length, 20);
    else assert.ok(Object.keys(JSON.parse(whole[0])[2]).length >= 1);
  }
});

await check('cached_tokens on a repeated document, salt isolation', async () => {
  const req = { model: 'qwen3next-tiny', prompt: doc, max_tokens: 3, cache_salt: 'node-a' };
  const a = await client.completions.create(req);
  const b = await client.completions.create(req);
  assert.equal(a.usage.prompt_tokens_details.cached_tokens, 0);
  assert.ok(b.usage.prompt_tokens_details.cached_tokens > 0, 'repeat must hit the cache');
  const c = await client.completions.create({ ...req, cache_salt: 'node-b' });
  assert.equal(c.usage.prompt_tokens_details.cached_tokens, 0, 'another salt must not hit');
});

await check('n choices, each its own seeded stream', async () => {
  const req = { model: 'qwen3next-tiny', prompt: 'x', max_tokens: 6, temperature: 1, ignore_eos: true };
  const r = await client.completions.create({ ...req, n: 3, seed: 40 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  for (let i = 0; i < 3; i++) {
    const one = await client.completions.create({ ...req, seed: 40 + i });
    assert.equal(r.choices[i].text, one.choices[0].text, `choice ${i}`);
  }
});

await check('errors', async () => {
  const bad = new OpenAI({ apiKey: 'wrong', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
  await expectStatus(401, OpenAI.AuthenticationError, () => bad.models.list());
  const e404 = await expectStatus(404, OpenAI.NotFoundError,
    () => client.completions.create({ model: 'gpt-4o', prompt: 'x' }));
  assert.match(e404.error.message, /gpt-4o/);
  const n = await expectStatus(400, OpenAI.BadRequestError,
    () => client.completions.create({ model: 'qwen3next-tiny', prompt: 'x', n: 0 }));
  assert.equal(n.param, 'n');
  const ctx = await expectStatus(400, OpenAI.BadRequestError,
    () => client.completions.create({ model: 'qwen3next-tiny', prompt: 'x', max_tokens: 5000 }));
  assert.match(ctx.error.message, /maximum context length/);
  await expectStatus(400, OpenAI.BadRequestError,
    () => client.chat.completions.create({ model: 'qwen3next-tiny', messages: [] }));
  await expectStatus(413, OpenAI.APIError,
    () => client.completions.create({ model: 'qwen3next-tiny', prompt: 'y'.repeat(70000) }));
});

await check('structured output: response_format json_schema, whole = streamed, 400 for a bad schema', async () => {
  const schema = { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, rain: { type: 'boolean' } },
                   required: ['city', 'rain'], additionalProperties: false };
  const req = { model: 'qwen3next-tiny', messages: [{ role: 'user', content: 'Weather in Oslo?' }], max_tokens: 100,
                temperature: 1, seed: 3, response_format: { type: 'json_schema', json_schema: { name: 'weather', strict: true, schema } } };
  const r = await client.chat.completions.create(req);
  const v = JSON.parse(r.choices[0].message.content);
  assert.deepEqual(Object.keys(v), ['city', 'rain']);
  assert.equal(typeof v.city, 'string');
  assert.equal(typeof v.rain, 'boolean');
  assert.equal(r.choices[0].finish_reason, 'stop');
  const stream = await client.chat.completions.create({ ...req, stream: true });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  assert.equal(text, r.choices[0].message.content);
  const e = await expectStatus(400, OpenAI.BadRequestError, () => client.chat.completions.create({ ...req,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'integer', multipleOf: 2 } } } }));
  assert.equal(e.param, 'response_format');
  assert.match(e.error.message, /multipleOf/);
});

proc.kill('SIGTERM');
const code = await new Promise((r) => proc.on('exit', (c) => r(c)));
let failed = 0;
for (const [name, status] of results) {
  console.log(`${status === 'ok' ? 'ok  ' : 'FAIL'} ${name}${status === 'ok' ? '' : '\n' + status}`);
  if (status !== 'ok') failed++;
}
if (code !== 0) { console.log(`FAIL server exit code ${code} after SIGTERM`); failed++; }
console.log(`${results.length - failed}/${results.length} passed`);
process.exit(failed ? 1 : 0);
