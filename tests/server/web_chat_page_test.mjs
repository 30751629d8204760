// Drives the chat page of a running `tandem serve` in headless Chromium (Debian's, through
// the playwright-core npm package): types a prompt, waits for the streamed answer, checks the
// statistics and the KV cache view, asks a second question (the history is resent, so the
// prefix cache serves the first exchange), renders markdown with the page's own function
// (hostile HTML shown as text), and saves a screenshot. Started by
// tests/server/web_chat_page_test.cpp:
//   node web_chat_page_test.mjs --npm NPM_DIR --chromium PATH --url URL --screenshot FILE
// Exits non-zero on the first failed check, printing what differed.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const args = {};
for (let i = 2; i + 1 < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const { chromium } = createRequire(args.npm + '/')('playwright-core');

const browser = await chromium.launch({ executablePath: args.chromium, args: ['--no-sandbox'] });
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 760 } });
  const errors = [];
  page.on('pageerror', (error) => errors.push(String(error)));
  const elsewhere = [];  // requests to anywhere but the server: there must be none
  page.on('request', (request) => {
    if (!request.url().startsWith(args.url + '/')) elsewhere.push(request.url());
  });
  await page.goto(args.url + '/');
  await page.waitForFunction(() => document.getElementById('kv-total').textContent !== '–');
  await page.fill('#temperature', '0');
  await page.fill('#max_tokens', '20');
  await page.fill('#seed', '7');

  async function ask(prompt) {
    const answers = await page.locator('.message.assistant').count();
    await page.fill('#prompt', prompt);
    await page.press('#prompt', 'Enter');
    await page.waitForFunction((n) => document.querySelectorAll('.message.assistant').length > n, answers);
    await page.waitForFunction(() => document.body.dataset.state === 'idle', null, { timeout: 30000 });
    assert.equal(await page.locator('.message.error').count(), 0, await page.locator('#messages').innerText());
    const answer = await page.locator('.message.assistant').last().innerText();
    assert.ok(answer.trim().length > 0, 'empty answer');
    const text = async (id) => (await page.locator('#' + id).innerText()).trim();
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
    assert.equal(stats.tokens, 20);
    return stats;
  }

  const first = await ask('The dream');
  const second = await ask('And then?');
  // "prompt (cached)": the second prompt holds the first exchange, served from the prefix cache.
  const [firstPrompt] = first.prompt.split(' ').map(Number);
  const [secondPrompt, secondCached] = second.prompt.replace(/[()]/g, '').split(' ').map(Number);
  assert.ok(secondPrompt > firstPrompt + 10, `prompts ${first.prompt} then ${second.prompt}`);
  assert.ok(secondCached > 0, `nothing cached: ${second.prompt}`);

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
  assert.deepEqual(errors, []);
  assert.deepEqual(elsewhere, []);
  await page.screenshot({ path: args.screenshot });
} finally {
  await browser.close();
}
