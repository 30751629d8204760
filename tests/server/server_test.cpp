// The real `tandem serve` on 127.0.0.1: error cases over plain HTTP (400s, 401, 413, n = 2,
// malformed JSON), greedy text equal to `tandem run`, clean SIGTERM, a conversation with tool
// calls and results — and the Node.js suite (official `openai` package: streaming, chat, stop
// strings, usage, disconnects, concurrency, a load run with no leaked KV blocks), skipped with
// a message when npm cannot install it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "npm_packages.h"
#include "server_process.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

#define REQUIRE_MODEL() TANDEM_REQUIRE_SHARED(kAidreamsGguf)

void expect_error(const httplib::Result& res, int status, const std::string& what) {
  ASSERT_TRUE(res) << what << ": no response";
  EXPECT_EQ(res->status, status) << what << ": " << res->body;
  const json body = json::parse(res->body, nullptr, false);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << what << ": " << res->body;
  EXPECT_TRUE(body["error"]["message"].is_string()) << what;
  EXPECT_TRUE(body["error"]["type"].is_string()) << what;
}

httplib::Result post(httplib::Client& client, const std::string& path, const std::string& body) {
  return client.Post(path.c_str(), body, "application/json");
}

TEST(Server, RejectsBadRequestsWithOpenAIErrors) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "2"})) << server.log();
  httplib::Client client = server.client();
  expect_error(post(client, "/v1/completions", "{not json"), 400, "malformed JSON");
  expect_error(post(client, "/v1/completions", "[1,2]"), 400, "not an object");
  expect_error(post(client, "/v1/completions", R"({"prompt": 5})"), 400, "prompt of the wrong type");
  expect_error(post(client, "/v1/completions", R"({"prompt": "hi", "max_tokens": "many"})"), 400, "max_tokens string");
  expect_error(post(client, "/v1/completions", R"({"prompt": "hi", "max_tokens": 0})"), 400, "max_tokens < 1");
  expect_error(post(client, "/v1/completions", R"({"prompt": "hi", "temperature": "hot"})"), 400, "temperature string");
  expect_error(post(client, "/v1/completions", R"({"prompt": "hi", "n": 0})"), 400, "n = 0");
  expect_error(post(client, "/v1/completions", R"({"prompt": "hi", "n": 1000})"), 400, "n = 1000");
  expect_error(post(client, "/v1/completions", R"({"prompt": "hi", "n": 3})"), 400, "n = 3 over --parallel 2");
  expect_error(post(client, "/v1/completions", R"({"prompt": "hi", "model": "gpt-9"})"), 404, "unknown model");
  expect_error(post(client, "/v1/completions", R"({"prompt": "hi", "stop": [1]})"), 400, "stop of the wrong type");
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "dream ";
  expect_error(post(client, "/v1/completions", json{{"prompt", long_prompt}}.dump()), 400, "prompt over the context");
  expect_error(post(client, "/v1/chat/completions", R"({"messages": []})"), 400, "no messages");
  expect_error(post(client, "/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "x"}]})"), 400,
               "unknown role");
  expect_error(post(client, "/v1/completions", std::string(9 << 20, ' ')), 413, "body over the limit");
  expect_error(client.Get("/v1/nothing"), 404, "unknown path");
  expect_error(client.Get("/v1/completions"), 405, "GET on a POST endpoint");
  const auto head = client.Head("/health");  // headers only, as HTTP requires for HEAD
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty()) << head->body;

  // The server is still fine after all that.
  const auto ok = post(client, "/v1/completions", R"({"prompt": "The dream", "max_tokens": 4})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  const auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "model.gguf");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(Server, ApiKeyIsRequiredOnV1) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--api-key", "sekret"})) << server.log();
  httplib::Client client = server.client();
  expect_error(post(client, "/v1/completions", R"({"prompt": "hi"})"), 401, "no key");
  httplib::Headers wrong = {{"Authorization", "Bearer nope"}};
  expect_error(client.Post("/v1/completions", wrong, R"({"prompt": "hi"})", "application/json"), 401, "wrong key");
  httplib::Headers right = {{"Authorization", "Bearer sekret"}};
  const auto ok = client.Post("/v1/completions", right, R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(client.Get("/health")->status, 200);  // health and metrics stay open
  EXPECT_EQ(server.stop(), 0);
}

