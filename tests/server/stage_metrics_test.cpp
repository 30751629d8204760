// /metrics' stage lines (server/stage_metrics.h): nothing for a single process; for a pipeline,
// every family once with HELP and TYPE, a line per stage labelled with its stage and rank, and
// each value taken from its own field.
#include "server/stage_metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem::server {
namespace {

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(StageMetrics, OneLinePerStageAndFamilyEachFromItsField) {
  EXPECT_EQ(render_stage_metrics({}), "");
  const std::vector<StageStatus> stages = {
      {.stage = 0,
       .rank = 0,
       .layer_first = 0,
       .layer_end = 11,
       .weight_bytes = 101,
       .kv_bytes = 102,
       .micro_batches = 103,
       .tokens = 104,
       .compute_seconds = 1.5,
       .queue_seconds = 0.25,
       .received_bytes = 105},
      {.stage = 1,
       .rank = 1,
       .layer_first = 11,
       .layer_end = 22,
       .weight_bytes = 201,
       .kv_bytes = 202,
       .micro_batches = 203,
       .tokens = 204,
       .compute_seconds = 2.5,
       .queue_seconds = 0.75,
       .received_bytes = 205},
  };
  const std::string text = render_stage_metrics(stages);
  for (const char* family : {"layers", "weight_bytes", "kv_bytes", "micro_batches_total", "tokens_total",
                             "compute_seconds_total", "queue_seconds_total", "received_bytes_total"}) {
    const std::string name = std::string("tandem_stage_") + family;
    EXPECT_EQ(count_of(text, "# HELP " + name + " "), 1) << name;
    EXPECT_EQ(count_of(text, "# TYPE " + name + " "), 1) << name;
    EXPECT_EQ(count_of(text, "\n" + name + "{"), 2) << name;
  }
  for (const char* line :
       {"tandem_stage_layers{stage=\"0\",rank=\"0\"} 11\n", "tandem_stage_layers{stage=\"1\",rank=\"1\"} 11\n",
        "tandem_stage_weight_bytes{stage=\"1\",rank=\"1\"} 201\n",
        "tandem_stage_kv_bytes{stage=\"0\",rank=\"0\"} 102\n",
        "tandem_stage_micro_batches_total{stage=\"1\",rank=\"1\"} 203\n",
        "tandem_stage_tokens_total{stage=\"0\",rank=\"0\"} 104\n",
        "tandem_stage_compute_seconds_total{stage=\"1\",rank=\"1\"} 2.5\n",
        "tandem_stage_queue_seconds_total{stage=\"0\",rank=\"0\"} 0.25\n",
        "tandem_stage_received_bytes_total{stage=\"1\",rank=\"1\"} 205\n"})
    EXPECT_EQ(count_of(text, line), 1) << line;
  EXPECT_NE(text.find("# TYPE tandem_stage_queue_seconds_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE tandem_stage_layers gauge"), std::string::npos);
}

}  // namespace
}  // namespace tandem::server
