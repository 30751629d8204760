// Structured output through the other client libraries users reach for, against a running
// `tandem serve` (random weights: the grammar makes the JSON valid): the Vercel AI SDK's
// generateObject through @ai-sdk/openai-compatible, and LangChain's withStructuredOutput with
// each method (jsonSchema, functionCalling, jsonMode), for one zod schema with .int(), .min(),
// .max(), .regex(), .email() and a bounded array, in zod 3 and zod 4. Each library checks the
// reply with zod itself; Ajv with ajv-formats checks it against the JSON Schema again. Started
// by tests/server/structured_output_server_test.cpp:
//   node structured_output_clients_test.mjs --npm NPM_DIR --url URL --model ID
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const requireFromNpm = createRequire(args.npm + '/');
const ai = requireFromNpm('ai');
const { createOpenAICompatible } = requireFromNpm('@ai-sdk/openai-compatible');
const { ChatOpenAI } = requireFromNpm('@langchain/openai');
const { zodToJsonSchema } = requireFromNpm('zod-to-json-schema');
const AjvModule = requireFromNpm('ajv');
const Ajv = AjvModule.default ?? AjvModule;
const addFormats = requireFromNpm('ajv-formats').default ?? requireFromNpm('ajv-formats');
const ajv = new Ajv({ strict: false });
addFormats(ajv);

function person(z) {
  return z.object({
    name: z.string().min(1).max(40),
    age: z.number().int().min(0).max(150),
    code: z.string().regex(/^[A-Z]{3}-\d{2}$/),
    email: z.string().email(),
    tags: z.array(z.string().max(10)).min(1).max(3),
    count: z.number().int(),
  });
}

const provider = createOpenAICompatible({ name: 'tandem', baseURL: args.url + '/v1', supportsStructuredOutputs: true });
for (const [tag, z, toJsonSchema] of [
  ['zod3', requireFromNpm('zod').z, (s) => zodToJsonSchema(s)],
  ['zod4', requireFromNpm('zod/v4'), (s) => requireFromNpm('zod/v4').toJSONSchema(s)],
]) {
  const schema = person(z);
  // Ajv's default dialect is draft-07; zod 4 names 2020-12 (the keywords used here mean the same).
  const { $schema, ...jsonSchema } = toJsonSchema(schema);
  const validate = ajv.compile(jsonSchema);
  // AI SDK generateObject: it sends response_format json_schema and parses with zod.
  const { object } = await ai.generateObject({
    model: provider(args.model), schema, prompt: 'Describe a person.', maxOutputTokens: 3000, seed: 1, maxRetries: 0,
  });
  assert.ok(validate(object), `${tag} ai: ${JSON.stringify(object)} ${JSON.stringify(validate.errors)}`);
  // LangChain withStructuredOutput, each method.
  const llm = new ChatOpenAI({
    model: args.model, apiKey: 'unused', maxTokens: 3000, maxRetries: 0, configuration: { baseURL: args.url + '/v1' },
  });
  for (const method of ['jsonSchema', 'functionCalling']) {
    const parsed = await llm.withStructuredOutput(schema, { name: 'person', method }).invoke('Describe a person.');
    assert.ok(validate(parsed), `${tag} langchain ${method}: ${JSON.stringify(parsed)} ${JSON.stringify(validate.errors)}`);
  }
  // jsonMode asks for "a JSON object" only (response_format json_object), so a random model's
  // object has no reason to hold these fields: the raw reply must be an object.
  const { raw } = await llm.withStructuredOutput(schema, { name: 'person', method: 'jsonMode', includeRaw: true })
    .invoke('Describe a person as JSON.');
  // (Any JSON object may be long: parsed when the model ended it before max_tokens.)
  assert.ok(raw.content.trimStart().startsWith('{'), `${tag} jsonMode: ${raw.content}`);
  if (raw.response_metadata.finish_reason === 'stop') {
    const value = JSON.parse(raw.content);
    assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), `${tag} jsonMode: ${raw.content}`);
  }
}
console.log('clients: ok');
