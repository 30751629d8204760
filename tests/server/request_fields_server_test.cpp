// Issue 35's request fields against a real `tandem serve` (aidreams260K): n_predict limits a
// chat, include_stop_str_in_output keeps the stop string, truncate_prompt_tokens keeps the last
// tokens, return_tokens_as_token_ids names logprob tokens by id, bad_words keeps a word out,
// DRY/XTC/typical-p draws are seeded, priority and a request's chat_template are 400s naming
// the flag until the server is started with it, Mirostat's draws are seeded, and Mirostat with
// a truncation sampler as well is a 400 naming that one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "server_process.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

#define REQUIRE_MODEL() TANDEM_REQUIRE_SHARED(kAidreamsGguf)

json post_json(httplib::Client& client, const std::string& path, const json& body, int status = 200) {
  const auto res = client.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(res) << path;
  if (!res) return nullptr;
  EXPECT_EQ(res->status, status) << body.dump() << " -> " << res->body;
  return json::parse(res->body, nullptr, false);
}

// A 400 whose param is `field` and whose message names `words`.
void expect_refusal(httplib::Client& client, const std::string& path, const json& body, const std::string& field,
                    const std::string& words) {
  const json error = post_json(client, path, body, 400);
  ASSERT_TRUE(error.is_object() && error.contains("error")) << error;
  EXPECT_EQ(error["error"]["param"], field) << error;
  EXPECT_NE(error["error"]["message"].get<std::string>().find(words), std::string::npos) << error;
}

const json kChat = json::array({{{"role", "user"}, {"content", "Tell me a story about a cat"}}});

TEST(RequestFieldsServer, FieldsAreHonouredEndToEnd) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "2"})) << server.log();
  httplib::Client client = server.client();

  // n_predict: llama-server's max_tokens.
  json chat = post_json(client, "/v1/chat/completions",
                        {{"messages", kChat}, {"n_predict", 3}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(chat["usage"]["completion_tokens"], 3) << chat;
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "length");
  expect_refusal(client, "/v1/chat/completions", {{"messages", kChat}, {"n_predict", 3}, {"max_tokens", 4}},
                 "n_predict", "max_tokens");

  // include_stop_str_in_output: the stop string stays at the end of the text.
  const json plain =
      post_json(client, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}});
  const std::string text = plain["choices"][0]["text"];
  ASSERT_GT(text.size(), 12u) << plain;
  const std::string stop = text.substr(8, 3);
  const size_t at = text.find(stop);
  const json stopped = post_json(
      client, "/v1/completions",
      {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}, {"stop", json::array({stop})}});
  EXPECT_EQ(stopped["choices"][0]["text"], text.substr(0, at));
  const json kept = post_json(client, "/v1/completions",
                              {{"prompt", "Once upon a time"},
                               {"max_tokens", 40},
                               {"temperature", 0},
                               {"stop", json::array({stop})},
                               {"include_stop_str_in_output", true}});
  EXPECT_EQ(kept["choices"][0]["text"], text.substr(0, at + stop.size()));
  EXPECT_EQ(kept["choices"][0]["finish_reason"], "stop");

  // truncate_prompt_tokens: the prompt's last N tokens only.
  const json truncated = post_json(client, "/v1/completions",
                                   {{"prompt", "Once upon a time there was a little girl named Lily"},
                                    {"max_tokens", 2},
                                    {"truncate_prompt_tokens", 4}});
  EXPECT_EQ(truncated["usage"]["prompt_tokens"], 4) << truncated;

  // return_tokens_as_token_ids: logprob tokens as "token_id:N".
  const json ids = post_json(client, "/v1/chat/completions",
                             {{"messages", kChat},
                              {"max_tokens", 4},
                              {"logprobs", true},
                              {"top_logprobs", 2},
                              {"return_tokens_as_token_ids", true}});
  const json& content = ids["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 4u) << ids;
  const std::regex token_id("token_id:[0-9]+");
  for (const json& entry : content) {
    EXPECT_TRUE(std::regex_match(entry["token"].get<std::string>(), token_id)) << entry;
    for (const json& top : entry["top_logprobs"])
      EXPECT_TRUE(std::regex_match(top["token"].get<std::string>(), token_id)) << top;
  }

  // bad_words: a word of the greedy text, banned, is not generated (its token sequence, as the
  // tokenizer encodes the word after a space, is never completed).
  const json greedy =
      post_json(client, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}});
  const std::string greedy_text = greedy["choices"][0]["text"];
  std::smatch match;
  const std::regex a_word(" ([a-z]{4,})");
  ASSERT_TRUE(std::regex_search(greedy_text, match, a_word)) << greedy_text;
  const std::string word = match[1];
  const json banned = post_json(
      client, "/v1/completions",
      {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}, {"bad_words", json::array({word})}});
  const std::string banned_text = banned["choices"][0]["text"];
  EXPECT_EQ(banned_text.find(" " + word), std::string::npos) << word << " in " << banned_text;
  EXPECT_NE(banned_text, greedy_text);

  // allowed_token_ids: only those are sampled (their ids come back with return_tokens_as_token_ids).
  const json allowed = post_json(client, "/v1/completions",
                                 {{"prompt", "Once upon a time"},
                                  {"max_tokens", 8},
                                  {"allowed_token_ids", {300, 301}},
                                  {"logprobs", 0},
                                  {"return_tokens_as_token_ids", true}});
  for (const json& token : allowed["choices"][0]["logprobs"]["tokens"])
    EXPECT_TRUE(token == "token_id:300" || token == "token_id:301") << allowed;
  expect_refusal(client, "/v1/completions", {{"prompt", "hi"}, {"allowed_token_ids", {100000}}}, "allowed_token_ids",
                 "outside the vocabulary");

  // DRY, XTC and typical-p together: seeded draws repeat, and they change the draws.
  const json sampled_body = {{"prompt", "Once upon a time"}, {"max_tokens", 48}, {"seed", 11}, {"temperature", 1.0}};
  json extras = sampled_body;
  extras.update({{"dry_multiplier", 0.8},
                 {"dry_allowed_length", 1},
                 {"xtc_probability", 0.5},
                 {"xtc_threshold", 0.05},
                 {"typical_p", 0.9}});
  const json a = post_json(client, "/v1/completions", extras);
  const json b = post_json(client, "/v1/completions", extras);
  const json without = post_json(client, "/v1/completions", sampled_body);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  EXPECT_NE(a["choices"][0]["text"], without["choices"][0]["text"]);

  // Refusals that name the field, and the flag where one would allow it.
  expect_refusal(client, "/v1/completions", {{"prompt", "hi"}, {"priority", 1}}, "priority",
                 "--scheduling-policy priority");
  expect_refusal(client, "/v1/chat/completions", {{"messages", kChat}, {"chat_template", "{{ 'x' }}"}}, "chat_template",
                 "--trust-request-chat-template");
  expect_refusal(client, "/v1/completions", {{"prompt", "hi"}, {"mirostat", 2}, {"top_k", 5}}, "top_k", "Mirostat");
  // Mirostat v2: seeded draws repeat.
  json mirostat = sampled_body;
  mirostat.update({{"mirostat", 2}, {"mirostat_tau", 3.0}, {"mirostat_eta", 0.2}});
  const json m1 = post_json(client, "/v1/completions", mirostat);
  const json m2 = post_json(client, "/v1/completions", mirostat);
  EXPECT_EQ(m1["choices"][0]["text"], m2["choices"][0]["text"]);
  EXPECT_EQ(m1["usage"]["completion_tokens"], m2["usage"]["completion_tokens"]);
  expect_refusal(client, "/v1/completions", {{"prompt", "hi"}, {"dry_multiplier", 1}, {"dry_sequence_breakers", 3}},
                 "dry_sequence_breakers", "array of strings");
  // Priority 0 is what every request has: accepted without the flag.
  post_json(client, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}, {"priority", 0}});
  EXPECT_EQ(server.stop(), 0);
}

