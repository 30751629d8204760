// Rank 0's pipeline step (see pipeline_forward.h): receives posted first, then stage 0 on each
// micro-batch with its send started at once, then polls until every logits message is in.
#include "dist/pipeline_forward.h"

#include <fmt/format.h>

#include "base/error.h"
#include "dist/clock_offset.h"
#include "dist/micro_batches.h"
#include "dist/pipeline_messages.h"

namespace tandem {

PipelineForward::PipelineForward(Communicator& comm, int64_t d_model, int64_t vocab_size, int32_t max_micro_batches,
                                 int64_t min_split_tokens)
    : comm_(comm),
      last_rank_(comm.size() - 1),
      d_model_(d_model),
      vocab_size_(vocab_size),
      max_micro_batches_(max_micro_batches),
      min_split_tokens_(min_split_tokens),
      micro_batches_(static_cast<size_t>(max_micro_batches)),
      send_buffers_(static_cast<size_t>(max_micro_batches)),
      receive_buffers_(static_cast<size_t>(max_micro_batches)),
      sends_(static_cast<size_t>(max_micro_batches)),
      receives_(static_cast<size_t>(max_micro_batches)),
      local_timings_(static_cast<size_t>(max_micro_batches)),
      timings_(static_cast<size_t>(max_micro_batches), std::vector<StageTiming>(static_cast<size_t>(comm.size()) - 1)),
      clock_offsets_ns_(static_cast<size_t>(comm.size()), 0),
      stages_(static_cast<size_t>(comm.size())) {
  TANDEM_ASSERT(comm.rank() == 0 && comm.size() >= 2 && max_micro_batches >= 1);
  for (int r = 0; r < comm.size(); ++r)
    stages_[static_cast<size_t>(r)].stage = stages_[static_cast<size_t>(r)].rank = r;
}

void PipelineForward::describe_stages(std::vector<StageStatus> stages, std::vector<int64_t> clock_offsets_ns) {
  TANDEM_ASSERT(stages.size() == stages_.size() && clock_offsets_ns.size() == clock_offsets_ns_.size());
  std::lock_guard lock(stages_mutex_);
  stages_ = std::move(stages);
  clock_offsets_ns_ = std::move(clock_offsets_ns);
}

std::vector<StageStatus> PipelineForward::stages() const {
  std::lock_guard lock(stages_mutex_);
  return stages_;
}

std::span<const float> PipelineForward::run(Forward& local, const Batch& batch, KvCache& cache) {
  const int64_t step_start = steady_clock_ns();
  const std::vector<int32_t> bounds =
      micro_batch_bounds(batch, batch.n_tokens() >= min_split_tokens_ ? max_micro_batches_ : 1);
  const auto n_parts = static_cast<int32_t>(bounds.size()) - 1;
  // Each part's logits rows, and where they go in this step's output (parts keep batch order).
  std::vector<int64_t> first_row(static_cast<size_t>(n_parts) + 1, 0);
  for (int32_t p = 0; p < n_parts; ++p) {
    extract_micro_batch(batch, bounds[static_cast<size_t>(p)], bounds[static_cast<size_t>(p) + 1],
                        micro_batches_[static_cast<size_t>(p)]);
    int64_t rows = 0;
    for (uint8_t wants : micro_batches_[static_cast<size_t>(p)].wants_logits) rows += wants;
    first_row[static_cast<size_t>(p) + 1] = first_row[static_cast<size_t>(p)] + rows;
  }
  logits_.resize(static_cast<size_t>(first_row.back() * vocab_size_));
  // Posted before any compute: the last rank's sends then never wait on rank 0 to ask, and MPI
  // matches messages of one sender and tag in order, so part p lands in receive p.
  for (int32_t p = 0; p < n_parts; ++p) {
    const int64_t rows = first_row[static_cast<size_t>(p) + 1] - first_row[static_cast<size_t>(p)];
    std::vector<uint8_t>& buffer = receive_buffers_[static_cast<size_t>(p)];
    buffer.resize(static_cast<size_t>(logits_message_bytes(rows, vocab_size_, comm_.size() - 1)));
    receives_[static_cast<size_t>(p)] = comm_.receive_async(last_rank_, kTagLogits, buffer);
  }
  for (int32_t p = 0; p < n_parts; ++p) {
    const Batch& part = micro_batches_[static_cast<size_t>(p)];
    LocalTiming& timing = local_timings_[static_cast<size_t>(p)];
    timing.n_tokens = part.n_tokens();
    timing.start_ns = steady_clock_ns();
    const std::span<const float> hidden = local.run_stage(part, {}, cache);
    timing.end_ns = steady_clock_ns();
    std::vector<uint8_t>& buffer = send_buffers_[static_cast<size_t>(p)];
    pack_activations(step_, p, part, hidden, d_model_, {}, buffer);
    sends_[static_cast<size_t>(p)] = comm_.send_async(1, kTagActivations, buffer);
    // Lets MPI move the parts already sent along while this rank computes the next.
    for (int32_t q = 0; q <= p; ++q)
      if (sends_[static_cast<size_t>(q)].pending()) sends_[static_cast<size_t>(q)].test();
  }
  wait_all_polling(std::span(sends_).first(static_cast<size_t>(n_parts)));
  wait_all_polling(std::span(receives_).first(static_cast<size_t>(n_parts)));
  const int64_t wait_end = steady_clock_ns();
  for (int32_t p = 0; p < n_parts; ++p) {
    const auto first = static_cast<size_t>(first_row[static_cast<size_t>(p)] * vocab_size_);
    const auto n =
        static_cast<size_t>((first_row[static_cast<size_t>(p) + 1] - first_row[static_cast<size_t>(p)]) * vocab_size_);
    unpack_logits(receive_buffers_[static_cast<size_t>(p)], step_, p, vocab_size_, std::span(logits_).subspan(first, n),
                  timings_[static_cast<size_t>(p)]);
  }
  account(n_parts, step_start, wait_end);
  ++step_;
  micro_batches_run_ += n_parts;
  return logits_;
}

void PipelineForward::account(int32_t n_parts, int64_t step_start_ns, int64_t wait_end_ns) {
  const bool tracing = profiler_ != nullptr && profiler_->tracing();
  const auto n_stages = static_cast<int32_t>(stages_.size());
  const auto process = [&](int32_t stage) {
    return fmt::format("pipeline stage {}/{} (rank {})", stage + 1, n_stages, stage);
  };
  std::lock_guard lock(stages_mutex_);
  // Part p of this step at `stage`, times on rank 0's clock: handed on by the stage before (for
  // stage 0, cut at the step's start), taken in, run from start to end.
  const auto add = [&](int32_t stage, int32_t p, int64_t tokens, int64_t handed_on, int64_t taken, int64_t start,
                       int64_t end, int64_t bytes_in) {
    StageStatus& status = stages_[static_cast<size_t>(stage)];
    ++status.micro_batches;
    status.tokens += tokens;
    status.compute_seconds += static_cast<double>(end - start) * 1e-9;
    // Within the offset's error a reading may land a little before its cause: never negative.
    status.queue_seconds += static_cast<double>(std::max<int64_t>(0, taken - handed_on)) * 1e-9;
    status.received_bytes += bytes_in;
    if (!tracing) return;
    const std::string name = fmt::format("step {} part {}", step_, p);
    profiler_->trace_span({.process = process(stage),
                           .track = "compute",
                           .name = name,
                           .category = "stage",
                           .start_ns = start,
                           .end_ns = end,
                           .tokens = tokens});
    // Stage 0's bytes in are the logits coming back, not what this part waited for.
    profiler_->trace_span({.process = process(stage),
                           .track = fmt::format("queue (part {})", p),
                           .name = "queued " + name,
                           .category = "stage",
                           .start_ns = std::min(handed_on, taken),
                           .end_ns = taken,
                           .bytes = stage == 0 ? -1 : bytes_in});
  };
  for (int32_t p = 0; p < n_parts; ++p) {
    const LocalTiming& local = local_timings_[static_cast<size_t>(p)];
    add(0, p, local.n_tokens, step_start_ns, local.start_ns, local.start_ns, local.end_ns,
        static_cast<int64_t>(receive_buffers_[static_cast<size_t>(p)].size()));
    int64_t handed_on = local.end_ns;
    for (int32_t stage = 1; stage < n_stages; ++stage) {
      const StageTiming& timing = timings_[static_cast<size_t>(p)][static_cast<size_t>(stage) - 1];
      TANDEM_CHECK_INPUT(timing.rank == stage, "stage timing {} of a logits message is rank {}'s", stage, timing.rank);
      const int64_t offset = clock_offsets_ns_[static_cast<size_t>(stage)];
      add(stage, p, local.n_tokens, handed_on, timing.received_ns - offset, timing.start_ns - offset,
          timing.end_ns - offset, timing.bytes_in);
      handed_on = timing.end_ns - offset;
    }
  }
  if (tracing && n_parts > 0)
    profiler_->trace_span({.process = process(0),
                           .track = "waiting for the last stage",
                           .name = fmt::format("step {}: logits back", step_),
                           .category = "stage",
                           .start_ns = local_timings_[static_cast<size_t>(n_parts) - 1].end_ns,
                           .end_ns = wait_end_ns});
}

}  // namespace tandem
