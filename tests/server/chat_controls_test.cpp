// Chat controls and multi-choice responses as pure functions (openai_protocol.h,
// chat_request.h, request_log.h): prefill and chat_template_kwargs parsing, n / best_of /
// echo / suffix validation, responses and SSE chunks with several choices, seeds per choice,
// and the request log lines.
#include <gtest/gtest.h>

#include "base/error.h"
#include "server/chat_request.h"
#include "server/openai_protocol.h"
#include "server/request_log.h"

namespace tandem::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string rejection(std::string_view body, Endpoint endpoint = Endpoint::Completions) {
  try {
    parse_request(endpoint, body, 16);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    return e.what();
  }
  ADD_FAILURE() << body << ": accepted";
  return {};
}

ApiRequest chat(std::string_view body) { return parse_request(Endpoint::Chat, body, 16); }

constexpr const char* kEndsWithAssistant =
    R"("messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Once"}])";
constexpr const char* kEndsWithUser = R"("messages":[{"role":"user","content":"Hi"}])";

TEST(ChatControls, FinalAssistantMessageIsContinuedByDefault) {
  const ApiRequest prefill = chat(std::string("{") + kEndsWithAssistant + "}");
  EXPECT_TRUE(prefill.render.continue_final_message);
  const ApiRequest user_last = chat(std::string("{") + kEndsWithUser + "}");
  EXPECT_FALSE(user_last.render.continue_final_message);
  EXPECT_TRUE(user_last.render.add_generation_prompt);
  // vLLM's spelling of the same.
  EXPECT_TRUE(chat(std::string("{") + kEndsWithAssistant + R"(,"continue_final_message":true,)" +
                   R"("add_generation_prompt":false})")
                  .render.continue_final_message);
  // Turned off: the turn is closed and a new one opened, as before.
  const ApiRequest closed = chat(std::string("{") + kEndsWithAssistant + R"(,"continue_final_message":false})");
  EXPECT_FALSE(closed.render.continue_final_message);
  EXPECT_FALSE(
      chat(std::string("{") + kEndsWithUser + R"(,"add_generation_prompt":false})").render.add_generation_prompt);
}

TEST(ChatControls, ContradictoryPrefillRequestsAre400) {
  EXPECT_NE(rejection(std::string("{") + kEndsWithUser + R"(,"continue_final_message":true})", Endpoint::Chat)
                .find("assistant"),
            std::string::npos);
  EXPECT_NE(rejection(std::string("{") + kEndsWithAssistant +
                          R"(,"continue_final_message":true,"add_generation_prompt":true})",
                      Endpoint::Chat)
                .find("add_generation_prompt"),
            std::string::npos);
  EXPECT_NE(rejection(std::string("{") + kEndsWithUser + R"(,"continue_final_message":"yes"})", Endpoint::Chat)
                .find("continue_final_message"),
            std::string::npos);
}

TEST(ChatControls, AssistantToolCallsAtTheEndStayAClosedTurn) {
  const ApiRequest request =
      chat(R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1",)"
           R"("type":"function","function":{"name":"f","arguments":"{}"}}]}]})");
  EXPECT_FALSE(request.render.continue_final_message);
}

TEST(ChatControls, TemplateKwargsMustBeAnObjectWithoutReservedNames) {
  const ApiRequest request =
      chat(std::string("{") + kEndsWithUser + R"(,"chat_template_kwargs":{"enable_thinking":false}})");
  EXPECT_EQ(request.render.template_kwargs, ordered_json({{"enable_thinking", false}}));
  EXPECT_NE(rejection(std::string("{") + kEndsWithUser + R"(,"chat_template_kwargs":[1]})", Endpoint::Chat)
                .find("chat_template_kwargs"),
            std::string::npos);
  EXPECT_NE(rejection(std::string("{") + kEndsWithUser + R"(,"chat_template_kwargs":{"messages":[]}})", Endpoint::Chat)
                .find("messages"),
            std::string::npos);
}

