// Grammar bombs (issue 33) against the real `tandem serve` on 127.0.0.1: nested bounded
// repetitions and grammars too ambiguous to follow are refused with a 400 that names the
// limit, or end that request alone with the reason in the body, the stream and the log —
// while a short request sent beside them keeps its latency. Latency is compared as a ratio
// against the same request on the same server without the bomb, never as an absolute time.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <thread>

#include "hostile_checks.h"

namespace tandem::testing::hostile {
namespace {

// A bomb and the short request beside it take milliseconds on a fixed server; on a stalled
// one the short request waited 14 s behind a 13-18 s mask (issue 33). 10x its latency without
// the bomb leaves room for a loaded CI machine (and the sanitizer builds), none for a stall.
constexpr double kMaxLatencyRatio = 10.0;

// 64 tokens (a few ms on aidreams260K): long enough that a scheduling hiccup of a few ms on a
// loaded machine is not a large ratio of it.
std::string short_completion() {
  return json{{"prompt", kPromptIds}, {"max_tokens", 64}, {"temperature", 0}, {"ignore_eos", true}}.dump();
}

// Seconds for one short completion; a failure counts as forever.
double short_latency(int port) {
  const auto start = Clock::now();
  const auto res = post(port, "/v1/completions", short_completion(), {}, 60.0);
  if (!res || res->status != 200) {
    ADD_FAILURE() << "the short completion failed: " << describe(res);
    return 1e9;
  }
  return seconds_since(start);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

struct Latency {
  double alone = 0, beside = 0;
  double ratio() const { return beside / alone; }
  std::string describe() const {
    return "the short request took " + std::to_string(beside) + " s beside the bomb, " + std::to_string(alone) +
           " s without it (medians of 3)";
  }
};

// Three rounds of: the short completion alone, then `body` sent to `path` and, 50 ms later
// (the bomb is in the server by then: parsing, or in the engine), the short completion beside
// it. Alone and beside alternate, so a change in the machine's load touches both. `check`
// judges each bomb's answer.
template <typename Check>
Latency latency_beside(int port, const std::string& path, const std::string& body, Check check) {
  short_latency(port);  // warm-up
  std::vector<double> alone, beside;
  for (int round = 0; round < 3; ++round) {
    alone.push_back(short_latency(port));
    auto bomb = std::async(std::launch::async, [&] { return post(port, path, body, {}, 120.0); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    beside.push_back(short_latency(port));
    check(bomb.get());
  }
  return {median(alone), median(beside)};
}

std::string completion_with(const json& fields) {
  json request = {{"prompt", kPromptIds}, {"max_tokens", 8}};
  request.update(fields);
  return request.dump();
}

// A 400 whose message has `needle` (the limit's name and value).
auto refused_naming(const std::string& what, const std::string& needle) {
  return [what, needle](const std::optional<RawResponse>& res) {
    expect_error(res, 400, what);
    EXPECT_NE(error_message(res).find(needle), std::string::npos) << what << ": " << describe(res);
  };
}

// Issue 33's reproductions: ((a{0,100}){0,100}){0,100} held the engine 13-18 s (a concurrent
// 2-token request waited 14 s) and answered 200 with empty text; four levels of {0,30} grew
// to 1.5 GB. Now a 400 naming the expanded repetition limit, before admission, and the short
// request beside them is as fast as alone.
TEST(GrammarBombs, NestedRepetitionsAre400AndOthersKeepTheirLatency) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  const int port = server.port();
  const std::vector<std::pair<std::string, std::string>> bombs = {
      {"three levels", R"(root ::= (("a"{0,100}){0,100}){0,100})"},
      {"four levels", R"(root ::= ((("a"{0,30}){0,30}){0,30}){0,30})"},
      {"three levels through named rules", "a ::= \"a\"{0,100}\nb ::= a{0,100}\nroot ::= b{0,100}\n"}};
  for (const auto& [name, grammar] : bombs) {
    const Latency latency = latency_beside(port, "/v1/completions", completion_with({{"grammar", grammar}}),
                                           refused_naming(name, "the expanded repetition limit is 262144"));
    EXPECT_LT(latency.ratio(), kMaxLatencyRatio) << name << ": " << latency.describe();
  }
  expect_health(port, 5.0, "after the bombs");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Grammars too ambiguous to follow: 100k enum values, 10k anyOf options, 100k guided_choice
// strings came back 200 + finish_reason "error" with no reason anywhere. Now a 400 naming the
// limit of alternatives (kMaxRuleAlternatives, 4096), and the short request keeps its latency.
TEST(GrammarBombs, AmbiguousGrammarsAre400AndOthersKeepTheirLatency) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  const int port = server.port();
  json values = json::array(), options = json::array(), choices = json::array();
  for (int i = 0; i < 100000; ++i) values.push_back("v" + std::to_string(i));
  for (int i = 0; i < 10000; ++i) options.push_back({{"const", i}});
  for (int i = 0; i < 100000; ++i) choices.push_back("c" + std::to_string(i));
  const json enum_format = {{"type", "json_schema"}, {"json_schema", {{"name", "e"}, {"schema", {{"enum", values}}}}}};
  const std::vector<std::pair<std::string, json>> bombs = {
      {"100k enum values", {{"response_format", enum_format}}},
      {"10k anyOf options", {{"guided_json", {{"anyOf", options}}}}},
      {"100k guided_choice strings", {{"guided_choice", choices}}}};
  for (const auto& [name, fields] : bombs) {
    const Latency latency =
        latency_beside(port, "/v1/completions", completion_with(fields), refused_naming(name, "(the limit is 4096)"));
    EXPECT_LT(latency.ratio(), kMaxLatencyRatio) << name << ": " << latency.describe();
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A grammar within the compile limits whose matching is not: one "a" of ("a"?){0,2000} is any
// of 2000 places, about two million stack merges for the first mask. That request ends at its
// first step with finish_reason "error" and the reason — in the error body (not an empty 200),
// in the stream's error event and in the server's log line — and the short request beside it
// keeps its latency.
TEST(GrammarBombs, PastTheMatchingBudgetEndsThatRequestWithItsReason) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  const int port = server.port();
  const std::string reason = "grammar: matching one token needed more than";
  const json fields = {{"grammar", R"(root ::= ("a"?){0,2000} "b")"}};
  json whole_error;  // the error object of the request not streamed
  const Latency latency =
      latency_beside(port, "/v1/completions", completion_with(fields), [&](const std::optional<RawResponse>& res) {
        ASSERT_TRUE(res) << "no response";
        // The request's own doing, which a retry would repeat: 400, not 503 + Retry-After.
        EXPECT_EQ(res->status, 400) << res->body;
        whole_error = parse(res->body).value("error", json());
        EXPECT_NE(error_message(res).find(reason), std::string::npos) << describe(res);
      });
  EXPECT_LT(latency.ratio(), kMaxLatencyRatio) << latency.describe();

  json streamed = json::parse(completion_with(fields));
  streamed["stream"] = true;
  const auto stream = post(port, "/v1/completions", streamed.dump());
  ASSERT_TRUE(stream && stream->status == 200) << describe(stream);
  expect_complete_stream(*stream, "the streamed bomb");
  bool said_why = false, finished_with_error = false;
  for (const std::string& event : sse_data(stream->body)) {
    const json chunk = parse(event);
    if (!chunk.is_object()) continue;
    if (chunk.contains("error")) {
      said_why |= chunk["error"].value("message", "").find(reason) != std::string::npos;
      // The same object as the error body: OpenAI's clients read param and code from both.
      EXPECT_EQ(chunk["error"]["type"], "invalid_request_error") << event;
      ASSERT_TRUE(chunk["error"].contains("param") && chunk["error"].contains("code")) << event;
      EXPECT_EQ(chunk["error"]["param"], whole_error["param"]) << event << " vs " << whole_error;
      EXPECT_EQ(chunk["error"]["code"], whole_error["code"]) << event << " vs " << whole_error;
    }
    if (chunk.contains("choices"))
      for (const json& choice : chunk["choices"])
        finished_with_error |= choice.value("finish_reason", json()) == "error";
  }
  EXPECT_TRUE(said_why) << stream->body;
  EXPECT_TRUE(finished_with_error) << stream->body;
  expect_completion_served(port, "after the bombs");
  EXPECT_EQ(server.stop(), 0) << server.log();
  const std::string log = server.log();
  EXPECT_NE(log.find("finish=error error=\"" + reason), std::string::npos) << log;
}

// Grammars within every limit whose masks are slow (issue 33: "the mask computation must not
// hold the engine thread"): one "a" of ("a"?){0,300} can be any of 300 places, so a request's
// first mask takes ~4 ms here and each later one (a new state every token) 0.1-0.2 ms, where
// a step of the served model takes tens of microseconds. Six such requests at once, and the
// short request 10 ms later: before, every engine step waited for their masks on the engine
// thread (25 ms for the first six, ~1 ms a step after), so the short request took one such
// wait per token; now the masks are made off the engine thread and only the grammar requests
// wait for them. Each still answers 200 with 64 a's.
TEST(GrammarBombs, SlowMasksDoNotSlowTheOtherRequests) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "8"})) << server.log();
  const int port = server.port();
  const std::string bomb = completion_with(
      {{"grammar", R"(root ::= ("a"?){0,300} "a"*)"}, {"max_tokens", 64}, {"ignore_eos", true}, {"temperature", 0}});
  short_latency(port);  // warm-up
  std::vector<double> alone, beside;
  for (int round = 0; round < 3; ++round) {
    alone.push_back(short_latency(port));
    std::vector<std::future<std::optional<RawResponse>>> bombs;
    for (int i = 0; i < 6; ++i)
      bombs.push_back(std::async(std::launch::async, [&] { return post(port, "/v1/completions", bomb, {}, 120.0); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    beside.push_back(short_latency(port));
    for (auto& answer : bombs) {
      const std::optional<RawResponse> res = answer.get();
      ASSERT_TRUE(res && res->status == 200) << describe(res);
      const json body = parse(res->body);
      ASSERT_TRUE(body.is_object() && body.contains("choices")) << res->body;
      EXPECT_EQ(body["choices"][0].value("text", ""), std::string(64, 'a')) << res->body;
      EXPECT_EQ(body["choices"][0].value("finish_reason", ""), "length") << res->body;
    }
  }
  const Latency latency{median(alone), median(beside)};
  EXPECT_LT(latency.ratio(), kMaxLatencyRatio) << latency.describe();
  // /metrics counts the masks made off the engine thread: at least one a grammar request.
  const std::optional<RawResponse> metrics = get(port, "/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200) << describe(metrics);
  const std::string series = "tandem_grammar_masks_off_thread_total ";
  const size_t at = metrics->body.find("\n" + series);
  ASSERT_NE(at, std::string::npos) << metrics->body;
  EXPECT_GE(std::stod(metrics->body.substr(at + 1 + series.size())), 18.0) << metrics->body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A client that sends the bomb and leaves: nothing of it may keep the engine. Within a few
// seconds the engine is idle (before, it stayed inside the first mask for 13-18 s, where no
// cancellation is seen) and a short request is as fast as alone.
TEST(GrammarBombs, ClientThatLeavesLeavesNoGrammarWorkBehind) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  const int port = server.port();
  short_latency(port);  // warm-up
  std::vector<double> times;
  for (int i = 0; i < 3; ++i) times.push_back(short_latency(port));
  const double alone = median(times);
  for (const std::string grammar : {R"(root ::= (("a"{0,100}){0,100}){0,100})", R"(root ::= ("a"?){0,2000} "b")"}) {
    RawConnection client;
    ASSERT_TRUE(client.connect(port)) << client.error();
    json request = json::parse(completion_with({{"grammar", grammar}, {"max_tokens", 64}}));
    request["stream"] = true;
    ASSERT_TRUE(client.send(http_request("POST", "/v1/completions", request.dump())));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    client.close();
    std::string page;
    const auto idle = [&] {
      page = metrics_page(port);
      return metric(page, "tandem_requests_running") == 0.0 && metric(page, "tandem_requests_waiting") == 0.0;
    };
    for (const auto start = Clock::now(); seconds_since(start) < 3.0 && !idle();)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(idle()) << grammar << ":\n"
                        << metric_lines(page, {"tandem_requests_running", "tandem_requests_waiting"});
    const double after = short_latency(port);
    EXPECT_LT(after / alone, kMaxLatencyRatio) << grammar << ": the short request took " << after
                                               << " s after the bomb's client left, " << alone << " s alone";
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace tandem::testing::hostile
