// A tensor-parallel rank's loop (see tensor_parallel_worker.h): poll for rank 0's next batch,
// run the slice on it (the all-reduces inside), repeat until the stop.
#include "dist/tensor_parallel_worker.h"

#include <algorithm>

#include "base/error.h"
#include "dist/clock_offset.h"
#include "dist/poll_backoff.h"

namespace tandem {

TensorParallelWorker::TensorParallelWorker(Communicator& comm, std::shared_ptr<const Model> model, ThreadPool& pool)
    : comm_(comm), model_(std::move(model)), pool_(pool), all_reduce_(comm) {
  TANDEM_ASSERT(comm.rank() >= 1 && model_->tensor_slice && model_->tensor_slice->rank == comm.rank());
}

StageReady TensorParallelWorker::set_up() {
  PollBackoff backoff;
  while (!comm_.try_receive_any_size(0, kTagStageSetup, incoming_)) backoff.pause();
  const StageSetup setup = unpack_stage_setup(incoming_);
  cache_ = std::make_unique<KvCache>(model_->kv_shape(), setup.n_blocks, setup.block_size, setup.kv_types);
  forward_ = std::make_unique<Forward>(model_, setup.max_batch_tokens, pool_, setup.context_length);
  forward_->set_partial_sums(&all_reduce_);
  const StageReady ready{.rank = comm_.rank(),
                         .weight_bytes = model_->weight_bytes_total(),
                         .kv_bytes = cache_->n_blocks() * cache_->bytes_per_block()};
  pack_stage_ready(ready, incoming_);
  comm_.send(0, kTagStageReady, incoming_);
  answer_clock_pings(comm_, 0);  // for the trace: this rank's all-reduces on rank 0's clock
  return ready;
}

int64_t TensorParallelWorker::run() {
  TANDEM_ASSERT(forward_ != nullptr);  // set_up() first
  int64_t n_run = 0;
  PollBackoff backoff;
  for (;;) {
    if (!comm_.try_receive_any_size(0, kTagActivations, incoming_)) {
      backoff.pause();
      continue;
    }
    backoff.reset();
    unpack_activations(incoming_, 0, message_);
    if (message_.stop) break;
    // Rank 0 alone turns hidden states into logits.
    std::fill(message_.batch.wants_logits.begin(), message_.batch.wants_logits.end(), uint8_t{0});
    forward_->run(message_.batch, *cache_);
    ++n_run;
  }
  return n_run;
}

}  // namespace tandem
