// Engine: the one generation loop (server, `tandem run`, the library, the decode benchmark)
// — schedule -> build one ragged Batch -> Forward::run -> sample per sequence -> detokenize
// -> emit events; the forward pass runs on the host or, with EngineConfig::device_forward, on
// a device. A single request is a batch of one. It owns the KV storage, the block
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
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "engine/generation_service.h"
#include "engine/kv_export.h"
#include "engine/kv_import.h"
#include "engine/request.h"
#include "engine/request_checks.h"
#include "engine/scheduler.h"
#include "engine/speculation/draft_length.h"
#include "engine/speculation/draft_model.h"
#include "engine/speculation/ngram_proposer.h"
#include "engine/speculation/rejection_sampler.h"
#include "engine/token_logprobs.h"
#include "grammar/mask_worker.h"
#include "grammar/token_trie.h"
#include "kv/block_manager.h"
#include "kv/kv_cache.h"
#include "kv/kv_pool_plan.h"
#include "kv/kv_types.h"
#include "model/forward.h"
#include "tokenizer/streaming_detokenizer.h"

namespace tandem {

// Runs one step's forward pass for the engine. The default (none set) is the engine's own
// Forward over the whole model; a pipeline over MPI ranks (dist/pipeline_forward.h) runs its
// stage on `local` and the other stages elsewhere; tensor parallelism (dist/tensor_parallel_forward.h)
// runs rank 0's slice on `local` while the other ranks run theirs; a device (EngineConfig::device_forward,
// backends/cuda/cuda_step_forward.h) runs the whole model on its own KV pool. Returns what Forward::run returns (the
// logits rows of the batch's wants_logits tokens, in batch order), valid until the next call.
class StepForward {
 public:
  virtual ~StepForward() = default;
  virtual std::span<const float> run(Forward& local, const Batch& batch, KvCache& cache) = 0;
  // What it knows of the pipeline's stages (Engine::stages()); thread-safe.
  virtual std::vector<StageStatus> stages() const { return {}; }
  // What it knows of the tensor-parallel ranks (Engine::tensor_ranks()); thread-safe.
  virtual std::vector<TensorRankStatus> tensor_ranks() const { return {}; }
};

struct EngineConfig;

// Makes the forward pass that runs every step on a device in place of the engine's own
// Forward (the CLI's --device cuda), once the engine has sized its KV pool: n_blocks blocks of
// config.block_size slots. The device holds a pool of the same blocks, so the block tables the
// engine keeps on the host index it unchanged. Null: the engine runs on its own Forward after
// all. Throws InputError when the device cannot run this model with this config.
using DeviceForwardFactory = std::function<std::unique_ptr<StepForward>(const std::shared_ptr<const Model>& model,
                                                                        const EngineConfig& config, int64_t n_blocks)>;

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
  // Null: every step runs on the engine's own Forward. With a device forward pass, the host
  // KvCache keeps the block bookkeeping but no K/V bytes (they are on the device): requests
  // that read them on the host are refused (embeddings, KV export and import).
  DeviceForwardFactory device_forward;
  // --scheduling-policy priority (vLLM's): waiting requests are admitted by
  // GenerationParams::priority, lowest first, and preemption takes the lowest priority first;
  // false: first come, first served.
  bool priority_scheduling = false;
};

