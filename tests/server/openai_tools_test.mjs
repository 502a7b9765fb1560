// Tool calls and reasoning through the real `invar serve` and the official OpenAI Node client.
// Random-weight models never write <think> or <tool_call>, so the server runs with
// --replay-outputs: the model's vocabulary and a real chat template, answering with the
// fixture outputs of tests/data/chat-outputs/replay.json one token at a time. Checks the whole
// responses and the streams (assembled as a client does) against each other and the fixtures,
// for the XML form (Qwen3.5 template) and the JSON form (Qwen3 template, the default model's),
// and runs agent loops as applications write them: the assistant message the SDK returned goes
// back into the history as is (content null beside tool_calls), with string and text-part
// content.
// Usage: node openai_tools_test.mjs INVAR_BINARY MODEL_GGUF TEMPLATES_DIR REPLAY_JSON
import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer as startServerOf } from './node_server.mjs';

const [bin, model, templates, replay] = process.argv.slice(2);

function startServer(template, extra = []) {
  return startServerOf(bin, ['--model', model, '--chat-template', `${templates}/${template}`, '--replay-outputs', replay,
                             ...extra]);
}

// Named checks, run in order after the servers are up; each failure is reported, none stops
// the others.
const checks = [];
const check = (name, fn) => checks.push({ name, fn });

const weather = { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] } } };
const time = { type: 'function', function: { name: 'get_time', description: 'Time in a zone',
  parameters: { type: 'object', properties: { zone: { type: 'string' } } } } };

// A stream assembled as clients assemble it; also checks the OpenAI streaming shape of calls.
async function assemble(stream) {
  const out = { content: '', reasoning: '', calls: [], finish: null, chunks: 0, argChunks: 0 };
  for await (const c of stream) {
    out.chunks++;
    if (!c.choices.length) continue;
    const ch = c.choices[0];
    if (ch.finish_reason) out.finish = ch.finish_reason;
    const d = ch.delta;
    out.content += d.content ?? '';
    out.reasoning += d.reasoning_content ?? '';
    assert.equal(d.reasoning, d.reasoning_content, 'vLLM\'s newer name beside the old one');
    for (const t of d.tool_calls ?? []) {
      if (t.id !== undefined) {
        assert.equal(t.index, out.calls.length, 'a new call takes the next index');
        assert.equal(t.type, 'function');
        assert.equal(typeof t.function.name, 'string');
        out.calls.push({ id: t.id, name: t.function.name, arguments: t.function.arguments ?? '' });
      } else {
        assert.ok(t.index < out.calls.length, 'arguments follow their call header');
        assert.equal(t.function.name, undefined, 'the name comes once, first');
        out.calls[t.index].arguments += t.function.arguments;
        out.argChunks++;
      }
    }
  }
  return out;
}

function wholeForm(r) {
  const m = r.choices[0].message;
  assert.equal(m.reasoning, m.reasoning_content, 'vLLM\'s newer name beside the old one');
  return { content: m.content ?? '', reasoning: m.reasoning_content ?? '', finish: r.choices[0].finish_reason,
           calls: (m.tool_calls ?? []).map((t) => ({ name: t.function.name, arguments: t.function.arguments })) };
}

async function bothWays(client, req) {
  const whole = await client.chat.completions.create({ ...req, model: 'replay' });
  const streamed = await assemble(await client.chat.completions.create({ ...req, model: 'replay', stream: true }));
  const w = wholeForm(whole);
  assert.deepEqual({ content: streamed.content, reasoning: streamed.reasoning, finish: streamed.finish,
                     calls: streamed.calls.map((c) => ({ name: c.name, arguments: c.arguments })) }, w,
                   'the stream assembles to the whole response');
  assert.ok(streamed.chunks > 10, 'streamed token by token');
  for (const c of [...whole.choices[0].message.tool_calls ?? [], ...streamed.calls])
    assert.match(c.id, /^call_[0-9a-f]{24}$/);
  return { whole, w, streamed };
}

