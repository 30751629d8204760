// StageWorker: a pipeline stage rank's whole life in `tandem serve --pipeline S` (ranks
// 1..S-1). It holds its layers' weights and the KV cache of its layers; it takes the KV pool's
// geometry from rank 0 (block ids in a Batch index the same pool on every rank), answers ready
// and rank 0's clock pings (clock_offset.h), then runs each micro-batch that arrives from the rank before — the Batch
// and its hidden states — and sends the result on: hidden states to the next rank, or, on the last stage, the logits
// rows to rank 0 — each with its own timing added to those of the stages before (when it took the micro-batch in, ran
// it, finished), for rank 0's metrics and trace. A stop message from the rank before is passed on and ends it. It never
// schedules or samples: rank 0's engine decides everything. Waits sleep between polls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "dist/communicator.h"
#include "dist/pipeline_messages.h"
#include "kv/kv_cache.h"
#include "model/forward.h"

namespace tandem {

class StageWorker {
 public:
  // `model`: this rank's stage (loaded with its ModelLoadOptions::layers).
  StageWorker(Communicator& comm, std::shared_ptr<const Model> model, ThreadPool& pool);

  // Waits for rank 0's StageSetup, builds the KV cache and the forward pass, answers
  // StageReady, then rank 0's clock pings; returns what it answered.
  StageReady set_up();
  // Runs micro-batches until the stop message (passed on to the next rank); returns the
  // micro-batches run.
  int64_t run();

 private:
  struct Outgoing {
    std::vector<uint8_t> bytes;
    MpiRequest request;
  };
  // A send buffer no message in flight reads (one more when all are taken).
  Outgoing& free_outgoing();
  void progress_sends();

  Communicator& comm_;
  std::shared_ptr<const Model> model_;
  ThreadPool& pool_;
  bool last_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Forward> forward_;
  std::vector<uint8_t> incoming_;
  ActivationsMessage message_;
  std::vector<std::unique_ptr<Outgoing>> outgoing_;
};

}  // namespace tandem
