#include "dist/kv_transfer_trace.h"

#include <fmt/format.h>

namespace tandem::dist {

namespace {

constexpr const char* kProcess = "kv transfer";
constexpr const char* kCategory = "kv";

}  // namespace

void KvTransferTrace::block_sent(int decode_rank, uint64_t request_id, int64_t bytes, int64_t posted_ns,
                                 int64_t completed_ns) {
  size_t lane = 0;
  {
    // Spans come in order of their ends, so a lane whose last span ended by this one's start
    // holds nothing this one overlaps.
    std::lock_guard lock(mutex_);
    std::vector<int64_t>& ends = lane_ends_[decode_rank];
    while (lane < ends.size() && ends[lane] > posted_ns) ++lane;
    if (lane == ends.size()) ends.push_back(0);
    ends[lane] = completed_ns;
  }
  const std::string track = lane == 0 ? fmt::format("send to rank {}", decode_rank)
                                      : fmt::format("send to rank {} (lane {})", decode_rank, lane + 1);
  profiler_.trace_span({.process = kProcess,
                        .track = track,
                        .name = fmt::format("kv block (request {})", request_id),
                        .category = kCategory,
                        .start_ns = posted_ns,
                        .end_ns = completed_ns,
                        .bytes = bytes});
}

void KvTransferTrace::imported(int prefill_rank, uint64_t request_id, int64_t bytes, int64_t asked_ns,
                               int64_t applied_ns, bool complete) {
  profiler_.trace_span({.process = kProcess,
                        .track = fmt::format("import (request {})", request_id),
                        .name = fmt::format("kv import (request {}) from rank {}{}", request_id, prefill_rank,
                                            complete ? "" : ", ended before all blocks came"),
                        .category = kCategory,
                        .start_ns = asked_ns,
                        .end_ns = applied_ns,
                        .bytes = bytes});
}

}  // namespace tandem::dist
