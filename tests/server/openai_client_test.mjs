// Drives a running `tandem serve` with the official `openai` npm package (v4), as a real
// client would. Started by tests/server/server_test.cpp:
//   node openai_client_test.mjs --openai NPM_DIR --url URL [--api-key KEY] --part basic|concurrent|load|endpoints
// Exits non-zero on the first failed check, printing what differed.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const args = {};
for (let i = 2; i < process.argv.length; i++) {
  const key = process.argv[i].replace(/^--/, '');
  const next = process.argv[i + 1];
  if (next === undefined || next.startsWith('--')) args[key] = true;
  else { args[key] = next; i++; }
}
const OpenAI = createRequire(args.openai + '/')('openai');
const apiKey = args['api-key'] || 'unused';
const client = new OpenAI({ baseURL: args.url + '/v1', apiKey, maxRetries: 0, timeout: 30000 });

async function metrics() {
  // With --api-key set, /metrics is behind the key too.
  const headers = args['api-key'] ? { Authorization: `Bearer ${args['api-key']}` } : {};
  const text = await (await fetch(args.url + '/metrics', { headers })).text();
  const value = (name) => {
    const m = text.match(new RegExp('^' + name + ' ([0-9.e+-]+)$', 'm'));
    assert.ok(m, `metric ${name} missing`);
    return Number(m[1]);
  };
  return { text, value };
}

