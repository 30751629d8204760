// Drives the chat page of a running `tandem serve` (the 128-token context of the demo model)
// in headless Chromium (Debian's, through the playwright-core npm package): two streamed
// answers with their statistics and the KV cache view (the history is resent, so the prefix
// cache serves the first exchange); markdown rendered by the page's own function, hostile
// HTML shown as text; the conversation kept over a reload, a new chat, a deleted one; and a
// stored conversation longer than the context sent without its oldest exchanges, with a note.
// Started by tests/server/web_chat_page_test.cpp:
//   node web_chat_page_test.mjs --npm NPM_DIR --chromium PATH --url URL --artifacts DIR
// Saves DIR/web-chat.png and DIR/web-chat-trimmed.png. Exits non-zero on the first failed
// check, printing what differed.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const args = {};
for (let i = 2; i + 1 < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const { chromium } = createRequire(args.npm + '/')('playwright-core');
const maxTokens = 20;

const browser = await chromium.launch({ executablePath: args.chromium, args: ['--no-sandbox'] });
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 760 } });
  const errors = [];
  page.on('pageerror', (error) => errors.push(String(error)));
  const elsewhere = [];  // requests to anywhere but the server: there must be none
  const sent = [];  // the bodies of /v1/chat/completions requests
  page.on('request', (request) => {
    if (!request.url().startsWith(args.url + '/')) elsewhere.push(request.url());
    if (request.url().endsWith('/v1/chat/completions')) sent.push(JSON.parse(request.postData()));
  });
  const count = (selector) => page.locator(selector).count();
  const text = async (id) => (await page.locator('#' + id).innerText()).trim();

  // Settings are the page's, not the conversation's: set again after each reload.
  async function open(system = '') {
    await page.waitForFunction(() => document.getElementById('kv-total').textContent !== '–');
    await page.fill('#temperature', '0');
    await page.fill('#max_tokens', String(maxTokens));
    await page.fill('#seed', '7');
    await page.fill('#system', system);
  }

  async function ask(prompt, { tokens = maxTokens } = {}) {
    const answers = await count('.message.assistant');
    await page.fill('#prompt', prompt);
    await page.press('#prompt', 'Enter');
    await page.waitForFunction((n) => document.querySelectorAll('.message.assistant').length > n, answers);
    await page.waitForFunction(() => document.body.dataset.state === 'idle', null, { timeout: 30000 });
    assert.equal(await count('.message.error'), 0, await page.locator('#messages').innerText());
    const answer = await page.locator('.message.assistant').last().innerText();
    assert.ok(answer.trim().length > 0, 'empty answer');
    const stats = {
      answer,
      ttft: await text('ttft'),
      rate: Number(await text('tokens-per-second')),
      tokens: Number(await text('completion-tokens')),
      prompt: await text('prompt-tokens'),
    };
    console.log(JSON.stringify(stats));
    assert.match(stats.ttft, /^[0-9]+ ms$/);
    assert.ok(stats.rate > 0, `tokens/s ${stats.rate}`);
    if (tokens) assert.equal(stats.tokens, tokens);
    return stats;
  }

  await page.goto(args.url + '/');
  await open();
  const first = await ask('The dream');
  const second = await ask('And then?');
  // "prompt (cached)": the second prompt holds the first exchange, served from the prefix cache.
  const [firstPrompt] = first.prompt.split(' ').map(Number);
  const [secondPrompt, secondCached] = second.prompt.replace(/[()]/g, '').split(' ').map(Number);
  assert.ok(secondPrompt > firstPrompt + 10, `prompts ${first.prompt} then ${second.prompt}`);
  assert.ok(secondCached > 0, `nothing cached: ${second.prompt}`);
  assert.deepEqual(sent.map((body) => body.messages.length), [1, 3]);
  assert.equal(await count('.message.note'), 0, 'a short conversation is sent whole');

  // The KV view: numbers from /metrics, adding up to the pool.
  await page.waitForTimeout(300);
  const kv = {};
  for (const name of ['used', 'cached', 'free']) kv[name] = Number(await page.locator('#kv-' + name).innerText());
  const total = Number((await page.locator('#kv-total').innerText()).split(' ')[0]);
  console.log(JSON.stringify({ kv, total }));
  assert.ok(total > 0);
  assert.equal(kv.used + kv.cached + kv.free, total);
  assert.ok(kv.cached > 0, 'the finished conversation leaves its blocks cached');

  // Markdown: the random model cannot be asked for it, so the page's renderer is given a fixed
  // answer (shown as one more bubble, not stored) and the DOM it makes is checked.
  const markdown = [
    '# prompt', '', 'Steps:', '', '- first **bold**', '- second `inline`', '',
    '```python', 'def f(x):', '    return x < 2', '```', '',
    '<img src=x onerror="window.pwned = 1"> <script>window.pwned = 2</script>',
    '[click](javascript:window.pwned=3) [site](https://example.com/a?b=1&c=2) ![pic](http://example.invalid/x.png)',
  ].join('\n');
  const rendered = await page.evaluate((text) => {
    const view = addMessage('assistant', text);
    return {
      text: view.innerText,
      code: [...view.querySelectorAll('pre > code')].map((code) => [code.className, code.textContent]),
      items: [...view.querySelectorAll('ul > li')].map((li) => li.innerHTML),
      tags: [...new Set([...view.querySelectorAll('*')].map((element) => element.tagName))].sort(),
      links: [...view.querySelectorAll('a')].map((a) => [a.getAttribute('href'), a.textContent, a.rel]),
      headingId: view.querySelector('h1') && view.querySelector('h1').id,
      promptIsTheTextarea: document.getElementById('prompt').tagName === 'TEXTAREA',
      pwned: window.pwned,
    };
  }, markdown);
  console.log(JSON.stringify(rendered));
  assert.deepEqual(rendered.code, [['language-python', 'def f(x):\n    return x < 2\n']]);
  assert.deepEqual(rendered.items, ['first <strong>bold</strong>', 'second <code>inline</code>']);
  assert.deepEqual(rendered.tags, ['A', 'BR', 'CODE', 'H1', 'LI', 'P', 'PRE', 'STRONG', 'UL']);
  assert.ok(rendered.text.includes('<img src=x onerror="window.pwned = 1">'), rendered.text);
  assert.ok(rendered.text.includes('<script>window.pwned = 2</script>'), rendered.text);
  assert.ok(rendered.text.includes('click'), 'a javascript: link is its text');
  assert.deepEqual(rendered.links, [['https://example.com/a?b=1&c=2', 'site', 'noopener noreferrer'],
                                    ['http://example.invalid/x.png', 'image: pic', 'noopener noreferrer']]);
  assert.equal(rendered.headingId, '');
  assert.ok(rendered.promptIsTheTextarea);
  assert.equal(rendered.pwned, undefined);
  await page.screenshot({ path: args.artifacts + '/web-chat.png' });

  // Conversations: kept over a reload, listed, restored with their answers.
  const firstAnswers = await page.locator('.message.assistant[data-turn]').allInnerTexts();
  await page.reload();
  await open();
  assert.deepEqual(await page.locator('#conversation-list li').allInnerTexts(), ['The dream\n×']);
  assert.equal(await count('#conversation-list li.current'), 1);
  assert.equal(await count('.message.user'), 2);
  assert.deepEqual(await page.locator('.message.assistant').allInnerTexts(), firstAnswers);
  await page.click('#new-chat');
  assert.equal(await count('.message'), 0);
  assert.equal(await count('#conversation-list li.current'), 0);

  // A stored conversation of 12 turns (about 34 tokens an exchange under the llama2 template and
  // this 512-token vocabulary), far past 128 tokens: its oldest exchanges are left out.
  await page.evaluate(() => {
    const store = JSON.parse(localStorage.getItem('tandem.conversations.v1'));
    const turns = [];
    for (let i = 1; i <= 6; i++)
      turns.push({ role: 'user', content: `Dream ${i}?` }, { role: 'assistant', content: 'A big tree.' });
    store.list.unshift({ id: 'long', title: 'A long story', updated: Date.now(), turns, leftOut: 0 });
    localStorage.setItem('tandem.conversations.v1', JSON.stringify(store));
  });
  await page.reload();
  const system = 'Be brief.';
  await open(system);
  assert.equal(await count('#conversation-list li'), 2);
  await page.click('#conversation-list li[data-id="long"] .open');
  assert.equal(await count('.message[data-turn]'), 12);
  const trimmed = await ask('Go on', { tokens: 0 });
  const body = sent[sent.length - 1];
  const leftOut = 13 - (body.messages.length - 1);  // 12 stored turns and the question, less those sent
  console.log(JSON.stringify({ sent: body.messages.map((m) => m.role), leftOut, prompt: trimmed.prompt }));
  assert.equal(body.messages[0].content, system, 'the system prompt is kept');
  assert.equal(body.messages[1].role, 'user', 'whole exchanges are left out');
  assert.equal(body.messages.at(-1).content, 'Go on');
  assert.ok(leftOut >= 2 && leftOut % 2 === 0 && leftOut < 12, `left out ${leftOut}`);
  assert.ok(Number(trimmed.prompt.split(' ')[0]) + maxTokens <= 128, `prompt ${trimmed.prompt}`);
  // Not one exchange more than needed: with the newest of those left out, it would not fit.
  const stored = await page.evaluate(() => JSON.parse(localStorage.getItem('tandem.conversations.v1')));
  const oneMore = [body.messages[0], ...stored.list[0].turns.slice(leftOut - 2, leftOut), ...body.messages.slice(1)];
  const longer = await page.evaluate(async (messages) => {
    const response = await fetch('/tokenize', { method: 'POST', body: JSON.stringify({ messages }) });
    return (await response.json()).count;
  }, oneMore);
  assert.ok(longer + maxTokens > 128, `${longer} tokens with one more exchange would have fit`);
  assert.equal(stored.list[0].leftOut, leftOut);
  const note = await page.locator('.message.note').innerText();
  assert.match(note, new RegExp(`^${leftOut} earlier messages are left out: .*context \\(128 tokens\\)`));
  assert.equal(await count('.message.left-out'), leftOut);
  await page.locator('.message.note').scrollIntoViewIfNeeded();
  await page.screenshot({ path: args.artifacts + '/web-chat-trimmed.png' });

  // Delete the first conversation: gone from the list and from the browser's storage.
  await page.click('#conversation-list li:not([data-id="long"]) .delete');
  assert.deepEqual(await page.locator('#conversation-list li').allInnerTexts(), ['A long story\n×']);
  const kept = await page.evaluate(() => JSON.parse(localStorage.getItem('tandem.conversations.v1')));
  assert.deepEqual(kept.list.map((item) => [item.id, item.turns.length, item.leftOut]), [['long', 14, leftOut]]);
  assert.equal(await count('.message.left-out'), leftOut, 'the open conversation stays as it was');

  assert.deepEqual(errors, []);
  assert.deepEqual(elsewhere, []);
} finally {
  await browser.close();
}
