// Hostile requests and start-ups against the real `tandem serve` on 127.0.0.1, over raw TCP
// (raw_http.h): JSON the parser cannot hold, control-token text in chat, keys on every path,
// token ids outside the vocabulary, and operator errors — an unloadable model, a taken port.
// Each TEST is one attack and asserts the fixed behaviour; every wait is bounded.
// Connection-level attacks: hostile_client_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "hostile_checks.h"

namespace tandem::testing::hostile {
namespace {

// Attack: JSON the parser accepts as text but cannot hold — a number beyond double (1e400) —
// and a chat content part whose "type" is a number. Fixed: 400 with an OpenAI error naming
// the value, not a 500 from an escaped exception.
TEST(HostileClient, UnrepresentableJsonIs400) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  const int port = server.port();
  const auto huge = post(port, "/v1/completions", R"({"prompt":"hi","x":1e400})");
  expect_error(huge, 400, "1e400");
  EXPECT_NE(error_message(huge).find("1e400"), std::string::npos) << describe(huge);
  expect_error(post(port, "/v1/chat/completions", R"({"messages":[{"role":"user","content":[{"type":5}]}]})"), 400,
               "a content part with a numeric type");
  expect_completion_served(port, "after the bad JSON");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Attack: a user message that spells a control token ("</s>"), which would end the turn if
// it were tokenized as the token itself. Fixed: user text is plain text. One "</s>" is 1
// token as control and ~4 as text, but the pieces around it shift by a token or two, so the
// message repeats it 8 times: as text it costs well over 2 tokens each beyond an empty message.
TEST(HostileClient, ControlTokenTextInChatIsPlainText) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  const auto prompt_tokens = [&](const std::string& content) -> int64_t {
    const json request = {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 1}};
    const auto res = post(server.port(), "/v1/chat/completions", request.dump());
    if (!res || res->status != 200) {
      ADD_FAILURE() << "chat with content '" << content << "': " << describe(res);
      return -1;
    }
    return parse(res->body)["usage"]["prompt_tokens"].get<int64_t>();
  };
  constexpr int kRepeats = 8;
  std::string spelled;
  for (int i = 0; i < kRepeats; ++i) spelled += "</s>";
  const int64_t template_only = prompt_tokens("");
  const int64_t with_text = prompt_tokens(spelled);
  ASSERT_GE(template_only, 0);
  ASSERT_GE(with_text, 0);
  EXPECT_GT(with_text - template_only, 2 * kRepeats)
      << kRepeats << " x '</s>' in a user message became " << with_text - template_only
      << " tokens: the control token, not text";
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Attack: reading /metrics and probing unknown paths without the key. Fixed: with --api-key
// every path but /health needs it (/metrics included; unknown paths are 401, not 404, so
// they reveal nothing); with --metrics-key too, /metrics takes that key instead.
TEST(HostileClient, KeyGuardsMetricsAndUnknownPaths) {
  REQUIRE_MODEL();
  {
    ServerProcess server;
    ASSERT_TRUE(server.start({"--api-key", "k"})) << server.log();
    const int port = server.port();
    expect_error(get(port, "/metrics"), 401, "/metrics without the key");
    const auto metrics = get(port, "/metrics", {"Authorization: Bearer k"});
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200) << metrics->body;
    expect_health(port, 2.0, "without a key");
    expect_error(get(port, "/anything-else"), 401, "an unknown path without the key");
    expect_error(get(port, "/v1/models"), 401, "/v1/models without the key");
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
  {
    ServerProcess server;
    ASSERT_TRUE(server.start({"--api-key", "k", "--metrics-key", "m"})) << server.log();
    const int port = server.port();
    expect_error(get(port, "/metrics"), 401, "/metrics without a key");
    expect_error(get(port, "/metrics", {"Authorization: Bearer k"}), 401,
                 "/metrics with the API key, not the metrics key");
    const auto metrics = get(port, "/metrics", {"Authorization: Bearer m"});
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200) << metrics->body;
    expect_health(port, 2.0, "without a key");
    expect_error(get(port, "/anything-else"), 401, "an unknown path without a key");
    const auto models = get(port, "/v1/models", {"Authorization: Bearer k"});
    ASSERT_TRUE(models);
    EXPECT_EQ(models->status, 200) << models->body;
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
}

// Attack: prompt token ids outside the vocabulary — negative, past 32 bits, past vocab 512.
// Fixed: 400 quoting the id exactly as sent (not a clamped or wrapped value, not a crash).
TEST(HostileClient, OutOfRangeTokenIdsAre400) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  for (const std::string id : {"-5", "1099511627776", "600"}) {
    const auto res = post(server.port(), "/v1/completions", R"({"prompt":[)" + id + R"(],"max_tokens":1})");
    expect_error(res, 400, "token id " + id);
    EXPECT_NE(error_message(res).find(id), std::string::npos) << "token id " << id << ": " << describe(res);
  }
  expect_completion_served(server.port(), "after the bad ids");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Attack (operator error, repeated): serve a model file that does not exist, and a text file
// (named .gguf, and named otherwise, which is read as a llama2.c checkpoint). Fixed: every
// time, the process exits non-zero within seconds with an error line on stderr that names the
// file — it never hangs with its listener half up.
TEST(HostileClient, UnloadableModelExitsNonZero) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tandem-hostile-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::vector<std::string> paths = {"/nonexistent.gguf", (dir / "not-a-model.gguf").string(),
                                          (dir / "notes.txt").string()};
  for (size_t i = 1; i < paths.size(); ++i) std::ofstream(paths[i]) << "this is a text file, not a model\n";