TEST(Server, GreedyCompletionEqualsTandemRun) {
  REQUIRE_MODEL();
  const std::string prompt = "Echoes of light";
  const std::string out_file =
      (std::filesystem::temp_directory_path() / ("tandem-run-" + std::to_string(::getpid()) + ".txt")).string();
  const std::string command = std::string(TANDEM_BINARY) + " run -m " + shared_path("models/aidreams260K/model.gguf") +
                              " -n 60 --temp 0 -t 2 -p '" + prompt + "' > " + out_file + " 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0);
  const std::string run_text = read_file(out_file);
  std::filesystem::remove(out_file);

  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  httplib::Client client = server.client();
  const auto res =
      post(client, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 60}, {"temperature", 0}}.dump());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  // `tandem run` prints the prompt, the text, and ends the line when the text did not.
  std::string expected = prompt + body["choices"][0]["text"].get<std::string>();
  if (!expected.ends_with('\n')) expected += '\n';
  EXPECT_EQ(expected, run_text);
  EXPECT_EQ(body["usage"]["completion_tokens"], 60);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(server.stop(), 0);
}

TEST(Server, SpeculativeRequestsMatchPlainOnesAndAreCounted) {
  // Prompt lookup on by flag; one request turns it off, the others keep it: the same greedy
  // text either way, the counts in usage and in /metrics.
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--spec", "ngram", "--draft-max", "4", "--spec-ngram-min", "1"})) << server.log();
  httplib::Client client = server.client();
  const json request = {{"prompt", "The dream"}, {"max_tokens", 120}, {"temperature", 0}};
  json plain_request = request;
  plain_request["speculative"] = {{"type", "none"}};
  const auto plain = post(client, "/v1/completions", plain_request.dump());
  const auto spec = post(client, "/v1/completions", request.dump());
  json stream_request = request;
  stream_request["speculative"] = {{"type", "ngram"}, {"max", 2}};
  stream_request["stream"] = true;
  stream_request["stream_options"] = {{"include_usage", true}};
  const auto streamed = post(client, "/v1/completions", stream_request.dump());
  ASSERT_TRUE(plain && spec && streamed);
  ASSERT_EQ(plain->status, 200) << plain->body;
  ASSERT_EQ(spec->status, 200) << spec->body;
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  const json plain_body = json::parse(plain->body), spec_body = json::parse(spec->body);
  EXPECT_EQ(spec_body["choices"][0]["text"], plain_body["choices"][0]["text"]);
  EXPECT_FALSE(plain_body["usage"].contains("speculative"));
  const json& counts = spec_body["usage"]["speculative"];
  ASSERT_TRUE(counts.is_object()) << spec->body;
  EXPECT_GT(counts["accepted"].get<int64_t>(), 0);
  EXPECT_LE(counts["accepted"].get<int64_t>(), counts["drafted"].get<int64_t>());
  EXPECT_NE(streamed->body.find("\"speculative\":{\"accepted\""), std::string::npos) << streamed->body;

  const auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tandem_spec_drafted_tokens_total"), std::string::npos);
  EXPECT_EQ(metrics->body.find("tandem_spec_accepted_tokens_total 0\n"), std::string::npos) << metrics->body;
  expect_error(post(client, "/v1/completions", R"({"prompt":"hi","speculative":{"type":"draft"}})"), 400,
               "draft without a draft model");
  EXPECT_EQ(server.stop(), 0);
}

TEST(Server, DraftModelRequestsMatchPlainOnes) {
  // --draft-model (here the model itself: every proposal kept); requests choose it per request.
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--draft-model", shared_path(kAidreamsGguf), "--parallel", "2"})) << server.log();
  httplib::Client client = server.client();
  const json request = {{"prompt", "I see"}, {"max_tokens", 80}, {"temperature", 0}};
  json draft_request = request;
  draft_request["speculative"] = {{"type", "draft"}, {"max", 3}};
  const auto plain = post(client, "/v1/completions", request.dump());
  const auto drafted = post(client, "/v1/completions", draft_request.dump());
  ASSERT_TRUE(plain && drafted);
  ASSERT_EQ(plain->status, 200) << plain->body;
  ASSERT_EQ(drafted->status, 200) << drafted->body;
  const json plain_body = json::parse(plain->body), drafted_body = json::parse(drafted->body);
  EXPECT_EQ(drafted_body["choices"][0]["text"], plain_body["choices"][0]["text"]);
  const json& counts = drafted_body["usage"]["speculative"];
  ASSERT_TRUE(counts.is_object()) << drafted->body;
  EXPECT_GT(counts["drafted"].get<int64_t>(), 0);
  EXPECT_EQ(counts["accepted"], counts["drafted"]);
  EXPECT_EQ(server.stop(), 0);
}

