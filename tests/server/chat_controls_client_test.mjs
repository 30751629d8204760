// Chat controls and choices through the official `openai` npm client (v7), against a running
// `tandem serve` on aidreams260K. Started by tests/server/chat_controls_server_test.cpp:
//   node chat_controls_client_test.mjs --npm NPM_DIR --url URL --part choices|prefill|echo|kwargs
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
const OpenAI = createRequire(args.npm + '/')('openai');
const client = new OpenAI({ baseURL: args.url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 30000 });
const model = 'model.gguf';

async function metric(name) {
  const text = await (await fetch(args.url + '/metrics')).text();
  const m = text.match(new RegExp('^' + name + ' ([0-9.e+-]+)$', 'm'));
  assert.ok(m, `metric ${name} missing`);
  return Number(m[1]);
}

async function post(path, body) {
  const res = await fetch(args.url + path, { method: 'POST', body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

// Text per choice index from a stream, and its usage.
async function streamChoices(stream, chat) {
  const texts = [], finishes = [];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      texts[c.index] = (texts[c.index] ?? '') + (chat ? (c.delta.content ?? '') : c.text);
      if (c.finish_reason) finishes[c.index] = c.finish_reason;
    }
  }
  return { texts, finishes, usage };
}

const rejects400 = (promise, word) => assert.rejects(promise, (e) => {
  assert.equal(e.status, 400, String(e));
  assert.equal(e.error?.type, 'invalid_request_error');
  assert.ok(e.message.includes(word), `'${e.message}' does not name ${word}`);
  return true;
});

async function choices() {
  // A prompt no earlier request sent (so choice 0 finds nothing cached), several KV blocks long.
  const prompt = 'In the quiet of the night the old lighthouse keeper climbed the stairs, counting each step ' +
                 'as he had for forty years, and at the top he lit the lamp and watched the sea';
  const cachedBefore = await metric('tandem_cached_prompt_tokens_total');
  const params = { model, prompt, max_tokens: 12, temperature: 1.0, seed: 1234 };
  const three = await client.completions.create({ ...params, n: 3 });
  const cachedAfter = await metric('tandem_cached_prompt_tokens_total');
  assert.equal(three.choices.length, 3);
  assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
  const texts = three.choices.map((c) => c.text);
  assert.ok(new Set(texts).size > 1, 'three seeds gave one text: ' + JSON.stringify(texts));

  // Choice i is the single request with seed + i (its own seed stream, batch-invariant).
  const singles = [];
  for (let i = 0; i < 3; i++) singles.push(await client.completions.create({ ...params, seed: 1234 + i }));
  assert.deepEqual(texts, singles.map((s) => s.choices[0].text));
  // Usage counts the prompt once and every choice's tokens.
  assert.equal(three.usage.prompt_tokens, singles[0].usage.prompt_tokens);
  assert.equal(three.usage.completion_tokens, singles.reduce((sum, s) => sum + s.usage.completion_tokens, 0));
  // Choices 1 and 2 reused choice 0's prompt blocks (16 tokens each) through the prefix cache.
  const fullBlocks = Math.floor((three.usage.prompt_tokens - 1) / 16) * 16;
  assert.ok(fullBlocks >= 32, `prompt of ${three.usage.prompt_tokens} tokens`);
  assert.ok(cachedAfter - cachedBefore >= 2 * fullBlocks, `cached ${cachedAfter - cachedBefore} < 2 x ${fullBlocks}`);

  // Streamed: the same texts, interleaved by index; one usage chunk at the end.
  const streamed = await streamChoices(await client.completions.create(
    { ...params, n: 3, stream: true, stream_options: { include_usage: true } }), false);
  assert.deepEqual(streamed.texts, texts);
  assert.deepEqual(streamed.finishes, three.choices.map((c) => c.finish_reason));
  assert.equal(streamed.usage.completion_tokens, three.usage.completion_tokens);
  assert.equal(streamed.usage.prompt_tokens, three.usage.prompt_tokens);

  // Chat, plain and streamed, choice by choice equal to n = 1 with seed + i.
  const messages = [{ role: 'user', content: 'Tell me about the sea and the lighthouse, please.' }];
  const chatParams = { model, messages, max_tokens: 10, temperature: 1.0, seed: 99 };
  const chat = await client.chat.completions.create({ ...chatParams, n: 3 });
  assert.deepEqual(chat.choices.map((c) => c.index), [0, 1, 2]);
  for (let i = 0; i < 3; i++) {
    const single = await client.chat.completions.create({ ...chatParams, seed: 99 + i });
    assert.equal(chat.choices[i].message.content, single.choices[0].message.content, `choice ${i}`);
  }
  const chatStream = await streamChoices(await client.chat.completions.create({ ...chatParams, n: 3, stream: true }), true);
  assert.deepEqual(chatStream.texts, chat.choices.map((c) => c.message.content));

  // More choices than the server runs at once (--parallel 4), and out-of-range n: 400s naming n.
  await rejects400(client.completions.create({ ...params, n: 5 }), "'n'");
  await rejects400(client.completions.create({ ...params, n: 0 }), "'n'");
  console.log('choices: ok');
}

async function prefill() {
  const opened = [{ role: 'user', content: 'Tell me a story.' }, { role: 'assistant', content: 'Once upon a time' }];
  // The prompt ends inside the assistant's message: no end of turn, no new turn.
  const open = await post('/apply-template', { messages: opened });
  assert.equal(open.status, 200);
  assert.ok(open.body.prompt.endsWith('<|im_start|>assistant\nOnce upon a time'), open.body.prompt);
  const closed = await post('/apply-template', { messages: opened, continue_final_message: false });
  assert.ok(closed.body.prompt.startsWith(open.body.prompt));
  assert.ok(closed.body.prompt.endsWith('<|im_end|>\n<|im_start|>assistant\n'), closed.body.prompt);
  const vllm = await post('/apply-template',
    { messages: opened, continue_final_message: true, add_generation_prompt: false });
  assert.equal(vllm.body.prompt, open.body.prompt);
  const noPrompt = await post('/apply-template', { messages: opened.slice(0, 1), add_generation_prompt: false });
  assert.ok(noPrompt.body.prompt.endsWith('Tell me a story.<|im_end|>\n'), noPrompt.body.prompt);

  // The model continues the message: greedy chat content = the completion of the rendered prompt.
  const greedy = { model, max_tokens: 12, temperature: 0 };
  const chat = await client.chat.completions.create({ ...greedy, messages: opened });
  const raw = await client.completions.create({ ...greedy, prompt: open.body.prompt });
  assert.equal(chat.choices[0].message.content, raw.choices[0].text);
  assert.equal(chat.usage.prompt_tokens, raw.usage.prompt_tokens);
  // Closing the turn (the old behaviour) costs more prompt tokens and answers differently.
  const reopened = await client.chat.completions.create({ ...greedy, messages: opened, continue_final_message: false });
  assert.ok(reopened.usage.prompt_tokens > chat.usage.prompt_tokens,
            `${reopened.usage.prompt_tokens} <= ${chat.usage.prompt_tokens}`);

  await rejects400(client.chat.completions.create(
    { ...greedy, messages: opened, continue_final_message: true, add_generation_prompt: true }), 'add_generation_prompt');
  await rejects400(client.chat.completions.create(
    { ...greedy, messages: opened.slice(0, 1), continue_final_message: true }), 'continue_final_message');
  console.log('prefill: ok');
}

async function echo() {
  const params = { model, prompt: 'The lighthouse keeper', max_tokens: 8, temperature: 0.8, seed: 5 };
  const plain = await client.completions.create(params);
  const echoed = await client.completions.create({ ...params, echo: true });
  assert.equal(echoed.choices[0].text, params.prompt + plain.choices[0].text);
  assert.equal(echoed.usage.completion_tokens, plain.usage.completion_tokens);
  const streamed = await streamChoices(await client.completions.create({ ...params, echo: true, stream: true }), false);
  assert.equal(streamed.texts[0], echoed.choices[0].text);
  // Each choice starts with the prompt.
  const two = await client.completions.create({ ...params, echo: true, n: 2 });
  for (const c of two.choices) assert.ok(c.text.startsWith(params.prompt), c.text);

  // What is not supported is a 400 naming it, never silently ignored.
  await rejects400(client.completions.create({ ...params, echo: true, logprobs: 2 }), 'echo');
  await rejects400(client.completions.create({ ...params, best_of: 3 }), 'best_of');
  await rejects400(client.completions.create({ ...params, suffix: ' and the sea.' }), 'suffix');
  // best_of = n is plain sampling of n choices.
  const bestOfTwo = await client.completions.create({ ...params, best_of: 2, n: 2 });
  assert.equal(bestOfTwo.choices.length, 2);
  console.log('echo: ok');
}

// The server runs a template that prints an empty think block when enable_thinking is false,
// with --chat-template-kwargs '{"enable_thinking": false}'.
async function kwargs() {
  const messages = [{ role: 'user', content: 'Hello.' }];
  const byDefault = await post('/apply-template', { messages });
  assert.ok(byDefault.body.prompt.endsWith('<think>\n\n</think>\n\n'), byDefault.body.prompt);
  const thinking = await post('/apply-template', { messages, chat_template_kwargs: { enable_thinking: true } });
  assert.ok(!thinking.body.prompt.includes('<think>'), thinking.body.prompt);
  // The same through the chat endpoint: the request's kwargs win, and the prompt is shorter.
  const greedy = { model, messages, max_tokens: 4, temperature: 0 };
  const off = await client.chat.completions.create(greedy);
  const on = await client.chat.completions.create({ ...greedy, chat_template_kwargs: { enable_thinking: true } });
  assert.ok(on.usage.prompt_tokens < off.usage.prompt_tokens, `${on.usage.prompt_tokens} vs ${off.usage.prompt_tokens}`);
  await rejects400(client.chat.completions.create({ ...greedy, chat_template_kwargs: 'enable_thinking' }),
                   'chat_template_kwargs');
  await rejects400(client.chat.completions.create({ ...greedy, chat_template_kwargs: { messages: [] } }), 'messages');
  console.log('kwargs: ok');
}

const parts = { choices, prefill, echo, kwargs };
try {
  await parts[args.part]();
} catch (e) {
  console.error(`${args.part}: FAILED\n`, e);
  process.exit(1);
}
