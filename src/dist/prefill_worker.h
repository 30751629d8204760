// PrefillWorker: a prefill rank of a disaggregated job. A decode rank asks it for the KV
// blocks of a prompt's head (kPrefillJob); its engine computes them as a prefill-only request
// (reusing its own prefix cache, chunked and batched with other jobs), and each block goes to
// the decode rank, non-blocking, as soon as its chunk is computed — the transfer overlaps the
// rest of the prompt's compute — then kPrefillDone. Runs the rank's MPI thread until the
// front says stop. With a tracing profiler, each block's send is a span of its trace.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "dist/kv_transfer_trace.h"
#include "dist/message_pump.h"
#include "engine/engine.h"

namespace tandem::dist {

class PrefillWorker {
 public:
  // `engine` is started and outlives run(); `profiler` (null: no trace) is the engine's.
  PrefillWorker(Communicator& comm, Engine& engine, Profiler* profiler = nullptr, int front_rank = 0);
  // Until the front says stop; false when it said a worker was down (see run_worker_loop).
  bool run();

 private:
  struct Job {
    uint64_t engine_id = 0;
    int decode_rank = 0;
  };
  // A job's blocks, packed on the engine thread and posted to its decode rank.
  class BlockSender;

  void on_message(const MessageInfo& info, std::vector<uint8_t>& bytes);
  void start_job(int decode_rank, const nlohmann::json& message);
  void send_report();

  Communicator& comm_;
  Engine& engine_;
  Profiler* const profiler_;
  const int front_rank_;
  MessagePump pump_;
  std::unique_ptr<KvTransferTrace> transfer_trace_;  // with a profiler
  std::mutex mutex_;                                 // jobs_: the pump thread and the engine thread's callbacks
  std::unordered_map<uint64_t, Job> jobs_;           // by the front's request id (unique across decode ranks)
  std::atomic<int64_t> kv_bytes_sent_{0};
  std::atomic<int64_t> requests_done_{0};
  bool stopping_ = false;
};

}  // namespace tandem::dist