const xml = await startServer('Qwen3.5-4B.jinja');
const hermes = await startServer('Qwen-Qwen3-0.6B.jinja');
const xmlClient = new OpenAI({ apiKey: 'none', baseURL: `http://127.0.0.1:${xml.port}/v1`, maxRetries: 0 });
const hermesClient = new OpenAI({ apiKey: 'none', baseURL: `http://127.0.0.1:${hermes.port}/v1`, maxRetries: 0 });

check('startup log names the template', async () => {
  assert.match(xml.log(), /chat template: --chat-template \S+Qwen3\.5-4B\.jinja \(sha256 [0-9a-f]{12}, \d+ bytes; tool calls: qwen3_xml; reasoning: auto; content format: openai \(detected\)\)/);
  assert.match(hermes.log(), /tool calls: hermes; reasoning: auto; content format: string \(detected\)\)/);
});

check('XML tool call (Qwen3.5): whole and streamed', async () => {
  const { w, streamed } = await bothWays(xmlClient, {
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools: [weather, time] });
  assert.equal(w.finish, 'tool_calls');
  assert.equal(w.content, '');
  assert.equal(w.reasoning, 'The user wants the weather in Paris.\n');
  assert.equal(w.calls.length, 1);
  assert.equal(w.calls[0].name, 'get_weather');
  assert.deepEqual(JSON.parse(w.calls[0].arguments), { city: 'Paris', days: 3 }, 'days typed by the schema');
  assert.ok(streamed.argChunks >= 2, 'arguments streamed in pieces');
});

check('XML tool call, the message content is null beside tool_calls', async () => {
  const r = await xmlClient.chat.completions.create({ model: 'replay', tools: [weather],
    messages: [{ role: 'user', content: 'weather in Paris' }] });
  assert.equal(r.choices[0].message.content, null);
});

check('JSON tool call (Qwen3 template): whole and streamed', async () => {
  const { w } = await bothWays(hermesClient, {
    messages: [{ role: 'user', content: 'What is the time in Tokyo?' }], tools: [weather, time] });
  assert.equal(w.finish, 'tool_calls');
  assert.equal(w.reasoning, '\nI need the time in Tokyo.\n');
  assert.deepEqual(w.calls, [{ name: 'get_time', arguments: '{"zone":"Asia/Tokyo"}' }]);
});

check('reasoning and a plain answer', async () => {
  const { w } = await bothWays(xmlClient, { messages: [{ role: 'user', content: 'Please say hello.' }] });
  assert.equal(w.finish, 'stop');
  assert.equal(w.reasoning, 'A greeting is enough.\n');
  assert.equal(w.content, 'Hello! Nice to meet you.');
  assert.deepEqual(w.calls, []);
});

check('tool_choice none leaves the call as text', async () => {
  const { w } = await bothWays(xmlClient, { messages: [{ role: 'user', content: 'weather in Paris' }],
    tools: [weather], tool_choice: 'none' });
  assert.equal(w.finish, 'stop');
  assert.deepEqual(w.calls, []);
  assert.match(w.content, /^<tool_call>\n<function=get_weather>/);
});

// The request-log lines of requests sent with `user` (the text log quotes it).
const linesOf = (server, user) => server.log().split('\n').filter((l) => l.includes(`user="${user}"`));

