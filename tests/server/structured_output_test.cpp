// Structured output and tool calls at the protocol level (server/structured_output.h,
// chat_reply.h, openai_protocol.h): which request fields become which grammar (checked by
// running the compiled grammar on texts it must accept and refuse), the 400s for unusable
// ones, forced tool calls read back, auto tool calls and reasoning parsed from the template's
// syntax, and the response / stream JSON that carries them.
#include <gtest/gtest.h>

#include <string>

#include "grammar/matcher.h"
#include "server/chat_reply.h"
#include "server/openai_protocol.h"
#include "server/structured_output.h"

namespace tandem::server {
namespace {

using nlohmann::json;

std::string rejection(std::string_view body, Endpoint endpoint = Endpoint::Chat) {
  try {
    parse_request(endpoint, body, 16);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << body << ": not an ApiError: " << e.what();
    return {};
  }
  ADD_FAILURE() << body << ": accepted";
  return {};
}

// Whether the request's grammar takes `text` as a whole sentence.
bool grammar_accepts(const ApiRequest& request, std::string_view text) {
  EXPECT_TRUE(request.params.grammar);
  if (!request.params.grammar) return false;
  grammar::GrammarMatcher matcher(request.params.grammar);
  return matcher.accept_bytes(text) && matcher.can_end();
}

ApiRequest chat(const std::string& extra) {
  return parse_request(Endpoint::Chat, R"({"messages":[{"role":"user","content":"hi"}])" + extra + "}", 16);
}

const std::string kWeatherTools = R"(,"tools":[
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"],
    "additionalProperties":false}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object",
    "properties":{"zone":{"type":"string"}},"required":["zone"],"additionalProperties":false}}}])";

TEST(StructuredOutput, ResponseFormatJsonObjectAcceptsAnyJsonOnly) {
  const ApiRequest r = chat(R"(,"response_format":{"type":"json_object"})");
  EXPECT_TRUE(grammar_accepts(r, R"({"a": [1, 2.5, "x", null, true]})"));
  EXPECT_FALSE(grammar_accepts(r, "hello"));
  EXPECT_FALSE(grammar_accepts(r, R"({"a": )"));
  EXPECT_FALSE(chat(R"(,"response_format":{"type":"text"})").params.grammar);
  EXPECT_FALSE(chat("").params.grammar);
}

TEST(StructuredOutput, ResponseFormatJsonSchemaFollowsTheSchema) {
  const ApiRequest r = chat(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,
    "schema":{"type":"object","properties":{"n":{"type":"integer"},"ok":{"type":"boolean"}},
    "required":["n","ok"],"additionalProperties":false}}})");
  EXPECT_TRUE(grammar_accepts(r, R"({"n": 3, "ok": false})"));
  EXPECT_FALSE(grammar_accepts(r, R"({"n": "3", "ok": false})"));
  EXPECT_FALSE(grammar_accepts(r, R"({"n": 3})"));
  EXPECT_FALSE(grammar_accepts(r, R"({"ok": false, "n": 3, "x": 1})"));
}

