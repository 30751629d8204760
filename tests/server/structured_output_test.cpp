// Structured output and tool calls at the protocol level (server/structured_output.h,
// chat_reply.h, openai_protocol.h): which request fields become which grammar (checked by
// running the compiled grammar on texts it must accept and refuse), the 400s for unusable
// ones, forced tool calls read back, auto tool calls and reasoning parsed from the template's
// syntax, and the response / stream JSON that carries them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
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

TEST(StructuredOutput, ResponseFormatJsonObjectAcceptsAnObjectOnly) {
  const ApiRequest r = chat(R"(,"response_format":{"type":"json_object"})");
  EXPECT_TRUE(grammar_accepts(r, R"({"a": [1, 2.5, "x", null, true]})"));
  EXPECT_FALSE(grammar_accepts(r, "hello"));
  EXPECT_FALSE(grammar_accepts(r, R"({"a": )"));
  // "a valid JSON object": a bare number, string or array is not one (LangChain's jsonMode
  // parses the reply as an object).
  EXPECT_FALSE(grammar_accepts(r, "42"));
  EXPECT_FALSE(grammar_accepts(r, R"("text")"));
  EXPECT_FALSE(grammar_accepts(r, "[1]"));
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
  EXPECT_TRUE(grammar_accepts(completion, "{}"));
  EXPECT_FALSE(grammar_accepts(completion, "[]"));
}

TEST(StructuredOutput, GuidedRegexAndGuidedGrammar) {
  for (Endpoint endpoint : {Endpoint::Chat, Endpoint::Completions}) {
    const std::string head =
        endpoint == Endpoint::Chat ? R"({"messages":[{"role":"user","content":"hi"}])" : R"({"prompt":"hi")";
    const ApiRequest regex = parse_request(endpoint, head + R"(,"guided_regex":"[A-Z]{2}-\\d{3}"})", 16);
    EXPECT_TRUE(grammar_accepts(regex, "AB-123"));
    EXPECT_FALSE(grammar_accepts(regex, "AB-1234"));
    EXPECT_FALSE(grammar_accepts(regex, "xAB-123")) << "guided_regex is a whole match";
    const ApiRequest gbnf = parse_request(endpoint, head + R"(,"guided_grammar":"root ::= \"yes\" | \"no\""})", 16);
    EXPECT_TRUE(grammar_accepts(gbnf, "no"));
    EXPECT_FALSE(grammar_accepts(gbnf, "maybe"));
  }
  EXPECT_NE(
      rejection(R"({"messages":[{"role":"user","content":"hi"}],"guided_regex":"(a)\\1"})").find("backreferences"),
      std::string::npos);
  EXPECT_NE(rejection(R"({"messages":[{"role":"user","content":"hi"}],"guided_regex":"a{0,100000}"})")
                .find("kMaxRepetitionCount"),
            std::string::npos);
  EXPECT_NE(rejection(R"({"messages":[{"role":"user","content":"hi"}],"guided_regex":""})").find("guided_regex"),
            std::string::npos);
  EXPECT_NE(rejection(R"({"messages":[{"role":"user","content":"hi"}],"guided_grammar":"root ::= x"})")
                .find("guided_grammar"),
            std::string::npos);
  EXPECT_NE(rejection(R"({"messages":[{"role":"user","content":"hi"}],"guided_regex":"a","guided_choice":["a"]})")
                .find("both"),
            std::string::npos);
}

