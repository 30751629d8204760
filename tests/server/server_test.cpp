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
#include <string>
#include <vector>

#include "npm_packages.h"
#include "server_process.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

#define REQUIRE_MODEL() TANDEM_REQUIRE_SHARED(kAidreamsGguf)

// OpenAI's error object {"message", "type", "param", "code"} (param and code may be null), or
// null when the response is not one.
json expect_error(const httplib::Result& res, int status, const std::string& what) {
  EXPECT_TRUE(res) << what << ": no response";
  if (!res) return nullptr;
  EXPECT_EQ(res->status, status) << what << ": " << res->body;
  const json body = json::parse(res->body, nullptr, false);
  EXPECT_TRUE(body.is_object() && body.contains("error")) << what << ": " << res->body;
  if (!body.is_object() || !body.contains("error")) return nullptr;
  const json& error = body["error"];
  EXPECT_TRUE(error["message"].is_string()) << what;
  EXPECT_TRUE(error["type"].is_string()) << what;
  EXPECT_TRUE(error.contains("param") && error.contains("code")) << what << ": " << res->body;
  return error;
}

// A 400 about the request field `param`, with OpenAI's `code` for what was wrong with it.
void expect_field_error(const httplib::Result& res, const std::string& param, const std::string& code,
                        const std::string& what) {
  const json error = expect_error(res, 400, what);
  if (error.is_null()) return;
  EXPECT_EQ(error["param"], param) << what << ": " << error;
  EXPECT_EQ(error["code"], code) << what << ": " << error;
}

httplib::Result post(httplib::Client& client, const std::string& path, const std::string& body) {
  return client.Post(path.c_str(), body, "application/json");
}

TEST(Server, RejectsBadRequestsWithOpenAIErrors) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "2"})) << server.log();
  httplib::Client client = server.client();
  // Not about a field: param and code are null.
  const json malformed = expect_error(post(client, "/v1/completions", "{not json"), 400, "malformed JSON");
  EXPECT_TRUE(malformed["param"].is_null() && malformed["code"].is_null()) << malformed;
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

  // Each 400 about a field names it (param) and says what was wrong with it (code), as OpenAI's do.
  const auto completions = [&](const std::string& body) { return post(client, "/v1/completions", body); };
  const auto chat = [&](const std::string& body) { return post(client, "/v1/chat/completions", body); };
  expect_field_error(completions(R"({"prompt": "hi", "temperature": "hot"})"), "temperature", "invalid_type", "hot");
  expect_field_error(completions(R"({"prompt": "hi", "temperature": 3})"), "temperature", "invalid_value", "3");
  expect_field_error(completions(R"({"prompt": "hi", "max_tokens": 0})"), "max_tokens", "invalid_value", "max 0");
  expect_field_error(completions(R"({"prompt": "hi", "n": 3})"), "n", "invalid_value", "n over --parallel");
  expect_field_error(completions(R"({"max_tokens": 3})"), "prompt", "missing_required_parameter", "no prompt");
  expect_field_error(completions(R"({"prompt": 5})"), "prompt", "invalid_type", "prompt 5");
  expect_field_error(completions(json{{"prompt", long_prompt}}.dump()), "prompt", "context_length_exceeded", "long");
  expect_field_error(completions(R"({"prompt": "hi", "functions": []})"), "functions", "unsupported_parameter",
                     "functions");
  expect_field_error(chat(R"({"messages": []})"), "messages", "invalid_value", "no messages");
  expect_field_error(chat(R"({"messages": [{"role": "wizard", "content": "x"}]})"), "messages[0].role", "invalid_value",
                     "wizard");
  expect_field_error(chat(R"({"messages": [{"role": "user", "content": "x"}], "response_format": "json"})"),
                     "response_format", "invalid_type", "response_format string");
  const json unknown_model = expect_error(completions(R"({"prompt": "hi", "model": "gpt-9"})"), 404, "gpt-9");
  EXPECT_EQ(unknown_model["code"], "model_not_found") << unknown_model;
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