TEST(ChatControls, RequestKwargsOverrideTheServersKeyByKey) {
  const ordered_json server = {{"enable_thinking", false}, {"style", "short"}};
  const ordered_json merged = merge_template_kwargs(server, {{"enable_thinking", true}});
  EXPECT_EQ(merged["enable_thinking"], true);
  EXPECT_EQ(merged["style"], "short");
  EXPECT_EQ(merge_template_kwargs(nullptr, nullptr), ordered_json(nullptr));
  EXPECT_EQ(merge_template_kwargs(server, nullptr), server);
}

TEST(ChatControls, TemplateKwargsFlagIsAnObjectOrAOneLineError) {
  EXPECT_EQ(parse_template_kwargs_flag(R"({"enable_thinking": false})")["enable_thinking"], false);
  for (const char* bad : {"{enable_thinking: false}", "[1, 2]", "", R"({"tools": 1})"}) {
    try {
      parse_template_kwargs_flag(bad);
      ADD_FAILURE() << bad << ": accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string(bad).empty() ? "JSON" : ""), std::string::npos);
    }
  }
}

TEST(ChatControls, ChoicesBestOfEchoAndSuffix) {
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt":"hi","n":3})", 16).n, 3);
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt":"hi","n":3,"best_of":3})", 16).n, 3);
  EXPECT_EQ(chat(std::string("{") + kEndsWithUser + R"(,"n":2})").n, 2);
  EXPECT_NE(rejection(R"({"prompt":"hi","n":0})").find("'n'"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","n":1000})").find("'n'"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","n":2,"best_of":4})").find("best_of"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","best_of":2})").find("best_of"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","suffix":"end"})").find("suffix"), std::string::npos);
  EXPECT_TRUE(parse_request(Endpoint::Completions, R"({"prompt":"hi","echo":true})", 16).echo);
  const std::string echo_logprobs = rejection(R"({"prompt":"hi","echo":true,"logprobs":1})");
  EXPECT_NE(echo_logprobs.find("echo"), std::string::npos);
  EXPECT_NE(echo_logprobs.find("logprobs"), std::string::npos);
  EXPECT_NE(rejection(std::string("{") + kEndsWithUser + R"(,"echo":true})", Endpoint::Chat).find("echo"),
            std::string::npos);
}

TEST(ChatControls, EachChoiceHasItsOwnSeed) {
  EXPECT_EQ(choice_seed(42, 0), 42u);
  EXPECT_EQ(choice_seed(42, 2), 44u);
  EXPECT_EQ(choice_seed(UINT64_MAX, 1), 0u);  // wraps, as the seed field may be any uint64
}

