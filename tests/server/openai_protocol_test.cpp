// Request parsing (src/server/openai_protocol.h, chat_request.h) on hostile JSON: every
// malformed or out-of-range input is a 400 ApiError whose message quotes what the client
// sent, never a library exception that would surface as a 500; and the chat messages, tool
// calls, tool results and tools a valid request carries.
#include <gtest/gtest.h>

#include "server/openai_protocol.h"

namespace tandem::server {
namespace {

// The ApiError's message; fails the test when parsing succeeds or throws anything else.
std::string rejection(std::string_view body, Endpoint endpoint = Endpoint::Completions) {
  try {
    parse_request(endpoint, body, 16);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.type, "invalid_request_error") << body;
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << body << ": not an ApiError: " << e.what();
    return {};
  }
  ADD_FAILURE() << body << ": accepted";
  return {};
}

TEST(OpenAIProtocol, NumberOverflowIsA400QuotingTheNumber) {
  EXPECT_NE(rejection(R"({"prompt":"hi","x":1e400})").find("1e400"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","max_tokens":-1e999})").find("-1e999"), std::string::npos);
  EXPECT_NE(rejection("{\"prompt\": \"hi\"").find("not valid JSON"), std::string::npos);
}

TEST(OpenAIProtocol, TokenIdsOutOfRangeAreQuotedAsSent) {
  EXPECT_NE(rejection(R"({"prompt":[-5]})").find("-5"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[1099511627776]})").find("1099511627776"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[5, 2147483648]})").find("2147483648"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[5, 1.5]})").find("1.5"), std::string::npos);
  const ApiRequest ok = parse_request(Endpoint::Completions, R"({"prompt":[0, 2147483647]})", 16);
  ASSERT_EQ(ok.prompts.size(), 1u);
  EXPECT_EQ(ok.prompts[0].ids, (std::vector<int32_t>{0, 2147483647}));
}

TEST(OpenAIProtocol, WrongTypesAnywhereAre400s) {
  EXPECT_NE(rejection(R"({"prompt":"hi","temperature":"hot"})").find("\"hot\""), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","max_tokens":3.5})").find("3.5"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","top_p":7})").find("7"), std::string::npos);
  // A content part whose "type" is not a string reached nlohmann's value() and threw type_error.
  rejection(R"({"messages":[{"role":"user","content":[{"type":5}]}]})", Endpoint::Chat);
  rejection(R"({"messages":[{"role":"user","content":[{"type":"text","text":5}]}]})", Endpoint::Chat);
  // A very long value is quoted cut short, not whole.
  const std::string message = rejection(R"({"prompt":"hi","temperature":")" + std::string(10000, 'x') + "\"}");
  EXPECT_LT(message.size(), 200u);
}

TEST(OpenAIProtocol, SpeculativeObjectOverridesTheServerDefaults) {
  SpeculationParams defaults;
  defaults.type = SpeculationType::Ngram;
  defaults.draft_max = 6;
  const ApiRequest inherited = parse_request(Endpoint::Completions, R"({"prompt":"hi"})", 16, defaults);
  EXPECT_EQ(inherited.params.speculation.type, SpeculationType::Ngram);
  EXPECT_EQ(inherited.params.speculation.draft_max, 6);
  const ApiRequest off =
      parse_request(Endpoint::Completions, R"({"prompt":"hi","speculative":{"type":"none"}})", 16, defaults);
  EXPECT_EQ(off.params.speculation.type, SpeculationType::None);
  const ApiRequest own = parse_request(
      Endpoint::Completions, R"({"prompt":"hi","speculative":{"type":"ngram","max":3,"min":1,"ngram_max":5}})", 16);
  EXPECT_EQ(own.params.speculation.type, SpeculationType::Ngram);
  EXPECT_EQ(own.params.speculation.draft_max, 3);
  EXPECT_EQ(own.params.speculation.draft_min, 1);
  EXPECT_EQ(own.params.speculation.ngram_max, 5);

  EXPECT_NE(rejection(R"({"prompt":"hi","speculative":"ngram"})").find("\"ngram\""), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","speculative":{"type":"magic"}})").find("magic"), std::string::npos);
  // "draft" parses; the engine refuses it when it has no draft model (a 400 from submit).
  const ApiRequest draft =
      parse_request(Endpoint::Completions, R"({"prompt":"hi","speculative":{"type":"draft"}})", 16);
  EXPECT_EQ(draft.params.speculation.type, SpeculationType::Draft);
  EXPECT_NE(rejection(R"({"prompt":"hi","speculative":{"max":99}})").find("99"), std::string::npos);
  rejection(R"({"prompt":"hi","speculative":{"type":"ngram","max":2,"min":3}})");
  rejection(R"({"prompt":"hi","speculative":{"type":"ngram","ngram_min":4,"ngram_max":2}})");
}