class Engine final : public GenerationService {
 public:
  // Throws InputError when the KV pool cannot hold one full-context sequence.
  Engine(std::shared_ptr<const Model> model, const Tokenizer& tokenizer, EngineConfig config, ThreadPool& pool);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; returns its id. Thread-safe. Throws InputError for an unusable
  // request (empty or too long prompt, max_tokens < 1, bad sampling parameters) — nothing
  // is queued then. `on_event` runs on the engine thread and must not block.
  uint64_t submit(std::vector<int32_t> prompt, GenerationParams params, EventCallback on_event) override;
  // submit() for a request whose prompt's leading import->n_blocks() blocks are computed in
  // another process (disaggregated serving's decode side): the engine says which it still
  // needs (KvImport::ready: those its prefix cache lacks), collects them as they arrive, then
  // writes them into its pool as cached prefix blocks and queues the request, whose admission
  // reuses them like any cached prefix; it computes the rest of the prompt (at most a block)
  // itself and generates as usual, so the output equals a request computed here whole.
  uint64_t submit_imported(std::vector<int32_t> prompt, GenerationParams params, EventCallback on_event,
                           std::shared_ptr<KvImport> kv_import) override;
  // What submit() checks of a request besides max_tokens and the sampling options (which the
  // Sampler checks): throws InputError for an empty or too long prompt, ids outside the
  // vocabulary, top_logprobs above 20, an empty stop string. For callers that answer some
  // requests without submitting them (the library's max_tokens 0).
  void check_request(std::span<const int32_t> prompt, const GenerationParams& params) const;
  // Cancels at the start of the next step (its blocks are freed then). Thread-safe; unknown
  // or finished ids are ignored.
  void cancel(uint64_t request_id) override;
  void cancel_all() override;
  // Cancels the requests never admitted to the batch (a preempted one was admitted and stays):
  // a server shutting down refuses its queue but lets admitted requests finish. Thread-safe.
  void cancel_waiting() override;

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
  // Not with a device forward pass (EngineConfig::device_forward), which is the step forward.
  void set_step_forward(StepForward* step_forward) {
    TANDEM_ASSERT(!on_device());
    step_forward_ = step_forward;
  }
  // Whether the steps run on a device forward pass (EngineConfig::device_forward).
  bool on_device() const { return device_forward_ != nullptr; }

  EngineStats stats() const override;  // thread-safe snapshot
  // The step forward's pipeline stages (none without one).
  std::vector<StageStatus> stages() const override {
    return step_forward_ != nullptr ? step_forward_->stages() : std::vector<StageStatus>{};
  }
  // The step forward's tensor-parallel ranks (none without one).
  std::vector<TensorRankStatus> tensor_ranks() const override {
    return step_forward_ != nullptr ? step_forward_->tensor_ranks() : std::vector<TensorRankStatus>{};
  }
  const EngineConfig& config() const { return config_; }
  int64_t context_length() const override { return config_.context_length; }
  int32_t max_seqs() const override { return config_.max_seqs; }
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  const ModelConfig& model_config() const override;
  const Model& model() const { return *model_; }

 private:
  struct Sequence;  // engine_sequence.h

  // engine.cpp — requests in, the loop.
  // The checks and set-up every submitted request gets; the sequence is not queued yet.
  std::unique_ptr<Sequence> make_sequence(std::vector<int32_t> prompt, GenerationParams params, EventCallback on_event);
  uint64_t enqueue(std::unique_ptr<Sequence> sequence);
  // Takes in new requests and cancellations (ending the cancelled), then advances imports.
  void intake();
  void update_stats();
  void loop();

  // engine_step.cpp — one step's phases: plan -> batch -> forward -> outputs.
  // Logs the plan's line (set_step_logger) when it says anything.
  void log_step(const StepPlan& plan);
  // The step's forward pass over batch_: logits rows of the rows that want them, in batch order.
  std::span<const float> run_forward();
  // What the pass settled, before any output (which may finish and free a request): traces,
  // the scheduler's bookkeeping, prefill-only exports, preempted sequences' draft state.
  void settle_forward(const StepPlan& plan);
  // Embedding requests pool their rows of the pass.
  void pool_embeddings(const StepPlan& plan);
  // Each sampling chunk's logits rows: sampled (or verified), or ends an embedding or
  // prefill-only request, whose row is not used.
  void take_outputs(const StepPlan& plan, std::span<const float> logits);
  // With a tracing profiler: each request's queue wait, its chunk of this step's forward
  // pass, preemptions.
  void trace_requests(const StepPlan& plan, int64_t step_start_ns);

  // engine_output.cpp — per sequence: sample under the grammar, emit, stop, finish.
  // Samples from logits and emits the token; true when that finished (and destroyed) the
  // sequence. A constrained sequence whose mask is not done yet keeps the logits and waits
  // (Request::awaiting_sample) instead: the step goes on without it.
  bool process_sample(Sequence& sequence, std::span<const float> logits);
  // Samples the sequences whose awaited mask is now done (from their kept logits).
  void sample_awaiting();
  // Starts the mask for the grammar's current state: on the mask worker, or here when the
  // masker has it cached (a copy).
  void launch_mask(Sequence& sequence);
  // The logits a constrained sequence may sample from (the grammar's disallowed tokens at
  // -inf, in the sequence's scratch; its mask must be done), or `logits` itself when it is
  // unconstrained; empty when the grammar allows no token at all or passed a matching limit
  // (the caller ends the sequence).
  std::span<const float> constrain(Sequence& sequence, std::span<const float> logits);
  // Ends a constrained sequence whose grammar allows nothing more (FinishReason::Error).
  void end_unconstrainable(Sequence& sequence);
  // Suppresses the sequence's end tokens in its sampler while it is short of min_tokens.
  void hold_end_tokens(Sequence& sequence);
  // Appends the token, releases its text and emits the event; true when that finished (and
  // destroyed) the sequence.
  bool emit_token(Sequence& sequence, int32_t token, std::span<const float> logits);
  // Detokenizes the appended token into sequence.held and says whether it ends the output
  // (an end token, the grammar complete or refusing it, max_tokens, the context).
  FinishReason take_token(Sequence& sequence, int32_t token, RequestEvent& event);
  // Ends an embedding request whose whole prompt has been pooled, its vector on the event.
  void finish_embedding(Sequence& sequence);
  void finish(Sequence& sequence, RequestState state, FinishReason reason, RequestEvent& event);