TEST(StructuredOutput, GbnfJsonSchemaGuidedJsonAndGuidedChoice) {
  EXPECT_TRUE(grammar_accepts(chat(R"(,"grammar":"root ::= \"a\" [0-9]+")"), "a42"));
  EXPECT_FALSE(grammar_accepts(chat(R"(,"grammar":"root ::= \"a\" [0-9]+")"), "b42"));
  EXPECT_TRUE(grammar_accepts(chat(R"(,"json_schema":{"type":"array","items":{"type":"null"}})"), "[null, null]"));
  EXPECT_TRUE(grammar_accepts(chat(R"(,"guided_json":{"enum":["x","y"]})"), R"("y")"));
  EXPECT_TRUE(grammar_accepts(chat(R"(,"guided_json":"{\"type\":\"boolean\"}")"), "true"));
  const ApiRequest choice = chat(R"(,"guided_choice":["yes","no","a \"quoted\" one"])");
  EXPECT_TRUE(grammar_accepts(choice, "no"));
  EXPECT_TRUE(grammar_accepts(choice, R"(a "quoted" one)"));
  EXPECT_FALSE(grammar_accepts(choice, "maybe"));
  // The completions endpoint takes them too.
  const ApiRequest completion =
      parse_request(Endpoint::Completions, R"({"prompt":"x","response_format":{"type":"json_object"}})", 16);
  EXPECT_TRUE(grammar_accepts(completion, "[]"));
}

TEST(StructuredOutput, UnusableConstraintsAre400sNamingTheProblem) {
  const std::string minimum = rejection(R"({"messages":[{"role":"user","content":"hi"}],"response_format":
    {"type":"json_schema","json_schema":{"name":"p","schema":{"type":"integer","minimum":3}}}})");
  EXPECT_NE(minimum.find("minimum"), std::string::npos) << minimum;
  EXPECT_NE(minimum.find("response_format"), std::string::npos) << minimum;
  EXPECT_NE(
      rejection(R"({"messages":[{"role":"user","content":"hi"}],"grammar":"root ::= undefined-rule"})").find("grammar"),
      std::string::npos);
  EXPECT_NE(rejection(R"({"messages":[{"role":"user","content":"hi"}],"grammar":7})").find("'grammar'"),
            std::string::npos);
  EXPECT_NE(rejection(R"({"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"nonsense"}})")
                .find("nonsense"),
            std::string::npos);
  EXPECT_NE(rejection(R"({"messages":[{"role":"user","content":"hi"}],"guided_choice":[]})").find("guided_choice"),
            std::string::npos);
  const std::string both = rejection(
      R"({"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"},"grammar":"root ::= \"a\""})");
  EXPECT_NE(both.find("both"), std::string::npos) << both;
  const std::string tool_and_format =
      rejection(R"({"messages":[{"role":"user","content":"hi"}],"tool_choice":"required","response_format":)"
                R"({"type":"json_object"})" +
                kWeatherTools + "}");
  EXPECT_NE(tool_and_format.find("tool_choice"), std::string::npos) << tool_and_format;
}

TEST(StructuredOutput, ToolChoiceRequiredForcesAnArrayOfKnownCalls) {
  const ApiRequest r = chat(R"(,"tool_choice":"required")" + kWeatherTools);
  const std::string two = R"([{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}},
    {"name": "get_time", "parameters": {"zone": "CET"}}])";
  EXPECT_TRUE(grammar_accepts(r, two));
  EXPECT_FALSE(grammar_accepts(r, "[]"));
  EXPECT_FALSE(grammar_accepts(r, R"([{"name": "get_time", "parameters": {"city": "Paris", "unit": "c"}}])"));
  EXPECT_FALSE(grammar_accepts(r, R"([{"name": "launch", "parameters": {}}])"));
  const auto calls = forced_tool_calls(r, two, 7);
  ASSERT_TRUE(calls);
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0].name, "get_weather");
  EXPECT_EQ(json::parse((*calls)[0].arguments), json::parse(R"({"city": "Paris", "unit": "c"})"));
  EXPECT_EQ((*calls)[1].name, "get_time");
  EXPECT_NE((*calls)[0].id, (*calls)[1].id);
  EXPECT_EQ((*calls)[0].id.rfind("call_", 0), 0u);
  EXPECT_FALSE(forced_tool_calls(r, R"([{"name": "get_time", "param)", 7)) << "cut short: no call";

  const ApiRequest single = chat(R"(,"tool_choice":"required","parallel_tool_calls":false)" + kWeatherTools);
  EXPECT_FALSE(grammar_accepts(single, two));
  EXPECT_TRUE(grammar_accepts(single, R"([{"name": "get_time", "parameters": {"zone": "UTC"}}])"));
}

TEST(StructuredOutput, NamedToolChoiceForcesItsArguments) {
  const ApiRequest r = chat(R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})" + kWeatherTools);
  EXPECT_TRUE(grammar_accepts(r, R"({"zone": "UTC"})"));
  EXPECT_FALSE(grammar_accepts(r, R"({"city": "Paris", "unit": "c"})"));
  const auto calls = forced_tool_calls(r, R"({"zone": "UTC"})", 1);
  ASSERT_TRUE(calls);
  ASSERT_EQ(calls->size(), 1u);
  EXPECT_EQ((*calls)[0].name, "get_time");
  EXPECT_EQ((*calls)[0].arguments, R"({"zone":"UTC"})");
  // auto and none leave the output free.
  EXPECT_FALSE(chat(R"(,"tool_choice":"auto")" + kWeatherTools).params.grammar);
  EXPECT_FALSE(chat(R"(,"tool_choice":"none")" + kWeatherTools).params.grammar);
}

std::string joined_content(const std::vector<json>& deltas, const char* key) {
  std::string text;
  for (const json& d : deltas)
    if (d.contains(key)) text += d[key].get<std::string>();
  return text;
}

