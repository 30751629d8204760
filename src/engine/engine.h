// Engine: the one generation loop (server, `tandem run`, the library, the decode benchmark)
// — schedule -> build one ragged Batch -> Forward::run -> sample per sequence -> detokenize
// -> emit events. A single request is a batch of one. It owns the KV storage, the block
// allocator (which blocks each sequence holds), the scheduler and every in-flight request; requests arrive
// thread-safely via submit() and leave as events through their callback. Runs on its own thread (start()) or is stepped
// by hand (tests). Knows nothing of HTTP or JSON. A speculating sequence's decode carries
// the tokens its proposer (speculation/) predicts; the same pass verifies them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/thread_pool.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/speculation/draft_length.h"
#include "engine/speculation/draft_model.h"
#include "engine/speculation/ngram_proposer.h"
#include "engine/speculation/rejection_sampler.h"
#include "grammar/token_trie.h"
#include "kv/block_manager.h"
#include "kv/kv_cache.h"
#include "kv/kv_pool_plan.h"
#include "kv/kv_types.h"
#include "model/forward.h"
#include "tokenizer/streaming_detokenizer.h"

namespace tandem {

struct EngineConfig {
  int32_t max_seqs = 4;                // --parallel: sequences in flight at once
  int64_t max_batch_tokens = 512;      // --max-batch-tokens: tokens per step
  int32_t block_size = 16;             // --kv-block: tokens per KV block
  int64_t context_length = 0;          // --ctx: per-sequence limit; 0 or above the model's: the model's
  int64_t kv_memory_bytes = 0;         // --kv-memory: pool size; 0: max_seqs full contexts
  KvTypes kv_types = kDefaultKvTypes;  // --kv-type, --cache-type-k/-v: what K and V are stored as
  // --draft-model: a smaller model with the same vocabulary for requests speculating with
  // SpeculationType::Draft; null: none. Its KV pool holds max_seqs full contexts of its own.
  // draft_tokenizer (its tokenizer; may be null) is compared with the target's at
  // construction only: any difference is an InputError.
  std::shared_ptr<const Model> draft_model;
  const Tokenizer* draft_tokenizer = nullptr;
};

struct TopLogprob {
  int32_t token = 0;
  std::string text;  // the token's raw bytes (may be part of a UTF-8 character)
  float logprob = 0.0f;
};

struct TokenLogprob {
  TopLogprob chosen;
  std::vector<TopLogprob> top;  // most probable first
};

// One event per sampled token; the last one has finished set (also on cancellation).
struct RequestEvent {
  uint64_t request_id = 0;
  std::string text;                    // text released by this token (stop strings never appear)
  std::vector<int32_t> tokens;         // the token(s) sampled for this event
  std::vector<TokenLogprob> logprobs;  // when top_logprobs >= 0, one per token
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  bool admitted = false;  // final event: the request was ever admitted to the batch
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  int64_t completion_tokens = 0;
  // Set on the final event, in milliseconds: queue (arrival -> first admission), TTFT
  // (arrival -> first token), prefill (first admission -> first token: the prompt's forward
  // passes, chunked or not), decode (first -> last token), end to end; itl_ms holds the gaps
  // between consecutive tokens (TPOT percentiles). kv_bytes: the KV cache the sequence held
  // at its end (its blocks x bytes per block; blocks shared through the prefix cache count).
  double queue_ms = 0.0, ttft_ms = 0.0, prefill_ms = 0.0, decode_ms = 0.0, e2e_ms = 0.0;
  std::vector<double> itl_ms;
  int64_t kv_bytes = 0;
  int32_t preemptions = 0;
  // Speculative decoding, so far (final event: in total): tokens proposed and verified, and
  // of those the ones kept. Both 0 without speculation.
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  // An embedding request's final event: the pooled final-norm hidden state [d_model]
  // (GenerationParams::pooling), not normalised.
  std::vector<float> embedding;
};
using EventCallback = std::function<void(RequestEvent&&)>;

// Runs one step's forward pass for the engine. The default (none set) is the engine's own
// Forward over the whole model; a pipeline over MPI ranks (dist/pipeline_forward.h) runs its
// stage on `local` and the other stages elsewhere. Returns what Forward::run returns (the
// logits rows of the batch's wants_logits tokens, in batch order), valid until the next call.
class StepForward {
 public:
  virtual ~StepForward() = default;
  virtual std::span<const float> run(Forward& local, const Batch& batch, KvCache& cache) = 0;
};

struct EngineStats {
  int64_t running = 0;
  int64_t waiting = 0;
  BlockStats blocks;
  int64_t block_size = 0;
  int64_t bytes_per_block = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t context_length = 0;
  KvPoolPlan kv_pool;           // the pool's sizing, as chosen at construction
  int64_t drafted_tokens = 0;   // speculative decoding, since start: tokens proposed and verified
  int64_t accepted_tokens = 0;  // of those, kept
};

class Engine {
 public:
  // Throws InputError when the KV pool cannot hold one full-context sequence.
  Engine(std::shared_ptr<const Model> model, const Tokenizer& tokenizer, EngineConfig config, ThreadPool& pool);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; returns its id. Thread-safe. Throws InputError for an unusable
  // request (empty or too long prompt, max_tokens < 1, bad sampling parameters) — nothing
  // is queued then. `on_event` runs on the engine thread and must not block.
  uint64_t submit(std::vector<int32_t> prompt, GenerationParams params, EventCallback on_event);
  // What submit() checks of a request besides max_tokens and the sampling options (which the
  // Sampler checks): throws InputError for an empty or too long prompt, ids outside the
  // vocabulary, top_logprobs above 20, an empty stop string. For callers that answer some
  // requests without submitting them (the library's max_tokens 0).
  void check_request(std::span<const int32_t> prompt, const GenerationParams& params) const;
  // Cancels at the start of the next step (its blocks are freed then). Thread-safe; unknown
  // or finished ids are ignored.
  void cancel(uint64_t request_id);
  void cancel_all();
  // Cancels the requests never admitted to the batch (a preempted one was admitted and stays):
  // a server shutting down refuses its queue but lets admitted requests finish. Thread-safe.
  void cancel_waiting();