// Waits until the engine has let go of every block (cancellations land at the next step).
async function expectNoBlocksInUse() {
  for (let i = 0; i < 100; i++) {
    const m = await metrics();
    if (m.value('tandem_kv_blocks_used') === 0 && m.value('tandem_requests_running') === 0 &&
        m.value('tandem_requests_waiting') === 0) {
      assert.equal(m.value('tandem_kv_blocks_free') + m.value('tandem_kv_blocks_cached'), m.value('tandem_kv_blocks_total'));
      return m;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('KV blocks still in use:\n' + (await metrics()).text);
}

async function complete(prompt, extra = {}) {
  return client.completions.create({ model: 'model.gguf', prompt, max_tokens: 24, temperature: 0, ...extra });
}

async function streamText(stream, chat) {
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += chat ? (choice.delta.content ?? '') : choice.text;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { text, finish, usage, chunks };
}

function checkUsage(usage, completionTokens) {
  assert.ok(usage.prompt_tokens > 0);
  assert.equal(usage.completion_tokens, completionTokens);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  assert.equal(typeof usage.prompt_tokens_details.cached_tokens, 'number');
}

async function basic() {
  // Non-streaming completion: text, finish_reason, usage.
  const plain = await complete('The dream', { max_tokens: 30 });
  assert.equal(plain.object, 'text_completion');
  assert.equal(plain.choices[0].finish_reason, 'length');
  checkUsage(plain.usage, 30);
  const reference = plain.choices[0].text;
  assert.ok(reference.length > 20, reference);

  // Streaming gives the same text, one chunk per token or so, and usage when asked.
  const streamed = await streamText(
    await complete('The dream', { max_tokens: 30, stream: true, stream_options: { include_usage: true } }), false);
  assert.equal(streamed.text, reference);
  assert.equal(streamed.finish, 'length');
  assert.ok(streamed.chunks > 10);
  checkUsage(streamed.usage, 30);

  // The same prompt again hits the prefix cache and still gives the same text.
  const again = await complete('The dream align, as I seep into the void, and the dream', { max_tokens: 10 });
  const hit = await complete('The dream align, as I seep into the void, and the dream', { max_tokens: 10 });
  assert.equal(hit.choices[0].text, again.choices[0].text);
  assert.ok(hit.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(hit.usage));

  // Stop strings: cut before the match, never printed, finish_reason "stop"; streamed alike.
  const cut = reference.indexOf('as I');
  assert.ok(cut > 0, reference);
  const stopped = await complete('The dream', { max_tokens: 30, stop: ['as I', 'never appears'] });
  assert.equal(stopped.choices[0].text, reference.slice(0, cut));
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  const stoppedStream = await streamText(await complete('The dream', { max_tokens: 30, stop: 'as I', stream: true }), false);
  assert.equal(stoppedStream.text, reference.slice(0, cut));
  assert.equal(stoppedStream.finish, 'stop');

  // Chat, plain and streamed.
  const messages = [{ role: 'system', content: 'You dream.' }, { role: 'user', content: 'Tell me a dream' }];
  const chat = await client.chat.completions.create({ model: 'model.gguf', messages, max_tokens: 20, temperature: 0 });
  assert.equal(chat.object, 'chat.completion');
  assert.equal(chat.choices[0].message.role, 'assistant');
  assert.equal(typeof chat.choices[0].message.content, 'string');
  checkUsage(chat.usage, 20);
  const chatStream = await streamText(await client.chat.completions.create(
    { model: 'model.gguf', messages, max_tokens: 20, temperature: 0, stream: true }), true);
  assert.equal(chatStream.text, chat.choices[0].message.content);
  assert.equal(chatStream.finish, 'length');

  // Logprobs: one entry per token, the top alternatives sorted.
  const lp = await client.chat.completions.create(
    { model: 'model.gguf', messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3 });
  const content = lp.choices[0].logprobs.content;
  assert.equal(content.length, 5);
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 3);
    assert.ok(entry.logprob <= 0);
    assert.equal(entry.logprob, entry.top_logprobs[0].logprob);  // greedy picks the top one
  }

  // Seeded sampling is reproducible.
  const s1 = await complete('I see', { temperature: 0.9, seed: 7, max_tokens: 20 });
  const s2 = await complete('I see', { temperature: 0.9, seed: 7, max_tokens: 20 });
  assert.equal(s1.choices[0].text, s2.choices[0].text);

  // Several prompts: one choice each, in order, each the prompt's own completion.
  const pair = await complete(['I see', 'The dream'], { max_tokens: 8 });
  assert.deepEqual(pair.choices.map((c) => c.index), [0, 1]);
  const alone = [await complete('I see', { max_tokens: 8 }), await complete('The dream', { max_tokens: 8 })];
  assert.deepEqual(pair.choices.map((c) => c.text), alone.map((a) => a.choices[0].text));
  assert.equal(pair.usage.prompt_tokens, alone[0].usage.prompt_tokens + alone[1].usage.prompt_tokens);

  // Errors surface as the SDK's typed errors, with the field (param) and OpenAI's code.
  await assert.rejects(complete('hi', { n: 0 }), (e) => e.status === 400 && e.error?.type === 'invalid_request_error' &&
                                                        e.param === 'n' && e.code === 'invalid_value');
  await assert.rejects(complete('hi', { temperature: 'hot' }),
                       (e) => e.status === 400 && e.param === 'temperature' && e.code === 'invalid_type');
  const wrongKey = new OpenAI({ baseURL: args.url + '/v1', apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrongKey.completions.create({ model: 'model.gguf', prompt: 'hi' }), (e) => e.status === 401);

  // A client that disconnects mid-stream: its request is cancelled and its blocks freed.
  const before = (await metrics()).value('tandem_requests_cancelled_total');
  const controller = new AbortController();
  const longStream = await client.completions.create(
    { model: 'model.gguf', prompt: 'I see', max_tokens: 100000, temperature: 0, stream: true },
    { signal: controller.signal });
  let seen = 0;
  try {
    for await (const chunk of longStream) {
      if (++seen === 5) controller.abort();
    }
  } catch (e) {
    assert.ok(e.name === 'AbortError' || /abort/i.test(String(e)), String(e));
  }
  const m = await expectNoBlocksInUse();
  // The request may also have hit the context limit first on a fast machine; either way it ended.
  assert.ok(m.value('tandem_requests_cancelled_total') >= before);
  assert.ok(m.text.includes('tandem_time_to_first_token_seconds_bucket'));
  console.log('basic: ok');
}

function mixedRequests() {
  const prompts = ['The dream', 'I see', 'Echoes of light', 'Contrast edges sharpen, a kaleidoscope',
    'The dream align, as I seep into the void. Classification whispers secrets', 'A', 'Classification',
    'The dream align, as I seep into the void. Contrast'];
  return prompts.map((prompt, i) => ({
    chat: i % 3 === 2,
    stream: i % 2 === 1,
    prompt,
    max_tokens: 12 + 6 * i,
    stop: i === 4 ? ['whispers never'] : undefined,
  }));
}

async function runOne(r) {
  if (r.chat) {
    const params = { model: 'model.gguf', messages: [{ role: 'user', content: r.prompt }], max_tokens: r.max_tokens,
      temperature: 0, stop: r.stop, stream: r.stream };
    const res = await client.chat.completions.create(params);
    return r.stream ? (await streamText(res, true)).text : res.choices[0].message.content;
  }
  const res = await complete(r.prompt, { max_tokens: r.max_tokens, stop: r.stop, stream: r.stream });
  return r.stream ? (await streamText(res, false)).text : res.choices[0].text;
}

async function concurrent() {
  const requests = mixedRequests();
  const sequential = [];
  for (const r of requests) sequential.push(await runOne(r));
  const preemptionsBefore = (await metrics()).value('tandem_preemptions_total');
  for (let round = 0; round < 2; round++) {  // the second round also hits the prefix cache
    const together = await Promise.all(requests.map(runOne));
    for (let i = 0; i < requests.length; i++)
      assert.equal(together[i], sequential[i], `request ${i} (${JSON.stringify(requests[i])}) differs when batched`);
  }
  const m = await expectNoBlocksInUse();
  if (args['expect-preemption'])
    assert.ok(m.value('tandem_preemptions_total') > preemptionsBefore, 'no preemption happened: make the pool smaller');
  assert.ok(m.value('tandem_prefix_cache_hit_ratio') > 0);
  console.log(`concurrent: ok (preemptions ${m.value('tandem_preemptions_total')}, ` +
              `hit ratio ${m.value('tandem_prefix_cache_hit_ratio').toFixed(3)})`);
}

// Deterministic pseudo-random numbers (mulberry32), so the load is the same every run.
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function load() {
  const random = rng(42);
  const words = ['dream', 'light', 'echoes', 'contrast', 'whispers', 'the', 'of', 'void', 'I', 'see', 'gentle', 'hum'];
  const jobs = [];
  for (let i = 0; i < 64; i++) {
    const n = 1 + Math.floor(random() * 40);
    const prompt = Array.from({ length: n }, () => words[Math.floor(random() * words.length)]).join(' ');
    jobs.push({ prompt, max_tokens: 4 + Math.floor(random() * 28), disconnect: random() < 0.15, stream: random() < 0.6 });
  }
  let completed = 0, disconnected = 0, next = 0;
  async function worker() {
    while (next < jobs.length) {
      const job = jobs[next++];
      if (job.disconnect) {
        // Leaving the loop early makes the SDK abort the HTTP request: the server sees a disconnect.
        const s = await complete(job.prompt, { max_tokens: 1000, stream: true });
        let k = 0;
        for await (const _ of s) if (++k === 2) break;
        disconnected++;
        continue;
      }
      if (job.stream) {
        const r = await streamText(await complete(job.prompt, { max_tokens: job.max_tokens, stream: true,
          stream_options: { include_usage: true } }), false);
        assert.ok(r.finish === 'length' || r.finish === 'stop', JSON.stringify(r));
        assert.ok(r.usage && r.usage.completion_tokens <= job.max_tokens && r.usage.completion_tokens >= 1);
      } else {
        const r = await complete(job.prompt, { max_tokens: job.max_tokens });
        assert.equal(r.choices.length, 1);
        assert.equal(typeof r.choices[0].text, 'string');
        assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
        assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= job.max_tokens);
        checkUsage(r.usage, r.usage.completion_tokens);
      }
      completed++;
    }
  }
  await Promise.all(Array.from({ length: 16 }, worker));
  assert.equal(completed + disconnected, jobs.length);
  assert.ok(disconnected > 0);
  await expectNoBlocksInUse();
  assert.equal((await fetch(args.url + '/health')).status, 200);
  console.log(`load: ok (${completed} completed, ${disconnected} disconnected)`);
}

