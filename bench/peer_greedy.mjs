#!/usr/bin/env node
// Greedy continuation of a given token id sequence by llama.cpp (the peer, through
// node-llama-cpp), for comparing with `tandem run --temp 0 --ids` on the same file: the ids
// are fed as they are (no tokenization, no BOS added), temperature 0, end-of-generation tokens
// yielded too, so exactly --gen ids come back. Prints one JSON object per --ids (it may be
// repeated; the history is cleared between): {"prompt": [...], "generated": [...]}; with
// --top2, also "top2": per step the two most probable [id, probability] pairs, to tell a
// near-tie (noise) from a real difference where two engines part.
//
// usage: NLC_DIR=PEERDIR node bench/peer_greedy.mjs MODEL.gguf --ids 1,2,3 [--ids 4,5] [--gen 32] [--threads 2] [--top2]
//   PEERDIR: a node-llama-cpp install (../shared/peer/install PEERDIR).

import path from "node:path";
import fs from "node:fs";
import {pathToFileURL} from "node:url";

const opts = {gen: 32, threads: 2, prompts: [], model: undefined, top2: false};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
        if (i + 1 >= argv.length) throw new Error(`missing value for ${a}`);
        return argv[++i];
    };
    if (a === "--gen" || a === "-n") opts.gen = Number(next());
    else if (a === "--threads" || a === "-t") opts.threads = Number(next());
    else if (a === "--ids") opts.prompts.push(next().split(/[ ,]+/).filter((s) => s !== "").map(Number));
    else if (a === "--top2") opts.top2 = true;
    else if (a.startsWith("-")) throw new Error(`unknown option ${a}`);
    else opts.model = a;
}
if (!opts.model || opts.prompts.length === 0 || opts.prompts.some((p) => p.length === 0)) throw new Error("usage: peer_greedy.mjs MODEL.gguf --ids 1,2,3 [--gen N]");

// One libuv worker, as ../shared/peer/llama-cpp-bench.mjs does (node's default pool of 4
// fights llama.cpp's own threads on small machines); it only changes speed, not results.
if (process.env.UV_THREADPOOL_SIZE == null) {
    const {spawnSync} = await import("node:child_process");
    const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)],
        {stdio: "inherit", env: {...process.env, UV_THREADPOOL_SIZE: "1"}});
    process.exit(r.status ?? 1);
}

const nlcDir = process.env.NLC_DIR;
if (!nlcDir || !fs.existsSync(path.join(nlcDir, "node_modules", "node-llama-cpp", "package.json")))
    throw new Error("set NLC_DIR to a node-llama-cpp install (../shared/peer/install DIR)");
const entry = pathToFileURL(path.join(path.resolve(nlcDir), "node_modules", "node-llama-cpp", "dist", "index.js")).href;
const {getLlama, LlamaLogLevel} = await import(entry);

const llama = await getLlama({gpu: false, build: "never", maxThreads: opts.threads, logLevel: LlamaLogLevel.warn,
    progressLogs: false});
const model = await llama.loadModel({modelPath: path.resolve(opts.model), gpuLayers: 0});
const longest = Math.max(...opts.prompts.map((p) => p.length));
const context = await model.createContext({contextSize: longest + opts.gen + 16, sequences: 1,
    threads: {ideal: opts.threads, min: opts.threads}, failedCreationRemedy: false});
const sequence = context.getSequence();
for (const prompt of opts.prompts) {
    await sequence.clearHistory();
    const generated = [], top2 = [];
    const steps = sequence.evaluateWithMetadata(prompt, {probabilities: opts.top2}, {temperature: 0, yieldEogToken: true});
    for await (const step of steps) {
        generated.push(step.token);
        if (opts.top2) top2.push([...step.probabilities.entries()].slice(0, 2));
        if (generated.length >= opts.gen) break;
    }
    console.log(JSON.stringify(opts.top2 ? {prompt, generated, top2} : {prompt, generated}));
}
await context.dispose();
await model.dispose();
