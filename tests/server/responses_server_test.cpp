// /v1/responses on the real `tandem serve` over 127.0.0.1, with a random-weight model of the
// Llama 2 vocabulary (its text is noise: the checks are on the interface): the response
// object, the stream's events in order with their sequence numbers, previous_response_id and
// store: false, GET and DELETE /v1/responses/{id}, the bound on stored responses (--max-stored-responses), forced tool
// calls and their outputs sent back, json_schema text format, and 400s that name the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "generated_tiny_model.h"
#include "server_process.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

const char* const kLlamaSpmVocab = "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf";

const std::string& random_model_path() {
  static const GeneratedTinyModel model("tandem-responses", shared_path(kLlamaSpmVocab));
  return model.path();
}

#define START_SERVER(server, ...)                                                      \
  TANDEM_REQUIRE_SHARED(kLlamaSpmVocab);                                               \
  ASSERT_FALSE(random_model_path().empty()) << "gen-model failed";                     \
  ServerProcess server;                                                                \
  ASSERT_TRUE(server.start({__VA_ARGS__}, 60.0, random_model_path())) << server.log(); \
  httplib::Client client = server.client();                                            \
  client.set_read_timeout(60, 0)

httplib::Result post(httplib::Client& client, const json& body) {
  return client.Post("/v1/responses", body.dump(), "application/json");
}

json ok_json(const httplib::Result& res, const std::string& what) {
  EXPECT_TRUE(res) << what << ": no response";
  if (!res) return {};
  EXPECT_EQ(res->status, 200) << what << ": " << res->body;
  return json::parse(res->body, nullptr, false);
}

void expect_error(const httplib::Result& res, int status, const std::string& reason) {
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, status) << res->body;
  const json body = json::parse(res->body, nullptr, false);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << res->body;
  EXPECT_NE(body["error"]["message"].get<std::string>().find(reason), std::string::npos) << res->body;
}

// The text of a response's message items.
std::string output_text(const json& response) {
  std::string text;
  for (const json& item : response["output"])
    if (item["type"] == "message")
      for (const json& part : item["content"]) text += part["text"].get<std::string>();
  return text;
}

// The events of an SSE body: (event line, data JSON).
std::vector<std::pair<std::string, json>> events_of(const std::string& sse) {
  std::vector<std::pair<std::string, json>> events;
  size_t pos = 0;
  while ((pos = sse.find("event: ", pos)) != std::string::npos) {
    const size_t eol = sse.find('\n', pos);
    const size_t end = sse.find("\n\n", eol);
    events.emplace_back(sse.substr(pos + 7, eol - pos - 7),
                        json::parse(sse.substr(eol + 7, end - eol - 7), nullptr, false));
    pos = end;
  }
  return events;
}