// The JSON chunks of an SSE body ("data: {...}"), without the final [DONE].
std::vector<json> sse_chunks(const std::string& body) {
  std::vector<json> chunks;
  for (size_t at = 0; (at = body.find("data: ", at)) != std::string::npos;) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
    at = end == std::string::npos ? body.size() : end;
    if (data != "[DONE]") chunks.push_back(json::parse(data, nullptr, false));
  }
  return chunks;
}

// A completion's texts by choice index and its usage, from a whole body or a stream's chunks.
struct Choices {
  std::vector<std::string> texts;
  json usage;
};
Choices choices_of(httplib::Client& client, json request) {
  const auto res = post(client, "/v1/completions", request.dump());
  EXPECT_TRUE(res && res->status == 200) << request << ": " << (res ? res->body : "no response");
  if (!res || res->status != 200) return {};
  Choices out;
  const auto add = [&](const json& choice) {
    const auto index = choice["index"].get<size_t>();
    if (out.texts.size() <= index) out.texts.resize(index + 1);
    out.texts[index] += choice["text"].get<std::string>();
  };
  if (!request.value("stream", false)) {
    const json body = json::parse(res->body);
    for (size_t i = 0; i < body["choices"].size(); ++i) {
      EXPECT_EQ(body["choices"][i]["index"], i) << body;  // in index order
      add(body["choices"][i]);
    }
    out.usage = body["usage"];
    return out;
  }
  for (const json& chunk : sse_chunks(res->body)) {
    EXPECT_FALSE(chunk.is_discarded()) << res->body;
    if (chunk.contains("usage") && !chunk["usage"].is_null()) out.usage = chunk["usage"];
    for (const json& choice : chunk["choices"]) add(choice);
  }
  return out;
}