check('tool_choice required without a call is a 422 the SDK does not retry', async () => {
  // The SDK's default retry policy (maxRetries 2: 408, 409, 429 and >= 500 are retried).
  const retrying = new OpenAI({ apiKey: 'none', baseURL: `http://127.0.0.1:${xml.port}/v1` });
  assert.equal(retrying.maxRetries, 2, 'the SDK retries by default: the check is not vacuous');
  for (const [choice, user] of [['required', 'unmet-required'],
                                [{ type: 'function', function: { name: 'get_time' } }, 'unmet-named']]) {
    try {
      await retrying.chat.completions.create({ model: 'replay', tools: [weather, time], tool_choice: choice, user,
        messages: [{ role: 'user', content: 'Please say hello.' }] });
      assert.fail('expected an error');
    } catch (e) {
      assert.ok(e instanceof OpenAI.UnprocessableEntityError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 422);
      assert.equal(e.code, 'tool_choice_unmet');
      assert.equal(e.param, 'tool_choice');
      assert.equal(e.type, 'unprocessable_entity_error');
    }
    // The log line is written after the reply: wait for it, then for any retry to show up.
    for (let i = 0; i < 100 && linesOf(xml, user).length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 300));
    const lines = linesOf(xml, user);
    assert.equal(lines.length, 1, `one attempt, not retried:\n${lines.join('\n')}`);
    assert.match(lines[0], /endpoint=\/v1\/chat\/completions status=422 /);
  }
  // Streamed: the error comes as an event after what was sent; the SDK throws, nothing retried.
  const stream = await retrying.chat.completions.create({ model: 'replay', tools: [weather], tool_choice: 'required',
    user: 'unmet-stream', stream: true, messages: [{ role: 'user', content: 'Please say hello.' }] });
  await assert.rejects(async () => { for await (const c of stream) void c; }, /tool_choice/);
  const named = await xmlClient.chat.completions.create({ model: 'replay', tools: [weather, time],
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
    messages: [{ role: 'user', content: 'weather in Paris' }] });
  assert.equal(named.choices[0].message.tool_calls[0].function.name, 'get_weather');
});

// An agent loop: ask, run every call the model makes (answers from `results`), send the
// results back, until the model answers; each turn whole and streamed.
async function agentLoop(client, { question, tools, results, parts }) {
  const text = (s) => (parts ? [{ type: 'text', text: s }] : s);
  const messages = [{ role: 'system', content: text('You are a helpful assistant.') },
                    { role: 'user', content: text(question) }];
  const turns = [];
  for (let turn = 0; turn < 3; turn++) {
    const { whole, w } = await bothWays(client, { messages, tools });
    turns.push(w);
    const msg = whole.choices[0].message;
    if (!msg.tool_calls?.length) break;
    messages.push(msg);
    for (const c of msg.tool_calls)
      messages.push({ role: 'tool', tool_call_id: c.id, content: text(results[c.function.name]) });
  }
  return { turns, messages };
}

// The prompt the server builds for `messages` (/tokenize renders exactly what a chat renders).
async function promptOf(server, messages, tools) {
  const r = await fetch(`http://127.0.0.1:${server.port}/tokenize`, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages, tools, return_token_strs: true }) });
  assert.equal(r.status, 200, await r.clone().text());
  const j = await r.json();
  return { tokens: j.tokens, text: j.token_strs.join('') };
}