TEST(Server, SigtermWithStreamsInFlightExitsCleanly) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--drain-seconds", "0.2"})) << server.log();
  std::thread client_thread([port = server.port()] {
    httplib::Client client("127.0.0.1", port);
    client.Post("/v1/completions", R"({"prompt": "The dream", "max_tokens": 100000, "stream": true})",
                "application/json");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(server.stop(), 0) << server.log();
  client_thread.join();
  EXPECT_NE(server.log().find("stopped"), std::string::npos) << server.log();
}

// Issue 11: an agent's conversation — an assistant turn that only calls a tool (content
// null) and the tool's result — is accepted and rendered into the prompt, and markers in
// the arguments or the result stay text. The built-in Llama 2 format, the shortest, keeps
// it within the model's 128-token context; tools are described in the system prompt, which
// that context cannot hold, so the 400 shows how far the prompt grew.
TEST(Server, ChatWithToolCallsAndResultsIsRendered) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--chat-template", "llama2"})) << server.log();
  httplib::Client client = server.client();
  const auto prompt_tokens = [&](const json& messages, const json& extra = json::object()) -> int64_t {
    json request = {{"messages", messages}, {"max_tokens", 1}};
    request.update(extra);
    const auto res = post(client, "/v1/chat/completions", request.dump());
    if (!res || res->status != 200) {
      ADD_FAILURE() << request.dump() << ": " << (res ? res->body : "no response");
      return -1;
    }
    return json::parse(res->body)["usage"]["prompt_tokens"].get<int64_t>();
  };
  const json user = {{"role", "user"}, {"content", "Hi"}};
  const auto call = [](const std::string& arguments) {
    return json{{"role", "assistant"},
                {"content", nullptr},
                {"tool_calls",
                 {{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", arguments}}}}}}};
  };
  const auto result = [](const std::string& content) {
    return json{{"role", "tool"}, {"tool_call_id", "c1"}, {"content", content}};
  };
  const int64_t plain = prompt_tokens(json::array({user}));  // one element: not a copy of it
  const int64_t with_call = prompt_tokens({user, call("{}")});
  const int64_t with_result = prompt_tokens({user, call("{}"), result("ok")}, {{"tool_choice", "auto"}});
  EXPECT_GT(with_call, plain + 10);        // <tool_call>{"name": "f", "arguments": {}}</tool_call>
  EXPECT_GT(with_result, with_call + 10);  // a user turn with <tool_response>ok</tool_response>

  // Three "</s>" as control tokens would add 3 tokens; as text, about 4 each.
  const std::string markers = "</s></s></s>";
  EXPECT_GT(prompt_tokens({user, call("{}"), result(markers)}) - prompt_tokens({user, call("{}"), result("")}), 6);
  EXPECT_GT(prompt_tokens({user, call(R"({"q": ")" + markers + R"("})")}) - prompt_tokens({user, call(R"({"q": ""})")}),
            6);

  const json tools = {{{"type", "function"}, {"function", {{"name", "f"}, {"description", "Does f."}}}}};
  const auto described =
      post(client, "/v1/chat/completions", json{{"messages", json::array({user})}, {"tools", tools}}.dump());
  ASSERT_TRUE(described);
  EXPECT_EQ(described->status, 400) << described->body;
  long long described_tokens = 0;
  EXPECT_EQ(std::sscanf(json::parse(described->body)["error"]["message"].get<std::string>().c_str(),
                        "the prompt has %lld tokens", &described_tokens),
            1)
      << described->body;
  EXPECT_GT(described_tokens, plain + 100);

  // Malformed shapes are 400s naming the field.
  expect_error(post(client, "/v1/chat/completions",
                    json{{"messages", {user, call("{}"), {{"role", "tool"}, {"content", "ok"}}}}}.dump()),
               400, "a tool message without tool_call_id");
  expect_error(
      post(client, "/v1/chat/completions",
           R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "f", "arguments": {"q": 1}}}]}]})"),
      400, "arguments as an object");
  expect_error(
      post(client, "/v1/chat/completions",
           R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})"),
      400, "an image part");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// --- Node.js with the official openai package -----------------------------------------------