TEST(Server, SeveralPromptsAreOneChoiceEachPromptMajorAndBatched) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "4", "--max-queue", "4"})) << server.log();
  httplib::Client client = server.client();
  const std::vector<std::string> prompts = {"The dream", "Once upon a time", "A little bird"};
  const json greedy = {{"max_tokens", 8}, {"temperature", 0}};
  const auto with = [](json request, const json& more) {
    request.update(more);
    return request;
  };

  // Each prompt alone: the texts and token counts several prompts must reproduce.
  std::vector<Choices> singles;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (const std::string& prompt : prompts) {
    singles.push_back(choices_of(client, with(greedy, {{"prompt", prompt}})));
    ASSERT_EQ(singles.back().texts.size(), 1u);
    prompt_tokens += singles.back().usage["prompt_tokens"].get<int64_t>();
    completion_tokens += singles.back().usage["completion_tokens"].get<int64_t>();
  }
  // One choice per prompt, in the prompts' order, whole or streamed; usage sums the prompts.
  for (const bool stream : {false, true}) {
    const Choices several =
        choices_of(client, with(greedy, {{"prompt", prompts}, {"stream", stream}, {"stream_options", nullptr}}));
    const Choices streamed_usage = choices_of(
        client, with(greedy, {{"prompt", prompts}, {"stream", stream}, {"stream_options", {{"include_usage", true}}}}));
    ASSERT_EQ(several.texts.size(), prompts.size()) << "stream " << stream;
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(several.texts[i], singles[i].texts[0]) << i;
    const json& usage = stream ? streamed_usage.usage : several.usage;
    EXPECT_EQ(usage["prompt_tokens"], prompt_tokens) << "stream " << stream;
    EXPECT_EQ(usage["completion_tokens"], completion_tokens) << "stream " << stream;
    EXPECT_EQ(usage["total_tokens"], prompt_tokens + completion_tokens) << "stream " << stream;
  }
  // A one-element array is the plain string.
  const Choices one = choices_of(client, with(greedy, {{"prompt", json::array({prompts[1]})}}));
  EXPECT_EQ(one.texts, singles[1].texts);
  EXPECT_EQ(one.usage, singles[1].usage);

  // Token-id arrays: the prompts' ids (with BOS, as the text is encoded) give the same texts.
  json id_prompts = json::array();
  for (const std::string& prompt : prompts) {
    const auto ids = post(client, "/tokenize", json{{"content", prompt}, {"add_special", true}}.dump());
    ASSERT_TRUE(ids && ids->status == 200);
    id_prompts.push_back(json::parse(ids->body)["tokens"]);
  }
  const Choices by_ids = choices_of(client, with(greedy, {{"prompt", id_prompts}}));
  ASSERT_EQ(by_ids.texts.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(by_ids.texts[i], singles[i].texts[0]) << i;
  EXPECT_EQ(by_ids.usage["prompt_tokens"], prompt_tokens);

  // n = 2: prompt-major, prompt p's choice i at index p * 2 + i, sampled with seed + i: each is
  // the request with that prompt alone and that seed.
  const json sampled = {{"max_tokens", 8}, {"temperature", 1.0}, {"seed", 4321}};
  const std::vector<std::string> two(prompts.begin(), prompts.begin() + 2);
  for (const bool stream : {false, true}) {
    const Choices four = choices_of(
        client,
        with(sampled, {{"prompt", two}, {"n", 2}, {"stream", stream}, {"stream_options", {{"include_usage", true}}}}));
    ASSERT_EQ(four.texts.size(), 4u) << "stream " << stream;
    int64_t prompts_tokens = 0, choices_tokens = 0;
    for (size_t p = 0; p < two.size(); ++p) {
      for (int i = 0; i < 2; ++i) {
        const Choices alone = choices_of(client, with(sampled, {{"prompt", two[p]}, {"seed", 4321 + i}}));
        ASSERT_EQ(alone.texts.size(), 1u);
        EXPECT_EQ(four.texts[p * 2 + static_cast<size_t>(i)], alone.texts[0]) << "prompt " << p << " choice " << i;
        if (i == 0) prompts_tokens += alone.usage["prompt_tokens"].get<int64_t>();
        choices_tokens += alone.usage["completion_tokens"].get<int64_t>();
      }
    }
    EXPECT_NE(four.texts[0], four.texts[1]) << "two seeds gave one text";
    EXPECT_EQ(four.usage["prompt_tokens"], prompts_tokens) << "each prompt once, stream " << stream;
    EXPECT_EQ(four.usage["completion_tokens"], choices_tokens) << "stream " << stream;
  }

  // Limits, checked before any work: kMaxPrompts (128) prompts, and prompts x n within what the
  // server admits (--parallel 4 + --max-queue 4 = 8).
  const json many = with(greedy, {{"prompt", std::vector<std::string>(129, "x")}});
  const json too_many = expect_error(post(client, "/v1/completions", many.dump()), 400, "129 prompts");
  EXPECT_EQ(too_many["param"], "prompt");
  EXPECT_NE(too_many["message"].get<std::string>().find("at most 128"), std::string::npos) << too_many;
  const json over = expect_error(post(client, "/v1/completions", with(greedy, {{"prompt", prompts}, {"n", 3}}).dump()),
                                 400, "9 sequences");
  EXPECT_NE(over["message"].get<std::string>().find("--max-queue 4"), std::string::npos) << over;
  // One bad prompt refuses the request, naming which; a mix of strings and ids is a type error.
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "dream ";
  expect_field_error(
      post(client, "/v1/completions", with(greedy, {{"prompt", json::array({"The dream", long_prompt})}}).dump()),
      "prompt[1]", "context_length_exceeded", "second prompt too long");
  expect_field_error(post(client, "/v1/completions", R"({"prompt": [[1, 2], []]})"), "prompt[1]", "invalid_value",
                     "empty ids");
  expect_field_error(post(client, "/v1/completions", R"({"prompt": ["a", [1, 2]]})"), "prompt[1]", "invalid_type",
                     "mixed");
  expect_field_error(post(client, "/v1/completions", R"({"prompt": []})"), "prompt", "invalid_value", "none");
  // The server still answers as before.
  EXPECT_EQ(choices_of(client, with(greedy, {{"prompt", prompts[0]}})).texts, singles[0].texts);
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
