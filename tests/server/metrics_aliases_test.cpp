// /metrics under other servers' names (server/metrics.h): every vllm:* and llamacpp:* series
// carries the value of the tandem_* series it stands for, vLLM's with the model_name label
// (escaped), and the whole exposition stays well-formed Prometheus text.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "engine/generation_service.h"
#include "server/metrics.h"

namespace tandem::server {
namespace {

// Sample lines as name{labels} -> value; comment lines checked for their shape.
std::map<std::string, std::string> samples_of(const std::string& text) {
  std::map<std::string, std::string> samples;
  std::istringstream lines(text);
  std::string line;
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})?) (\S+)$)");
  const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  while (std::getline(lines, line)) {
    std::smatch match;
    if (line.rfind("# ", 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, comment)) << line;
      continue;
    }
    EXPECT_TRUE(std::regex_match(line, match, sample)) << "not a sample line: " << line;
    if (!match.empty()) samples[match[1]] = match[3];
  }
  return samples;
}

TEST(MetricsAliases, VllmAndLlamaServerNamesCarryTheTandemValues) {
  Metrics metrics;
  RequestEvent event;
  event.finished = true;
  event.prompt_tokens = 37;
  event.completion_tokens = 5;
  event.ttft_ms = 20.0;
  event.e2e_ms = 90.0;
  event.queue_ms = 1.0;
  event.itl_ms = {10.0, 12.0, 30.0, 8.0};
  metrics.observe(event);
  EngineStats stats;
  stats.running = 2;
  stats.waiting = 1;
  stats.blocks.total = 10;
  stats.blocks.used = 4;
  stats.block_size = 16;
  stats.steps = 77;
  stats.preemptions = 3;
  stats.blocks.lookup_tokens = 100;
  stats.blocks.hit_tokens = 40;
  const std::map<std::string, std::string> s = samples_of(metrics.render(stats, {}, "my \"m\"\\x"));
  const std::string label = R"({model_name="my \"m\"\\x"})";

  EXPECT_EQ(s.at("vllm:num_requests_running" + label), s.at("tandem_requests_running"));
  EXPECT_EQ(s.at("vllm:num_requests_waiting" + label), s.at("tandem_requests_waiting"));
  EXPECT_EQ(s.at("vllm:kv_cache_usage_perc" + label), "0.4");
  EXPECT_EQ(s.at("vllm:gpu_cache_usage_perc" + label), "0.4");
  EXPECT_EQ(s.at("vllm:prompt_tokens_total" + label), s.at("tandem_prompt_tokens_total"));
  EXPECT_EQ(s.at("vllm:generation_tokens_total" + label), s.at("tandem_generation_tokens_total"));
  EXPECT_EQ(s.at("vllm:num_preemptions_total" + label), s.at("tandem_preemptions_total"));
  EXPECT_EQ(s.at("vllm:prefix_cache_queries_total" + label), "100");
  EXPECT_EQ(s.at("vllm:prefix_cache_hits_total" + label), s.at("tandem_prefix_cache_hit_tokens_total"));
  EXPECT_EQ(s.at("vllm:time_to_first_token_seconds_count" + label), s.at("tandem_time_to_first_token_seconds_count"));
  EXPECT_EQ(s.at("vllm:inter_token_latency_seconds_count" + label), "4");
  EXPECT_EQ(s.at("vllm:time_per_output_token_seconds_sum" + label), s.at("tandem_inter_token_latency_seconds_sum"));
  EXPECT_EQ(s.at("vllm:e2e_request_latency_seconds_sum" + label), s.at("tandem_e2e_request_latency_seconds_sum"));
  EXPECT_EQ(s.at("vllm:request_queue_time_seconds_count" + label), "1");
  EXPECT_EQ(s.at(R"(vllm:inter_token_latency_seconds_bucket{model_name="my \"m\"\\x",le="0.01"})"), "2");
  EXPECT_EQ(s.at(R"(vllm:inter_token_latency_seconds_bucket{model_name="my \"m\"\\x",le="+Inf"})"), "4");

  EXPECT_EQ(s.at("llamacpp:prompt_tokens_total"), "37");
  EXPECT_EQ(s.at("llamacpp:tokens_predicted_total"), "5");
  EXPECT_EQ(s.at("llamacpp:n_decode_total"), s.at("tandem_engine_steps_total"));
  EXPECT_EQ(s.at("llamacpp:kv_cache_usage_ratio"), "0.4");
  EXPECT_EQ(s.at("llamacpp:kv_cache_tokens"), "64");
  EXPECT_EQ(s.at("llamacpp:requests_processing"), "2");
  EXPECT_EQ(s.at("llamacpp:requests_deferred"), "1");
}

}  // namespace
}  // namespace tandem::server