TEST(StructuredOutput, VllmStructuredOutputsObject) {
  EXPECT_TRUE(
      grammar_accepts(chat(R"(,"structured_outputs":{"json":{"type":"integer","minimum":1,"maximum":9}})"), "7"));
  EXPECT_FALSE(
      grammar_accepts(chat(R"(,"structured_outputs":{"json":{"type":"integer","minimum":1,"maximum":9}})"), "10"));
  EXPECT_TRUE(grammar_accepts(chat(R"(,"structured_outputs":{"json":"{\"type\":\"boolean\"}"})"), "false"));
  EXPECT_TRUE(grammar_accepts(chat(R"(,"structured_outputs":{"regex":"\\d+"})"), "123"));
  EXPECT_FALSE(grammar_accepts(chat(R"(,"structured_outputs":{"regex":"\\d+"})"), "12a"));
  EXPECT_TRUE(grammar_accepts(chat(R"(,"structured_outputs":{"choice":["red","green"]})"), "green"));
  EXPECT_FALSE(grammar_accepts(chat(R"(,"structured_outputs":{"choice":["red","green"]})"), "blue"));
  EXPECT_TRUE(grammar_accepts(chat(R"(,"structured_outputs":{"grammar":"root ::= [a-c]+"})"), "abc"));
  EXPECT_TRUE(grammar_accepts(chat(R"(,"structured_outputs":{"json_object":true})"), R"({"k": 1})"));
  EXPECT_FALSE(grammar_accepts(chat(R"(,"structured_outputs":{"json_object":true})"), "1"));
  // disable_any_whitespace: JSON without whitespace between tokens.
  const ApiRequest tight = chat(R"(,"structured_outputs":{"json":{"type":"array"},"disable_any_whitespace":true})");
  EXPECT_TRUE(grammar_accepts(tight, "[1,2]"));
  EXPECT_FALSE(grammar_accepts(tight, "[1, 2]"));
  EXPECT_TRUE(grammar_accepts(
      parse_request(Endpoint::Completions, R"({"prompt":"x","structured_outputs":{"choice":["a"]}})", 16), "a"));
  const std::string head = R"({"messages":[{"role":"user","content":"hi"}],"structured_outputs":)";
  EXPECT_NE(rejection(head + R"({"json":{},"regex":"a"}})").find("sets both"), std::string::npos);
  EXPECT_NE(rejection(head + R"({}})").find("must set one of"), std::string::npos);
  EXPECT_NE(rejection(head + R"({"structural_tag":"x"}})").find("structured_outputs.structural_tag"),
            std::string::npos);
  EXPECT_NE(rejection(head + R"x({"regex":"(?=a)"}})x").find("lookahead"), std::string::npos);
  EXPECT_NE(rejection(head + R"("json"})").find("'structured_outputs' must be an object"), std::string::npos);
  EXPECT_NE(rejection(head + R"({"choice":["a"]},"grammar":"root ::= \"a\""})").find("both"), std::string::npos);
}

// The request bodies real clients send for one zod schema (.int(), .min(), .max(), .regex(),
// .email(), .array().min(1).max(3)), captured by fixtures/capture_client_schemas.mjs: each is
// accepted, and its grammar takes a valid reply and refuses replies that break one keyword.
TEST(StructuredOutput, SchemasRealClientsSendAreFollowed) {
  const std::filesystem::path path = std::filesystem::path(__FILE__).parent_path() / "fixtures" / "client_schemas.json";
  std::ifstream file(path);
  ASSERT_TRUE(file) << "missing fixture " << path;
  std::stringstream text;
  text << file.rdbuf();
  const json fixture = json::parse(text.str());
  ASSERT_GE(fixture["requests"].size(), 8u);
  const json valid = {{"name", "Ann"},      {"age", 30},
                      {"code", "ABC-12"},   {"email", "ann@example.com"},
                      {"tags", {"x", "y"}}, {"count", -9007199254740991}};
  auto with = [&](const char* key, const json& value) {
    json v = valid;
    v[key] = value;
    return v.dump();
  };
  for (const auto& [name, body] : fixture["requests"].items()) {
    SCOPED_TRACE(name);
    json request = body;
    request["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
    ApiRequest r;
    try {
      r = parse_request(Endpoint::Chat, request.dump(), 16);
    } catch (const ApiError& e) {
      ADD_FAILURE() << "refused: " << e.what();
      continue;
    }
    // Named tool choice (LangChain's functionCalling): the arguments object is the reply.
    EXPECT_TRUE(grammar_accepts(r, valid.dump()));
    EXPECT_TRUE(grammar_accepts(r, with("age", 150)));
    EXPECT_TRUE(grammar_accepts(r, with("tags", {"a", "b", "c"})));
    EXPECT_FALSE(grammar_accepts(r, with("age", 151)));
    EXPECT_FALSE(grammar_accepts(r, with("age", -1)));
    EXPECT_FALSE(grammar_accepts(r, with("age", 3.5)));
    EXPECT_FALSE(grammar_accepts(r, with("name", "")));
    EXPECT_FALSE(grammar_accepts(r, with("code", "abc-12")));
    EXPECT_FALSE(grammar_accepts(r, with("code", "ABC-123")));
    EXPECT_FALSE(grammar_accepts(r, with("email", "not an email")));
    EXPECT_FALSE(grammar_accepts(r, with("tags", json::array())));
    EXPECT_FALSE(grammar_accepts(r, with("tags", {"a", "b", "c", "d"})));
    EXPECT_FALSE(grammar_accepts(r, with("tags", {"eleven chars"})));
  }
}

TEST(StructuredOutput, UnusableConstraintsAre400sNamingTheProblem) {
  const std::string unsupported = rejection(R"({"messages":[{"role":"user","content":"hi"}],"response_format":
    {"type":"json_schema","json_schema":{"name":"p","schema":{"type":"integer","not":{"const":3}}}}})");
  EXPECT_NE(unsupported.find("'not'"), std::string::npos) << unsupported;
  EXPECT_NE(unsupported.find("response_format"), std::string::npos) << unsupported;
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
  // Cut by max_tokens after complete calls: those are still returned, the cut one dropped.
  bool cut = false;
  const auto kept = forced_tool_calls(
      r, R"([{"name": "get_weather", "parameters": {"city": "Paris, \"}{", "unit": "c"}}, {"name": "get_time", "param)",
      7, &cut);
  ASSERT_TRUE(kept);
  EXPECT_TRUE(cut);
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0].name, "get_weather");
  EXPECT_EQ(json::parse((*kept)[0].arguments), json::parse(R"({"city": "Paris, \"}{", "unit": "c"})"));
  cut = true;
  EXPECT_EQ(forced_tool_calls(r, two, 7, &cut)->size(), 2u);
  EXPECT_FALSE(cut);

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

// max_tokens cut a forced "required" reply inside its second call: the first is a call (the
// AI SDK's ToolChoiceViolationError and LangChain's empty tool_calls came from losing it).
TEST(ChatReplyShaper, ForcedCallsCutShortKeepTheCompleteOnes) {
  const ApiRequest r = chat(R"(,"tool_choice":"required")" + kWeatherTools);
  const std::string text = R"([{"name": "get_time", "parameters": {"zone": "CET"}}, {"name": "get_weather", "par)";
  ChatReplyShaper streamed(r, {}, 5);
  EXPECT_TRUE(streamed.feed(text).empty());
  const std::vector<json> deltas = streamed.finish();
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(deltas[0]["tool_calls"][0]["function"]["name"], "get_time");
  EXPECT_TRUE(streamed.called_tools());
  ASSERT_EQ(streamed.errors().size(), 1u);
  EXPECT_NE(streamed.errors()[0].find("did not complete"), std::string::npos);

  ChatReplyShaper whole(r, {}, 5);
  const ChatReply reply = whole.whole(text);
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_TRUE(reply.content.empty());
  // Nothing complete: the text is returned as content, as before.
  ChatReplyShaper none(r, {}, 5);
  EXPECT_EQ(none.whole(R"([{"name": "get_ti)").content, R"([{"name": "get_ti)");
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
