// The Responses API as pure functions (responses_api.h, responses_store.h): request bodies ->
// chat requests (input items, instructions, flat tools, tool_choice, text.format, sampling),
// fields refused by name, previous_response_id and item_reference through the store, the
// store's bounds, and the response object and stream events (their order, sequence numbers,
// "incomplete" when max_output_tokens cut the reply).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/responses_api.h"

namespace tandem::server {
namespace {

using nlohmann::json;

ResponsesRequest parse(const json& body, const ResponsesStore& store) {
  return parse_responses_request(body.dump(), 4096, {}, store);
}
ResponsesRequest parse(const json& body) {
  static const ResponsesStore empty(16, 1 << 20);
  return parse(body, empty);
}

// The refusal of `body`: its status and message.
std::pair<int, std::string> refusal(const json& body, const ResponsesStore* store = nullptr) {
  try {
    if (store)
      parse(body, *store);
    else
      parse(body);
  } catch (const ApiError& e) {
    return {e.status, e.what()};
  }
  ADD_FAILURE() << body.dump() << ": accepted";
  return {0, {}};
}

TEST(ResponsesApi, TextInputWithInstructionsAndSampling) {
  const ResponsesRequest r = parse({{"model", "m"},
                                    {"input", "Tell me a dream."},
                                    {"instructions", "Be brief."},
                                    {"max_output_tokens", 7},
                                    {"temperature", 0.5},
                                    {"top_p", 0.9}});
  ASSERT_EQ(r.api.messages.size(), 2u);
  EXPECT_EQ(r.api.messages[0].role, "system");
  EXPECT_EQ(r.api.messages[0].content, "Be brief.");
  EXPECT_EQ(r.api.messages[1].role, "user");
  EXPECT_EQ(r.api.messages[1].content, "Tell me a dream.");
  ASSERT_EQ(r.history.size(), 1u);  // instructions are not carried to the next turn
  EXPECT_EQ(r.api.endpoint, Endpoint::Chat);
  EXPECT_EQ(r.api.params.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.api.params.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.api.params.sampling.top_p, 0.9f);
  EXPECT_TRUE(r.api.render.add_generation_prompt);
  EXPECT_FALSE(r.api.render.continue_final_message);
  EXPECT_TRUE(r.store);
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  EXPECT_EQ(r.echo["max_output_tokens"], 7);
  // Without max_output_tokens the reply may run to the end of the context.
  EXPECT_EQ(parse({{"input", "hi"}}).api.params.max_tokens, 4096);
}

TEST(ResponsesApi, InputItemsBecomeChatMessages) {
  const json input = json::array(
      {{{"role", "developer"}, {"content", "Use tools."}},
       {{"type", "message"},
        {"role", "user"},
        {"content", {{{"type", "input_text"}, {"text", "Weather "}}, {{"type", "input_text"}, {"text", "in Oslo?"}}}}},
       {{"type", "reasoning"}, {"id", "rs_1"}, {"summary", json::array()}},
       {{"role", "assistant"}, {"content", {{{"type", "output_text"}, {"text", "Checking."}}}}},
       {{"type", "function_call"}, {"call_id", "call_1"}, {"name", "weather"}, {"arguments", R"({"city":"Oslo"})"}},
       {{"type", "function_call"}, {"call_id", "call_2"}, {"name", "time"}, {"arguments", "{}"}},
       {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "12 C"}},
       {{"type", "function_call_output"}, {"call_id", "call_2"}, {"output", "noon"}}});
  const ResponsesRequest r = parse({{"input", input}});
  ASSERT_EQ(r.api.messages.size(), 5u);
  EXPECT_EQ(r.api.messages[0].role, "developer");
  EXPECT_EQ(r.api.messages[1].content, "Weather in Oslo?");
  EXPECT_EQ(r.api.messages[2].role, "assistant");
  EXPECT_EQ(r.api.messages[2].content, "Checking.");
  ASSERT_EQ(r.api.messages[2].tool_calls.size(), 2u);  // both calls join the assistant's turn
  EXPECT_EQ(r.api.messages[2].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.api.messages[2].tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(r.api.messages[3].role, "tool");
  EXPECT_EQ(r.api.messages[3].tool_call_id, "call_1");
  EXPECT_EQ(r.api.messages[4].content, "noon");
  // A call with no text before it is an assistant turn of its own, content null.
  const ResponsesRequest bare =
      parse({{"input",
              {{{"role", "user"}, {"content", "hi"}},
               {{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", "{}"}},
               {{"type", "function_call_output"}, {"call_id", "c"}, {"output", "ok"}}}}});
  ASSERT_EQ(bare.api.messages.size(), 3u);
  EXPECT_TRUE(bare.api.messages[1].null_content);
}

TEST(ResponsesApi, FlatFunctionToolsToolChoiceAndTextFormat) {
  const json tools = {{{"type", "function"},
                       {"name", "weather"},
                       {"description", "Weather of a city"},
                       {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}},
                       {"strict", true}}};
  const ResponsesRequest r = parse({{"input", "hi"}, {"tools", tools}});
  ASSERT_EQ(r.api.tools.size(), 1u);
  EXPECT_EQ(r.api.tools[0].name, "weather");
  EXPECT_EQ(r.api.tools[0].description, "Weather of a city");
  EXPECT_TRUE(r.api.tools[0].strict);
  EXPECT_EQ(r.api.tool_choice.mode, ToolChoice::Mode::Auto);
  EXPECT_FALSE(r.api.params.grammar);
  EXPECT_EQ(r.echo["tools"][0]["name"], "weather");  // echoed flat, as sent
  EXPECT_EQ(r.echo["tools"][0]["type"], "function");

  const ResponsesRequest named =
      parse({{"input", "hi"}, {"tools", tools}, {"tool_choice", {{"type", "function"}, {"name", "weather"}}}});
  EXPECT_EQ(named.api.tool_choice.mode, ToolChoice::Mode::Function);
  EXPECT_EQ(named.api.tool_choice.function, "weather");
  EXPECT_TRUE(named.api.params.grammar);  // forced calls are grammar-constrained
  EXPECT_EQ(named.echo["tool_choice"]["name"], "weather");
  EXPECT_TRUE(parse({{"input", "hi"}, {"tools", tools}, {"tool_choice", "required"}}).api.params.grammar);

  const json format = {{"type", "json_schema"},
                       {"name", "answer"},
                       {"schema",
                        {{"type", "object"},
                         {"properties", {{"ok", {{"type", "boolean"}}}}},
                         {"required", {"ok"}},
                         {"additionalProperties", false}}},
                       {"strict", true}};
  const ResponsesRequest structured = parse({{"input", "hi"}, {"text", {{"format", format}}}});
  EXPECT_TRUE(structured.api.params.grammar);
  EXPECT_EQ(structured.echo["text"]["format"]["name"], "answer");
  EXPECT_TRUE(parse({{"input", "hi"}, {"text", {{"format", {{"type", "json_object"}}}}}}).api.params.grammar);
  EXPECT_FALSE(parse({{"input", "hi"}, {"text", {{"format", {{"type", "text"}}}}}}).api.params.grammar);
}

TEST(ResponsesApi, FieldsItCannotHonourAre400sNamingThem) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"model", "m"}}, "'input' is required"},
      {{{"input", 3}}, "'input' must be"},
      {{{"input", "hi"}, {"conversation", "conv_1"}}, "'conversation'"},
      {{{"input", "hi"}, {"prompt", {{"id", "p"}}}}, "'prompt'"},
      {{{"input", "hi"}, {"truncation", "auto"}}, "'truncation'"},
      {{{"input", "hi"}, {"include", {"reasoning.encrypted_content"}}}, "'include'"},
      {{{"input", "hi"}, {"reasoning", {{"effort", "high"}}}}, "'reasoning.effort'"},
      {{{"input", "hi"}, {"top_logprobs", 3}}, "'top_logprobs'"},
      {{{"input", "hi"}, {"background", true}}, "'background'"},
      {{{"input", "hi"}, {"frobnicate", 1}}, "'frobnicate'"},
      {{{"input", "hi"}, {"max_output_tokens", 0}}, "'max_output_tokens'"},
      {{{"input", "hi"}, {"temperature", 3}}, "'temperature'"},
      {{{"input", "hi"}, {"text", {{"verbosity", "low"}}}}, "'text.verbosity'"},
      {{{"input", "hi"}, {"text", {{"format", {{"type", "xml"}}}}}}, "'text.format.type'"},
      {{{"input", "hi"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}}}}}}, "'text.format.schema'"},
      {{{"input", "hi"}, {"tools", {{{"type", "web_search"}}}}}, "'tools[0].type'"},
      {{{"input", "hi"}, {"tools", {{{"type", "function"}}}}}, "'tools[0].name'"},
      {{{"input", "hi"}, {"tool_choice", {{"type", "file_search"}}}}, "'tool_choice'"},
      {{{"input", "hi"}, {"tool_choice", "required"}}, "'tool_choice'"},  // no tools to choose from
      {{{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}}}},
       "'input[0].content[0].type'"},
      {{{"input", {{{"role", "critic"}, {"content", "x"}}}}}, "'input[0].role'"},
      {{{"input", {{{"type", "function_call_output"}, {"output", "x"}}}}}, "'input[0].call_id'"},
      {{{"input", {{{"type", "web_search_call"}}}}}, "'input[0].type'"},
      {{{"input", "hi"}, {"stream_options", {{"include_usage", true}}}}, "'stream_options.include_usage'"},
  };
  for (const auto& [body, expected] : cases) {
    const auto [status, message] = refusal(body);
    EXPECT_EQ(status, 400) << body.dump();
    EXPECT_NE(message.find(expected), std::string::npos) << body.dump() << " -> " << message;
  }
  // Asking for the plain behaviour is fine.
  EXPECT_NO_THROW(parse({{"input", "hi"},
                         {"truncation", "disabled"},
                         {"include", json::array()},
                         {"reasoning", {{"effort", nullptr}}},
                         {"background", false},
                         {"store", false},
                         {"metadata", {{"k", "v"}}},
                         {"stream_options", {{"include_obfuscation", false}}},
                         {"user", "u"},
                         {"top_k", 5}}));
}

