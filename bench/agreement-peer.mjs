#!/usr/bin/env node
// The llama.cpp side of bench/agreement, run in its own process (node-llama-cpp is an ES module,
// and each model's memory goes back to the system with the process):
//   node bench/agreement-peer.mjs MODEL.gguf --ids IDS.json --probs OUT.f32 [--prompt-text TEXT]
//        [--gen 32] [--threads 2] [--fa on|off] [--kv F16|F32]
// 1. Teacher forcing: the ids of IDS.json (a JSON array) through one sequence with
//    controlledEvaluate, every position asking for the next-token probabilities under greedy
//    sampling (a chain of greedy alone, so node-llama-cpp softmaxes the full vocabulary:
//    no top-k cut). Written as float32 [n_ids, vocab_size] to OUT.f32.
// 2. Greedy generation: BOS + the tokenized prompt text, then --gen tokens at temperature 0
//    (end-of-generation tokens included, as in ../shared/peer/llama-cpp-bench.mjs).
// Prints one JSON line: {vocab, promptIds, greedy, info}. The library comes from
// $NLC_DIR/node_modules/node-llama-cpp (bench/agreement installs it there).
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

function parseArgs(argv) {
  const o = {model: null, ids: null, probs: null, promptText: null, gen: 32, threads: 2, fa: "on", kv: "F16"};
  for (let i = 0; i < argv.length; i++) {
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`missing value for ${argv[i]}`);
      return argv[++i];
    };
    switch (argv[i]) {
      case "--ids": o.ids = next(); break;
      case "--probs": o.probs = next(); break;
      case "--prompt-text": o.promptText = next(); break;
      case "--gen": o.gen = Number(next()); break;
      case "--threads": o.threads = Number(next()); break;
      case "--fa": o.fa = next(); break;
      case "--kv": o.kv = next(); break;
      default:
        if (argv[i].startsWith("-")) throw new Error(`unknown option ${argv[i]}`);
        o.model = argv[i];
    }
  }
  if (!o.model || !o.ids || !o.probs) throw new Error("usage: agreement-peer.mjs MODEL --ids IDS.json --probs OUT.f32 ...");
  return o;
}

const opts = parseArgs(process.argv.slice(2));
const nlcDir = process.env.NLC_DIR;
if (!nlcDir) throw new Error("NLC_DIR must name the folder node-llama-cpp is installed in");
const libEntry = pathToFileURL(path.join(path.resolve(nlcDir), "node_modules", "node-llama-cpp", "dist", "index.js")).href;
const {getLlama, LlamaLogLevel} = await import(libEntry);

const llama = await getLlama({gpu: false, build: "never", maxThreads: opts.threads, logLevel: LlamaLogLevel.error,
  progressLogs: false});
const model = await llama.loadModel({modelPath: path.resolve(opts.model), gpuLayers: 0});
const ids = JSON.parse(fs.readFileSync(opts.ids, "utf8"));
const context = await model.createContext({
  contextSize: Math.max(ids.length, 64) + opts.gen + 16,
  batchSize: Math.min(512, Math.max(ids.length, 64)),
  sequences: 1,
  threads: {ideal: opts.threads, min: opts.threads},
  // bench/agreement asks for it on, as llama.cpp's "auto" picks on CPU: its other path rounds
  // Q and the softmax weights to f16 in its matmuls (F32 test-tiny at scale 16: KL to Tandem
  // 7.3e-9 without, 6.7e-12 with flash attention).
  flashAttention: opts.fa === "on",
  experimentalKvCacheKeyType: opts.kv,
  experimentalKvCacheValueType: opts.kv,
  failedCreationRemedy: false
});
const seq = context.getSequence();

// 1. teacher forcing, every position's full distribution
const greedyOnly = {probabilities: true, options: {temperature: 0}};
const results = await seq.controlledEvaluate(ids.map((id) => [id, {generateNext: greedyOnly}]));
// Greedy alone truncates nothing, so each map holds the whole vocabulary (checked below: the
// main script also checks the size against Tandem's).
const vocab = results[0]?.next?.probabilities?.size ?? 0;
const probs = new Float32Array(ids.length * vocab);
for (let i = 0; i < ids.length; i++) {
  const map = results[i]?.next?.probabilities;
  if (!map) throw new Error(`no probabilities at position ${i}`);
  if (map.size !== vocab) throw new Error(`position ${i}: ${map.size} probabilities, not the whole vocabulary of ${vocab}`);
  const row = probs.subarray(i * vocab, (i + 1) * vocab);
  for (const [token, p] of map) row[token] = p;
}
fs.writeFileSync(opts.probs, Buffer.from(probs.buffer, probs.byteOffset, probs.byteLength));

// 2. greedy generation from BOS + prompt text
let promptIds = [], greedy = [];
if (opts.promptText != null) {
  await seq.clearHistory();
  promptIds = Array.from(model.tokenize(opts.promptText, false));
  if (model.tokens.bos != null) promptIds.unshift(model.tokens.bos);
  for await (const token of seq.evaluate(promptIds, {temperature: 0, yieldEogToken: true})) {
    greedy.push(token);
    if (greedy.length >= opts.gen) break;
  }
}
const info = {
  nodeLlamaCpp: JSON.parse(fs.readFileSync(new URL("../package.json", libEntry), "utf8")).version,
  llamaCppRelease: `${llama.llamaCppRelease.repo}@${llama.llamaCppRelease.release}`,
  flashAttention: context.flashAttention,
  kv: opts.kv,
  threads: context.idealThreads
};
try {
  const maps = fs.readFileSync("/proc/self/maps", "utf8");
  info.cpuBackendLib = [...new Set(maps.split("\n").map((l) => l.split(/\s+/).pop()).filter((p) => /libggml-cpu/.test(p ?? "")))]
    .map((p) => path.basename(p)).join(",");
} catch { /* not linux */ }
await context.dispose();
await model.dispose();
await llama.dispose();
console.log(JSON.stringify({vocab, promptIds, greedy, info}));
