// Tandem's chat page: sends the conversation to /v1/chat/completions with stream: true and
// reads the server-sent events from fetch's body stream (EventSource cannot POST), timing
// the first token (TTFT) and the rest (tokens/s); polls /metrics for the KV cache's blocks.
// Conversations live in this browser (conversations.js); the server keeps no session (its
// prefix cache makes resending the history cheap). A history longer than the context loses
// its oldest turns, as `tandem chat` drops them (fitConversation). Answers are markdown
// (markdown.js). document.body.dataset.state is "idle" or "streaming".
"use strict";

const $ = (id) => document.getElementById(id);
const store = loadConversations();
let conversation = findConversation(store, store.current);  // null: a new chat, not stored yet
let controller = null;  // the answer in flight, for Stop
let modelId = "";
let contextLength = 0;  // tokens, from /v1/models or /tokenize (max_model_len)

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

// A message bubble; `turn` is its index in the conversation's turns (none for errors).
function addMessage(role, text, turn) {
  const div = document.createElement("div");
  div.className = "message " + role;
  if (turn !== undefined) div.dataset.turn = turn;
  showText(div, role, text);
  $("messages").appendChild(div);
  $("messages").scrollTop = $("messages").scrollHeight;
  return div;
}

// The turns left out of what is sent are dimmed, and a note stands where the sent part begins.
function showLeftOut() {
  for (const note of document.querySelectorAll("#messages .note")) note.remove();
  const leftOut = conversation ? conversation.leftOut : 0;
  for (const view of document.querySelectorAll("#messages [data-turn]"))
    view.classList.toggle("left-out", Number(view.dataset.turn) < leftOut);
  const first = document.querySelector(`#messages [data-turn="${leftOut}"]`);
  if (!leftOut || !first) return;
  const note = document.createElement("div");
  note.className = "message note";
  note.textContent = `${leftOut} earlier message${leftOut === 1 ? " is" : "s are"} left out: the conversation ` +
                     `no longer fits the context` + (contextLength ? ` (${contextLength} tokens)` : "");
  first.before(note);
}

function saveStore() {
  if (!saveConversations(store))
    addMessage("error", "this browser did not keep the conversation (its storage is full or off)");
}

function showConversationList() {
  const items = store.list.map((item) => {
    const li = document.createElement("li");
    li.dataset.id = item.id;
    if (conversation === item) li.className = "current";
    const open = document.createElement("button");
    open.type = "button";
    open.className = "open";
    open.textContent = item.title || "(untitled)";
    open.title = new Date(item.updated).toLocaleString();
    open.addEventListener("click", () => openConversation(item));
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "delete";
    remove.textContent = "×";
    remove.title = "Delete this conversation";
    remove.addEventListener("click", () => removeConversation(item));
    li.append(open, remove);
    return li;
  });
  $("conversation-list").replaceChildren(...items);
}

// Shows `item` (null: a new chat); an answer in flight is stopped first (what it wrote is kept).
function openConversation(item) {
  if (controller) controller.abort();
  conversation = item;
  store.current = item ? item.id : null;
  saveStore();
  $("messages").replaceChildren();
  if (item) item.turns.forEach((turn, i) => addMessage(turn.role, turn.content, i));
  showLeftOut();
  showConversationList();
}

function removeConversation(item) {
  deleteConversation(store, item.id);
  if (conversation === item) return openConversation(null);  // which saves and redraws
  saveStore();
  showConversationList();
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
    contextLength = (body.data && body.data.length && body.data[0].max_model_len) || contextLength;
    $("model-name").textContent = modelId || "no model loaded yet";
    showLeftOut();  // its note names the context
  } catch (error) {
    $("model-name").textContent = "server unreachable";
  }
}

// The tokens of `messages` as the chat endpoint renders them (vLLM's /tokenize shape), or
// null when the server cannot say (no chat template, an older server).
async function countTokens(messages, signal) {
  try {
    const response = await fetch("/tokenize", { method: "POST", headers: headers(), signal,
                                                 body: JSON.stringify({ messages }) });
    if (!response.ok) return null;
    const body = await response.json();
    if (body.max_model_len) contextLength = body.max_model_len;
    return typeof body.count === "number" ? body.count : null;
  } catch (error) {
    if (error.name === "AbortError") throw error;
    return null;
  }
}

// The messages to send: the system prompt and `item`'s turns, the oldest exchanges
// left out (item.leftOut grows) while the prompt and max_tokens do not fit the context,
// as `tandem chat` drops them (src/cli/chat_command.cpp, which needs only the prompt to fit and
// shortens the answer instead). A turn once left out stays out, as there, so the prompt's start,
// and with it the server's prefix cache, stays the same from turn to turn.
async function fitConversation(item, signal) {
  const system = $("system").value.trim() ? [{ role: "system", content: $("system").value.trim() }] : [];
  const room = Math.max(Number($("max_tokens").value) || 0, 1);  // no max_tokens: the answer needs one
  const turns = item.turns;
  let start = Math.min(item.leftOut || 0, turns.length - 1);
  for (;;) {
    const count = await countTokens([...system, ...turns.slice(start)], signal);
    if (count === null || !contextLength || count + room <= contextLength) break;
    let next = start + 1;  // the next user turn: an exchange goes as a whole
    while (next < turns.length && turns[next].role !== "user") next += 1;
    if (next >= turns.length) {
      if (count >= contextLength) throw new Error(`that message does not fit the context of ${contextLength} tokens`);
      break;  // the newest message alone: the answer gets the room there is
    }
    start = next;
  }
  item.leftOut = start;
  return [...system, ...turns.slice(start)];
}

function requestBody(messages) {
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
  if (!conversation) {
    conversation = createConversation(store, prompt);
    showConversationList();
  }
  const asked = conversation;  // the answer goes here even if another conversation is opened
  asked.turns.push({ role: "user", content: prompt });
  const question = addMessage("user", prompt, asked.turns.length - 1);
  const view = addMessage("assistant", "");
  setState("streaming");
  controller = new AbortController();
  const kvTimer = setInterval(refreshKv, 250);  // the blocks move while the answer is written
  let answer = "";
  try {
    const messages = await fitConversation(asked, controller.signal);
    showLeftOut();
    const started = performance.now();
    const response = await fetch("/v1/chat/completions", { method: "POST", headers: headers(),
                                                           body: JSON.stringify(requestBody(messages)),
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
      asked.turns.pop();
      delete question.dataset.turn;
      addMessage("error", String(error.message || error));
      answer = null;
    }
  } finally {
    clearInterval(kvTimer);
    controller = null;
    if (answer !== null) {
      asked.turns.push({ role: "assistant", content: answer });
      view.dataset.turn = asked.turns.length - 1;
    }
    if (asked.turns.length > 0) {
      touchConversation(store, asked);
    } else {  // its first message failed
      deleteConversation(store, asked.id);
      if (conversation === asked) conversation = null;
    }
    saveStore();
    showConversationList();
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
$("new-chat").addEventListener("click", () => openConversation(null));

setState("idle");
openConversation(conversation);
loadModel();
refreshKv();
setInterval(refreshKv, 2000);