TEST(ChatControls, ResponseWithChoicesCountsThePromptOnce) {
  ResponseMeta meta{Endpoint::Completions, "cmpl-1", 1, "m", false};
  meta.n = 3;  // three choices of one prompt
  std::vector<Completion> choices(3);
  for (int i = 0; i < 3; ++i) {
    choices[static_cast<size_t>(i)].text = std::string(1, static_cast<char>('a' + i));
    choices[static_cast<size_t>(i)].prompt_tokens = 10;
    choices[static_cast<size_t>(i)].cached_tokens = i == 0 ? 0 : 8;
    choices[static_cast<size_t>(i)].completion_tokens = 4 + i;
    choices[static_cast<size_t>(i)].finish_reason = FinishReason::Length;
  }
  const json response = response_json(meta, choices);
  ASSERT_EQ(response["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(response["choices"][i]["index"], i);
    EXPECT_EQ(response["choices"][i]["text"], std::string(1, static_cast<char>('a' + i)));
  }
  EXPECT_EQ(response["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(response["usage"]["completion_tokens"], 15);
  EXPECT_EQ(response["usage"]["total_tokens"], 25);
  EXPECT_EQ(response["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  // Two prompts of 10 and 7 tokens with n = 2 (prompt-major): each prompt counted once, as its
  // first choice's.
  meta.n = 2;
  choices.resize(4);
  choices[2].prompt_tokens = choices[3].prompt_tokens = 7;
  choices[2].cached_tokens = 3;
  choices[3].completion_tokens = 1;
  const json two = response_json(meta, choices);
  EXPECT_EQ(two["usage"]["prompt_tokens"], 17);
  EXPECT_EQ(two["usage"]["completion_tokens"], 4 + 5 + 6 + 1);
  EXPECT_EQ(two["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
  EXPECT_EQ(two["choices"][3]["index"], 3);
}

TEST(ChatControls, StreamedChoicesCarryTheirIndexAndTheStreamEndsOnce) {
  ResponseMeta meta{Endpoint::Chat, "chatcmpl-1", 1, "m", false};
  RequestEvent last;
  last.finished = true;
  last.finish_reason = FinishReason::Length;
  const std::string chunks = sse_choice_event(meta, last, {{{"content", "x"}}}, true, false, 2);
  EXPECT_EQ(chunks.find("[DONE]"), std::string::npos);
  size_t at = 0, count = 0;
  while ((at = chunks.find("data: ", at)) != std::string::npos) {
    const json chunk = json::parse(chunks.substr(at + 6, chunks.find("\n\n", at) - at - 6));
    EXPECT_EQ(chunk["choices"][0]["index"], 2);
    ++count;
    ++at;
  }
  EXPECT_EQ(count, 3u);  // role, content, finish
  const std::string end = sse_stream_end(meta, usage_json(5, 6, 0));
  EXPECT_NE(end.find("\"usage\""), std::string::npos);
  EXPECT_EQ(end.substr(end.size() - 14), "data: [DONE]\n\n");
  EXPECT_EQ(sse_stream_end(meta, nullptr), "data: [DONE]\n\n");
}

TEST(RequestLog, JsonLinesParseAndTextLinesStayOneLine) {
  RequestLogEntry entry;
  entry.id = "cmpl-7";
  entry.method = "POST";
  entry.path = "/v1/completions";
  entry.status = 200;
  entry.total_ms = 12.345;
  entry.generation = true;
  entry.choices = 3;
  entry.prompt_tokens = 40;
  entry.cached_tokens = 64;
  entry.completion_tokens = 48;
  entry.queue_ms = 0.26;
  entry.ttft_ms = 4.04;
  entry.finish_reason = "length";
  const std::string line = request_log_line(entry, LogFormat::Json);
  ASSERT_EQ(line.back(), '\n');
  const json parsed = json::parse(line);
  EXPECT_EQ(parsed["event"], "request");
  EXPECT_EQ(parsed["level"], "info");
  EXPECT_EQ(parsed["id"], "cmpl-7");
  EXPECT_EQ(parsed["status"], 200);
  EXPECT_EQ(parsed["prompt_tokens"], 40);
  EXPECT_EQ(parsed["cached_tokens"], 64);
  EXPECT_EQ(parsed["completion_tokens"], 48);
  EXPECT_DOUBLE_EQ(parsed["total_ms"].get<double>(), 12.3);
  EXPECT_DOUBLE_EQ(parsed["ttft_ms"].get<double>(), 4.0);
  EXPECT_EQ(parsed["time"].get<std::string>().size(), 24u);  // 2026-12-03T07:48:27.123Z

  EXPECT_EQ(request_log_line(entry, LogFormat::Text),
            "tandem serve: request cmpl-7 POST /v1/completions 200 n=3 prompt=40 cached=64 generated=48 queue_ms=0.3 "
            "ttft_ms=4 total_ms=12.3 finish=length\n");
  // A path cannot forge a second line or split the fields.
  RequestLogEntry odd{.id = "req-1", .method = "GET", .path = "/a b\r\nx", .status = 404};
  const std::string text = request_log_line(odd, LogFormat::Text);
  EXPECT_EQ(text.find('\n'), text.size() - 1);
  EXPECT_NE(text.find("/a%20b%0D%0Ax"), std::string::npos);
  EXPECT_EQ(json::parse(request_log_line(odd, LogFormat::Json)).count("prompt_tokens"), 0u);

  EXPECT_EQ(log_message_line("warning", "slow", LogFormat::Text), "tandem serve: warning: slow\n");
  EXPECT_EQ(json::parse(log_message_line("info", "ready", LogFormat::Json))["message"], "ready");
  EXPECT_EQ(log_format_from_name("json"), LogFormat::Json);
  EXPECT_FALSE(log_format_from_name("xml"));
}

}  // namespace
}  // namespace tandem::server
