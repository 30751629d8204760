// KvTransferTrace (dist/kv_transfer_trace.h): block sends to one decode rank that overlap go
// on lanes of its track, so no two spans of a track overlap, and a lane is reused once free;
// sends to another rank get a track of their own; an import is a span on its request's track,
// named after the request and the prefill rank, with its bytes.
#include "dist/kv_transfer_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tandem::dist {
namespace {

TEST(KvTransferTrace, OverlappingSendsGoOnLanesAndImportsOnTheirRequestsTrack) {
  Profiler profiler;
  profiler.enable_trace(1, 64);
  KvTransferTrace trace(profiler);
  // In order of completion, as the pump sees them: 1 and 2 overlap, 3 starts after 1 ended.
  trace.block_sent(2, 7, 100, 1000, 2000);
  trace.block_sent(2, 7, 100, 1500, 2500);
  trace.block_sent(2, 8, 100, 2000, 3000);
  trace.block_sent(3, 9, 50, 1200, 2200);
  trace.imported(1, 7, 200, 500, 4000, true);
  trace.imported(1, 8, 0, 600, 900, false);

  const std::vector<TraceSpan>& spans = profiler.trace_spans();
  ASSERT_EQ(spans.size(), 6u);
  for (const TraceSpan& span : spans) EXPECT_EQ(span.process, "kv transfer");
  EXPECT_EQ(spans[0].track, "send to rank 2");
  EXPECT_EQ(spans[1].track, "send to rank 2 (lane 2)");
  EXPECT_EQ(spans[2].track, "send to rank 2");  // lane 1 was free again
  EXPECT_EQ(spans[3].track, "send to rank 3");
  EXPECT_EQ(spans[0].name, "kv block (request 7)");
  EXPECT_EQ(spans[2].name, "kv block (request 8)");
  EXPECT_EQ(spans[1].bytes, 100);
  EXPECT_EQ(spans[1].start_ns, 1500);
  EXPECT_EQ(spans[1].end_ns, 2500);
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> tracks;
  for (const TraceSpan& span : spans) tracks[span.track].emplace_back(span.start_ns, span.end_ns);
  for (auto& [track, intervals] : tracks) {
    std::sort(intervals.begin(), intervals.end());
    for (size_t i = 1; i < intervals.size(); ++i) EXPECT_GE(intervals[i].first, intervals[i - 1].second) << track;
  }
  EXPECT_EQ(spans[4].track, "import (request 7)");
  EXPECT_EQ(spans[4].name, "kv import (request 7) from rank 1");
  EXPECT_EQ(spans[4].bytes, 200);
  EXPECT_EQ(spans[4].start_ns, 500);
  EXPECT_EQ(spans[4].end_ns, 4000);
  EXPECT_EQ(spans[5].name, "kv import (request 8) from rank 1, ended before all blocks came");
}

}  // namespace
}  // namespace tandem::dist
