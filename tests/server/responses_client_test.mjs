// /v1/responses through real clients against a running `tandem serve` (random weights: the
// text is noise, the checks are on the interface): the official `openai` npm package (v7:
// responses.create with text, instructions, a forced function call and its output sent back
// both inline and with previous_response_id, retrieve and delete, a json_schema text format,
// responses.stream) and
// the Vercel AI SDK's default OpenAI provider (`openai(model)` and `.responses(model)` use the
// Responses API: generateText, a tool call executed and answered in a second step, streamText,
// structured output). Started by tests/server/responses_client_test.cpp:
//   node responses_client_test.mjs --npm NPM_DIR --url URL --model ID --part openai|aisdk
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
const requireFromNpm = createRequire(args.npm + '/');
const MODEL = args.model;

const WEATHER_PARAMETERS = {
  type: 'object',
  properties: { city: { type: 'string', enum: ['Oslo', 'Paris'] } },
  required: ['city'],
  additionalProperties: false,
};
const VERDICT_SCHEMA = {
  type: 'object',
  properties: { ok: { type: 'boolean' }, mood: { type: 'string', enum: ['calm', 'wild'] } },
  required: ['ok', 'mood'],
  additionalProperties: false,
};

function checkVerdict(value, what) {
  assert.equal(typeof value.ok, 'boolean', `${what}: ${JSON.stringify(value)}`);
  assert.ok(['calm', 'wild'].includes(value.mood), `${what}: ${JSON.stringify(value)}`);
}

async function openaiPart() {
  const OpenAI = requireFromNpm('openai').default ?? requireFromNpm('openai');
  const client = new OpenAI({ baseURL: args.url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000 });

  // Text, with instructions.
  const text = await client.responses.create({
    model: MODEL, input: 'Tell me a story.', instructions: 'Be brief.', max_output_tokens: 8,
  });
  assert.equal(text.object, 'response');
  assert.match(text.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(text.status), text.status);
  assert.equal(typeof text.output_text, 'string');
  assert.equal(text.instructions, 'Be brief.');
  assert.ok(text.usage.output_tokens >= 1 && text.usage.output_tokens <= 8, JSON.stringify(text.usage));
  assert.equal(text.usage.total_tokens, text.usage.input_tokens + text.usage.output_tokens);

  // A forced function call, then its output sent back: inline, and after previous_response_id.
  const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city',
                   parameters: WEATHER_PARAMETERS, strict: true }];
  const input = [{ role: 'user', content: 'Weather in Oslo?' }];
  const called = await client.responses.create({
    model: MODEL, input, tools, tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 64,
  });
  const call = called.output.find((item) => item.type === 'function_call');
  assert.ok(call, JSON.stringify(called.output));
  assert.equal(call.name, 'get_weather');
  assert.ok(['Oslo', 'Paris'].includes(JSON.parse(call.arguments).city), call.arguments);
  const output = { type: 'function_call_output', call_id: call.call_id, output: '12 C, rain' };
  const inline = await client.responses.create({
    model: MODEL, input: [...input, ...called.output, output], tools, max_output_tokens: 4,
  });
  assert.equal(inline.output[0].type, 'message', JSON.stringify(inline.output));
  const chained = await client.responses.create({
    model: MODEL, previous_response_id: called.id, input: [output], tools, max_output_tokens: 4,
  });
  assert.equal(chained.previous_response_id, called.id);
  assert.equal(chained.usage.input_tokens, inline.usage.input_tokens, 'the stored turn is the inline conversation');
  assert.deepEqual((await client.responses.retrieve(called.id)).output, called.output);
  await client.responses.delete(called.id);
  await assert.rejects(client.responses.retrieve(called.id), (e) => e.status === 404);
  await assert.rejects(
    client.responses.create({ model: MODEL, previous_response_id: 'resp_unknown', input: 'hi' }),
    (e) => e.status === 404 && /resp_unknown/.test(e.message));

  // Structured output.
  const structured = await client.responses.create({
    model: MODEL, input: 'Judge.', max_output_tokens: 64,
    text: { format: { type: 'json_schema', name: 'verdict', schema: VERDICT_SCHEMA, strict: true } },
  });
  checkVerdict(JSON.parse(structured.output_text), 'json_schema');

  // Streaming: the SDK's stream helper checks the event order as it accumulates.
  const stream = client.responses.stream({ model: MODEL, input: 'Tell me a story.', max_output_tokens: 8 });
  const types = [];
  let deltas = '';
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'response.output_text.delta') deltas += event.delta;
  }
  const streamed = await stream.finalResponse();
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.ok(['response.completed', 'response.incomplete'].includes(types.at(-1)), types.join(' '));
  assert.equal(streamed.output_text, deltas);

  const toolStream = client.responses.stream({
    model: MODEL, input, tools, tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 64,
  });
  const toolTypes = [];
  for await (const event of toolStream) toolTypes.push(event.type);
  const streamedCall = (await toolStream.finalResponse()).output.find((item) => item.type === 'function_call');
  assert.ok(streamedCall, toolTypes.join(' '));
  assert.ok(toolTypes.includes('response.function_call_arguments.done'), toolTypes.join(' '));
  assert.ok(['Oslo', 'Paris'].includes(JSON.parse(streamedCall.arguments).city), streamedCall.arguments);
}