TEST(OpenAIProtocol, UsageCarriesSpeculativeCountsWhenTokensWereProposed) {
  const nlohmann::json plain = usage_json(5, 7, 0);
  EXPECT_FALSE(plain.contains("speculative"));
  const nlohmann::json spec = usage_json(5, 7, 0, 12, 9);
  EXPECT_EQ(spec["speculative"]["drafted"], 12);
  EXPECT_EQ(spec["speculative"]["accepted"], 9);
  EXPECT_EQ(spec["total_tokens"], 12);
}

// Issue 11: full OpenAI chat messages — content parts, assistant tool calls with null
// content, tool results — and function tools, tool_choice and parallel_tool_calls.
TEST(OpenAIProtocol, ChatMessagesCarryToolCallsResultsAndTools) {
  const ApiRequest request = parse_request(Endpoint::Chat, R"({"messages": [
      {"role": "developer", "content": "D", "name": "ops"},
      {"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "c2", "function": {"name": "get_weather", "arguments": "not json"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
      {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "rain"}]},
      {"role": "assistant", "content": "Sunny and rain.", "tool_calls": []}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "strict": true,
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "noop"}}],
    "tool_choice": {"type": "function", "function": {"name": "noop"}}, "parallel_tool_calls": false})",
                                           16);
  ASSERT_EQ(request.messages.size(), 6u);
  EXPECT_EQ(request.messages[0].role, "developer");
  EXPECT_EQ(request.messages[0].name, "ops");
  EXPECT_EQ(request.messages[1].content, "a b");  // text parts joined as they are
  const ChatMessage& call = request.messages[2];
  EXPECT_TRUE(call.null_content);
  ASSERT_EQ(call.tool_calls.size(), 2u);
  EXPECT_EQ(call.tool_calls[0].id, "c1");
  EXPECT_EQ(call.tool_calls[0].name, "get_weather");
  EXPECT_EQ(call.tool_calls[0].arguments, R"({"city": "Paris"})");  // the text as sent
  EXPECT_EQ(call.tool_calls[1].arguments, "not json");              // not parsed here
  EXPECT_EQ(request.messages[3].tool_call_id, "c1");
  EXPECT_EQ(request.messages[4].content, "rain");
  EXPECT_FALSE(request.messages[5].null_content);
  EXPECT_TRUE(request.messages[5].tool_calls.empty());
  ASSERT_EQ(request.tools.size(), 2u);
  EXPECT_EQ(request.tools[0].name, "get_weather");
  EXPECT_EQ(request.tools[0].description, "Weather");
  EXPECT_TRUE(request.tools[0].strict);
  // The client's key order, which is what a template prints.
  EXPECT_EQ(request.tools[0].parameters.dump(),
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  EXPECT_TRUE(request.tools[1].parameters.is_null());
  EXPECT_EQ(request.tool_choice.mode, ToolChoice::Mode::Function);
  EXPECT_EQ(request.tool_choice.function, "noop");
  EXPECT_FALSE(request.parallel_tool_calls);

  const ApiRequest plain = parse_request(Endpoint::Chat, R"({"messages": [{"role": "user", "content": "hi"}],
      "tools": null, "tool_choice": "none"})",
                                         16);
  EXPECT_TRUE(plain.tools.empty());
  EXPECT_EQ(plain.tool_choice.mode, ToolChoice::Mode::None);
  EXPECT_TRUE(plain.parallel_tool_calls);
}

