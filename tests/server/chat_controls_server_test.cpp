// Chat controls end to end: `tandem serve` on aidreams260K driven by the official `openai` npm
// client v7 (chat_controls_client_test.mjs): n > 1 choices (seed + i each, equal to single
// requests, the prompt's blocks shared through the prefix cache), assistant prefill,
// echo / best_of / suffix, chat_template_kwargs over --chat-template-kwargs. The server logs in
// JSON (--log-format json), and every request the client made has its line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "npm_packages.h"
#include "server_process.h"

namespace tandem::testing {
namespace {

int run_client(const std::string& url, const std::string& part) {
  const std::string script = (std::filesystem::path(__FILE__).parent_path() / "chat_controls_client_test.mjs").string();
  const std::string command =
      "timeout 120 node '" + script + "' --npm '" + npm_cache_dir("npm7") + "' --url " + url + " --part " + part;
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// The log's lines that are JSON objects with "event": "request".
std::vector<nlohmann::json> request_lines(const std::string& log) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    const nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << line;
    if (parsed.is_object() && parsed.value("event", "") == "request") lines.push_back(parsed);
  }
  return lines;
}

void run_part(const std::string& part, std::vector<std::string> flags = {}) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  std::string why;
  if (!ensure_npm_packages("npm7", {"openai@7"}, why)) GTEST_SKIP() << why << "; skipping";
  flags.insert(flags.end(), {"--parallel", "4", "--log-format", "json"});
  const bool verbose = std::find(flags.begin(), flags.end(), "--verbose") != flags.end();
  ServerProcess server;
  ASSERT_TRUE(server.start(flags)) << server.log();
  EXPECT_EQ(run_client(server.url(), part), 0) << server.log();
  EXPECT_EQ(server.stop(), 0);

  // One line per request, each with its id, path and status; generation lines with tokens and times.
  const std::vector<nlohmann::json> lines = request_lines(server.log());
  int generations = 0, refused = 0;
  for (const nlohmann::json& line : lines) {
    EXPECT_TRUE(line["id"].is_string() && line["method"].is_string() && line["path"].is_string()) << line;
    EXPECT_TRUE(line["status"].is_number_integer() && line["total_ms"].is_number()) << line;
    if (!verbose) {
      EXPECT_FALSE(line["path"] == "/metrics") << "probes are logged only with --verbose";
    }
    if (line["status"] == 400) ++refused;
    if (!line.contains("prompt_tokens")) continue;
    ++generations;
    EXPECT_GT(line["prompt_tokens"].get<int>(), 0) << line;
    EXPECT_GE(line["ttft_ms"].get<double>(), line["queue_ms"].get<double>()) << line;
    EXPECT_GE(line["total_ms"].get<double>(), line["ttft_ms"].get<double>()) << line;
    if (part == "choices" && line["choices"] == 3 && line["path"] == "/v1/completions") {
      EXPECT_GE(line["cached_tokens"].get<int>(), 64) << "choices 1 and 2 reuse the prompt's blocks: " << line;
    }
  }
  EXPECT_GE(generations, 2) << server.log();
  EXPECT_GE(refused, 2) << server.log();

  // Every line is one JSON object (start-up and shutdown too); --verbose adds the scheduler's decisions.
  std::istringstream in(server.log());
  int admissions = 0, reused = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(parsed.is_object()) << "not a JSON object: " << line;
    const std::string message = parsed.value("message", "");
    if (message.rfind("scheduler: step ", 0) != 0) continue;
    EXPECT_EQ(parsed["level"], "debug");
    admissions += message.find("; admit request ") != std::string::npos;
    reused += message.find(", 0 cached)") == std::string::npos && message.find(" cached)") != std::string::npos;
  }
  if (verbose) {
    EXPECT_GT(admissions, 0) << server.log();
    EXPECT_GT(reused, 0) << "later choices are admitted with cached prompt tokens: " << server.log();
  } else {
    EXPECT_EQ(admissions, 0) << "scheduler lines only with --verbose";
  }
}

TEST(ChatControlsClient, ChoicesAreSeedPlusIndexAndShareThePrompt) { run_part("choices", {"--verbose"}); }

TEST(ChatControlsClient, FinalAssistantMessageIsContinued) { run_part("prefill"); }

TEST(ChatControlsClient, EchoBestOfAndSuffix) { run_part("echo"); }

TEST(ChatControlsClient, TemplateKwargsFromFlagAndRequest) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tandem-kwargs-" + std::to_string(::getpid()) + ".jinja")).string();
  {
    std::ofstream out(path);
    out << "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
           "{%- if add_generation_prompt %}<|im_start|>assistant\n"
           "{%- if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}";
  }
  run_part("kwargs", {"--chat-template", path, "--chat-template-kwargs", R"({"enable_thinking": false})"});
  std::filesystem::remove(path);
}

TEST(ChatControlsClient, BadTemplateKwargsFlagIsAOneLineStartUpError) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  ServerProcess server;
  ASSERT_TRUE(server.spawn({"serve", "-m", shared_path(kAidreamsGguf), "--port", "0", "--chat-template-kwargs",
                            "{enable_thinking: false}"}));
  EXPECT_EQ(server.wait_exit(30.0), 1);
  const std::string log = server.log();
  EXPECT_NE(log.find("tandem: error: --chat-template-kwargs is not valid JSON"), std::string::npos) << log;
  EXPECT_EQ(log.find("listening"), std::string::npos) << "refused before binding: " << log;
}

}  // namespace
}  // namespace tandem::testing
