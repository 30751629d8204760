// Structured output and tool calls through the official `openai` npm package (v7) against a
// running `tandem serve` whose model has random weights and a real vocabulary: whatever valid
// JSON or tool call comes back is the grammar's doing. Started by
// tests/server/structured_output_server_test.cpp:
//   node structured_output_client_test.mjs --npm NPM_DIR --url URL --model ID --part schemas|tools
// Each response is validated with Ajv (an independent JSON Schema validator). Exits non-zero
// on the first failed check, printing what differed.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const args = {};
for (let i = 2; i < process.argv.length; i++) {
  const key = process.argv[i].replace(/^--/, '');
  const next = process.argv[i + 1];
  if (next === undefined || next.startsWith('--')) args[key] = true;
  else { args[key] = next; i++; }
}
const requireFromNpm = createRequire(args.npm + '/');
const OpenAI = requireFromNpm('openai').default ?? requireFromNpm('openai');
const AjvModule = requireFromNpm('ajv');
const Ajv = AjvModule.default ?? AjvModule;
const ajv = new Ajv({ strict: false });
// The string formats the grammar supports, as RFC 3339 and RFC 4122 write them (Ajv itself
// knows no formats without the ajv-formats package).
const DATE = '\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])';
const TIME = '([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d+)?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)';
ajv.addFormat('date', new RegExp(`^${DATE}$`));
ajv.addFormat('time', new RegExp(`^${TIME}$`));
ajv.addFormat('date-time', new RegExp(`^${DATE}T${TIME}$`));
ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
const client = new OpenAI({ baseURL: args.url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const MODEL = args.model;  // the served model's id (its file name)

// Seeded PRNG (mulberry32): the same 50 schemas every run.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A random schema of the supported subset (OpenAI strict mode: objects with required
// properties and additionalProperties false, arrays with items/minItems/maxItems, enum,
// const, string/number/integer/boolean/null, anyOf, $ref into $defs, string formats). Arrays
// and strings are bounded so that a random model's output ends.
function randomSchema(random) {
  const pick = (xs) => xs[Math.floor(random() * xs.length)];
  const defs = {};
  let nDefs = 0;
  function value(depth) {
    const kinds = ['string', 'integer', 'number', 'boolean', 'null', 'enum', 'const', 'format', 'bounded', 'pattern'];
    if (depth < 2) kinds.push('object', 'array', 'anyOf', 'ref');
    switch (pick(kinds)) {
      case 'string': return { type: 'string', maxLength: 1 + Math.floor(random() * 8) };
      case 'integer': return { type: 'integer' };
      case 'number': return { type: 'number' };
      case 'boolean': return { type: 'boolean' };
      case 'null': return { type: 'null' };
      case 'enum': return { enum: ['alpha', 'beta', 'gamma', 'delta'].slice(0, 1 + Math.floor(random() * 4)) };
      case 'const': return { const: pick(['fixed', 42, true, null]) };
      case 'format': return { type: 'string', format: pick(['date', 'time', 'date-time', 'uuid']) };
      case 'bounded': return pick([
        { type: 'integer', minimum: 0, maximum: 255 },
        { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
        { type: 'integer', exclusiveMinimum: 10, maximum: 99999 },
        { type: 'number', minimum: -1.5, exclusiveMaximum: 2.25 },
        { type: 'number', minimum: 0, multipleOf: 0.01 },
      ]);
      case 'pattern': return { type: 'string', pattern: pick(['^[A-Z]{3}-\\d{2}$', '^(red|green|blue)$', '^[a-z]{1,8}@[a-z]{1,8}\\.[a-z]{2,3}$', '^\\w{1,5}$']) };
      case 'object': return object(depth + 1);
      case 'array': {
        const max = 1 + Math.floor(random() * 3);
        return { type: 'array', items: value(depth + 1), minItems: Math.floor(random() * (max + 1)), maxItems: max };
      }
      case 'anyOf': return { anyOf: [value(depth + 1), value(depth + 1)] };
      case 'ref': {
        const name = 'd' + nDefs++;
        defs[name] = object(depth + 1);
        return { $ref: '#/$defs/' + name };
      }
    }
  }
  function object(depth) {
    const n = 1 + Math.floor(random() * 4);
    const properties = {};
    for (let i = 0; i < n; i++) properties['k' + i + pick(['', '_x', 'Name'])] = value(depth);
    const names = Object.keys(properties);
    const required = names.filter(() => random() < 0.8);
    return { type: 'object', properties, required, additionalProperties: false };
  }
  const root = object(0);
  if (nDefs > 0) root.$defs = defs;
  return root;
}

async function schemas() {
  const random = rng(20261202);
  for (let i = 0; i < 50; i++) {
    const schema = randomSchema(random);
    const validate = ajv.compile(schema);
    const request = {
      model: MODEL, messages: [{ role: 'user', content: 'Fill in the form.' }], max_tokens: 1500, seed: i,
      temperature: 1.0, response_format: { type: 'json_schema', json_schema: { name: 'form', strict: true, schema } },
    };
    let text;
    if (i % 2 === 0) {
      // The SDK's parse(): it refuses a reply cut at max_tokens and parses the content itself.
      const completion = await client.chat.completions.parse(request);
      const message = completion.choices[0].message;
      assert.equal(completion.choices[0].finish_reason, 'stop', `${JSON.stringify(completion)}\nschema: ${JSON.stringify(schema)}`);
      assert.ok(message.parsed !== undefined && message.parsed !== null || message.content === 'null', message.content);
      text = message.content;
    } else {
      const stream = await client.chat.completions.create({ ...request, stream: true });
      text = '';
      let finish = null;
      for await (const chunk of stream) {
        for (const choice of chunk.choices) {
          text += choice.delta.content ?? '';
          if (choice.finish_reason) finish = choice.finish_reason;
        }
      }
      assert.equal(finish, 'stop', `${text}\nschema: ${JSON.stringify(schema)}`);
    }
    let value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw new Error(`schema ${i}: not JSON: ${text}\nschema: ${JSON.stringify(schema)}`);
    }
    assert.ok(validate(value), `schema ${i}: ${text}\nerrors: ${JSON.stringify(validate.errors)}\nschema: ${JSON.stringify(schema)}`);
  }
  // json_object: a JSON object (never a bare number or string).
  for (const seed of [3, 4, 5]) {
    const anyJson = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 1500, seed,
      response_format: { type: 'json_object' },
    });
    if (anyJson.choices[0].finish_reason !== 'stop') continue;
    const value = JSON.parse(anyJson.choices[0].message.content);
    assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), anyJson.choices[0].message.content);
  }
  // Refusals name the problem.
  await assert.rejects(
    client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'integer', not: { const: 1 } } } },
    }),
    (e) => e.status === 400 && /'not'/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '(a)\\1' } } },
    }),
    (e) => e.status === 400 && /backreferences/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], response_format: { type: 'nonsense' } }),
    (e) => e.status === 400 && /nonsense/.test(e.message));
}

