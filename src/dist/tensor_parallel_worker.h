// TensorParallelWorker: a tensor-parallel rank's whole life in `tandem serve --tensor-parallel T`
// (ranks 1..T-1). It holds its slice of every layer (model/tensor_slice.h) and the KV cache of
// its own KV heads; it takes the KV pool's geometry from rank 0 (block ids in a Batch index the
// same pool on every rank; the pipeline's StageSetup), answers ready, then runs each Batch rank 0
// sends (the pipeline's activations message, with no hidden states) through its slice, its
// row-parallel outputs summed with the other ranks' (MpiAllReduce). It never computes logits,
// schedules or samples: rank 0 does. The pipeline's stop message ends it. Its MPI calls are made
// on its main thread; waits for the next batch sleep between polls (PollBackoff).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "dist/communicator.h"
#include "dist/mpi_all_reduce.h"
#include "dist/pipeline_messages.h"
#include "kv/kv_cache.h"
#include "model/forward.h"

namespace tandem {

class TensorParallelWorker {
 public:
  // `model`: this rank's slice (loaded with ModelLoadOptions::tensor_slice).
  TensorParallelWorker(Communicator& comm, std::shared_ptr<const Model> model, ThreadPool& pool);

  // Waits for rank 0's StageSetup, builds the KV cache and the forward pass, answers
  // StageReady, then rank 0's clock pings (clock_offset.h); returns what it answered.
  StageReady set_up();
  // Runs batches until the stop message; returns the steps run.
  int64_t run();

  AllReduceTotals totals() const { return all_reduce_.totals(); }

 private:
  Communicator& comm_;
  std::shared_ptr<const Model> model_;
  ThreadPool& pool_;
  MpiAllReduce all_reduce_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Forward> forward_;
  std::vector<uint8_t> incoming_;
  ActivationsMessage message_;
};

}  // namespace tandem
