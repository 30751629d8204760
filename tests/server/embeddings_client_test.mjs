// /v1/embeddings through the official `openai` npm package against a running `tandem serve`
// (aidreams260K). Started by tests/server/embeddings_test.cpp:
//   node embeddings_client_test.mjs --openai NPM_DIR --url URL --model ID --dims N
// Checks shapes, unit norms, that a batch gives each input's vector as a request of its own
// would (batch invariance), that the SDK's default encoding (base64) and "float" agree, usage
// against /tokenize, and the SDK's errors for a wrong model and an empty input.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const args = {};
for (let i = 2; i < process.argv.length; i++) {
  const key = process.argv[i].replace(/^--/, '');
  args[key] = process.argv[++i];
}
const requireFromNpm = createRequire(args.openai + '/');
const OpenAI = requireFromNpm('openai').default ?? requireFromNpm('openai');
const client = new OpenAI({ baseURL: args.url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 30000 });
const dims = Number(args.dims);
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);

const texts = ['The dream of a quiet sea', 'I see the stars', 'Once upon a time, a small fox ran home'];
const batch = await client.embeddings.create({ model: args.model, input: texts, encoding_format: 'float' });
assert.equal(batch.object, 'list');
assert.equal(batch.data.length, texts.length);
for (const [i, item] of batch.data.entries()) {
  assert.equal(item.index, i);
  assert.equal(item.embedding.length, dims);
  assert.ok(Math.abs(norm(item.embedding) - 1) < 1e-5, `norm ${norm(item.embedding)}`);
}
// Each input alone gives the same vector, bit for bit (float32 survives JSON's shortest form).
let tokens = 0;
for (const [i, text] of texts.entries()) {
  const alone = await client.embeddings.create({ model: args.model, input: text, encoding_format: 'float' });
  assert.deepEqual(alone.data[0].embedding, batch.data[i].embedding, `input ${i} alone differs from in a batch`);
  const counted = await (await fetch(args.url + '/tokenize', {
    method: 'POST', body: JSON.stringify({ content: text, add_special: true }),
  })).json();
  assert.equal(alone.usage.prompt_tokens, counted.tokens.length);
  tokens += counted.tokens.length;
}
assert.equal(batch.usage.prompt_tokens, tokens);
assert.equal(batch.usage.total_tokens, tokens);
// Different texts, different directions; the SDK's default encoding decodes to the same floats.
assert.ok(dot(batch.data[0].embedding, batch.data[1].embedding) < 0.9999);
const sdkDefault = await client.embeddings.create({ model: args.model, input: texts[0] });
assert.equal(sdkDefault.data[0].embedding.length, dims);
for (let k = 0; k < dims; k++)
  assert.equal(Math.fround(sdkDefault.data[0].embedding[k]), Math.fround(batch.data[0].embedding[k]));
// Token ids as input give what the text gives.
const ids = (await (await fetch(args.url + '/tokenize', {
  method: 'POST', body: JSON.stringify({ content: texts[1], add_special: true }),
})).json()).tokens;
const byIds = await client.embeddings.create({ model: args.model, input: ids, encoding_format: 'float' });
assert.deepEqual(byIds.data[0].embedding, batch.data[1].embedding);

await assert.rejects(client.embeddings.create({ model: 'no-such-model', input: 'x' }),
  (e) => e.status === 404 && /no-such-model/.test(e.message));
await assert.rejects(client.embeddings.create({ model: args.model, input: '' }),
  (e) => e.status === 400 && /empty/.test(e.message));
await assert.rejects(client.embeddings.create({ model: args.model, input: 'x', dimensions: 3 }),
  (e) => e.status === 400 && /dimensions/.test(e.message));
console.log('embeddings: ok');
