// Rank 0's tensor-parallel step (see tensor_parallel_forward.h): the batch out to every rank,
// rank 0's slice run with the all-reduce inside, the sends completed.
#include "dist/tensor_parallel_forward.h"

#include <fmt/format.h>

#include "base/error.h"
#include "dist/pipeline_messages.h"

namespace tandem {

TensorParallelForward::TensorParallelForward(Communicator& comm)
    : comm_(comm),
      all_reduce_(comm),
      sends_(static_cast<size_t>(comm.size())),
      ranks_(static_cast<size_t>(comm.size())) {
  TANDEM_ASSERT(comm.rank() == 0 && comm.size() >= 2);
  for (int r = 0; r < comm.size(); ++r) ranks_[static_cast<size_t>(r)].rank = r;
}

void TensorParallelForward::describe_ranks(std::vector<TensorRankStatus> ranks, std::vector<int64_t> clock_offsets_ns) {
  TANDEM_ASSERT(ranks.size() == ranks_.size() && clock_offsets_ns.size() == ranks_.size());
  std::lock_guard lock(ranks_mutex_);
  ranks_ = std::move(ranks);
  clock_offsets_ns_ = std::move(clock_offsets_ns);
}

std::vector<TensorRankStatus> TensorParallelForward::tensor_ranks() const {
  std::vector<TensorRankStatus> ranks;
  {
    std::lock_guard lock(ranks_mutex_);
    ranks = ranks_;
  }
  const std::vector<AllReduceTotals> totals = all_reduce_.ranks_totals();
  for (size_t r = 0; r < ranks.size(); ++r) {
    ranks[r].all_reduces = totals[r].count;
    ranks[r].all_reduce_seconds = static_cast<double>(totals[r].nanoseconds) * 1e-9;
    ranks[r].all_reduce_bytes_sent = totals[r].bytes_sent;
  }
  return ranks;
}

std::span<const float> TensorParallelForward::run(Forward& local, const Batch& batch, KvCache& cache) {
  // The Batch alone (d_model 0: no hidden states); every rank embeds the tokens itself.
  pack_activations(step_, 0, batch, {}, 0, {}, batch_message_);
  for (int r = 1; r < comm_.size(); ++r)
    sends_[static_cast<size_t>(r)] = comm_.send_async(r, kTagActivations, batch_message_);
  const bool tracing = profiler_ != nullptr && profiler_->tracing();
  all_reduce_.set_recording(tracing);
  local.set_partial_sums(&all_reduce_);
  const std::span<const float> logits = local.run(batch, cache);
  // Every rank has taken the batch by now (each took part in the all-reduces), so this returns
  // at once; the buffer is reused next step.
  wait_all_polling(sends_);
  if (tracing)
    for (const AllReduceCall& call : all_reduce_.take_calls()) {
      // Another rank's reading of its own clock, brought onto this one's.
      const int64_t offset = clock_offsets_ns_.empty() ? 0 : clock_offsets_ns_[static_cast<size_t>(call.rank)];
      profiler_->trace_span({.process = fmt::format("tensor parallel rank {}", call.rank),
                             .track = "all-reduce",
                             .name = call.values >= 0
                                         ? fmt::format("step {}: all-reduce of {} values", step_, call.values)
                                         : std::string("all-reduce"),
                             .category = "all-reduce",
                             .start_ns = call.start_ns - offset,
                             .end_ns = call.end_ns - offset,
                             .bytes = call.bytes_sent});
    }
  ++step_;
  return logits;
}

}  // namespace tandem