TEST(ResponsesApi, PreviousResponseIdAndItemReferencesComeFromTheStore) {
  ResponsesStore store(16, 1 << 20);
  StoredResponse earlier;
  earlier.conversation = {{"user", "First question"}, {"assistant", "First answer"}};
  earlier.output = json::array({{{"id", "msg_1"},
                                 {"type", "message"},
                                 {"role", "assistant"},
                                 {"status", "completed"},
                                 {"content", {{{"type", "output_text"}, {"text", "First answer"}}}}}});
  ASSERT_TRUE(store.put("resp_1", earlier));

  const ResponsesRequest next =
      parse({{"input", "Second question"}, {"instructions", "New rules."}, {"previous_response_id", "resp_1"}}, store);
  ASSERT_EQ(next.api.messages.size(), 4u);
  EXPECT_EQ(next.api.messages[0].content, "New rules.");
  EXPECT_EQ(next.api.messages[1].content, "First question");
  EXPECT_EQ(next.api.messages[2].content, "First answer");
  EXPECT_EQ(next.api.messages[3].content, "Second question");
  EXPECT_EQ(next.history.size(), 3u);
  EXPECT_EQ(next.echo["previous_response_id"], "resp_1");

  const auto [status, message] = refusal({{"input", "x"}, {"previous_response_id", "resp_gone"}}, &store);
  EXPECT_EQ(status, 404);
  EXPECT_NE(message.find("resp_gone"), std::string::npos) << message;

  const ResponsesRequest referenced =
      parse({{"input", {{{"role", "user"}, {"content", "Q"}}, {{"type", "item_reference"}, {"id", "msg_1"}}}}}, store);
  ASSERT_EQ(referenced.api.messages.size(), 2u);
  EXPECT_EQ(referenced.api.messages[1].role, "assistant");
  EXPECT_EQ(referenced.api.messages[1].content, "First answer");
  EXPECT_EQ(refusal({{"input", {{{"type", "item_reference"}, {"id", "msg_none"}}}}}, &store).first, 404);
}