// Issue 15's names and endpoints, as the SDK and a browser-like fetch use them. The server runs
// with --served-model-name gpt-4o-mini dreamer --allowed-origins http://localhost:5173.
async function endpoints() {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['gpt-4o-mini']);
  assert.equal((await client.models.retrieve('gpt-4o-mini')).id, 'gpt-4o-mini');
  assert.equal((await client.models.retrieve('dreamer')).id, 'dreamer');
  const notFound = (e) => e.status === 404 && e.code === 'model_not_found' && e.type === 'invalid_request_error';
  await assert.rejects(client.models.retrieve('model.gguf'), notFound);
  const aliased = await client.completions.create({ model: 'dreamer', prompt: 'The dream', max_tokens: 3 });
  assert.equal(aliased.model, 'gpt-4o-mini');
  const messages = [{ role: 'system', content: 'You dream.' }, { role: 'user', content: 'Tell me a dream' }];
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages, max_tokens: 3 }), notFound);

  const auth = { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' };
  const post = async (path, body) => {
    const r = await fetch(args.url + path, { method: 'POST', headers: auth, body: JSON.stringify(body) });
    return { status: r.status, body: await r.json() };
  };
  // Round trips through /tokenize and /detokenize, and the ids /v1/completions counts.
  for (const text of ['The dream', ' leading space', 'line\nbreak', 'a  b']) {
    const ids = await post('/tokenize', { content: text });
    assert.equal(ids.status, 200);
    assert.equal((await post('/detokenize', { tokens: ids.body.tokens })).body.content, text);
    const withBos = await post('/tokenize', { content: text, add_special: true });
    const usage = (await client.completions.create({ model: 'gpt-4o-mini', prompt: text, max_tokens: 1 })).usage;
    assert.equal(usage.prompt_tokens, withBos.body.tokens.length);
  }
  const bad = await post('/detokenize', { tokens: [1, 99999999] });
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /99999999/);
  // /apply-template's prompt is what the chat endpoint tokenizes.
  const prompt = (await post('/apply-template', { messages })).body.prompt;
  const promptIds = (await post('/tokenize', { content: prompt, add_special: true, parse_special: true })).body.tokens;
  const chat = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 2 });
  assert.equal(chat.usage.prompt_tokens, promptIds.length);

  const props = await (await fetch(args.url + '/props', { headers: auth })).json();
  assert.equal(props.model_alias, 'gpt-4o-mini');
  assert.ok(props.total_slots >= 1 && props.n_ctx > 0);

  // A CORS preflight as a browser on the listed origin sends it (no key), and one from elsewhere.
  const preflight = (origin) => fetch(args.url + '/v1/chat/completions', {
    method: 'OPTIONS',
    headers: { Origin: origin, 'Access-Control-Request-Method': 'POST',
               'Access-Control-Request-Headers': 'authorization,content-type' },
  });
  const allowed = await preflight('http://localhost:5173');
  assert.equal(allowed.status, 204);
  assert.equal(allowed.headers.get('access-control-allow-origin'), 'http://localhost:5173');
  assert.match(allowed.headers.get('access-control-allow-headers'), /Authorization/);
  assert.match(allowed.headers.get('access-control-allow-methods'), /POST/);
  const refused = await preflight('http://evil.test');
  assert.equal(refused.headers.get('access-control-allow-origin'), null);
  const list = await fetch(args.url + '/v1/models', { headers: { ...auth, Origin: 'http://localhost:5173' } });
  assert.equal(list.headers.get('access-control-allow-origin'), 'http://localhost:5173');
  console.log('endpoints: ok');
}

const parts = { basic, concurrent, load, endpoints };
try {
  await parts[args.part]();
} catch (e) {
  console.error(`${args.part}: FAILED\n`, e);
  process.exit(1);
}