const weatherParameters = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer' } },
  required: ['city', 'unit'], additionalProperties: false,
};
const timeParameters = {
  type: 'object', properties: { zone: { enum: ['UTC', 'CET', 'PST'] } }, required: ['zone'], additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: weatherParameters } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a zone', parameters: timeParameters } },
];
const validators = { get_weather: ajv.compile(weatherParameters), get_time: ajv.compile(timeParameters) };

function checkCall(call, expectedName) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  if (expectedName) assert.equal(call.function.name, expectedName);
  const validate = validators[call.function.name];
  assert.ok(validate, `unknown function ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
}

async function streamedCalls(request) {
  const stream = await client.chat.completions.create({ ...request, stream: true });
  const calls = [];
  let finish = null, content = '';
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      content += choice.delta.content ?? '';
      for (const delta of choice.delta.tool_calls ?? []) {
        const call = (calls[delta.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (delta.id) call.id = delta.id;
        if (delta.type) call.type = delta.type;
        if (delta.function?.name) call.function.name += delta.function.name;
        if (delta.function?.arguments) call.function.arguments += delta.function.arguments;
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { calls, finish, content };
}

async function toolCalls() {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  // required: at least one call to a known function, arguments valid under its schema.
  for (let seed = 1; seed <= 6; seed++) {
    const completion = await client.chat.completions.create({
      model: MODEL, messages, tools, tool_choice: 'required', seed, temperature: 1.0, max_tokens: 1500,
    });
    const choice = completion.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(completion));
    assert.equal(choice.message.content, null);
    assert.ok(choice.message.tool_calls.length >= 1);
    for (const call of choice.message.tool_calls) checkCall(call);
  }
  // parallel_tool_calls false: exactly one.
  const single = await client.chat.completions.create({
    model: MODEL, messages, tools, tool_choice: 'required', parallel_tool_calls: false, seed: 9, max_tokens: 1500,
  });
  assert.equal(single.choices[0].message.tool_calls.length, 1);
  // A named function.
  const named = await client.chat.completions.create({
    model: MODEL, messages, tools, tool_choice: { type: 'function', function: { name: 'get_time' } }, seed: 4, max_tokens: 800,
  });
  assert.equal(named.choices[0].message.tool_calls.length, 1);
  checkCall(named.choices[0].message.tool_calls[0], 'get_time');

  // Streamed deltas reassemble to the call the same seeded request returns whole (ids aside:
  // each response draws its own).
  for (const seed of [2, 5]) {
    const request = { model: MODEL, messages, tools, tool_choice: 'required', seed, temperature: 1.0, max_tokens: 1500 };
    const whole = await client.chat.completions.create(request);
    const streamed = await streamedCalls(request);
    assert.equal(streamed.finish, 'tool_calls');
    assert.equal(streamed.content, '');
    const strip = (calls) => calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
    assert.deepEqual(strip(streamed.calls), strip(whole.choices[0].message.tool_calls));
    for (const call of streamed.calls) checkCall(call);
  }

  // runTools: the SDK calls our stub with the parsed arguments and sends its result back (an
  // assistant message with content null and tool_calls, then a tool message): the second
  // request must be accepted, and answers with another call (tool_choice is still required).
  const seen = [];
  const runner = client.chat.completions.runTools({
    model: MODEL, messages, tool_choice: 'required', parallel_tool_calls: false, seed: 11, max_tokens: 1500,
    tools: [{
      type: 'function',
      function: {
        name: 'get_time', parameters: timeParameters, parse: JSON.parse,
        function: (parsed) => { seen.push(parsed); return { time: '12:00', zone: parsed.zone }; },
      },
    }],
  }, { maxChatCompletions: 2 });
  await runner.done();
  assert.equal(seen.length, 2, JSON.stringify(runner.messages));
  for (const parsed of seen) assert.ok(validators.get_time(parsed), JSON.stringify(parsed));
  const roles = runner.messages.map((m) => m.role);
  assert.deepEqual(roles.slice(0, 5), ['user', 'assistant', 'tool', 'assistant', 'tool']);
  assert.equal(runner.messages[2].tool_call_id, runner.messages[1].tool_calls[0].id);

  // The same with streaming: the SDK assembles the streamed deltas itself.
  const streamedSeen = [];
  const streamRunner = client.chat.completions.runTools({
    model: MODEL, messages, tool_choice: { type: 'function', function: { name: 'get_weather' } }, seed: 12,
    max_tokens: 1500, stream: true,
    tools: [{
      type: 'function',
      function: { name: 'get_weather', parameters: weatherParameters, parse: JSON.parse,
        function: (parsed) => { streamedSeen.push(parsed); return 'sunny'; } },
    }],
  });
  await streamRunner.done();
  assert.equal(streamedSeen.length, 1);
  assert.ok(validators.get_weather(streamedSeen[0]), JSON.stringify(streamedSeen[0]));

  // tool_choice none / auto on this model: plain text, no calls forced.
  const free = await client.chat.completions.create({ model: MODEL, messages, tools, tool_choice: 'none', max_tokens: 8 });
  assert.equal(free.choices[0].message.tool_calls, undefined);
  assert.equal(free.choices[0].finish_reason, 'length');
}

// zod schemas through the SDK's own helpers (openai/helpers/zod), with zod 3 and zod 4: .int()
// (zod 4 writes the safe integer range), .min()/.max(), .regex(), .email() (zod 4 writes a
// pattern beside the format), .array().min(1).max(3). parse() runs zod on the reply; Ajv with
// ajv-formats checks it against the JSON Schema the SDK sent.
async function zodSchemas() {
  const { zodResponseFormat, zodFunction } = requireFromNpm('openai/helpers/zod');
  const addFormats = requireFromNpm('ajv-formats').default ?? requireFromNpm('ajv-formats');
  const strictAjv = new Ajv({ strict: false });
  addFormats(strictAjv);
  for (const [tag, z] of [['zod3', requireFromNpm('zod').z], ['zod4', requireFromNpm('zod/v4')]]) {
    const Person = z.object({
      name: z.string().min(1).max(40),
      age: z.number().int().min(0).max(150),
      code: z.string().regex(/^[A-Z]{3}-\d{2}$/),
      email: z.string().email(),
      tags: z.array(z.string().max(10)).min(1).max(3),
      count: z.number().int(),
    });
    const format = zodResponseFormat(Person, 'person');
    const validate = strictAjv.compile(format.json_schema.schema);
    for (const seed of [1, 2, 3]) {
      const completion = await client.chat.completions.parse({
        model: MODEL, messages: [{ role: 'user', content: 'Describe a person.' }], max_tokens: 3000, seed,
        temperature: 1.0, response_format: format,
      });
      const message = completion.choices[0].message;
      assert.equal(completion.choices[0].finish_reason, 'stop', `${tag}: ${JSON.stringify(completion)}`);
      assert.ok(message.parsed, `${tag}: zod refused ${message.content}`);
      assert.ok(validate(JSON.parse(message.content)), `${tag}: ${message.content}: ${JSON.stringify(validate.errors)}`);
    }
    // The same schema as a forced tool's parameters (zodFunction), arguments parsed by zod.
    const tool = zodFunction({ name: 'save_person', parameters: Person });
    const validateArgs = strictAjv.compile(tool.function.parameters);
    const called = await client.chat.completions.parse({
      model: MODEL, messages: [{ role: 'user', content: 'Save a person.' }], max_tokens: 3000, seed: 7,
      tools: [tool], tool_choice: { type: 'function', function: { name: 'save_person' } },
    });
    const call = called.choices[0].message.tool_calls[0];
    assert.ok(call.function.parsed_arguments, `${tag}: ${JSON.stringify(called)}`);
    assert.ok(validateArgs(JSON.parse(call.function.arguments)), `${tag}: ${call.function.arguments}`);
  }
  // vLLM's fields through the SDK (it passes unknown body fields on): guided_regex,
  // structured_outputs, on completions and chat.
  const regex = await client.completions.create({ model: MODEL, prompt: 'Code:', max_tokens: 50, guided_regex: '[A-Z]{3}-\\d{2}' });
  assert.match(regex.choices[0].text, /^[A-Z]{3}-\d{2}$/);
  const choice = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Pick.' }], max_tokens: 10,
    structured_outputs: { choice: ['red', 'green', 'blue'] },
  });
  assert.ok(['red', 'green', 'blue'].includes(choice.choices[0].message.content), choice.choices[0].message.content);
  const json = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Count.' }], max_tokens: 100,
    structured_outputs: { json: { type: 'integer', minimum: 10, maximum: 99 } },
  });
  const n = JSON.parse(json.choices[0].message.content);
  assert.ok(Number.isInteger(n) && n >= 10 && n <= 99, json.choices[0].message.content);
}

// A forced "required" reply cut by max_tokens: the complete calls before the cut are returned.
async function cutToolCalls() {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  let sawCut = false;
  for (let seed = 1; seed <= 20 && !sawCut; seed++) {
    const full = await client.chat.completions.create({ model: MODEL, messages, tools, tool_choice: 'required', seed, temperature: 1.0, max_tokens: 1500 });
    const calls = full.choices[0].message.tool_calls;
    if (calls.length < 2) continue;
    // The same seeded request stopped a few tokens before its end (inside the last call, once
    // the tokens after its closing brace are cut too): the calls before it survive.
    const usage = full.usage.completion_tokens;
    const strip = (cs) => cs.map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
    for (let k = 1; k <= 12 && !sawCut; k++) {
      const cut = await client.chat.completions.create({ model: MODEL, messages, tools, tool_choice: 'required', seed, temperature: 1.0, max_tokens: usage - k });
      assert.equal(cut.choices[0].finish_reason, 'length');
      const kept = cut.choices[0].message.tool_calls ?? [];
      assert.ok(kept.length >= 1, JSON.stringify(cut));
      assert.deepEqual(strip(kept), strip(calls.slice(0, kept.length)));
      for (const call of kept) checkCall(call);
      sawCut = kept.length < calls.length;
    }
  }
  assert.ok(sawCut, 'no seed gave two or more calls to cut');
}

const parts = { schemas, tools: toolCalls, zod: zodSchemas, cut: cutToolCalls };
try {
  await parts[args.part]();
  console.log(`${args.part}: ok`);
} catch (e) {
  console.error(`${args.part}: FAILED\n`, e);
  process.exit(1);
}