TEST(ResponsesApi, StoreForgetsTheOldestPastItsCountOrBytes) {
  const auto response_of = [](size_t bytes) {
    StoredResponse r;
    r.conversation = {{"user", std::string(bytes, 'x')}};
    return r;
  };
  ResponsesStore by_count(2, 1 << 20);
  for (const char* id : {"a", "b", "c"}) EXPECT_TRUE(by_count.put(id, response_of(10)));
  EXPECT_EQ(by_count.size(), 2u);
  EXPECT_FALSE(by_count.get("a"));
  EXPECT_TRUE(by_count.get("b"));
  EXPECT_TRUE(by_count.get("c"));

  ResponsesStore by_bytes(100, 10000);
  for (const char* id : {"a", "b", "c", "d"}) EXPECT_TRUE(by_bytes.put(id, response_of(3000)));
  EXPECT_LE(by_bytes.bytes(), 10000u);
  EXPECT_FALSE(by_bytes.get("a"));
  EXPECT_TRUE(by_bytes.get("d"));
  EXPECT_FALSE(by_bytes.put("huge", response_of(20000)));  // larger than the whole bound: not kept
  EXPECT_TRUE(by_bytes.get("d"));                          // ... and evicts nothing

  ResponsesStore none(0, 1 << 20);
  EXPECT_FALSE(none.put("a", response_of(1)));
  EXPECT_EQ(none.size(), 0u);
}

// The events of an SSE body: (event line, data JSON).
std::vector<std::pair<std::string, json>> events_of(const std::string& sse) {
  std::vector<std::pair<std::string, json>> events;
  size_t pos = 0;
  while ((pos = sse.find("event: ", pos)) != std::string::npos) {
    const size_t eol = sse.find('\n', pos);
    const std::string type = sse.substr(pos + 7, eol - pos - 7);
    EXPECT_EQ(sse.compare(eol + 1, 6, "data: "), 0);
    const size_t end = sse.find("\n\n", eol);
    events.emplace_back(type, json::parse(sse.substr(eol + 7, end - eol - 7)));
    pos = end;
  }
  return events;
}

