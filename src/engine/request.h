// Request: one generation request through its typed lifecycle
//   Waiting -> Prefilling -> Decoding -> Finished | Cancelled
// (a preempted request goes back to Waiting and recomputes prompt + generated so far).
// Holds what the scheduler tracks (tokens, blocks, computed count) and the timestamps; the
// engine keeps the per-request sampler and detokenizer beside it. No threading here.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampler.h"
#include "engine/speculation/speculation_params.h"
#include "kv/block_manager.h"
#include "tokenizer/streaming_detokenizer.h"

namespace tandem {

namespace grammar {
class Grammar;
}
class KvBlockSink;

enum class RequestState { Waiting, Prefilling, Decoding, Finished, Cancelled };

// Why generation ended. OpenAI's finish_reason: Stop and EndOfSequence -> "stop",
// Length and ContextLimit -> "length".
enum class FinishReason { None, EndOfSequence, StopString, Length, ContextLimit, Cancelled, Error };
const char* finish_reason_name(FinishReason reason);  // OpenAI spelling ("stop", "length", ...)

// An embedding request (/v1/embeddings): the prompt's hidden states after the final norm,
// pooled into one vector instead of sampling. Mean: the average over every prompt position
// (such a request never reuses cached prefix blocks, whose rows it would not see); Last: the
// last position's (a causal model's summary of the whole prompt); Tokens: not pooled, every prompt
// position's state in order (llama-server's --pooling none; like Mean, no cached rows).
enum class Pooling { None, Mean, Last, Tokens };

struct GenerationParams {
  SamplingParams sampling;
  int64_t max_tokens = 16;        // >= 1
  std::vector<std::string> stop;  // never emitted; matched across token boundaries
  int32_t top_logprobs = -1;      // < 0: no logprobs; 0..20: chosen token plus this many alternatives
  bool ignore_eos = false;        // EOS is an ordinary token (benchmarks generating exactly max_tokens)
  // Tokens that end the request as EOS does (vLLM's stop_token_ids), not emitted as text.
  std::vector<int32_t> stop_token_ids{};
  // Before this many tokens are generated, EOS and stop_token_ids cannot be sampled and stop
  // strings do not end the request (vLLM's min_tokens).
  int64_t min_tokens = 0;
  // vLLM's include_stop_str_in_output: the stop string that ended the request stays at the end
  // of its text, and so does an end token's text (stop_token_ids, EOS), when it has any.
  bool include_stop_str_in_output = false;
  // Which text control tokens print as (vLLM's skip_special_tokens, spaces_between_special_tokens).
  DetokenizeOptions detokenize{};
  // vLLM's bad_words as token sequences (bad_words.h): the generated tokens never complete one.
  std::vector<std::vector<int32_t>> bad_words{};
  // Waiting requests are admitted lowest value first when the engine orders by priority
  // (EngineConfig::priority_scheduling), ties in arrival order; ignored otherwise.
  int64_t priority = 0;
  // Constrained decoding (response_format, tool_choice, a GBNF `grammar`): each step samples
  // only tokens the grammar allows, and the request ends (EndOfSequence) as soon as the
  // grammar is complete and nothing may follow. Null: unconstrained. Shared and immutable.
  std::shared_ptr<const grammar::Grammar> grammar{};
  SpeculationParams speculation;  // proposals verified in one forward pass; output unchanged by it
  // Not None: an embedding request. The prompt is prefilled and the final event carries the
  // pooled vector (RequestEvent::embedding); nothing is sampled or generated.
  Pooling pooling = Pooling::None;
  // Not null: a prefill-only request (disaggregated serving's prefill side). Its prompt's K/V
  // is computed (reusing the prefix cache), each full block from kv_export_first_block on is
  // handed to the sink as soon as it is computed, and the request ends without sampling
  // (FinishReason::Length, no token) once the prompt is computed. Its prompt should be whole
  // blocks: a partial last block is computed but not exported.
  std::shared_ptr<KvBlockSink> kv_export{};
  int64_t kv_export_first_block = 0;
};

using RequestClock = std::chrono::steady_clock;

inline double ms_between(RequestClock::time_point from, RequestClock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

struct RequestTimes {
  RequestClock::time_point arrival;   // submitted
  RequestClock::time_point admitted;  // first left the waiting queue
  RequestClock::time_point first_token;
  RequestClock::time_point last_token;
  RequestClock::time_point finished;
  std::vector<double> itl_ms;  // gaps between consecutive generated tokens
};

struct Request {
  uint64_t id = 0;
  RequestState state = RequestState::Waiting;
  std::vector<int32_t> prompt;
  GenerationParams params;
  std::vector<int32_t> generated;  // sampled tokens, EOS included when it ends the request

  // Scheduler bookkeeping. tokens() = prompt + generated; positions [0, n_computed) have K/V.
  std::vector<int32_t> tokens;
  int64_t n_computed = 0;
  SequenceBlocks blocks;  // its KV blocks (changed only by the BlockManager)
  // Proposed continuation of `tokens` for this step (speculative decoding): the scheduler
  // feeds as many as fit after the pending token, the engine verifies them. Not in `tokens`.
  std::vector<int32_t> draft;
  // Decoding, its last logits computed, but its next token not chosen yet: it waits for its
  // grammar mask, computed off the engine thread (grammar/mask_worker.h). The scheduler gives
  // it no chunk until the engine has sampled it; a preemption clears it (the recompute samples).
  bool awaiting_sample = false;
  int64_t cached_prompt_tokens = -1;  // prefix-cache hit at first admission (-1: not admitted yet)
  int64_t admit_order = 0;            // preemption takes the newest admitted first
  int32_t n_preemptions = 0;

  FinishReason finish_reason = FinishReason::None;
  RequestTimes times;

  // In the running batch (holding KV blocks): admitted and not preempted since.
  bool admitted() const { return state == RequestState::Prefilling || state == RequestState::Decoding; }
  bool done() const { return state == RequestState::Finished || state == RequestState::Cancelled; }
  // Tokens whose K/V must still be computed before the next sample.
  int64_t n_pending() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
  void append_token(int32_t token) {
    generated.push_back(token);
    tokens.push_back(token);
  }
};

inline const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::EndOfSequence:
    case FinishReason::StopString: return "stop";
    case FinishReason::Length:
    case FinishReason::ContextLimit: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
    case FinishReason::None: break;
  }
  return "none";
}

}  // namespace tandem
