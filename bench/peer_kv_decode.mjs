#!/usr/bin/env node
// bench/peer_kv_decode.mjs: llama.cpp's decode speed at long context with a chosen KV cache
// type, the peer side of bench/kv_types. ../shared/peer/llama-cpp-bench.mjs always runs
// node-llama-cpp's default cache (f16); this driver sets the context's K and V types
// (node-llama-cpp's experimentalKvCacheKeyType / experimentalKvCacheValueType, i.e. llama.cpp's
// --cache-type-k/-v) and times what `tandem bench -p 0 -n GEN --tg-prefill PROMPT` times: GEN
// greedy tokens decoded after a PROMPT-token prompt, tokens/s over the tokens after the first.
//
// usage: NLC_DIR=PEERDIR node bench/peer_kv_decode.mjs MODEL.gguf --k f16 --v f16
//            [--prompt 1920] [--gen 128] [--threads 2] [--reps 3] [--fa on|off|auto]
// Prints one JSON line: {"k", "v", "flashAttention", "prompt", "gen", "decodeTokPerSec", "runs"}.
// llama.cpp stores a quantized V (q8_0, q4_0) only with flash attention, so --fa defaults to
// on for those and to llama.cpp's own default (auto) otherwise.
// Like the shared driver, it re-runs itself with UV_THREADPOOL_SIZE=1 (see that script: a
// larger libuv pool made 2-thread decode up to 2x slower on 2 cores).
import path from "node:path";
import {pathToFileURL} from "node:url";

const KV_TYPES = {f32: "F32", f16: "F16", bf16: "BF16", q8_0: "Q8_0", q4_0: "Q4_0"};

function parseArgs(argv) {
  const o = {model: null, k: "f16", v: "f16", prompt: 1920, gen: 128, threads: 2, reps: 3, fa: null};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`missing value for ${a}`);
      return argv[++i];
    };
    if (a === "--k") o.k = next();
    else if (a === "--v") o.v = next();
    else if (a === "--prompt") o.prompt = Number(next());
    else if (a === "--gen") o.gen = Number(next());
    else if (a === "--threads" || a === "-t") o.threads = Number(next());
    else if (a === "--reps" || a === "-r") o.reps = Number(next());
    else if (a === "--fa") o.fa = next();
    else if (a.startsWith("-")) throw new Error(`unknown option ${a}`);
    else o.model = a;
  }
  if (!o.model) throw new Error("usage: node bench/peer_kv_decode.mjs MODEL.gguf --k TYPE --v TYPE (see the header)");
  for (const t of [o.k, o.v])
    if (!(t in KV_TYPES)) throw new Error(`unknown KV type ${t} (one of ${Object.keys(KV_TYPES).join(", ")})`);
  if (o.gen < 2) throw new Error("--gen must be at least 2");
  if (o.fa === null) o.fa = o.v.startsWith("q") ? "on" : "auto";
  return o;
}

const opts = parseArgs(process.argv.slice(2));
if (process.env.UV_THREADPOOL_SIZE == null) {
  const {spawnSync} = await import("node:child_process");
  const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)],
    {stdio: "inherit", env: {...process.env, UV_THREADPOOL_SIZE: "1"}});
  process.exit(r.status ?? 1);
}

const nlcDir = process.env.NLC_DIR;
if (!nlcDir) throw new Error("set NLC_DIR to a peer install (../shared/peer/install DIR)");
const entry = pathToFileURL(path.join(path.resolve(nlcDir), "node_modules", "node-llama-cpp", "dist", "index.js")).href;
const {getLlama, LlamaLogLevel} = await import(entry);

const now = () => Number(process.hrtime.bigint()) / 1e9;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const llama = await getLlama({gpu: false, build: "never", maxThreads: opts.threads, logLevel: LlamaLogLevel.error,
  progressLogs: false});
const model = await llama.loadModel({modelPath: path.resolve(opts.model), gpuLayers: 0});
const context = await model.createContext({
  contextSize: opts.prompt + opts.gen + 16,
  batchSize: Math.min(512, opts.prompt),
  sequences: 1,
  threads: {ideal: opts.threads, min: opts.threads},
  flashAttention: opts.fa === "auto" ? "auto" : opts.fa === "on",
  experimentalKvCacheKeyType: KV_TYPES[opts.k],
  experimentalKvCacheValueType: KV_TYPES[opts.v],
  failedCreationRemedy: false,
});
const sequence = context.getSequence();

// The prompt: BOS and a repeated sentence, cut to exactly `prompt` ids (as the shared driver).
const text = " The quick brown fox jumps over the lazy dog.".repeat(Math.ceil(opts.prompt / 4) + 8);
let prompt = Array.from(model.tokenize(text, false));
if (model.tokens.bos != null) prompt = [model.tokens.bos, ...prompt];
prompt = prompt.slice(0, opts.prompt);

const runs = [];
// No warm-up round: each round's prompt is evaluated before its decode is timed, which pages
// the weights in.
for (let r = 0; r < opts.reps; r++) {
  await sequence.clearHistory();
  const out = [];
  let first = 0;
  for await (const token of sequence.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
    if (out.length === 0) first = now();
    out.push(token);
    if (out.length >= opts.gen) break;
  }
  runs.push((out.length - 1) / (now() - first));
}
console.log(JSON.stringify({k: opts.k, v: opts.v, flashAttention: context.flashAttention, prompt: opts.prompt,
  gen: opts.gen, decodeTokPerSec: median(runs), runs, model: path.basename(opts.model)}));
await context.dispose();
await model.dispose();
await llama.dispose();