TEST(ResponsesApi, StreamEventsComeInOrderWithSequenceNumbers) {
  const ResponsesRequest request = parse({{"input", "hi"}, {"max_output_tokens", 50}});
  ResponseBuilder builder(request, "resp_x", 1700000000, "tiny");
  std::string sse = builder.stream_start();
  sse += builder.stream_deltas({{{"reasoning_content", "Hmm"}}});
  sse += builder.stream_deltas({{{"content", "Hel"}}, {{"content", "lo"}}});
  sse += builder.stream_deltas({{{"tool_calls",
                                  {{{"index", 0},
                                    {"id", "call_9"},
                                    {"type", "function"},
                                    {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}}});
  Completion totals;
  totals.finish_reason = FinishReason::EndOfSequence;
  totals.prompt_tokens = 5;
  totals.completion_tokens = 9;
  sse += builder.stream_finish(totals);

  const auto events = events_of(sse);
  std::vector<std::string> types;
  for (size_t i = 0; i < events.size(); ++i) {
    types.push_back(events[i].first);
    EXPECT_EQ(events[i].second["type"], events[i].first);
    EXPECT_EQ(events[i].second["sequence_number"], i);
  }
  const std::vector<std::string> expected = {"response.created",
                                             "response.in_progress",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.reasoning_text.delta",
                                             "response.reasoning_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.output_text.delta",
                                             "response.output_text.delta",
                                             "response.output_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.function_call_arguments.delta",
                                             "response.function_call_arguments.done",
                                             "response.output_item.done",
                                             "response.completed"};
  EXPECT_EQ(types, expected);
  EXPECT_EQ(events[0].second["response"]["status"], "in_progress");
  EXPECT_EQ(events[0].second["response"]["id"], "resp_x");
  EXPECT_EQ(events[12].second["text"], "Hello");
  EXPECT_EQ(events[12].second["output_index"], 1);
  EXPECT_EQ(events[15].second["item"]["call_id"], "call_9");
  const json& done = events.back().second["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][0]["type"], "reasoning");
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["output"][2]["type"], "function_call");
  EXPECT_EQ(done["output"][2]["name"], "f");
  EXPECT_EQ(done["usage"]["input_tokens"], 5);
  EXPECT_EQ(done["usage"]["output_tokens"], 9);
  EXPECT_EQ(done["usage"]["total_tokens"], 14);
  // Each item's events carry its own id and index.
  EXPECT_EQ(events[10].second["item_id"], done["output"][1]["id"]);

  // What is stored: the conversation with the reply as one assistant turn.
  const StoredResponse stored = builder.stored();
  ASSERT_EQ(stored.conversation.size(), 2u);
  EXPECT_EQ(stored.conversation[1].content, "Hello");
  ASSERT_EQ(stored.conversation[1].tool_calls.size(), 1u);
  EXPECT_EQ(stored.conversation[1].tool_calls[0].id, "call_9");
}

TEST(ResponsesApi, MaxOutputTokensMakesTheResponseIncomplete) {
  const ResponsesRequest request = parse({{"input", "hi"}, {"max_output_tokens", 3}});
  Completion cut;
  cut.finish_reason = FinishReason::Length;
  cut.reply = ChatReply{"abc", {}, {}};
  cut.completion_tokens = 3;
  const json whole = ResponseBuilder(request, "resp_a", 0, "m").whole(cut);
  EXPECT_EQ(whole["status"], "incomplete");
  EXPECT_EQ(whole["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(whole["output"][0]["status"], "incomplete");
  EXPECT_EQ(whole["object"], "response");

  ResponseBuilder streamed(request, "resp_b", 0, "m");
  std::string sse = streamed.stream_start();
  sse += streamed.stream_deltas({{{"content", "abc"}}});
  sse += streamed.stream_finish(cut);
  const auto events = events_of(sse);
  EXPECT_EQ(events.back().first, "response.incomplete");
  EXPECT_EQ(events.back().second["response"]["incomplete_details"]["reason"], "max_output_tokens");

  Completion stopped;
  stopped.finish_reason = FinishReason::EndOfSequence;
  stopped.reply = ChatReply{"", {}, {}};
  const json empty = ResponseBuilder(request, "resp_c", 0, "m").whole(stopped);
  EXPECT_EQ(empty["status"], "completed");
  EXPECT_TRUE(empty["incomplete_details"].is_null());
  ASSERT_EQ(empty["output"].size(), 1u);  // an empty reply is still one message
  EXPECT_EQ(empty["output"][0]["content"][0]["text"], "");
}

}  // namespace
}  // namespace tandem::server