// Each malformed shape is a 400 that names the field and quotes the value.
TEST(OpenAIProtocol, MalformedToolShapesAre400sQuotingTheValue) {
  const auto chat = [](const std::string& body) { return rejection(body, Endpoint::Chat); };
  const auto expect_has = [](const std::string& message, std::initializer_list<const char*> parts) {
    for (const char* part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' in: " << message;
  };
  const std::string user = R"({"role": "user", "content": "hi"})";
  const auto assistant_call = [](const std::string& call) {
    return R"({"role": "assistant", "content": null, "tool_calls": [)" + call + "]}";
  };
  const auto with_messages = [](const std::string& messages) { return R"({"messages": [)" + messages + "]}"; };
  const auto with_tools = [&](const std::string& tools, const std::string& more = "") {
    return R"({"messages": [)" + user + R"(], "tools": )" + tools + more + "}";
  };

  // Messages.
  expect_has(chat(with_messages(R"("hi")")), {"messages[0]", "\"hi\""});
  expect_has(chat(with_messages(R"({"role": "wizard", "content": "x"})")), {"messages[0].role", "\"wizard\""});
  expect_has(chat(with_messages(R"({"role": "function", "content": "x"})")), {"messages[0].role", "\"function\""});
  expect_has(chat(with_messages(R"({"role": 3, "content": "x"})")), {"messages[0].role", "3"});
  expect_has(chat(with_messages(R"({"role": "user"})")), {"messages[0].content", "required"});
  expect_has(chat(with_messages(R"({"role": "user", "content": 5})")), {"messages[0].content", "5"});
  expect_has(chat(with_messages(R"({"role": "assistant", "content": null})")), {"messages[0]", "tool_calls"});
  expect_has(chat(with_messages(R"({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]})")),
             {"messages[0].content[0]", "\"image_url\"", "not supported"});
  expect_has(chat(with_messages(R"({"role": "user", "content": [{"type": "input_audio"}]})")), {"\"input_audio\""});
  expect_has(chat(with_messages(R"({"role": "user", "content": "x", "name": 7})")), {"messages[0].name", "7"});
  expect_has(chat(with_messages(R"({"role": "assistant", "content": null, "tool_calls": {"id": 1}})")),
             {"messages[0].tool_calls", "must be an array", R"({"id":1})"});
  expect_has(chat(with_messages(R"({"role": "user", "content": "x", "tool_calls": []})")),
             {"messages[0].tool_calls", "assistant"});
  expect_has(chat(with_messages(R"({"role": "user", "content": "x", "tool_call_id": "c1"})")),
             {"messages[0].tool_call_id", "tool messages"});
  expect_has(chat(with_messages(R"({"role": "tool", "content": "sunny"})")), {"messages[0]", "tool_call_id"});
  expect_has(chat(with_messages(R"({"role": "tool", "content": "sunny", "tool_call_id": 12})")),
             {"messages[0].tool_call_id", "12"});

  // Tool calls.
  expect_has(chat(with_messages(assistant_call(R"("call")"))), {"messages[0].tool_calls[0]", "\"call\""});
  expect_has(
      chat(with_messages(assistant_call(R"({"type": "function", "function": {"name": "f", "arguments": "{}"}})"))),
      {"messages[0].tool_calls[0].id"});
  expect_has(chat(with_messages(
                 assistant_call(R"({"id": "c", "type": "custom", "function": {"name": "f", "arguments": "{}"}})"))),
             {"messages[0].tool_calls[0].type", "\"custom\""});
  expect_has(chat(with_messages(assistant_call(R"({"id": "c", "function": "f"})"))),
             {"messages[0].tool_calls[0].function", "\"f\""});
  expect_has(chat(with_messages(assistant_call(R"({"id": "c", "function": {"arguments": "{}"}})"))),
             {"messages[0].tool_calls[0].function.name"});
  expect_has(chat(with_messages(assistant_call(R"({"id": "c", "function": {"name": "f", "arguments": {"x": 1}}})"))),
             {"messages[0].tool_calls[0].function.arguments", "must be a string", R"({"x":1})"});
  expect_has(chat(with_messages(assistant_call(R"({"id": "c", "function": {"name": "f"}})"))),
             {"messages[0].tool_calls[0].function.arguments"});

  // Tools.
  expect_has(chat(with_tools(R"({"type": "function"})")), {"'tools'", R"({"type":"function"})"});
  expect_has(chat(with_tools(R"([5])")), {"tools[0]", "5"});
  expect_has(chat(with_tools(R"([{"type": "custom", "custom": {"name": "f"}}])")), {"tools[0].type", "\"custom\""});
  expect_has(chat(with_tools(R"([{"function": {"name": "f"}}])")), {"tools[0].type"});
  expect_has(chat(with_tools(R"([{"type": "function"}])")), {"tools[0].function"});
  expect_has(chat(with_tools(R"([{"type": "function", "function": {"name": "get weather"}}])")),
             {"tools[0].function.name", "\"get weather\""});
  expect_has(chat(with_tools(R"([{"type": "function", "function": {"name": "f", "parameters": "x"}}])")),
             {"tools[0].function.parameters", "\"x\""});
  expect_has(chat(with_tools(R"([{"type": "function", "function": {"name": "f", "description": ["d"]}}])")),
             {"tools[0].function.description", "[\"d\"]"});
  expect_has(
      chat(with_tools(
          R"([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])")),
      {"tools[1].function.name", "\"f\""});
  std::string deep = "{}";
  for (int i = 0; i < 80; ++i) deep = R"({"type": "object", "properties": {"x": )" + deep + "}}";
  expect_has(chat(with_tools(R"([{"type": "function", "function": {"name": "f", "parameters": )" + deep + "}}]")),
             {"tools[0].function.parameters", "deeper"});

  // tool_choice and parallel_tool_calls.
  const std::string tools = R"([{"type": "function", "function": {"name": "f"}}])";
  expect_has(chat(with_tools(tools, R"(, "tool_choice": "sometimes")")), {"'tool_choice'", "\"sometimes\""});
  expect_has(chat(with_tools(tools, R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})")),
             {"'tool_choice'", "\"g\"", "not in 'tools'"});
  expect_has(chat(with_tools(tools, R"(, "tool_choice": {"type": "function"})")),
             {"'tool_choice'", R"({"type":"function"})"});
  expect_has(chat(R"({"messages": [)" + user + R"(], "tool_choice": "required"})"),
             {"'tool_choice'", "\"required\"", "needs 'tools'"});
  expect_has(chat(with_tools(tools, R"(, "parallel_tool_calls": "yes")")), {"'parallel_tool_calls'", "\"yes\""});
}

}  // namespace
}  // namespace tandem::server

