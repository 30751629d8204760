// Engine::Sequence: everything the engine keeps for one request in flight beside the Request
// the scheduler sees — its sampler and detokenizer, held-back text, proposer, grammar job,
// embedding pool, KV transfer state. Internal to the engine's own files (engine*.cpp); only
// the engine thread touches a sequence once it is queued.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/embedding_pool.h"
#include "engine/engine.h"

namespace tandem {

struct Engine::Sequence {
  // draft_cost: a draft model's proposal in target decode steps (Engine::draft_cost_).
  Sequence(const Tokenizer& tokenizer, const GenerationParams& params, int64_t vocab_size, double draft_cost);
  // Stops its grammar's mask computation if one is in flight: nothing will read it.
  ~Sequence();

  Request request;
  Sampler sampler;
  StreamingDetokenizer detokenizer;
  std::string held;  // detokenized text not yet released: it could start a stop string
  EventCallback on_event;
  SpeculationParams speculation;
  NgramProposer ngram;
  DraftLength draft_length;
  int64_t drafted_tokens = 0;  // proposed tokens verified so far
  int64_t accepted_tokens = 0;
  std::vector<int32_t> end_tokens;  // EOS (unless ignore_eos) and stop_token_ids: what min_tokens holds back
  bool holding_end = false;         // whether the sampler suppresses end_tokens now
  std::vector<int32_t> suppressed;  // held end tokens and bad-word bans, for the sampler (bad_words only)

  // Constrained decoding (params.grammar): where the output stands in the grammar (advanced
  // only by emitted tokens, so rejected proposals never touch it) and the masker with its
  // cache of masks by grammar state, in a job whose next mask is computed on the mask worker
  // while the forward pass runs (Engine::launch_mask); scratch for the masked logits; the
  // logits of a sample waiting for its mask (Request::awaiting_sample).
  std::shared_ptr<grammar::MaskJob> grammar;
  std::vector<float> masked_logits;
  std::vector<float> awaiting_logits;
  std::string grammar_error;  // why the grammar ended it (a matching limit, no token allowed)
  // Embedding requests (params.pooling): the prompt's pooled final hidden states.
  EmbeddingPool pool;
  // Imported (submit_imported): the hand-over, the first block asked for (-1: not asked yet),
  // the arrived block messages by block index (applied once all are here), and the
  // transfer's bytes and start.
  std::shared_ptr<KvImport> import;
  int64_t import_first = -1;
  std::vector<std::vector<uint8_t>> import_messages;
  int64_t kv_transfer_bytes = 0;
  RequestClock::time_point import_asked;
  double kv_transfer_ms = 0.0;
  int64_t exported_blocks = 0;  // prefill-only: blocks handed to the sink so far
};

}  // namespace tandem