const loops = [
  { name: 'Qwen3.5', server: xml, client: xmlClient, city: 'Oslo', zone: 'Europe/Oslo',
    weather: 'OSLO-WEATHER: 4 degrees, rain', time: 'OSLO-TIME: 09:30',
    answer: 'Take a raincoat: it is 4 degrees and raining in Oslo, and 09:30 there.',
    call: '<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>' },
  { name: 'Qwen3', server: hermes, client: hermesClient, city: 'Bergen', zone: 'Europe/Oslo',
    weather: 'BERGEN-WEATHER: 7 degrees, rain', time: 'BERGEN-TIME: 10:15',
    answer: 'Take an umbrella: it is 7 degrees and raining in Bergen, and 10:15 there.',
    call: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Bergen"}}\n</tool_call>' },
];
for (const l of loops) {
  const run = (parts) => agentLoop(l.client, { question: `What should I wear in ${l.city} today?`,
    tools: [weather, time], results: { get_weather: l.weather, get_time: l.time }, parts });
  const strings = {};
  for (const parts of [false, true]) {
    check(`agent loop, three turns (${l.name} template, ${parts ? 'text-part arrays' : 'string content'})`, async () => {
      const { turns, messages } = await run(parts);
      assert.equal(turns.length, 3, 'call, call, answer');
      assert.equal(turns[0].finish, 'tool_calls');
      assert.deepEqual(turns[0].calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_weather', { city: l.city }]]);
      assert.equal(turns[1].finish, 'tool_calls');
      assert.deepEqual(turns[1].calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_time', { zone: l.zone }]]);
      assert.equal(turns[2].finish, 'stop');
      assert.equal(turns[2].content, l.answer);
      assert.deepEqual(turns[2].calls, []);
      const nulls = messages.filter((m) => m.role === 'assistant' && m.content === null && m.tool_calls);
      assert.equal(nulls.length, 2, 'the history carried both tool-call turns with content null');
      // The null-content turns render their calls (and nothing of "null"); a one-part array
      // renders as its string does.
      const p = await promptOf(l.server, messages, [weather, time]);
      assert.ok(p.text.includes(l.call), p.text);
      assert.ok(!/None|null/.test(p.text.split('</tools>').pop()), p.text);
      if (!parts) strings.prompt = p;
      else assert.deepEqual(p.tokens, strings.prompt.tokens, 'part arrays render as strings do');
    });
  }
}

check('text parts of one message are joined by a newline on a string-format template (Qwen3)', async () => {
  const parts = await promptOf(hermes, [{ role: 'user', content: [{ type: 'text', text: 'first part' }, { type: 'text', text: 'second part' }] }]);
  const joined = await promptOf(hermes, [{ role: 'user', content: 'first part\nsecond part' }]);
  assert.deepEqual(parts.tokens, joined.tokens);
  // Qwen3.5 iterates the parts itself: they are concatenated by its template, not joined.
  const own = await promptOf(xml, [{ role: 'user', content: [{ type: 'text', text: 'first part' }, { type: 'text', text: 'second part' }] }]);
  assert.ok(own.text.includes('first partsecond part'), own.text);
});

check('--chat-template-content-format openai forces the parts through (Qwen3 then refuses them)', async () => {
  const forced = await startServer('Qwen-Qwen3-0.6B.jinja', ['--chat-template-content-format', 'openai']);
  try {
    assert.match(forced.log(), /content format: openai\)/);
    const c = new OpenAI({ apiKey: 'none', baseURL: `http://127.0.0.1:${forced.port}/v1`, maxRetries: 0 });
    await assert.rejects(c.chat.completions.create({ model: 'replay',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Please say hello.' }] }] }),
    (e) => e instanceof OpenAI.APIError && e.status === 400 && /startswith/.test(e.message));
  } finally {
    forced.proc.kill('SIGKILL');
  }
});

check('--chat-template-content-format takes auto, string or openai only', async () => {
  const proc = spawn(bin, ['serve', '--model', model, '--port', '0', '--chat-template-content-format', 'text'],
                     { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  const code = await new Promise((resolve) => proc.on('exit', resolve));
  assert.notEqual(code, 0);
  assert.match(log, /--chat-template-content-format must be auto, string or openai, not 'text'/);
});

check('--reasoning-format none keeps the thought in content', async () => {
  const proc = spawn(bin, ['serve', '--model', model, '--port', '0', '--chat-template', `${templates}/Qwen3.5-4B.jinja`,
                           '--replay-outputs', replay, '--reasoning-format', 'none', '--tool-call-parser', 'none'],
                     { stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    const port = await new Promise((resolve, reject) => {
      let log = '';
      proc.stderr.on('data', (d) => { log += d; const m = log.match(/ready on port (\d+)/); if (m) resolve(Number(m[1])); });
      proc.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
    });
    const c = new OpenAI({ apiKey: 'none', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
    const r = await c.chat.completions.create({ model: 'replay', tools: [weather],
      messages: [{ role: 'user', content: 'weather in Paris' }] });
    assert.equal(r.choices[0].message.reasoning_content, undefined);
    assert.match(r.choices[0].message.content, /^The user wants the weather in Paris\.\n<\/think>/);
    assert.equal(r.choices[0].finish_reason, 'stop');
  } finally {
    proc.kill('SIGKILL');
  }
});

let failed = 0;
for (const { name, fn } of checks) {
  const error = await fn().then(() => null, (e) => e.stack || String(e));
  console.log(error ? `FAIL ${name}\n${error}` : `ok   ${name}`);
  if (error) failed++;
}
xml.proc.kill('SIGKILL');
hermes.proc.kill('SIGKILL');
console.log(`${checks.length - failed}/${checks.length} checks passed`);
process.exit(failed ? 1 : 0);
