// Drives invar serve's Responses API (POST /v1/responses, GET/DELETE /v1/responses/{id},
// /v1/responses/input_tokens) with the official OpenAI Node client and the Vercel AI SDK's
// default OpenAI provider (which speaks Responses): whole and streamed responses, a function
// call loop, text.format json_schema, previous_response_id, the store per API key, and the
// contract that the same conversation as chat and as Responses gives the same text and tokens.
// The tiny model writes arbitrary text: the checks are on structure and equality.
// Usage: node openai_responses_test.mjs INVAR_BINARY MODEL_GGUF CHAT_TEMPLATE
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { generateText, streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { startServer as startServerOf } from './node_server.mjs';

const [bin, model, template] = process.argv.slice(2);
const KEY_A = 'responses-key-a-0123456789';
const KEY_B = 'responses-key-b-0123456789';
const MODEL = 'qwen3next-tiny';
const keys = join(mkdtempSync(join(tmpdir(), 'invar-responses-')), 'keys');
writeFileSync(keys, `a ${KEY_A}\nb ${KEY_B}\n`);

function startServer() {
  return startServerOf(bin, ['--model', model, '--api-key-file', keys, '--block-size', '16', '--ctx', '2048',
                             '--threads', '1', '--chat-template', template]);
}

const { proc, port, log } = await startServer();
const baseURL = `http://127.0.0.1:${port}/v1`;
const client = new OpenAI({ apiKey: KEY_A, baseURL, maxRetries: 0 });
const other = new OpenAI({ apiKey: KEY_B, baseURL, maxRetries: 0 });
const results = [];
async function check(name, fn) {
  try {
    await fn();
    results.push([name, 'ok']);
  } catch (e) {
    results.push([name, 'FAIL: ' + (e.stack || e)]);
  }
}
async function expectStatus(status, fn) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `expected an APIError, got ${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status, e.message);
    return e;
  }
  assert.fail(`expected HTTP ${status}`);
}
function shape(r) {
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_[0-9a-f]+$/);
  assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  assert.equal(typeof r.output_text, 'string');
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
  assert.ok(r.output.length >= 1);
}

const weather = { type: 'function', name: 'get_weather', description: 'Weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  strict: true };
const doc = 'Report 9.' + Array.from({ length: 20 }, (_, k) => ` item ${(k * 7) % 97} is ${k}`).join('');

await check('whole', async () => {
  const r = await client.responses.create({ model: MODEL, input: 'Hello', max_output_tokens: 5, temperature: 0,
                                            metadata: { k: 'v' } });
  shape(r);
  assert.equal(r.model, MODEL);
  assert.equal(r.max_output_tokens, 5);
  assert.deepEqual(r.metadata, { k: 'v' });
  const msg = r.output.find((o) => o.type === 'message');
  assert.equal(msg.content[0].type, 'output_text');
  assert.equal(msg.content[0].text, r.output_text);
  if (r.status === 'incomplete') assert.equal(r.incomplete_details.reason, 'max_output_tokens');
});

await check('stream: typed events, then the final response', async () => {
  const stream = client.responses.stream({ model: MODEL, input: 'Count', max_output_tokens: 6, temperature: 0 });
  const events = [];
  for await (const e of stream) events.push(e);
  const final = await stream.finalResponse();
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[1].type, 'response.in_progress');
  assert.ok(['response.completed', 'response.incomplete'].includes(events.at(-1).type));
  events.forEach((e, i) => assert.equal(e.sequence_number, i));
  assert.equal(final.id, events[0].response.id);
  const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(deltas, final.output_text);
  assert.equal(events.find((e) => e.type === 'response.output_text.done').text, final.output_text);
  // stream: true on create: the same events, the same text (temperature 0).
  const raw = await client.responses.create({ model: MODEL, input: 'Count', max_output_tokens: 6, temperature: 0,
                                              stream: true });
  let text = '';
  let last;
  for await (const e of raw) {
    if (e.type === 'response.output_text.delta') text += e.delta;
    last = e;
  }
  assert.equal(text, final.output_text);
  assert.ok(last.response.usage.output_tokens > 0);
});

await check('function call loop', async () => {
  const r1 = await client.responses.create({ model: MODEL, input: 'Weather in Paris?', tools: [weather],
                                             tool_choice: 'required', max_output_tokens: 200, temperature: 0 });
  shape(r1);
  const call = r1.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(r1.output));
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof JSON.parse(call.arguments).city, 'string');
  const result = { type: 'function_call_output', call_id: call.call_id, output: '{"celsius": 21}' };
  // Continued from the store...
  const r2 = await client.responses.create({ model: MODEL, previous_response_id: r1.id, input: [result],
                                             tools: [weather], max_output_tokens: 4, temperature: 0 });
  shape(r2);
  assert.equal(r2.previous_response_id, r1.id);
  assert.ok(r2.usage.input_tokens > r1.usage.input_tokens);
  // ...or with the items sent back: the same prompt.
  const r3 = await client.responses.create({ model: MODEL, tools: [weather], max_output_tokens: 4, temperature: 0,
    input: [{ role: 'user', content: 'Weather in Paris?' }, ...r1.output, result], store: false });
  assert.equal(r3.usage.input_tokens, r2.usage.input_tokens);
  assert.equal(r3.output_text, r2.output_text);
  assert.equal(r3.store, false);
  await expectStatus(404, () => client.responses.retrieve(r3.id));
});

await check('text.format json_schema', async () => {
  const r = await client.responses.create({ model: MODEL, input: 'Is it on?', max_output_tokens: 100, temperature: 0,
    text: { format: { type: 'json_schema', name: 'answer', strict: true,
                      schema: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'],
                                additionalProperties: false } } } });
  assert.equal(r.status, 'completed');
  assert.equal(typeof JSON.parse(r.output_text).on, 'boolean');
  assert.equal(r.text.format.type, 'json_schema');
});

await check('previous_response_id, GET and DELETE, per API key', async () => {
  const r1 = await client.responses.create({ model: MODEL, input: 'My name is Ann.', max_output_tokens: 3,
                                             instructions: 'Be brief.' });
  const r2 = await client.responses.create({ model: MODEL, input: 'Who am I?', previous_response_id: r1.id,
                                             max_output_tokens: 3 });
  assert.ok(r2.usage.input_tokens > r1.usage.input_tokens, `${r2.usage.input_tokens} ≤ ${r1.usage.input_tokens}`);
  const got = await client.responses.retrieve(r1.id);
  assert.equal(got.id, r1.id);
  assert.deepEqual(got.output, r1.output);
  assert.equal(got.instructions, 'Be brief.');
  await expectStatus(404, () => other.responses.retrieve(r1.id));
  await expectStatus(404, () => other.responses.create({ model: MODEL, input: 'x', previous_response_id: r1.id }));
  await expectStatus(404, () => other.responses.delete(r1.id));
  await client.responses.delete(r1.id);
  await expectStatus(404, () => client.responses.retrieve(r1.id));
  await expectStatus(404, () => client.responses.delete(r1.id));
});

await check('chat and Responses: the same conversation, the same tokens and text', async () => {
  const chat = await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 8,
    messages: [{ role: 'system', content: 'Be brief. ' + doc }, { role: 'user', content: 'Tell me' }] });
  const resp = await client.responses.create({ model: MODEL, temperature: 0, max_output_tokens: 8,
                                               instructions: 'Be brief. ' + doc, input: 'Tell me' });
  assert.equal(resp.output_text, chat.choices[0].message.content ?? '');
  const reasoning = resp.output.find((o) => o.type === 'reasoning');
  assert.equal(reasoning ? reasoning.summary[0].text : '', chat.choices[0].message.reasoning_content ?? '');
  assert.equal(resp.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(resp.usage.output_tokens, chat.usage.completion_tokens);
  const count = await client.responses.inputTokens.count({ model: MODEL, instructions: 'Be brief. ' + doc,
                                                           input: 'Tell me' });
  assert.equal(count.object, 'response.input_tokens');
  assert.equal(count.input_tokens, chat.usage.prompt_tokens);
  const again = await client.responses.create({ model: MODEL, temperature: 0, max_output_tokens: 8,
                                                instructions: 'Be brief. ' + doc, input: 'Tell me' });
  assert.ok(again.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(again.usage));
  assert.equal(again.output_text, resp.output_text);
});

await check('refusals name the field', async () => {
  let e = await expectStatus(400, () => client.responses.create({ model: MODEL, input: 'x', background: true }));
  assert.equal(e.param, 'background');
  e = await expectStatus(400, () => client.responses.create({ model: MODEL, input: 'x',
                                                               tools: [{ type: 'web_search' }] }));
  assert.equal(e.param, 'tools[0].type');
  e = await expectStatus(400, () => client.responses.create({ model: MODEL, input: 'x', seed_me: 1 }));
  assert.equal(e.param, 'seed_me');
});

const provider = createOpenAI({ baseURL, apiKey: KEY_A });

await check('Vercel AI SDK generateText', async () => {
  const r = await generateText({ model: provider(MODEL), prompt: 'Hi', maxOutputTokens: 5, temperature: 0 });
  assert.equal(typeof r.text, 'string');
  assert.ok(r.usage.inputTokens > 0);
  assert.match(r.response.id, /^resp_/);
  const direct = await client.responses.create({ model: MODEL, input: [{ role: 'user', content: 'Hi' }],
                                                 max_output_tokens: 5, temperature: 0 });
  assert.equal(r.text, direct.output_text);
});

await check('Vercel AI SDK: a second turn sends the first by item_reference', async () => {
  const first = [{ role: 'user', content: 'Hi' }];
  const r1 = await generateText({ model: provider(MODEL), messages: first, maxOutputTokens: 4, temperature: 0 });
  const sent = [];
  const spy = createOpenAI({ baseURL, apiKey: KEY_A, fetch: async (url, init) => {
    sent.push(JSON.parse(init.body));
    return fetch(url, init);
  } });
  const next = [...first, ...r1.response.messages, { role: 'user', content: 'More' }];
  const r2 = await generateText({ model: spy(MODEL), messages: next, maxOutputTokens: 4, temperature: 0 });
  assert.ok(sent[0].input.some((i) => i.type === 'item_reference'), JSON.stringify(sent[0].input));
  assert.ok(r2.usage.inputTokens > r1.usage.inputTokens);
  // The same turn with the items written out: the same prompt, the same answer.
  const direct = await client.responses.create({ model: MODEL, max_output_tokens: 4, temperature: 0, input: [
    { role: 'user', content: 'Hi' }, { role: 'assistant', content: r1.text }, { role: 'user', content: 'More' }] });
  assert.equal(r2.usage.inputTokens, direct.usage.input_tokens);
  assert.equal(r2.text, direct.output_text);
});

await check('Vercel AI SDK streamText', async () => {
  const r = streamText({ model: provider(MODEL), prompt: 'Hi', maxOutputTokens: 5, temperature: 0 });
  let text = '';
  for await (const t of r.textStream) text += t;
  assert.equal(text, await r.text);
  assert.ok(['stop', 'length'].includes(await r.finishReason), await r.finishReason);
  assert.ok((await r.usage).outputTokens > 0);
});

proc.kill('SIGTERM');
let failed = 0;
for (const [name, status] of results) {
  console.log(`${status === 'ok' ? 'ok  ' : 'FAIL'} ${name}${status === 'ok' ? '' : '\n' + status}`);
  if (status !== 'ok') failed++;
}
if (failed) console.log('server log:\n' + log());
process.exit(failed ? 1 : 0);