TEST(ChatReplyShaper, ForcedCallsStreamAtTheEndAndMatchTheWholeReading) {
  const ApiRequest r = chat(R"(,"tool_choice":"required")" + kWeatherTools);
  const std::string text = R"([{"name": "get_time", "parameters": {"zone": "CET"}}])";
  ChatReplyShaper streamed(r, {}, 5);
  std::vector<json> deltas;
  for (size_t i = 0; i < text.size(); i += 7) {
    std::vector<json> d = streamed.feed(text.substr(i, 7));
    EXPECT_TRUE(d.empty()) << "a forced call is sent whole";
  }
  deltas = streamed.finish();
  ASSERT_EQ(deltas.size(), 1u);
  const json& call = deltas[0]["tool_calls"][0];
  EXPECT_EQ(call["index"], 0);
  EXPECT_EQ(call["function"]["name"], "get_time");
  EXPECT_EQ(call["function"]["arguments"], R"({"zone":"CET"})");
  EXPECT_TRUE(streamed.called_tools());

  ChatReplyShaper whole(r, {}, 5);
  const ChatReply reply = whole.whole(text);
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.tool_calls[0].id, call["id"]);
  EXPECT_TRUE(reply.content.empty());
}

TEST(ChatReplyShaper, AutoReadsTheTemplatesOwnCallSyntaxAndReasoning) {
  const ApiRequest r = chat(kWeatherTools);
  const chat::ToolCallSyntax hermes{chat::ToolCallFormat::kHermes, chat::ReasoningTags::kTags};
  const std::string text =
      "<think>Need the time.</think>Let me check.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
      "{\"zone\": \"UTC\"}}\n</tool_call>";
  ChatReplyShaper whole(r, hermes, 3);
  const ChatReply reply = whole.whole(text);
  EXPECT_EQ(reply.reasoning_content, "Need the time.");
  EXPECT_EQ(reply.content, "Let me check.");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.tool_calls[0].name, "get_time");

  ChatReplyShaper streamed(r, hermes, 3);
  std::vector<json> deltas;
  for (size_t i = 0; i < text.size(); i += 3)
    for (json& d : streamed.feed(text.substr(i, 3))) deltas.push_back(std::move(d));
  for (json& d : streamed.finish()) deltas.push_back(std::move(d));
  EXPECT_EQ(joined_content(deltas, "reasoning_content"), "Need the time.");
  EXPECT_EQ(joined_content(deltas, "content"), "Let me check.");
  int calls = 0;
  for (const json& d : deltas)
    if (d.contains("tool_calls")) {
      ++calls;
      EXPECT_EQ(d["tool_calls"][0]["id"], reply.tool_calls[0].id);
      EXPECT_EQ(d["tool_calls"][0]["function"]["arguments"], reply.tool_calls[0].arguments);
    }
  EXPECT_EQ(calls, 1);

  // tool_choice none: the same text is all content, the call syntax included.
  const ApiRequest none = chat(R"(,"tool_choice":"none")" + kWeatherTools);
  ChatReplyShaper plain(none, hermes, 3);
  const ChatReply unparsed = plain.whole(text);
  EXPECT_TRUE(unparsed.tool_calls.empty());
  EXPECT_NE(unparsed.content.find("<tool_call>"), std::string::npos);
}

TEST(ChatReplyShaper, WithoutToolsOrReasoningTheTextPassesUnchanged) {
  const ApiRequest r = chat("");
  ChatReplyShaper shaper(r, {chat::ToolCallFormat::kHermes, chat::ReasoningTags::kNone}, 1);
  const std::vector<json> deltas = shaper.feed("  spaced <tool_call> ");
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(deltas[0]["content"], "  spaced <tool_call> ");
  EXPECT_EQ(shaper.whole("  x ").content, "  x ");
}

TEST(ChatReplyShaper, ResponseAndFinalChunkSayToolCalls) {
  ResponseMeta meta;
  meta.endpoint = Endpoint::Chat;
  meta.id = "chatcmpl-1";
  Completion completion;
  completion.finish_reason = FinishReason::EndOfSequence;
  completion.reply = ChatReply{"", "thinking", {{"call_1", "get_time", R"({"zone":"UTC"})"}}};
  const json response = response_json(meta, completion);
  const json& choice = response["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(choice["message"]["reasoning_content"], "thinking");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_time");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["type"], "function");
  // Cut short by max_tokens: still "length".
  completion.finish_reason = FinishReason::Length;
  EXPECT_EQ(response_json(meta, completion)["choices"][0]["finish_reason"], "length");

  RequestEvent last;
  last.finished = true;
  last.finish_reason = FinishReason::EndOfSequence;
  const std::string chunks = sse_chat_event(meta, last, {}, false, false, true);
  EXPECT_NE(chunks.find(R"("finish_reason":"tool_calls")"), std::string::npos) << chunks;
}

}  // namespace
}  // namespace tandem::server