  // Runs the loop on a thread until stop(); stop() cancels whatever is still in flight.
  void start();
  void stop();

  // One iteration; returns false when there was nothing to run. Not with start().
  bool step();
  // Steps until no request is left (tests).
  void run_until_idle();

  // Records each step's ops (forward pass and sampling); null: off. Set it before start()
  // or between steps; the profiler must outlive the engine's use of it.
  void set_profiler(Profiler* profiler);
  // Called on the engine thread with describe_step()'s line for every step that admits,
  // prefills or preempts (`tandem serve --verbose`); empty: off. Set it before start().
  void set_step_logger(std::function<void(const std::string&)> logger) { step_logger_ = std::move(logger); }
  // Who runs each step's forward pass (null: the engine's own Forward); it must outlive the
  // engine's use of it. Set it before start().
  void set_step_forward(StepForward* step_forward) { step_forward_ = step_forward; }

  EngineStats stats() const;  // thread-safe snapshot
  const EngineConfig& config() const { return config_; }
  int64_t context_length() const { return config_.context_length; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const Model& model() const { return *model_; }

 private:
  struct Sequence;

  void intake();
  // Fills request.draft for each decoding sequence that speculates (before schedule()).
  void propose_drafts();
  // An embedding request's rows of this step's forward pass (its positions from `first_position`,
  // final residual rows [n, d_model] in position order): final-normed and pooled into the
  // sequence; positions pooled before (recomputed after a preemption) are skipped.
  void pool_rows(Sequence& sequence, int64_t first_position, std::span<const float> residual_rows);
  // Ends an embedding request whose whole prompt has been pooled, its vector on the event.
  void finish_embedding(Sequence& sequence);
  // Samples from logits and emits the token; true when that finished (and destroyed) the sequence.
  bool process_sample(Sequence& sequence, std::span<const float> logits);
  // The logits a constrained sequence may sample from (the grammar's disallowed tokens at
  // -inf, in the sequence's scratch), or `logits` itself when it is unconstrained; empty when
  // the grammar allows no token at all (the caller ends the sequence).
  std::span<const float> constrain(Sequence& sequence, std::span<const float> logits);
  // Ends a constrained sequence whose grammar allows nothing more (FinishReason::Error).
  void end_unconstrainable(Sequence& sequence);
  // Suppresses the sequence's end tokens in its sampler while it is short of min_tokens.
  void hold_end_tokens(Sequence& sequence);
  // A speculative chunk's rows [1 + n_draft, vocab]: keeps proposed tokens while the target
  // agrees, emits each kept token and the one after them, rolls the rest back.
  void verify_draft(Sequence& sequence, int64_t n_draft, std::span<const float> rows);
  bool emit_token(Sequence& sequence, int32_t token, std::span<const float> logits);
  void finish(Sequence& sequence, RequestState state, FinishReason reason, RequestEvent& event);
  TokenLogprob logprobs_of(std::span<const float> logits, int32_t chosen, int32_t top_n);
  void update_stats();
  void loop();
  // With a tracing profiler: each request's queue wait, its chunk of this step's forward
  // pass, preemptions.
  void trace_requests(const StepPlan& plan, int64_t step_start_ns);

  std::shared_ptr<const Model> model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  KvPoolPlan kv_pool_;  // before blocks_ and cache_, which it sizes
  BlockManager blocks_;
  KvCache cache_;
  Forward forward_;
  Scheduler scheduler_;
  Batch batch_;
  std::vector<int64_t> chunk_first_rows_;  // this step: each plan chunk's first row in batch_
  std::unique_ptr<DraftModel> draft_;      // when config_.draft_model is set
  std::vector<DraftJob> draft_jobs_;       // this step's draft-model proposals
  double draft_cost_ = 0.0;                // a draft-model proposal, in target decode steps
  RejectionSampler rejection_;
  Profiler* profiler_ = nullptr;
  StepForward* step_forward_ = nullptr;
  std::function<void(const std::string&)> step_logger_;
  // The vocabulary as byte strings in a prefix tree, for grammar masks: built by the first
  // constrained request (submit(), any thread: guarded by trie_once_), shared by all.
  std::once_flag trie_once_;
  std::shared_ptr<const grammar::TokenTrie> token_trie_;
  std::vector<float> logprob_work_;                                    // [vocab_size]
  std::vector<int32_t> logprob_ids_;                                   // [vocab_size]
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> sequences_;  // engine thread only

  // Shared with submitting threads.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Sequence>> incoming_;
  std::unordered_set<uint64_t> cancels_;
  bool cancel_everything_ = false;
  bool cancel_unadmitted_ = false;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  EngineStats stats_;
  int64_t steps_ = 0;
  int64_t drafted_tokens_ = 0;  // engine thread; copied into stats_
  int64_t accepted_tokens_ = 0;
  std::thread thread_;
};

}  // namespace tandem
