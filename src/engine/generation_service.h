// GenerationService: what a server asks of whatever generates tokens — submit a request and
// get its events back, cancel, read the stats — and the events and stats themselves. The
// Engine is one (a process generating on its own); src/dist's front of a multi-process job
// (prefill and decode ranks over MPI) is another, so the HTTP server serves either unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/kv_import.h"
#include "engine/request.h"
#include "kv/block_allocator.h"
#include "kv/kv_pool_plan.h"

namespace tandem {

class Tokenizer;
struct ModelConfig;

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
  std::string stop_string;             // final event, FinishReason::StopString: the stop string matched
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
  // Disaggregated serving (final event): the KV bytes this request's blocks brought in from
  // another process (Engine::submit_imported), and the time from asking for them (the
  // engine holding blocks for them) to the last one applied.
  int64_t kv_transfer_bytes = 0;
  double kv_transfer_ms = 0.0;
  // Why a request ended with FinishReason::Error, when there is more to say than the reason.
  std::string error;
  // The error came from the request itself (its grammar passed a matching limit): the same
  // request would fail the same way again, so a server answers 400 rather than 503 + retry.
  bool error_from_request = false;
};
using EventCallback = std::function<void(RequestEvent&&)>;

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
  // Grammar masks (grammar/mask_worker.h), since start: begun off the engine thread, of
  // those stopped half way because their request ended, and samples that waited a step or
  // more for their mask (the steps of the other sequences went on).
  int64_t grammar_masks_off_thread = 0;
  int64_t grammar_masks_stopped = 0;
  int64_t grammar_samples_awaited = 0;
};

// One worker process of a multi-process job, as the front sees it (/health, /metrics).
struct WorkerStatus {
  int rank = 0;
  std::string role;  // "prefill" or "decode"
  bool up = true;
  std::string down_reason;  // why it is counted down
  int64_t pid = 0;
  int64_t in_flight = 0;          // requests routed to it and not finished
  int64_t running = 0;            // its engine's, from its last report
  int64_t waiting = 0;            // its queue (decode: also requests whose blocks are still arriving)
  int64_t kv_bytes_sent = 0;      // prefill: KV block bytes sent to decode ranks
  int64_t kv_bytes_received = 0;  // decode: KV block bytes received and applied
  double kv_send_seconds = 0.0;   // prefill: summed over its KV blocks, send posted -> complete
  double kv_wait_seconds = 0.0;   // decode: summed over requests, blocks asked for -> all applied
  int64_t requests_done = 0;
};

// One stage of a pipeline-parallel job (`tandem serve --pipeline S`), as rank 0 sees it
// (/metrics): what it holds, and over the micro-batches it ran, its compute and its queue.
struct StageStatus {
  int stage = 0;  // 0 .. S-1, in layer order
  int rank = 0;
  int64_t layer_first = 0, layer_end = 0;  // [first, end) of the model's layers
  int64_t weight_bytes = 0;
  int64_t kv_bytes = 0;
  int64_t micro_batches = 0;  // run by it
  int64_t tokens = 0;         // in those micro-batches
  double compute_seconds = 0.0;
  // Summed over its micro-batches: from being handed on (stage 0: from its step's start; stage
  // r: from stage r-1 finishing it) to being taken in — packing, the transfer and waiting for
  // the stage to be free. Its rate is the mean number of micro-batches waiting at the stage.
  double queue_seconds = 0.0;
  // Stage r >= 1: activation bytes received from stage r-1; stage 0: logits bytes from the last.
  int64_t received_bytes = 0;
};

// One rank of a tensor-parallel job (`tandem serve --tensor-parallel T`), as rank 0 sees it
// (/metrics): what it holds, and its all-reduces (rank 0's own now; another rank's as of the
// all-reduce before its latest message to rank 0).
struct TensorRankStatus {
  int rank = 0;
  int64_t weight_bytes = 0;
  int64_t kv_bytes = 0;
  int64_t all_reduces = 0;
  double all_reduce_seconds = 0.0;  // in the all-reduce, waiting for the other ranks included
  int64_t all_reduce_bytes_sent = 0;
};

class GenerationService {
 public:
  virtual ~GenerationService() = default;
  // Queues a request; returns its id. Thread-safe. Throws InputError for an unusable request
  // (nothing is queued then). `on_event` must not block.
  virtual uint64_t submit(std::vector<int32_t> prompt, GenerationParams params, EventCallback on_event) = 0;
  // submit() for a prompt whose first kv_import->n_blocks() blocks' K/V come as KV block
  // messages (kv_import.h; the Engine's, for disaggregated serving and restored server slots)
  // instead of being computed. A service that cannot take them throws InputError.
  virtual uint64_t submit_imported(std::vector<int32_t> /*prompt*/, GenerationParams /*params*/,
                                   EventCallback /*on_event*/, std::shared_ptr<KvImport> /*kv_import*/) {
    throw InputError("this server cannot import KV blocks (it serves through worker processes)");
  }
  // Thread-safe; unknown or finished ids are ignored.
  virtual void cancel(uint64_t request_id) = 0;
  virtual void cancel_all() = 0;
  // Cancels the requests never admitted (a server shutting down refuses its queue).
  virtual void cancel_waiting() = 0;
  virtual EngineStats stats() const = 0;  // thread-safe snapshot
  virtual int64_t context_length() const = 0;
  virtual int32_t max_seqs() const = 0;  // sequences generated at once (what n > 1 is bounded by)
  virtual const Tokenizer& tokenizer() const = 0;
  virtual const ModelConfig& model_config() const = 0;
  // The worker processes behind it; empty for a single process.
  virtual std::vector<WorkerStatus> workers() const { return {}; }
  // The pipeline stages behind it; empty unless it runs as a pipeline.
  virtual std::vector<StageStatus> stages() const { return {}; }
  // The tensor-parallel ranks behind it; empty unless it runs tensor-parallel.
  virtual std::vector<TensorRankStatus> tensor_ranks() const { return {}; }
};

}  // namespace tandem
