// A stage rank's loop (see stage_worker.h): poll for the next message from the rank before,
// run it, start its send onward, and keep earlier sends moving while waiting.
#include "dist/stage_worker.h"

#include "base/error.h"
#include "dist/clock_offset.h"
#include "dist/poll_backoff.h"

namespace tandem {

StageWorker::StageWorker(Communicator& comm, std::shared_ptr<const Model> model, ThreadPool& pool)
    : comm_(comm), model_(std::move(model)), pool_(pool), last_(comm.rank() == comm.size() - 1) {
  TANDEM_ASSERT(comm.rank() >= 1);
  TANDEM_ASSERT(model_->holds_head() == last_ && !model_->holds_embedding());
}

StageReady StageWorker::set_up() {
  PollBackoff backoff;
  while (!comm_.try_receive_any_size(0, kTagStageSetup, incoming_)) backoff.pause();
  const StageSetup setup = unpack_stage_setup(incoming_);
  cache_ = std::make_unique<KvCache>(model_->kv_shape(), setup.n_blocks, setup.block_size, setup.kv_types);
  forward_ = std::make_unique<Forward>(model_, setup.max_batch_tokens, pool_, setup.context_length);
  const StageReady ready{.rank = comm_.rank(),
                         .weight_bytes = model_->weight_bytes_total(),
                         .kv_bytes = cache_->n_blocks() * cache_->bytes_per_block()};
  pack_stage_ready(ready, incoming_);
  comm_.send(0, kTagStageReady, incoming_);
  answer_clock_pings(comm_, 0);
  return ready;
}

int64_t StageWorker::run() {
  TANDEM_ASSERT(forward_ != nullptr);  // set_up() first
  const int previous = comm_.rank() - 1;
  const int64_t d_model = model_->config.d_model;
  const int64_t vocab_size = model_->config.vocab_size;
  int64_t n_run = 0;
  PollBackoff backoff;
  for (;;) {
    progress_sends();
    if (!comm_.try_receive_any_size(previous, kTagActivations, incoming_)) {
      backoff.pause();
      continue;
    }
    backoff.reset();
    StageTiming timing{
        .rank = comm_.rank(), .received_ns = steady_clock_ns(), .bytes_in = static_cast<int64_t>(incoming_.size())};
    unpack_activations(incoming_, d_model, message_);
    if (message_.stop) break;
    timing.start_ns = steady_clock_ns();
    const std::span<const float> out = forward_->run_stage(message_.batch, message_.hidden, *cache_);
    timing.end_ns = steady_clock_ns();
    message_.timings.push_back(timing);
    Outgoing& outgoing = free_outgoing();
    if (last_) {
      pack_logits(message_.step, message_.micro_batch, out, vocab_size, message_.timings, outgoing.bytes);
      outgoing.request = comm_.send_async(0, kTagLogits, outgoing.bytes);
    } else {
      pack_activations(message_.step, message_.micro_batch, message_.batch, out, d_model, message_.timings,
                       outgoing.bytes);
      outgoing.request = comm_.send_async(comm_.rank() + 1, kTagActivations, outgoing.bytes);
    }
    ++n_run;
  }
  // Everything sent before the stop is delivered before the stop is passed on.
  for (const std::unique_ptr<Outgoing>& outgoing : outgoing_)
    if (outgoing->request.pending()) outgoing->request.wait();
  if (!last_) {
    pack_stop(incoming_);
    comm_.send(comm_.rank() + 1, kTagActivations, incoming_);
  }
  return n_run;
}

StageWorker::Outgoing& StageWorker::free_outgoing() {
  for (const std::unique_ptr<Outgoing>& outgoing : outgoing_)
    if (!outgoing->request.pending()) return *outgoing;
  outgoing_.push_back(std::make_unique<Outgoing>());
  return *outgoing_.back();
}

void StageWorker::progress_sends() {
  for (const std::unique_ptr<Outgoing>& outgoing : outgoing_)
    if (outgoing->request.pending()) outgoing->request.test();
}

}  // namespace tandem