TEST(ResponsesServer, TextResponseWithUsageAndIncompleteAtMaxOutputTokens) {
  START_SERVER(server);
  const json response = ok_json(post(client, {{"model", std::filesystem::path(random_model_path()).filename()},
                                              {"input", "Tell me a story."},
                                              {"instructions", "Be brief."},
                                              {"max_output_tokens", 5},
                                              {"ignore_eos", true},
                                              {"temperature", 0}}),
                                "text");
  EXPECT_EQ(response["object"], "response");
  EXPECT_EQ(response["id"].get<std::string>().rfind("resp_", 0), 0u) << response;
  EXPECT_EQ(response["status"], "incomplete") << response;  // 5 tokens and no end: cut
  EXPECT_EQ(response["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(response["instructions"], "Be brief.");
  EXPECT_EQ(response["max_output_tokens"], 5);
  ASSERT_EQ(response["output"].size(), 1u) << response;
  EXPECT_EQ(response["output"][0]["type"], "message");
  EXPECT_EQ(response["output"][0]["role"], "assistant");
  EXPECT_EQ(response["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(response["usage"]["output_tokens"], 5);
  EXPECT_GT(response["usage"]["input_tokens"].get<int>(), 5);
  EXPECT_EQ(response["usage"]["total_tokens"],
            response["usage"]["input_tokens"].get<int>() + response["usage"]["output_tokens"].get<int>());
  // The same request as a chat completion: the same prompt, so the same count.
  const auto chat = client.Post(
      "/v1/chat/completions",
      json{{"messages",
            {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Tell me a story."}}}},
           {"max_tokens", 1}}
          .dump(),
      "application/json");
  EXPECT_EQ(ok_json(chat, "chat")["usage"]["prompt_tokens"], response["usage"]["input_tokens"]);
  EXPECT_EQ(server.stop(), 0);
}

TEST(ResponsesServer, StreamedEventsInOrderWithSequenceNumbers) {
  START_SERVER(server);
  const auto res =
      post(client, {{"input", "Tell me a story."}, {"max_output_tokens", 6}, {"ignore_eos", true}, {"stream", true}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  const auto events = events_of(res->body);
  ASSERT_GE(events.size(), 8u) << res->body;
  std::string deltas;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].second["type"], events[i].first);
    EXPECT_EQ(events[i].second["sequence_number"], i);
    if (events[i].first == "response.output_text.delta") deltas += events[i].second["delta"].get<std::string>();
  }
  EXPECT_EQ(events[0].first, "response.created");
  EXPECT_EQ(events[1].first, "response.in_progress");
  EXPECT_EQ(events[2].first, "response.output_item.added");
  EXPECT_EQ(events[3].first, "response.content_part.added");
  EXPECT_EQ(events[4].first, "response.output_text.delta");
  const size_t n = events.size();
  EXPECT_EQ(events[n - 4].first, "response.output_text.done");
  EXPECT_EQ(events[n - 4].second["text"], deltas);
  EXPECT_EQ(events[n - 3].first, "response.content_part.done");
  EXPECT_EQ(events[n - 2].first, "response.output_item.done");
  EXPECT_EQ(events[n - 1].first, "response.incomplete");
  const json& final_response = events[n - 1].second["response"];
  EXPECT_EQ(output_text(final_response), deltas);
  EXPECT_EQ(final_response["usage"]["output_tokens"], 6);
  EXPECT_EQ(final_response["id"], events[0].second["response"]["id"]);
  EXPECT_EQ(server.stop(), 0);
}

TEST(ResponsesServer, PreviousResponseIdContinuesAStoredConversation) {
  START_SERVER(server);
  const json first = ok_json(post(client, {{"input", "My name is Ada."}, {"max_output_tokens", 4}}), "first");
  const std::string id = first["id"];
  const json alone = ok_json(post(client, {{"input", "What is my name?"}, {"max_output_tokens", 1}}), "alone");
  const json next = ok_json(
      post(client, {{"input", "What is my name?"}, {"previous_response_id", id}, {"max_output_tokens", 1}}), "next");
  EXPECT_EQ(next["previous_response_id"], id);
  // The earlier turn and its reply are in the prompt.
  EXPECT_GT(next["usage"]["input_tokens"].get<int>(), alone["usage"]["input_tokens"].get<int>() + 5) << next;
  // A chain of three: the second response is stored too.
  ok_json(post(client, {{"input", "Again?"}, {"previous_response_id", next["id"]}, {"max_output_tokens", 1}}), "third");

  const json unstored =
      ok_json(post(client, {{"input", "Forget me."}, {"store", false}, {"max_output_tokens", 1}}), "unstored");
  EXPECT_EQ(unstored["store"], false);
  expect_error(post(client, {{"input", "x"}, {"previous_response_id", unstored["id"]}}), 404,
               unstored["id"].get<std::string>());
  expect_error(post(client, {{"input", "x"}, {"previous_response_id", "resp_unknown"}}), 404, "resp_unknown");

  // GET gives the stored response object as it was answered; DELETE forgets it.
  EXPECT_EQ(ok_json(client.Get("/v1/responses/" + id), "retrieve"), first);
  expect_error(client.Get("/v1/responses/" + unstored["id"].get<std::string>()), 404, "not stored");
  const json deleted = ok_json(client.Delete("/v1/responses/" + id), "delete");
  EXPECT_EQ(deleted["deleted"], true);
  EXPECT_EQ(deleted["id"], id);
  expect_error(client.Get("/v1/responses/" + id), 404, id);
  expect_error(client.Delete("/v1/responses/" + id), 404, id);
  expect_error(post(client, {{"input", "x"}, {"previous_response_id", id}}), 404, id);
  EXPECT_EQ(server.stop(), 0);
}

TEST(ResponsesServer, StoredResponsesAreBoundedOldestFirst) {
  START_SERVER(server, "--max-stored-responses", "2");
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(ok_json(post(client, {{"input", "Hello"}, {"max_output_tokens", 1}}), "store")["id"]);
  expect_error(post(client, {{"input", "x"}, {"previous_response_id", ids[0]}, {"max_output_tokens", 1}}), 404,
               "the last 2 responses");
  for (int i = 1; i < 3; ++i)
    ok_json(
        post(client, {{"input", "x"}, {"previous_response_id", ids[static_cast<size_t>(i)]}, {"max_output_tokens", 1}}),
        "kept");
  EXPECT_EQ(server.stop(), 0);
}

TEST(ResponsesServer, ForcedToolCallThenItsOutputSentBack) {
  START_SERVER(server);
  const json tools = {{{"type", "function"},
                       {"name", "get_weather"},
                       {"description", "The weather in a city"},
                       {"parameters",
                        {{"type", "object"},
                         {"properties", {{"city", {{"type", "string"}, {"enum", {"Oslo", "Paris"}}}}}},
                         {"required", {"city"}},
                         {"additionalProperties", false}}},
                       {"strict", true}}};
  const json input = {{{"role", "user"}, {"content", "Weather in Oslo?"}}};
  for (const bool stream : {false, true}) {
    const auto res = post(client, {{"input", input},
                                   {"tools", tools},
                                   {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}},
                                   {"max_output_tokens", 64},
                                   {"stream", stream}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    json response;
    if (stream) {
      const auto events = events_of(res->body);
      ASSERT_FALSE(events.empty());
      EXPECT_EQ(events.back().first, "response.completed") << res->body;
      bool args_done = false;
      for (const auto& [type, data] : events) args_done |= type == "response.function_call_arguments.done";
      EXPECT_TRUE(args_done) << res->body;
      response = events.back().second["response"];
    } else {
      response = json::parse(res->body);
    }
    ASSERT_EQ(response["output"].size(), 1u) << response;
    const json& call = response["output"][0];
    EXPECT_EQ(call["type"], "function_call");
    EXPECT_EQ(call["name"], "get_weather");
    EXPECT_EQ(call["status"], "completed");
    const json arguments = json::parse(call["arguments"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(arguments.is_object()) << call;
    EXPECT_TRUE(arguments["city"] == "Oslo" || arguments["city"] == "Paris") << call;

    // The call and its output sent back, the next turn answers.
    json next_input = input;
    next_input.push_back(call);
    next_input.push_back({{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "12 C, rain"}});
    const json answer =
        ok_json(post(client, {{"input", next_input}, {"tools", tools}, {"max_output_tokens", 3}}), "tool output");
    EXPECT_EQ(answer["output"][0]["type"], "message") << answer;
    // ... and so does a reference to the stored call, with previous_response_id.
    const json chained = ok_json(
        post(client,
             {{"previous_response_id", response["id"]},
              {"input", {{{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "12 C, rain"}}}},
              {"tools", tools},
              {"max_output_tokens", 3}}),
        "chained tool output");
    // The stored turn is the conversation the client sent inline: the same prompt.
    EXPECT_EQ(chained["usage"]["input_tokens"], answer["usage"]["input_tokens"]);
  }
  EXPECT_EQ(server.stop(), 0);
}

TEST(ResponsesServer, JsonSchemaTextFormatGivesJsonOfTheSchema) {
  START_SERVER(server);
  const json format = {{"type", "json_schema"},
                       {"name", "verdict"},
                       {"strict", true},
                       {"schema",
                        {{"type", "object"},
                         {"properties", {{"ok", {{"type", "boolean"}}}, {"mood", {{"enum", {"calm", "wild"}}}}}},
                         {"required", {"ok", "mood"}},
                         {"additionalProperties", false}}}};
  const json response = ok_json(
      post(client, {{"input", "Judge."}, {"text", {{"format", format}}}, {"max_output_tokens", 64}}), "json_schema");
  EXPECT_EQ(response["status"], "completed") << response;
  EXPECT_EQ(response["text"]["format"]["name"], "verdict");
  const json value = json::parse(output_text(response), nullptr, false);
  ASSERT_TRUE(value.is_object()) << response;
  EXPECT_TRUE(value["ok"].is_boolean()) << value;
  EXPECT_TRUE(value["mood"] == "calm" || value["mood"] == "wild") << value;
  EXPECT_EQ(server.stop(), 0);
}

TEST(ResponsesServer, UnsupportedFieldsAre400sNamingThem) {
  START_SERVER(server);
  expect_error(post(client, {{"input", "hi"}, {"conversation", "conv_1"}}), 400, "'conversation'");
  expect_error(post(client, {{"input", "hi"}, {"tools", {{{"type", "web_search"}}}}}), 400, "'tools[0].type'");
  expect_error(post(client, {{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}}}}}}}}), 400,
               "'input[0].content[0].type'");
  expect_error(post(client, {{"model", "no-such-model"}, {"input", "hi"}}), 404, "no-such-model");
  const auto get = client.Get("/v1/responses");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace tandem::testing