async function aisdkPart() {
  const { createOpenAI } = requireFromNpm('@ai-sdk/openai');
  const { generateText, streamText, jsonSchema, tool, stepCountIs, Output } = requireFromNpm('ai');
  const provider = createOpenAI({ baseURL: args.url + '/v1', apiKey: 'unused' });

  for (const model of [provider(MODEL), provider.responses(MODEL)]) {
    const text = await generateText({ model, prompt: 'Tell me a story.', maxOutputTokens: 8, maxRetries: 0 });
    assert.equal(typeof text.text, 'string');
    assert.ok(['stop', 'length'].includes(text.finishReason), text.finishReason);
    assert.ok(text.usage.outputTokens >= 1 && text.usage.outputTokens <= 8, JSON.stringify(text.usage));
    assert.match(text.response.id, /^resp_/);
  }
  const model = provider(MODEL);

  // A tool the model must call, executed, and its result sent back in a second step.
  let executed = 0;
  const weather = tool({
    description: 'The weather in a city',
    inputSchema: jsonSchema(WEATHER_PARAMETERS),
    execute: async ({ city }) => { executed++; return `12 C in ${city}`; },
  });
  const withTools = await generateText({
    model, prompt: 'Weather in Oslo?', tools: { get_weather: weather }, maxOutputTokens: 64, maxRetries: 0,
    toolChoice: { type: 'tool', toolName: 'get_weather' }, stopWhen: stepCountIs(2),
    prepareStep: ({ stepNumber }) => (stepNumber > 0 ? { toolChoice: 'none', maxOutputTokens: 4 } : undefined),
  });
  assert.equal(executed, 1);
  assert.equal(withTools.steps.length, 2);
  assert.equal(withTools.steps[0].toolCalls[0].toolName, 'get_weather');
  assert.ok(['Oslo', 'Paris'].includes(withTools.steps[0].toolCalls[0].input.city));
  assert.equal(withTools.steps[0].toolResults[0].output, `12 C in ${withTools.steps[0].toolCalls[0].input.city}`);

  // Streaming.
  const streamed = streamText({ model, prompt: 'Tell me a story.', maxOutputTokens: 8, maxRetries: 0 });
  let joined = '';
  for await (const piece of streamed.textStream) joined += piece;
  assert.equal(await streamed.text, joined);
  assert.ok(['stop', 'length'].includes(await streamed.finishReason));

  // Structured output (text.format json_schema).
  const structured = await generateText({
    model, prompt: 'Judge.', maxOutputTokens: 64, maxRetries: 0,
    output: Output.object({ schema: jsonSchema(VERDICT_SCHEMA) }),
  });
  checkVerdict(structured.output, 'AI SDK Output.object');
}

try {
  if (args.part === 'openai') await openaiPart();
  else if (args.part === 'aisdk') await aisdkPart();
  else throw new Error('unknown --part ' + args.part);
  console.log('ok');
} catch (e) {
  console.error(e);
  process.exit(1);
}
