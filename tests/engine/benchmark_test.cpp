// Tests for the benchmark harness: the measuring logic (engine/benchmark) runs tiny pp/tg
// tests on the 260K demo model and reports positive rates, and `tandem bench --json` prints
// one well-formed JSON object per test. No wall-clock assertions: only shape and sign.
#include "engine/benchmark.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "base/error.h"
#include "support/shared_data.h"

namespace tandem {
namespace {

const std::string kModel = testing::shared_path(testing::kAidreamsGguf);

#define REQUIRE_MODEL() TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf)

BenchOptions tiny_options() {
  BenchOptions options;
  options.prompt_lengths = {16};
  options.n_gen = 8;
  options.decode_prefill = 4;
  options.threads = 1;
  options.repetitions = 1;
  return options;
}

TEST(BenchmarkTest, TinyRunsGivePositiveRates) {
  REQUIRE_MODEL();
  Benchmark benchmark(load_model(kModel), tiny_options());
  const std::vector<BenchResult> results = benchmark.run_all();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].test, "pp16");
  EXPECT_EQ(results[0].n_prompt, 16);
  EXPECT_EQ(results[1].test, "tg8");
  EXPECT_EQ(results[1].n_gen, 8);
  for (const BenchResult& result : results) {
    ASSERT_EQ(result.samples.size(), 1u);
    EXPECT_GT(result.median(), 0.0);
    EXPECT_GT(result.kv_bytes, 0);
    EXPECT_GT(result.peak_rss_bytes, 0);
  }
}

TEST(BenchmarkTest, MedianAndStddev) {
  BenchResult result;
  result.samples = {3.0, 1.0, 2.0, 10.0};
  EXPECT_DOUBLE_EQ(result.median(), 2.5);
  result.samples = {2.0, 4.0, 6.0};
  EXPECT_DOUBLE_EQ(result.median(), 4.0);
  EXPECT_DOUBLE_EQ(result.stddev(), 2.0);
}

TEST(BenchmarkTest, PromptIsBosThenFixedPseudoRandomIds) {
  const std::vector<int32_t> a = bench_prompt(64, 512, 42), b = bench_prompt(64, 512, 42);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[0], 1);
  for (int32_t id : a) EXPECT_TRUE(id >= 0 && id < 512);
}

TEST(BenchmarkTest, PromptLongerThanContextIsAnInputError) {
  REQUIRE_MODEL();
  std::shared_ptr<const Model> model = load_model(kModel);
  BenchOptions options = tiny_options();
  options.prompt_lengths = {model->config.context_length + 1};
  EXPECT_THROW(Benchmark(model, options), InputError);
}

TEST(BenchmarkTest, JsonLinesHaveTheRequiredFields) {
  REQUIRE_MODEL();
  if (!std::filesystem::exists(TANDEM_BINARY)) GTEST_SKIP() << TANDEM_BINARY << " is not built";
  const std::string command = std::string("'") + TANDEM_BINARY + "' bench -m '" + kModel +
                              "' -p 16 -n 8 -r 1 -t 1 --tg-prefill 4 --json 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  ASSERT_EQ(::pclose(pipe), 0) << output;

  std::istringstream lines(output);
  std::string line;
  std::vector<nlohmann::json> objects;
  while (std::getline(lines, line)) objects.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(objects.size(), 2u) << output;
  EXPECT_EQ(objects[0]["test"], "pp16");
  EXPECT_EQ(objects[1]["test"], "tg8");
  for (const nlohmann::json& object : objects) {
    for (const char* field : {"test", "n_prompt", "n_gen", "threads", "tokens_per_s", "samples", "peak_rss_bytes",
                              "kv_bytes", "model_size_bytes"})
      EXPECT_TRUE(object.contains(field)) << field << " missing in " << object.dump();
    EXPECT_EQ(object["threads"], 1);
    EXPECT_GT(object["tokens_per_s"].get<double>(), 0.0);
    EXPECT_EQ(object["samples"].size(), 1u);
  }
}

}  // namespace
}  // namespace tandem