  // One try: exits non-zero within 10 s with an error line naming `path`; "" when it did.
  const auto try_serve = [](const std::string& path) -> std::string {
    ServerProcess server;
    if (!server.spawn({"serve", "-m", path, "--port", "0", "-t", "2"})) return "could not spawn";
    const std::optional<int> code = server.wait_exit(10.0);
    if (!code) {
      const std::string log = server.log();
      server.send_signal(SIGKILL);  // a hung start-up may not answer SIGTERM either
      server.wait_exit(2.0);
      return "still running 10 s after start: " + log;
    }
    if (*code == 0) return "exit code 0: " + server.log();
    std::istringstream lines(server.log());
    for (std::string line; std::getline(lines, line);)
      if (line.find(path) != std::string::npos && line.find("listening on") == std::string::npos &&
          lowercase(line).find("error") != std::string::npos)
        return "";
    return "exit code " + std::to_string(*code) + " but no error line names the file: " + server.log();
  };
  for (int attempt = 0; attempt < 8; ++attempt) {
    // All paths at once: a hang costs 10 s, not 10 s per path.
    std::vector<std::string> results(paths.size());
    std::vector<std::thread> tries;
    for (size_t i = 0; i < paths.size(); ++i) tries.emplace_back([&, i] { results[i] = try_serve(paths[i]); });
    for (std::thread& t : tries) t.join();
    bool failed = false;
    for (size_t i = 0; i < paths.size(); ++i) {
      EXPECT_EQ(results[i], "") << "try " << attempt << ", " << paths[i];
      failed = failed || !results[i].empty();
    }
    if (failed) break;  // one failing try says it; keep the test short
  }
  std::filesystem::remove_all(dir);
}

// Attack (operator error): a second server on the port the first one holds. Fixed: the second
// exits non-zero saying the port is in use (no port sharing that would split the clients);
// the first keeps serving its model.
TEST(HostileClient, SecondServerOnTakenPortExits) {
  REQUIRE_MODEL();
  ServerProcess first;
  ASSERT_TRUE(first.start({})) << first.log();
  ServerProcess second;
  ASSERT_TRUE(second.spawn({"serve", "-m", shared_path("models/aidreams260K/model.gguf"), "--port",
                            std::to_string(first.port()), "-t", "2"}));
  const std::optional<int> code = second.wait_exit(10.0);
  ASSERT_TRUE(code) << "a second server on port " << first.port() << " still runs: " << second.log();
  EXPECT_NE(*code, 0) << second.log();
  const std::string log = second.log();
  EXPECT_TRUE(log.find("in use") != std::string::npos || log.find("cannot bind") != std::string::npos) << log;

  const auto models = get(first.port(), "/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200) << models->body;
  const json body = parse(models->body);
  EXPECT_TRUE(body.is_object() && body["data"].is_array() && !body["data"].empty() &&
              body["data"][0].value("id", "") == "model.gguf")
      << models->body;
  EXPECT_EQ(first.stop(), 0) << first.log();
}

}  // namespace
}  // namespace tandem::testing::hostile
