// End-to-end tests of the profile flags through the built binary: `tandem bench --profile
// --trace` on a random-weight model (summary tables on stderr, a trace that parses),
// `bench --machine` caching ceilings that a later --profile turns into roofline columns, and
// `tandem run --profile --trace` through the public API printing the same ids as without.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "profiled_model.h"
#include "support/run_binary.h"

namespace tandem {
namespace {

using test_support::TempDir;
using testing::run_tandem;
using testing::shell_quote;

// Points the ceilings cache at a fresh folder for the test's lifetime (the binary inherits it).
class ScopedCacheDir {
 public:
  explicit ScopedCacheDir(const std::string& dir) { ::setenv("TANDEM_CACHE_DIR", dir.c_str(), 1); }
  ~ScopedCacheDir() { ::unsetenv("TANDEM_CACHE_DIR"); }
};

TEST(ProfileCli, BenchProfilePrintsBothPhasesAndTraceParses) {
  TempDir dir;
  ScopedCacheDir cache(dir.file("cache"));
  const std::string model = dir.file("model.gguf");
  test_support::write_random_model(test_support::profiled_model_spec(), model);
  const std::string trace = dir.file("bench.trace.json");
  const testing::CommandResult result =
      run_tandem("bench -m " + shell_quote(model) + " -p 16 -n 4 --tg-prefill 4 -r 1 -t 2 --profile --trace " +
                 shell_quote(trace));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("pp16"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("prefill: 1 steps, 16 tokens"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("decode: 4 steps, 4 tokens"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("| matmul"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("| ffn_down Q8_0"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("tandem bench --machine"), std::string::npos) << result.err;  // no ceilings yet
  std::ifstream in(trace);
  const nlohmann::json parsed = nlohmann::json::parse(in);
  EXPECT_GT(parsed["traceEvents"].size(), 100u);
}

TEST(ProfileCli, MachineCeilingsTurnOnTheRooflineColumns) {
  TempDir dir;
  ScopedCacheDir cache(dir.file("cache"));
  const testing::CommandResult machine = run_tandem("bench --machine --machine-mib 8 -t 1");
  ASSERT_EQ(machine.exit_code, 0) << machine.err;
  EXPECT_NE(machine.out.find("GB/s"), std::string::npos) << machine.out;
  EXPECT_NE(machine.out.find(dir.file("cache")), std::string::npos) << machine.out;

  const std::string model = dir.file("model.gguf");
  test_support::write_random_model(test_support::profiled_model_spec(), model);
  const testing::CommandResult bench =
      run_tandem("bench -m " + shell_quote(model) + " -p 0 -n 4 --tg-prefill 4 -r 1 -t 1 --profile");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NE(bench.err.find("ceilings: "), std::string::npos) << bench.err;
  EXPECT_NE(bench.err.find("% bound"), std::string::npos) << bench.err;
  EXPECT_NE(bench.err.find("loses most: "), std::string::npos) << bench.err;
  EXPECT_EQ(bench.err.find("prefill:"), std::string::npos) << bench.err;  // -p 0: no prefill test
}

TEST(ProfileCli, BenchWithoutModelOrMachineIsAnError) {
  const testing::CommandResult result = run_tandem("bench -p 16");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("--model is required"), std::string::npos) << result.err;
}

TEST(ProfileRun, RunProfileAndTraceKeepTheTokens) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  TempDir dir;
  ScopedCacheDir cache(dir.file("cache"));
  const std::string model = shell_quote(testing::shared_path(testing::kAidreamsGguf));
  const std::string common = "run -m " + model + " -p " + shell_quote("The dream") + " -n 24 --temp 0 -t 2 --ids";
  const testing::CommandResult plain = run_tandem(common);
  const std::string trace = dir.file("run.trace.json");
  const testing::CommandResult profiled = run_tandem(common + " --profile --trace " + shell_quote(trace));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  EXPECT_EQ(profiled.out, plain.out);
  EXPECT_NE(profiled.err.find("prefill: 1 steps"), std::string::npos) << profiled.err;
  EXPECT_NE(profiled.err.find("decode: "), std::string::npos) << profiled.err;
  EXPECT_NE(profiled.err.find("| sampling"), std::string::npos) << profiled.err;
  std::ifstream in(trace);
  const nlohmann::json parsed = nlohmann::json::parse(in);
  EXPECT_GT(parsed["traceEvents"].size(), 24u);
}

}  // namespace
}  // namespace tandem
