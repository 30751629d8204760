// Tandem's chat page: sends the conversation to /v1/chat/completions with stream: true and
// reads the server-sent events from fetch's body stream (EventSource cannot POST), timing
// the first token (TTFT) and the rest (tokens/s); polls /metrics for the KV cache's blocks.
// The conversation lives in this page only; the server keeps no session (its prefix cache
// makes resending the history cheap). Answers are markdown (markdown.js).
// document.body.dataset.state is "idle" or "streaming".
"use strict";

const $ = (id) => document.getElementById(id);
const history = [];  // {role, content} of the turns so far, system prompt not included
let controller = null;  // the answer in flight, for Stop
let modelId = "";

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api_key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

// The model's answers are markdown; what the user typed is shown as typed.
function showText(view, role, text) {
  if (role === "assistant") view.replaceChildren(renderMarkdown(text));
  else view.textContent = text;
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "message " + role;
  showText(div, role, text);
  $("messages").appendChild(div);
  $("messages").scrollTop = $("messages").scrollHeight;
  return div;
}

function setState(state) {
  document.body.dataset.state = state;
  $("send").disabled = state === "streaming";
  $("stop").disabled = state !== "streaming";
}

// Prometheus text format: "name value" or "name{labels} value" lines; comments skipped.
function parseMetrics(text) {
  const values = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/);
    if (match && !match[2]) values[match[1]] = Number(match[3]);
  }
  return values;
}

async function refreshKv() {
  try {
    const response = await fetch("/metrics", { headers: headers() });
    if (!response.ok) return;
    const m = parseMetrics(await response.text());
    const total = m.tandem_kv_blocks_total || 0;
    const parts = { used: m.tandem_kv_blocks_used || 0, cached: m.tandem_kv_blocks_cached || 0,
                    free: m.tandem_kv_blocks_free || 0 };
    for (const [name, blocks] of Object.entries(parts)) {
      $("kv-" + name).textContent = blocks;
      document.querySelector("#kv-bar ." + name).style.width = total ? (100 * blocks / total) + "%" : "0";
    }
    const tokens = m.tandem_kv_block_tokens || 0;
    $("kv-total").textContent = total + (tokens ? " × " + tokens + " tokens" : "");
  } catch (error) {
    // The server may be restarting; the next poll tries again.
  }
}

async function loadModel() {
  try {
    const response = await fetch("/v1/models", { headers: headers() });
    const body = await response.json();
    modelId = body.data && body.data.length ? body.data[0].id : "";
    $("model-name").textContent = modelId || "no model loaded yet";
  } catch (error) {
    $("model-name").textContent = "server unreachable";
  }
}

function requestBody() {
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...history);
  const body = { model: modelId, messages, stream: true, stream_options: { include_usage: true } };
  for (const name of ["temperature", "top_p", "top_k", "max_tokens", "seed"]) {
    const value = $(name).value.trim();
    if (value !== "") body[name] = Number(value);
  }
  return body;
}

function showStats(stats) {
  const format = (value, digits) => (value === null ? "–" : value.toFixed(digits));
  $("ttft").textContent = stats.ttft === null ? "–" : format(stats.ttft, 0) + " ms";
  $("tokens-per-second").textContent = format(stats.tokensPerSecond, 1);
  $("completion-tokens").textContent = stats.completionTokens;
  $("prompt-tokens").textContent = stats.promptTokens === null ? "–"
                                   : stats.promptTokens + " (" + stats.cachedTokens + ")";
}

// Reads the SSE stream, appending each delta to `view`; returns the text and statistics.
async function readAnswer(response, view, started) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "", text = "", firstAt = null, lastAt = null, pieces = 0;
  let usage = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message || "server error");
        if (chunk.usage) usage = chunk.usage;
        const delta = chunk.choices && chunk.choices.length ? chunk.choices[0].delta : null;
        if (delta && delta.content) {
          const now = performance.now();
          if (firstAt === null) firstAt = now;
          lastAt = now;
          pieces += 1;
          text += delta.content;
          view.answerText = text;  // what Stop keeps
          showText(view, "assistant", text);
          $("messages").scrollTop = $("messages").scrollHeight;
        }
      }
    }
  }
  const completionTokens = usage ? usage.completion_tokens : pieces;
  // Decode rate: the tokens after the first over the time since the first arrived.
  const tokensPerSecond = firstAt !== null && lastAt > firstAt && completionTokens > 1
                              ? (completionTokens - 1) * 1000 / (lastAt - firstAt) : null;
  return { text, stats: { ttft: firstAt === null ? null : firstAt - started, tokensPerSecond, completionTokens,
                          promptTokens: usage ? usage.prompt_tokens : null,
                          cachedTokens: usage && usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : 0 } };
}

async function send(prompt) {
  history.push({ role: "user", content: prompt });
  addMessage("user", prompt);
  const view = addMessage("assistant", "");
  setState("streaming");
  controller = new AbortController();
  const kvTimer = setInterval(refreshKv, 250);  // the blocks move while the answer is written
  const started = performance.now();
  let answer = "";
  try {
    const response = await fetch("/v1/chat/completions", { method: "POST", headers: headers(),
                                                           body: JSON.stringify(requestBody()),
                                                           signal: controller.signal });
    if (!response.ok) {
      let message = response.status + " " + response.statusText;
      try { message = (await response.json()).error.message; } catch (error) { /* not JSON */ }
      throw new Error(message);
    }
    const result = await readAnswer(response, view, started);
    answer = result.text;
    showStats(result.stats);
  } catch (error) {
    answer = view.answerText || "";
    if (error.name !== "AbortError") {
      view.remove();
      history.pop();
      addMessage("error", String(error.message || error));
      answer = null;
    }
  } finally {
    clearInterval(kvTimer);
    controller = null;
    if (answer !== null) history.push({ role: "assistant", content: answer });
    setState("idle");
    refreshKv();
  }
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const prompt = $("prompt").value;
  if (!prompt.trim() || controller) return;
  $("prompt").value = "";
  send(prompt);
});
$("prompt").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => controller && controller.abort());
$("reset").addEventListener("click", () => {
  if (controller) controller.abort();
  history.length = 0;
  $("messages").replaceChildren();
});

setState("idle");
loadModel();
refreshKv();
setInterval(refreshKv, 2000);
