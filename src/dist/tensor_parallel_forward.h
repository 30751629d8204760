// TensorParallelForward: rank 0's side of a tensor-parallel step (`tandem serve --tensor-parallel
// T`). The engine hands it each step's Batch; it sends the Batch to ranks 1..T-1 (non-blocking,
// the pipeline's activations message with no hidden states), runs rank 0's slice of every layer
// on the engine's Forward, whose row-parallel outputs are summed with the other ranks' by the
// all-reduce (MpiAllReduce), and returns rank 0's logits rows, as Forward::run. The other ranks
// run the same batch at the same time (TensorParallelWorker). Its MPI calls are made on the
// engine's step thread. It keeps what each rank holds and its all-reduce totals for /metrics
// (tensor_ranks()) and, with a tracing profiler, puts every rank's all-reduces on its track of
// the Chrome trace (rank r's brought onto rank 0's clock by the offset measured at set-up).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "dist/communicator.h"
#include "dist/mpi_all_reduce.h"
#include "engine/engine.h"
#include "profile/profiler.h"

namespace tandem {

class TensorParallelForward final : public StepForward {
 public:
  // `comm`: a job whose rank 0 is this one and whose ranks 1..size-1 run TensorParallelWorker.
  explicit TensorParallelForward(Communicator& comm);

  // What each rank holds ([rank]: rank, weight and KV bytes; counters zero) and each rank's clock
  // offset to this one (clock_offset.h; [0] = 0). Before the first step.
  void describe_ranks(std::vector<TensorRankStatus> ranks, std::vector<int64_t> clock_offsets_ns);
  // A tracing profiler gets a span per step's all-reduces (null: none). Before the first step.
  void set_profiler(Profiler* profiler) { profiler_ = profiler; }

  std::span<const float> run(Forward& local, const Batch& batch, KvCache& cache) override;
  std::vector<TensorRankStatus> tensor_ranks() const override;  // thread-safe

  int64_t steps() const { return static_cast<int64_t>(step_); }
  AllReduceTotals totals() const { return all_reduce_.totals(); }

 private:
  Communicator& comm_;
  MpiAllReduce all_reduce_;
  uint64_t step_ = 0;
  std::vector<uint8_t> batch_message_;
  std::vector<MpiRequest> sends_;  // [rank]
  Profiler* profiler_ = nullptr;
  mutable std::mutex ranks_mutex_;
  std::vector<TensorRankStatus> ranks_;    // [rank] what each holds
  std::vector<int64_t> clock_offsets_ns_;  // [rank]
};

}  // namespace tandem