namespace tandem::server {
namespace {

TEST(OpenAIProtocol, SamplingExtrasReachTheEngineParams) {
  const ApiRequest r = parse_request(Endpoint::Completions,
                                     R"({"prompt":"hi","max_tokens":20,"logit_bias":{"300":100,"12":-100.0},)"
                                     R"("min_tokens":4,"ignore_eos":true,"stop_token_ids":[2,7]})",
                                     16);
  EXPECT_EQ(r.params.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{300, 100.0f}, {12, -100.0f}}));
  EXPECT_EQ(r.params.min_tokens, 4);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{2, 7}));
  const ApiRequest plain = parse_request(Endpoint::Completions, R"({"prompt":"hi"})", 16);
  EXPECT_TRUE(plain.params.sampling.logit_bias.empty());
  EXPECT_EQ(plain.params.min_tokens, 0);
  EXPECT_FALSE(plain.params.ignore_eos);
}

TEST(OpenAIProtocol, BadSamplingExtrasAre400sNamingTheField) {
  EXPECT_NE(rejection(R"({"prompt":"hi","logit_bias":{"abc":1}})").find("\"abc\""), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","logit_bias":{"-3":1}})").find("\"-3\""), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","logit_bias":{"5":101}})").find("101"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","logit_bias":{"5":"x"}})").find("\"x\""), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","logit_bias":[1]})").find("logit_bias"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","max_tokens":3,"min_tokens":4})").find("min_tokens"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","stop_token_ids":[1,-2]})").find("-2"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","ignore_eos":"yes"})").find("ignore_eos"), std::string::npos);
}

TEST(OpenAIProtocol, FieldsOtherServersDefineButThisOneLacksAre400sNamingThem) {
  for (const char* name : {"functions", "prediction", "use_beam_search"}) {
    const std::string body = std::string(R"({"prompt":"hi",")") + name + R"(":{"a":1}})";
    EXPECT_NE(rejection(body).find(name), std::string::npos) << name;
  }
  EXPECT_NE(rejection(R"({"prompt":"hi","best_of":3})").find("best_of"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","suffix":"end"})").find("suffix"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","response_format":{"type":"nonsense"}})").find("nonsense"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","response_format":"json"})").find("response_format"), std::string::npos);
  // Asking for the plain behaviour is fine.
  parse_request(Endpoint::Completions, R"({"prompt":"hi","best_of":1,"response_format":{"type":"text"}})", 16);
}

TEST(OpenAIProtocol, UnknownVendorFieldsAreAcceptedAndListed) {
  const ApiRequest r =
      parse_request(Endpoint::Completions,
                    R"({"prompt":"hi","cache_prompt":true,"user":"u1","x_vendor":{"a":1},"skipped":null})", 16);
  EXPECT_EQ(r.ignored_fields, (std::vector<std::string>{"user", "x_vendor"}));
}

TEST(OpenAIProtocol, PromptMayBeSeveralStringsOrTokenIdArrays) {
  const auto prompts = [](std::string_view body) { return parse_request(Endpoint::Completions, body, 16).prompts; };
  ASSERT_EQ(prompts(R"({"prompt":"hi"})").size(), 1u);
  EXPECT_EQ(prompts(R"({"prompt":"hi"})")[0].text, "hi");
  const std::vector<PromptInput> texts = prompts(R"({"prompt":["a","b","c"]})");
  ASSERT_EQ(texts.size(), 3u);
  EXPECT_EQ(texts[0].text + texts[1].text + texts[2].text, "abc");
  EXPECT_TRUE(texts[2].ids.empty());
  // One array of ids is one prompt; an array of id arrays is several.
  ASSERT_EQ(prompts(R"({"prompt":[1,2]})").size(), 1u);
  const std::vector<PromptInput> ids = prompts(R"({"prompt":[[1,2],[3]]})");
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(ids[1].ids, (std::vector<int32_t>{3}));
  // At most kMaxPrompts prompts (an array of ids that long is one prompt).
  std::string body = R"({"prompt":[)";
  for (int32_t i = 0; i <= kMaxPrompts; ++i) body += std::string(i ? "," : "") + "5";
  EXPECT_EQ(prompts(body + "]}").size(), 1u);
  body = R"({"prompt":[)";
  for (int32_t i = 0; i <= kMaxPrompts; ++i) body += std::string(i ? "," : "") + "\"x\"";
  EXPECT_NE(rejection(body + "]}").find("at most 128"), std::string::npos);
  // Each prompt is checked where it is, and named.
  EXPECT_NE(rejection(R"({"prompt":[[1],[2,-7]]})").find("'prompt[1]' token id -7"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":["a",[1]]})").find("'prompt[1]'"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[]})").find("empty"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[[1],[]]})").find("'prompt[1]' is an empty array"), std::string::npos);
}