int run_node(const std::string& args) {
  const std::string script = (std::filesystem::path(__FILE__).parent_path() / "openai_client_test.mjs").string();
  const std::string command = "timeout 55 node '" + script + "' --openai '" + npm_cache_dir("npm") + "' " + args;
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

#define REQUIRE_OPENAI()                                                                     \
  do {                                                                                       \
    std::string why;                                                                         \
    if (!ensure_npm_packages("npm", {"openai@4"}, why)) GTEST_SKIP() << why << "; skipping"; \
  } while (0)

TEST(ServerOpenAIClient, CompletionsChatStopUsageKeyDisconnect) {
  REQUIRE_MODEL();
  REQUIRE_OPENAI();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "8", "--api-key", "test-key"})) << server.log();
  EXPECT_EQ(run_node("--url " + server.url() + " --api-key test-key --part basic"), 0) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

TEST(ServerOpenAIClient, ServedNamesTokenizeRoundTripsAndCorsPreflight) {
  REQUIRE_MODEL();
  REQUIRE_OPENAI();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--served-model-name", "gpt-4o-mini", "dreamer", "--allowed-origins",
                            "http://localhost:5173", "--api-key", "test-key"}))
      << server.log();
  EXPECT_EQ(run_node("--url " + server.url() + " --api-key test-key --part endpoints"), 0) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

TEST(ServerOpenAIClient, ConcurrentGreedyEqualsSequentialWithChunkingAndPreemption) {
  REQUIRE_MODEL();
  REQUIRE_OPENAI();
  ServerProcess server;
  // One context's worth of 16-token blocks for 8 sequences, 24-token steps: chunked prefill,
  // prefix hits and preemption all happen.
  // Bytes per token with an f32 cache: 2 x 4 layers x 80 floats per KV row (64, padded to whole
  // 64-byte lines plus one: KvCache::row_bytes) x 4.
  const int64_t pool_bytes = 8 * 16 * 2 * 4 * 80 * 4;
  ASSERT_TRUE(server.start(
      {"--parallel", "8", "--max-batch-tokens", "24", "--kv-type", "f32", "--kv-memory", std::to_string(pool_bytes)}))
      << server.log();
  EXPECT_EQ(run_node("--url " + server.url() + " --part concurrent --expect-preemption"), 0) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

TEST(ServerOpenAIClient, LoadRunLeavesNoBlockInUse) {
  REQUIRE_MODEL();
  REQUIRE_OPENAI();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "8", "--max-batch-tokens", "64"})) << server.log();
  EXPECT_EQ(run_node("--url " + server.url() + " --part load"), 0) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

// --trace: at shutdown, a Chrome trace with the engine's tracks and one per request (its
// queue wait, prefill chunk and decode steps).
TEST(Server, TraceAtShutdownHasATrackPerRequest) {
  REQUIRE_MODEL();
  const std::string trace_path =
      (std::filesystem::temp_directory_path() / ("tandem-server-trace-" + std::to_string(::getpid()) + ".json"))
          .string();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--trace", trace_path})) << server.log();
  httplib::Client client = server.client();
  for (int i = 0; i < 2; ++i) {
    const auto res = post(client, "/v1/completions", R"({"prompt": "The dream", "max_tokens": 4, "temperature": 0})");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
  }
  ASSERT_EQ(server.stop(), 0) << server.log();
  std::ifstream in(trace_path);
  const json trace = json::parse(in, nullptr, false);
  std::filesystem::remove(trace_path);
  ASSERT_TRUE(trace.is_object() && trace.contains("traceEvents")) << server.log();
  std::set<int> request_tracks;
  int queues = 0, decode_steps = 0;
  for (const json& event : trace["traceEvents"]) {
    if (event["pid"] != 2 || event["ph"] != "X") continue;
    request_tracks.insert(event["tid"].get<int>());
    queues += event["name"] == "queue";
    decode_steps += event["name"] == "decode step";
  }
  EXPECT_EQ(request_tracks.size(), 2u);
  EXPECT_EQ(queues, 2);
  EXPECT_GE(decode_steps, 2);  // at most 3 each: EOS may end one early
}

}  // namespace
}  // namespace tandem::testing
