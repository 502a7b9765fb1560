// Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) through the official
// Anthropic Node client against the real `invar serve`: a message, a stream (events and the
// message the SDK assembles from them), token counting, errors as the SDK's classes, and the
// contract that /v1/messages is /v1/chat/completions in another shape: the same conversation
// gives the same output and the same counts through both, and a repeated prompt is read from
// the cache. A tool loop (tool_use → tool_result, thinking blocks sent back) runs on a replay
// server, whose fixture outputs hold the calls a random-weight model never writes.
// Usage: node anthropic_client_test.mjs INVAR_BINARY TINY_GGUF QWEN35_GGUF TEMPLATES_DIR REPLAY_JSON
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startServer as startServerOf } from './node_server.mjs';

const [bin, tiny, qwen35, templates, replay] = process.argv.slice(2);
const KEY = 'anthropic-key';

function startServer(args) {
  return startServerOf(bin, args);
}

const plain = await startServer(['--model', tiny, '--api-key', KEY, '--block-size', '16', '--ctx', '1024',
                                 '--threads', '1']);
const tools = await startServer(['--model', qwen35, '--chat-template', `${templates}/Qwen3.5-4B.jinja`,
                                 '--replay-outputs', replay]);
const client = new Anthropic({ apiKey: KEY, baseURL: `http://127.0.0.1:${plain.port}`, maxRetries: 0 });
const toolClient = new Anthropic({ apiKey: 'none', baseURL: `http://127.0.0.1:${tools.port}`, maxRetries: 0 });
const MODEL = 'qwen3next-tiny';

const checks = [];
const check = (name, fn) => checks.push({ name, fn });

const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
const thinkingOf = (m) => m.content.filter((b) => b.type === 'thinking').map((b) => b.thinking).join('');

check('messages.create: a message in Anthropic\'s shape', async () => {
  const m = await client.messages.create({ model: MODEL, max_tokens: 6, system: 'Be brief.',
    messages: [{ role: 'user', content: 'Hi' }] });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, MODEL);
  assert.match(m.id, /^msg_/);
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  assert.equal(m.stop_sequence, null);
  for (const b of m.content) assert.ok(['text', 'thinking'].includes(b.type), b.type);
  assert.ok(m.usage.input_tokens > 0);
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 6);
});

check('messages.stream: events in order, the assembled message equals the whole one', async () => {
  const req = { model: MODEL, max_tokens: 8, temperature: 0, messages: [{ role: 'user', content: 'Count to ten' }],
                metadata: { user_id: 'stream-user' } };
  const whole = await client.messages.create(req);
  const stream = client.messages.stream(req);
  const names = [];
  for await (const ev of stream) names.push(ev.type);
  const final = await stream.finalMessage();
  assert.equal(names[0], 'message_start');
  assert.equal(names.at(-1), 'message_stop');
  assert.equal(names.at(-2), 'message_delta');
  assert.equal(names.filter((n) => n === 'content_block_start').length, final.content.length);
  assert.equal(names.filter((n) => n === 'content_block_stop').length, final.content.length);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(final.usage.input_tokens + final.usage.cache_read_input_tokens,
               whole.usage.input_tokens + whole.usage.cache_read_input_tokens);
});

// The same conversation through both front ends, at temperature 0 with the same max tokens.
const doc = 'Report 12.' + Array.from({ length: 24 }, (_, k) => ` the value of item ${(k * 5) % 89} is ${k}`).join('');
const conversation = [{ role: 'user', content: 'Summarise the report.' }];

