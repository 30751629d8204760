// PipelineForward: rank 0's side of a pipeline-parallel step (`tandem serve --pipeline S`). The
// engine hands it each step's Batch; it cuts the batch into micro-batches at sequence
// boundaries, runs stage 0's layers on each in turn and sends each one's hidden states on to
// rank 1 as soon as they exist, so that rank 1 works on micro-batch i while rank 0 computes
// i + 1 (GPipe within a step); the last rank sends each micro-batch's logits rows back, into
// receives posted at the start of the step. Returns the rows in batch order, as Forward::run.
// Its MPI calls are made on the engine's step thread; between polls it sleeps (PollBackoff).
// Every stage's timings come back with the logits (StageTiming, in rank 0's clock once the
// offsets measured at set-up are applied): it sums each stage's compute and queue time for
// /metrics (stages()) and, with a tracing profiler, puts each micro-batch's compute and wait per
// stage on the stage's tracks of the Chrome trace.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "dist/communicator.h"
#include "dist/pipeline_messages.h"
#include "engine/engine.h"
#include "profile/profiler.h"

namespace tandem {

class PipelineForward final : public StepForward {
 public:
  // `comm`: a job whose rank 0 is this one and whose ranks 1..size-1 run the later stages
  // (StageWorker); `max_micro_batches`: how many parts a step is cut into at most; a batch of
  // fewer than `min_split_tokens` tokens is not cut (see kDefaultMinSplitTokens).
  PipelineForward(Communicator& comm, int64_t d_model, int64_t vocab_size, int32_t max_micro_batches,
                  int64_t min_split_tokens = kDefaultMinSplitTokens);

  // Each part of a step makes every stage read its weights again. A stage's time on n tokens is
  // about a + b n (a: reading its weights, b: compute per token), so with two stages two parts
  // take 3 (a + b n / 2) and one part 2 (a + b n): cutting pays once n > 2 a / b. On tinyllama
  // Q8_0 (one thread per rank, AVX-512) a = 47 ms, b = 5 ms per half-model: n > ~18 tokens. So
  // decode steps of a few sequences run whole, and prefill chunks are cut (16: about there).
  // On a shared 2-core machine (bench/serve, 8 clients, interleaved with one process) cutting
  // every step gave 0.46-0.56x one process's tokens/s and this rule 0.57-0.68x: noisy, but
  // not against the arithmetic.
  static constexpr int64_t kDefaultMinSplitTokens = 16;

  // What each stage holds (stage, rank, layers, weight and KV bytes; counters zero) and each
  // rank's clock offset to this one (clock_offset.h; [0] = 0). Before the first step.
  void describe_stages(std::vector<StageStatus> stages, std::vector<int64_t> clock_offsets_ns);
  // A tracing profiler gets the stages' spans (null: none). Before the first step.
  void set_profiler(Profiler* profiler) { profiler_ = profiler; }

  std::span<const float> run(Forward& local, const Batch& batch, KvCache& cache) override;
  std::vector<StageStatus> stages() const override;  // thread-safe

  int64_t steps() const { return static_cast<int64_t>(step_); }
  int64_t micro_batches() const { return micro_batches_run_; }  // over all steps

 private:
  // Stage 0's own timing of part p (rank 0's clock) and its size.
  struct LocalTiming {
    int64_t start_ns = 0, end_ns = 0;
    int64_t n_tokens = 0;
  };
  // Adds this step's timings of every stage to the totals and the trace.
  void account(int32_t n_parts, int64_t step_start_ns, int64_t wait_end_ns);

  Communicator& comm_;
  int last_rank_;
  int64_t d_model_;
  int64_t vocab_size_;
  int32_t max_micro_batches_;
  int64_t min_split_tokens_;
  uint64_t step_ = 0;
  int64_t micro_batches_run_ = 0;
  std::vector<Batch> micro_batches_;                   // [max_micro_batches] this step's parts
  std::vector<std::vector<uint8_t>> send_buffers_;     // [max_micro_batches] their activations
  std::vector<std::vector<uint8_t>> receive_buffers_;  // [max_micro_batches] their logits messages
  std::vector<MpiRequest> sends_;                      // [max_micro_batches]
  std::vector<MpiRequest> receives_;                   // [max_micro_batches]
  std::vector<float> logits_;                          // [n_logit_rows, vocab_size] this step's rows
  std::vector<LocalTiming> local_timings_;             // [max_micro_batches] this step's, stage 0
  std::vector<std::vector<StageTiming>> timings_;      // [max_micro_batches][stage - 1] stages 1..S-1
  std::vector<int64_t> clock_offsets_ns_;              // [rank]
  Profiler* profiler_ = nullptr;
  mutable std::mutex stages_mutex_;
  std::vector<StageStatus> stages_;  // [stage]
};

}  // namespace tandem