  // engine_speculation.cpp — proposals before the plan, verification after the pass.
  // Fills request.draft for each decoding sequence that speculates (before schedule()).
  void propose_drafts();
  // A speculative chunk's rows [1 + n_draft, vocab]: keeps proposed tokens while the target
  // agrees, emits each kept token and the one after them, rolls the rest back.
  void verify_draft(Sequence& sequence, int64_t n_draft, std::span<const float> rows);
  // Row i of verify_draft's (its allowed logits): the output token and whether it keeps proposal i.
  std::pair<int32_t, bool> verify_row(Sequence& sequence, int64_t i, int64_t n_draft, std::span<const float> allowed);

  // engine_kv_transfer.cpp — KV blocks in (disaggregated decode) and out (prefill-only).
  // A KV import's block arrived (any thread): the loop looks at the imports on its next turn.
  void wake_for_import();
  // Imported requests (submit_imported): asks for the blocks of new ones (those not cached
  // here), collects what arrived, and once all are here writes them into the pool, publishes
  // them and hands the request to the scheduler; ends failed ones.
  void advance_imports();
  // Asks the import for the blocks this engine's prefix cache lacks.
  void ask_for_import(Sequence& sequence);
  // Checks and keeps the blocks that arrived; returns whether the transfer is complete.
  // `failure` says why the import failed (empty: it has not).
  bool collect_import(Sequence& sequence, std::string& failure);
  // Writes a complete import's blocks into the pool and publishes them as a cached prefix;
  // false when the pool is short of blocks now (tried again next step).
  bool install_import(Sequence& sequence);
  // Prompt tokens served from this engine's prefix cache (imported blocks are not).
  int64_t cached_tokens_of(const Sequence& sequence) const;
  // A prefill-only request (GenerationParams::kv_export): hands its newly computed full blocks
  // to its sink.
  void export_blocks(Sequence& sequence);
  void finish_prefill_only(Sequence& sequence);

  std::shared_ptr<const Model> model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  KvPoolPlan kv_pool_;  // before blocks_ and cache_, which it sizes
  BlockManager blocks_;
  std::unique_ptr<StepForward> device_forward_;  // EngineConfig::device_forward's; before cache_, which it empties
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
  TokenLogprobs logprobs_;
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> sequences_;  // engine thread only
  std::vector<Sequence*> importing_;  // imported requests whose blocks are not all written yet

  // Shared with submitting threads.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Sequence>> incoming_;
  std::unordered_set<uint64_t> cancels_;
  bool cancel_everything_ = false;
  bool cancel_unadmitted_ = false;
  bool import_news_ = false;  // an imported request's blocks arrived (or failed) since the last intake
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  EngineStats stats_;
  int64_t steps_ = 0;
  int64_t drafted_tokens_ = 0;  // engine thread; copied into stats_
  int64_t accepted_tokens_ = 0;
  bool mask_news_ = false;          // a grammar mask was done since the loop last waited
  std::vector<uint64_t> awaiting_;  // engine thread: sequences whose sample waits for its mask
  int64_t samples_awaited_ = 0;     // engine thread; copied into stats_
  std::thread thread_;
  // Computes grammar masks off the engine thread (grammar/mask_worker.h); last, so that it is
  // stopped and joined before the mutex and condition variable its callback wakes the loop by.
  grammar::MaskWorker mask_worker_{[this] {
    std::lock_guard lock(mutex_);
    mask_news_ = true;
    wake_.notify_one();
  }};
};

}  // namespace tandem