TEST(RequestFieldsServer, FlagsAllowPriorityAndARequestsOwnTemplate) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "2", "--scheduling-policy", "priority", "--trust-request-chat-template"}))
      << server.log();
  httplib::Client client = server.client();
  const json prioritised =
      post_json(client, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}, {"priority", -5}});
  EXPECT_EQ(prioritised["usage"]["completion_tokens"], 2) << prioritised;

  // The request's template renders the prompt: the user's words alone, as the same text sent to
  // /v1/completions (both get BOS as the vocabulary says).
  const json own = post_json(client, "/v1/chat/completions",
                             {{"messages", kChat},
                              {"max_tokens", 3},
                              {"temperature", 0},
                              {"chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}"}});
  const json same = post_json(client, "/v1/completions",
                              {{"prompt", "Tell me a story about a cat"}, {"max_tokens", 3}, {"temperature", 0}});
  EXPECT_EQ(own["usage"]["prompt_tokens"], same["usage"]["prompt_tokens"]) << own;
  EXPECT_EQ(own["choices"][0]["message"]["content"], same["choices"][0]["text"]);
  // Under the Jinja engine's limits: a runaway loop is a 400, not a hung worker.
  const json runaway = post_json(
      client, "/v1/chat/completions",
      {{"messages", kChat}, {"max_tokens", 1}, {"chat_template", "{% for i in range(100000000) %}x{% endfor %}"}}, 400);
  EXPECT_TRUE(runaway.contains("error")) << runaway;
  expect_refusal(client, "/v1/chat/completions", {{"messages", kChat}, {"chat_template", "{% if %}"}}, "chat_template",
                 "does not parse");
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace tandem::testing
