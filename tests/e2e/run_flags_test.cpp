// `tandem run`'s prompt and output flags end to end on the demo model: -c/--ctx (and its
// warning when clamped), -f, --system / -sys / --chat-template (a chat turn), --special,
// -q, the summary on stderr after a newline on stdout, sizes with units; and `tandem
// --version`, bench's default thread count, progress bars only on a terminal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/run_binary.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

std::string model() { return shell_quote(shared_path(kAidreamsGguf)); }

std::vector<int> ids_of(const std::string& out) {
  std::istringstream stream(out);
  std::vector<int> ids;
  for (int id; stream >> id;) ids.push_back(id);
  return ids;
}

TEST(RunFlags, CtxAboveTheModelsIsClampedWithAWarning) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const CommandResult wide = run_tandem("run -m " + model() + " --ctx 4096 -p 'The dream' -n 4 --temp 0");
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_NE(wide.err.find("warning: --ctx 4096 is more than the model's context; using 128"), std::string::npos)
      << wide.err;
  // A smaller context is used as given: generation stops at it.
  const CommandResult narrow = run_tandem("run -m " + model() + " -c 12 -p 'The dream' -n 100 --temp 0 --ids");
  ASSERT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_EQ(narrow.err.find("warning"), std::string::npos) << narrow.err;
  EXPECT_NE(narrow.err.find("stop:    context limit"), std::string::npos) << narrow.err;
  EXPECT_LE(ids_of(narrow.out).size(), 13u) << narrow.out;
}

TEST(RunFlags, PromptFromFileEqualsPromptFlag) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const fs::path file = fs::temp_directory_path() / ("tandem-run-prompt-" + std::to_string(::getpid()) + ".txt");
  std::ofstream(file) << "The dream";
  const CommandResult from_file =
      run_tandem("run -m " + model() + " -f " + shell_quote(file.string()) + " -n 16 --temp 0 -q");
  const CommandResult from_flag = run_tandem("run -m " + model() + " -p 'The dream' -n 16 --temp 0 -q");
  fs::remove(file);
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, from_flag.out);
  EXPECT_EQ(from_file.out.rfind("The dream", 0), 0u) << from_file.out;
  const CommandResult both = run_tandem("run -m " + model() + " -f /dev/null -p x");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
}

TEST(RunFlags, TextEndsItsLineAndTheSummaryGoesToStderrUnlessQuiet) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const CommandResult loud = run_tandem("run -m " + model() + " -p 'The dream' -n 8 --temp 0");
  ASSERT_EQ(loud.exit_code, 0) << loud.err;
  ASSERT_FALSE(loud.out.empty());
  EXPECT_EQ(loud.out.back(), '\n');
  EXPECT_EQ(loud.out.find("seed:"), std::string::npos);
  EXPECT_EQ(loud.err.rfind("seed:", 0), 0u) << loud.err;
  EXPECT_NE(loud.err.find("decode:"), std::string::npos);
  EXPECT_EQ(loud.err.back(), '\n');
  const CommandResult quiet = run_tandem("run -m " + model() + " -p 'The dream' -n 8 --temp 0 --quiet");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(quiet.out, loud.out);
}

TEST(RunFlags, SystemPromptMakesAChatTurnAndSysIsNotSeed) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const std::string common = "run -m " + model() + " -p 'hi' -n 0 --ids --chat-template chatml";
  const CommandResult plain = run_tandem("run -m " + model() + " -p 'hi' -n 0 --ids");
  const CommandResult chat = run_tandem(common);
  const CommandResult with_system = run_tandem(common + " --system 'Be brief.'");
  const CommandResult with_sys = run_tandem(common + " -sys 'Be brief.'");
  ASSERT_EQ(with_sys.exit_code, 0) << with_sys.err;  // not `-s ys`: a seed that is no number
  EXPECT_EQ(with_sys.out, with_system.out);
  EXPECT_GT(ids_of(chat.out).size(), ids_of(plain.out).size() + 4) << chat.out;  // <|im_start|>user ... <|im_end|>
  EXPECT_GT(ids_of(with_system.out).size(), ids_of(chat.out).size()) << with_system.out;
  // --chat-template also takes a Jinja file; a missing one is bad input.
  const CommandResult template_file =
      run_tandem("run -m " + model() + " -p 'hi' -n 0 --ids --chat-template /nonexistent/template.jinja");
  EXPECT_EQ(template_file.exit_code, 1);
}

TEST(RunFlags, SpecialMakesControlTextTheControlToken) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const CommandResult plain = run_tandem("run -m " + model() + " -p '</s>' -n 0 --ids");
  const CommandResult special = run_tandem("run -m " + model() + " -p '</s>' -n 0 --ids --special");
  ASSERT_EQ(special.exit_code, 0) << special.err;
  EXPECT_EQ(ids_of(special.out), (std::vector<int>{1, 2})) << special.out;  // BOS, EOS
  EXPECT_GT(ids_of(plain.out).size(), 2u) << plain.out;                     // "</s>" spelled out
}

TEST(RunFlags, SizesTakeUnits) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  for (const char* size : {"0.01G", "64M", "512KiB", "1048576"}) {
    const CommandResult result = run_tandem("run -m " + model() + " -p hi -n 2 -q --kv-memory " + size);
    EXPECT_EQ(result.exit_code, 0) << size << ": " << result.err;
  }
  const CommandResult bad = run_tandem("run -m " + model() + " -p hi -n 2 --kv-memory 1X");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("unknown unit in size '1X'"), std::string::npos) << bad.err;
  const CommandResult too_small = run_tandem("run -m " + model() + " -p hi -n 2 --kv-memory 1K");
  EXPECT_EQ(too_small.exit_code, 1) << too_small.err;  // less than one context: refused by the engine
  // serve's sizes go through the same parser (refused before it binds a port).
  const CommandResult serve_bad = run_tandem("serve -m " + model() + " --port 0 --kv-memory 2Q");
  EXPECT_EQ(serve_bad.exit_code, 1);
  EXPECT_NE(serve_bad.err.find("unknown unit in size '2Q'"), std::string::npos) << serve_bad.err;
  const CommandResult no_body = run_tandem("serve -m " + model() + " --port 0 --max-body-bytes 0");
  EXPECT_EQ(no_body.exit_code, 1);
  EXPECT_NE(no_body.err.find("--max-body-bytes must be at least 1 byte"), std::string::npos) << no_body.err;
}

TEST(RunFlags, BenchDefaultsToEveryCoreAsTheOtherCommands) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const CommandResult result = run_tandem("bench -m " + model() + " -p 0 -n 2 -r 1 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json line = nlohmann::json::parse(result.out.substr(0, result.out.find('\n')));
  EXPECT_EQ(line["threads"].get<int>(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST(CliVersion, PrintsVersionAndCommit) {
  const CommandResult result = run_tandem("--version");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.rfind("tandem ", 0), 0u) << result.out;
  EXPECT_NE(result.out.find("(commit "), std::string::npos) << result.out;
}

TEST(CliProgress, NoCarriageReturnsWhenStderrIsAFile) {
  const fs::path out = fs::temp_directory_path() / ("tandem-progress-" + std::to_string(::getpid()) + ".gguf");
  const std::string vocab = shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  if (!fs::exists(vocab)) GTEST_SKIP() << "needs " << vocab;
  const CommandResult result = run_tandem("gen-model --shape test-tiny --type Q8_0 --vocab-from " + shell_quote(vocab) +
                                          " -o " + shell_quote(out.string()));
  fs::remove(out);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err.find('\r'), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("gen-model: wrote"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace tandem::testing
