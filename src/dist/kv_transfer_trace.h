// KvTransferTrace: a worker rank's KV transfers as spans of its Chrome trace (process "kv
// transfer"): on a prefill rank each KV block's send, posted to complete, on a track per
// decode rank; on a decode rank each request's import, blocks asked for to all applied, on a
// track per request. Spans on one track never overlap (a viewer nests what overlaps): sends
// still in flight when the next one starts go on a further lane of their decode rank's track.
// Knows no MPI; the request ids are the front's, the same on every rank.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "profile/profiler.h"

namespace tandem::dist {

class KvTransferTrace {
 public:
  // `profiler` traces (enable_trace) and outlives this.
  explicit KvTransferTrace(Profiler& profiler) : profiler_(profiler) {}

  // Prefill rank: one KV block message of `bytes` for `request_id`, posted at posted_ns, its
  // send complete at completed_ns. Called in order of completion.
  void block_sent(int decode_rank, uint64_t request_id, int64_t bytes, int64_t posted_ns, int64_t completed_ns);
  // Decode rank: `request_id`'s blocks asked of `prefill_rank` at asked_ns, all applied at
  // applied_ns (`complete`), or the request ended then without them.
  void imported(int prefill_rank, uint64_t request_id, int64_t bytes, int64_t asked_ns, int64_t applied_ns,
                bool complete);

 private:
  Profiler& profiler_;
  std::mutex mutex_;
  std::map<int, std::vector<int64_t>> lane_ends_;  // by decode rank: each lane's last span's end
};

}  // namespace tandem::dist