async function chatOf(body) {
  const r = await fetch(`http://127.0.0.1:${plain.port}/v1/chat/completions`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` }, body: JSON.stringify(body) });
  assert.equal(r.status, 200, await r.clone().text());
  return r.json();
}

check('contract: /v1/messages writes what /v1/chat/completions writes, with the same counts', async () => {
  const chat = await chatOf({ model: MODEL, max_tokens: 12, temperature: 0,
    messages: [{ role: 'system', content: doc }, ...conversation] });
  const m = await client.messages.create({ model: MODEL, max_tokens: 12, temperature: 0, system: doc,
    messages: conversation });
  const cm = chat.choices[0].message;
  assert.ok(chat.usage.completion_tokens > 0 && (cm.content ?? '').length > 0, 'the comparison is not vacuous');
  assert.equal(textOf(m), cm.content ?? '');
  assert.equal(thinkingOf(m), cm.reasoning_content ?? '');
  assert.equal(m.usage.output_tokens, chat.usage.completion_tokens);
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, chat.usage.prompt_tokens);
  const counted = await client.messages.countTokens({ model: MODEL, system: doc, messages: conversation });
  assert.equal(counted.input_tokens, chat.usage.prompt_tokens, 'count_tokens counts the prompt the chat read');
});

check('a repeated prompt is read from the cache', async () => {
  const req = { model: MODEL, max_tokens: 2, system: doc + ' Again.', messages: conversation };
  await client.messages.create(req);
  const again = await client.messages.create(req);
  assert.ok(again.usage.cache_read_input_tokens > 0, JSON.stringify(again.usage));
  assert.equal(again.usage.cache_creation_input_tokens, 0);
});

check('countTokens: the tools are counted too (a template that renders them)', async () => {
  const bare = await toolClient.messages.countTokens({ model: 'replay', messages: conversation });
  const withTool = await toolClient.messages.countTokens({ model: 'replay', messages: conversation,
    tools: [{ name: 'lookup', description: 'Look an item up', input_schema: { type: 'object', properties: { item: { type: 'integer' } } } }] });
  assert.ok(bare.input_tokens > 0);
  assert.ok(withTool.input_tokens > bare.input_tokens, `${withTool.input_tokens} > ${bare.input_tokens}`);
});

check('errors as the SDK\'s classes', async () => {
  await assert.rejects(client.messages.create({ model: MODEL, messages: conversation }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, 400);
    assert.equal(e.error.type, 'error');
    assert.equal(e.error.error.type, 'invalid_request_error');
    assert.match(e.error.error.message, /max_tokens/);
    return true;
  });
  await assert.rejects(client.messages.create({ model: MODEL, max_tokens: 3, messages: conversation, n: 2 }),
    (e) => e instanceof Anthropic.BadRequestError && /unknown field 'n'/.test(e.error.error.message));
  await assert.rejects(client.messages.create({ model: 'claude-nope', max_tokens: 3, messages: conversation }),
    (e) => e instanceof Anthropic.NotFoundError && e.error.error.type === 'not_found_error');
  const wrongKey = new Anthropic({ apiKey: 'wrong', baseURL: `http://127.0.0.1:${plain.port}`, maxRetries: 0 });
  await assert.rejects(wrongKey.messages.countTokens({ model: MODEL, messages: conversation }),
    (e) => e instanceof Anthropic.AuthenticationError && e.error.error.type === 'authentication_error');
});

const weather = { name: 'get_weather', description: 'Weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
const time = { name: 'get_time', description: 'Time in a zone',
  input_schema: { type: 'object', properties: { zone: { type: 'string' } } } };

check('tool loop: tool_use, tool_result, thinking sent back; each turn whole = streamed', async () => {
  const results = { get_weather: 'OSLO-WEATHER: 4 degrees, rain', get_time: 'OSLO-TIME: 09:30' };
  const messages = [{ role: 'user', content: 'What should I wear in Oslo today?' }];
  const turns = [];
  for (let turn = 0; turn < 3; turn++) {
    const req = { model: 'replay', max_tokens: 200, tools: [weather, time], messages };
    const whole = await toolClient.messages.create(req);
    const streamed = await toolClient.messages.stream(req).finalMessage();
    // Call ids are drawn per request; all else is the same.
    const noIds = (m) => m.content.map((b) => (b.type === 'tool_use' ? { ...b, id: 'x' } : b));
    assert.deepEqual(noIds(streamed), noIds(whole), `turn ${turn}: the stream assembles to the whole message`);
    for (const b of whole.content.filter((c) => c.type === 'tool_use')) assert.match(b.id, /^call_/);
    assert.equal(streamed.stop_reason, whole.stop_reason);
    turns.push(whole);
    if (whole.stop_reason !== 'tool_use') break;
    messages.push({ role: 'assistant', content: whole.content });
    messages.push({ role: 'user', content: whole.content.filter((b) => b.type === 'tool_use')
      .map((b) => ({ type: 'tool_result', tool_use_id: b.id, content: [{ type: 'text', text: results[b.name] }] })) });
  }
  assert.equal(turns.length, 3, 'call, call, answer');
  const calls = (m) => m.content.filter((b) => b.type === 'tool_use').map((b) => [b.name, b.input]);
  assert.deepEqual(calls(turns[0]), [['get_weather', { city: 'Oslo' }]]);
  assert.deepEqual(calls(turns[1]), [['get_time', { zone: 'Europe/Oslo' }]]);
  assert.equal(thinkingOf(turns[0]), 'I need the weather in Oslo.\n');
  assert.equal(turns[0].content[0].type, 'thinking', 'the thought comes first');
  assert.equal(turns[2].stop_reason, 'end_turn');
  assert.equal(textOf(turns[2]), 'Take a raincoat: it is 4 degrees and raining in Oslo, and 09:30 there.');
});

let failed = 0;
for (const { name, fn } of checks) {
  const error = await fn().then(() => null, (e) => e.stack || String(e));
  console.log(error ? `FAIL ${name}\n${error}` : `ok   ${name}`);
  if (error) failed++;
}
plain.proc.kill('SIGKILL');
tools.proc.kill('SIGKILL');
console.log(`${checks.length - failed}/${checks.length} checks passed`);
process.exit(failed ? 1 : 0);
