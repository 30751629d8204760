// Rank 0's pipeline step (see pipeline_forward.h): receives posted first, then stage 0 on each
// micro-batch with its send started at once, then polls until every logits message is in.
#include "dist/pipeline_forward.h"

#include "base/error.h"
#include "dist/micro_batches.h"
#include "dist/pipeline_messages.h"
#include "dist/poll_backoff.h"

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
      receives_(static_cast<size_t>(max_micro_batches)) {
  TANDEM_ASSERT(comm.rank() == 0 && comm.size() >= 2 && max_micro_batches >= 1);
}

std::span<const float> PipelineForward::run(Forward& local, const Batch& batch, KvCache& cache) {
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
    buffer.resize(static_cast<size_t>(logits_message_bytes(rows, vocab_size_)));
    receives_[static_cast<size_t>(p)] = comm_.receive_async(last_rank_, kTagLogits, buffer);
  }
  for (int32_t p = 0; p < n_parts; ++p) {
    const Batch& part = micro_batches_[static_cast<size_t>(p)];
    const std::span<const float> hidden = local.run_stage(part, {}, cache);
    std::vector<uint8_t>& buffer = send_buffers_[static_cast<size_t>(p)];
    pack_activations(step_, p, part, hidden, d_model_, buffer);
    sends_[static_cast<size_t>(p)] = comm_.send_async(1, kTagActivations, buffer);
    // Lets MPI move the parts already sent along while this rank computes the next.
    for (int32_t q = 0; q <= p; ++q)
      if (sends_[static_cast<size_t>(q)].pending()) sends_[static_cast<size_t>(q)].test();
  }
  wait_all(std::span(sends_).first(static_cast<size_t>(n_parts)));
  wait_all(std::span(receives_).first(static_cast<size_t>(n_parts)));
  for (int32_t p = 0; p < n_parts; ++p) {
    const auto first = static_cast<size_t>(first_row[static_cast<size_t>(p)] * vocab_size_);
    const auto n =
        static_cast<size_t>((first_row[static_cast<size_t>(p) + 1] - first_row[static_cast<size_t>(p)]) * vocab_size_);
    unpack_logits(receive_buffers_[static_cast<size_t>(p)], step_, p, vocab_size_,
                  std::span(logits_).subspan(first, n));
  }
  ++step_;
  micro_batches_run_ += n_parts;
  return logits_;
}

void PipelineForward::wait_all(std::span<MpiRequest> requests) {
  PollBackoff backoff;
  for (;;) {
    bool all_done = true;
    for (MpiRequest& request : requests)
      if (request.pending() && !request.test()) all_done = false;
    if (all_done) return;
    backoff.pause();
  }
}

}  // namespace tandem
