// Engine tests' two sides of a batch-invariance check: greedy generation the plain way (the
// whole prompt in one forward pass, then a token per pass, on a KV pool of its own) and the
// same prompts submitted together to an Engine (chunked prefill next to other requests'
// decode tokens), plus random prompts to feed both.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine.h"
#include "kv/kv_cache.h"
#include "kv/kv_types.h"
#include "model/forward.h"

namespace tandem::test_support {

// Prompts of the given lengths, ids uniform in [0, vocab_size).
inline std::vector<std::vector<int32_t>> random_prompts(uint32_t seed, int64_t vocab_size,
                                                        const std::vector<int>& lengths) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab_size - 1));
  std::vector<std::vector<int32_t>> prompts;
  for (int length : lengths) {
    prompts.emplace_back();
    for (int i = 0; i < length; ++i) prompts.back().push_back(id(rng));
  }
  return prompts;
}

// max_tokens greedy ids after `tokens`, the plain way; kv_types: what the pool stores K and V in.
inline std::vector<int32_t> greedy_alone(const std::shared_ptr<const Model>& model, std::vector<int32_t> tokens,
                                         int64_t max_tokens, ThreadPool& pool, KvTypes kv_types = {}) {
  const auto n_prompt = static_cast<int64_t>(tokens.size());
  Forward forward(model, n_prompt, pool);
  KvCache cache(model->config.kv_shape(), n_prompt + max_tokens, 1, kv_types);
  Sampler sampler(SamplingParams{.temperature = 0.0f}, model->config.vocab_size);
  Batch batch;
  batch.add_sequence(cache.whole_pool_blocks());
  for (int64_t i = 0; i < n_prompt; ++i) batch.add(tokens[i], static_cast<int32_t>(i), 0, i == n_prompt - 1);
  std::vector<int32_t> generated;
  while (static_cast<int64_t>(generated.size()) < max_tokens) {
    const int32_t next = sampler.sample(forward.run(batch, cache), tokens);
    tokens.push_back(next);
    generated.push_back(next);
    batch.clear();
    batch.add_sequence(cache.whole_pool_blocks());
    batch.add(next, static_cast<int32_t>(tokens.size() - 1), 0, true);
  }
  return generated;
}

// Small limits that make an engine prefill prompts in chunks next to other requests' decode
// tokens and queue a fourth request: the engine seam tests' configuration.
inline EngineConfig chunked_prefill_config() {
  EngineConfig config;
  config.max_seqs = 3;          // the fourth request waits for a slot
  config.max_batch_tokens = 7;  // prompts prefilled in chunks, next to others' decode tokens
  config.block_size = 4;
  config.kv_memory_bytes = 96 * 1024;
  return config;
}

// What each request of run_greedy got, in submission order.
struct GreedyOutputs {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<TokenLogprob>> logprobs;  // one per token when top_logprobs >= 0
  std::vector<int64_t> cached_tokens;               // prompt tokens served from the prefix cache
};

// Submits every prompt (greedy, ignore_eos, max_tokens each) and steps the engine until no
// request is left, calling after_step (when set) after each step that ran.
inline GreedyOutputs run_greedy(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens,
                                int32_t top_logprobs = -1, const std::function<void()>& after_step = {}) {
  GreedyOutputs outputs;
  outputs.tokens.resize(prompts.size());
  outputs.logprobs.resize(prompts.size());
  outputs.cached_tokens.assign(prompts.size(), -1);
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationParams params;
    params.sampling.temperature = 0.0f;
    params.max_tokens = max_tokens;
    params.ignore_eos = true;
    params.top_logprobs = top_logprobs;
    engine.submit(prompts[i], params, [&outputs, i](RequestEvent&& event) {
      outputs.tokens[i].insert(outputs.tokens[i].end(), event.tokens.begin(), event.tokens.end());
      outputs.logprobs[i].insert(outputs.logprobs[i].end(), event.logprobs.begin(), event.logprobs.end());
      if (event.finished) outputs.cached_tokens[i] = event.cached_tokens;
    });
  }
  while (engine.step())
    if (after_step) after_step();
  engine.run_until_idle();
  return outputs;
}

// The ids of one greedy request with prompt-lookup (n-gram) speculation, up to 4 proposed
// tokens from 1- to 3-grams of its own text: the output must equal plain greedy's.
inline std::vector<int32_t> run_prompt_lookup(Engine& engine, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  GenerationParams params;
  params.sampling.temperature = 0.0f;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  params.speculation.type = SpeculationType::Ngram;
  params.speculation.draft_max = 4;
  params.speculation.ngram_min = 1;
  params.speculation.ngram_max = 3;
  std::vector<int32_t> got;
  engine.submit(prompt, params,
                [&](RequestEvent&& event) { got.insert(got.end(), event.tokens.begin(), event.tokens.end()); });
  engine.run_until_idle();
  return got;
}

}  // namespace tandem::test_support
