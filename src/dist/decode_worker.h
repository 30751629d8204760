// DecodeWorker: a decode rank of a disaggregated job. Takes requests from the front, asks a
// prefill rank for the prompt's KV blocks its own prefix cache lacks (KvImport::ready says
// which), feeds the arriving blocks to its engine, which admits the request once all are
// there and batches it with the others as any engine does; every token event goes back to
// the front. Runs the rank's MPI thread (MessagePump) until the front says stop. With a
// tracing profiler, each request's import is a span of its trace.
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

class DecodeWorker {
 public:
  // `engine` is started and outlives run(); `profiler` (null: no trace) is the engine's.
  DecodeWorker(Communicator& comm, Engine& engine, Profiler* profiler = nullptr, int front_rank = 0);
  // Until the front says stop; false when it said a worker was down (see run_worker_loop).
  bool run();

 private:
  struct Entry {
    uint64_t engine_id = 0;
    int prefill_rank = -1;  // -1: no blocks imported
    std::shared_ptr<KvImport> import;
    bool blocks_done = false;  // the prefill rank said it sent everything (or failed)
    int64_t asked_ns = 0;      // when the engine asked the prefill rank for blocks (0: it did not)
  };

  void on_message(const MessageInfo& info, std::vector<uint8_t>& bytes);
  void submit(const nlohmann::json& message);
  void on_event(uint64_t front_id, RequestEvent&& event);  // engine thread
  void send_report();

  Communicator& comm_;
  Engine& engine_;
  Profiler* const profiler_;
  const int front_rank_;
  MessagePump pump_;
  std::unique_ptr<KvTransferTrace> transfer_trace_;  // with a profiler
  std::mutex mutex_;                                 // entries_: the pump thread and the engine thread's callbacks
  std::unordered_map<uint64_t, Entry> entries_;      // by the front's request id
  std::atomic<int64_t> kv_bytes_received_{0};
  std::atomic<int64_t> kv_transfer_us_{0};
  std::atomic<int64_t> requests_done_{0};
  bool stopping_ = false;
};

}  // namespace tandem::dist