// The ApiError a body is refused with.
ApiError refusal_of(std::string_view body, Endpoint endpoint = Endpoint::Completions) {
  try {
    parse_request(endpoint, body, 16);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << body << ": accepted";
  return ApiError(0, "", "");
}

TEST(OpenAIProtocol, FieldErrorsCarryTheFieldAndOpenAIsCode) {
  struct Case {
    const char* body;
    const char* param;
    ErrorCode code;
  };
  const Case cases[] = {
      {R"({"prompt":"hi","temperature":"hot"})", "temperature", ErrorCode::InvalidType},
      {R"({"prompt":"hi","temperature":9})", "temperature", ErrorCode::InvalidValue},
      {R"({"prompt":"hi","max_tokens":2.5})", "max_tokens", ErrorCode::InvalidType},
      {R"({"prompt":"hi","stream":"yes"})", "stream", ErrorCode::InvalidType},
      {R"({"prompt":"hi","n":0})", "n", ErrorCode::InvalidValue},
      {R"({"max_tokens":2})", "prompt", ErrorCode::MissingRequired},
      {R"({"prompt":{"a":1}})", "prompt", ErrorCode::InvalidType},
      {R"({"prompt":"hi","functions":[1]})", "functions", ErrorCode::Unsupported},
      {R"({"prompt":"hi","best_of":2})", "best_of", ErrorCode::Unsupported},
      {R"({"prompt":"hi","response_format":{"type":"xml"}})", "response_format.type", ErrorCode::InvalidValue},
      {R"({"prompt":"hi","response_format":"json"})", "response_format", ErrorCode::InvalidType},
  };
  for (const Case& c : cases) {
    const ApiError e = refusal_of(c.body);
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.what();
    EXPECT_EQ(error_code_name(e.code), error_code_name(c.code)) << c.body << ": " << e.what();
  }
  EXPECT_EQ(refusal_of(R"({})", Endpoint::Chat).code, ErrorCode::MissingRequired);
  EXPECT_EQ(refusal_of(R"({"messages":[{"role":"x","content":"y"}]})", Endpoint::Chat).param, "messages[0].role");
  const ApiError content = refusal_of(R"({"messages":[{"role":"user","content":5}]})", Endpoint::Chat);
  EXPECT_EQ(content.param, "messages[0].content");
  EXPECT_EQ(content.code, ErrorCode::InvalidType);
  // A body that is not JSON is about no field: no param, no code.
  const ApiError malformed = refusal_of("{");
  EXPECT_TRUE(malformed.param.empty());
  EXPECT_EQ(malformed.code, ErrorCode::None);

  // The body: OpenAI's four keys, null where there is nothing to say.
  const nlohmann::json with_field = error_json("bad", "invalid_request_error", "temperature", ErrorCode::InvalidType);
  EXPECT_EQ(with_field["error"]["param"], "temperature");
  EXPECT_EQ(with_field["error"]["code"], "invalid_type");
  const nlohmann::json without = error_json("busy", "server_error");
  EXPECT_TRUE(without["error"].contains("param") && without["error"]["param"].is_null());
  EXPECT_TRUE(without["error"]["code"].is_null());
}

}  // namespace
}  // namespace tandem::server
