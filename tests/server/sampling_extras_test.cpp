// parse_request on issue 35's fields: values reach GenerationParams, bad ones are 400s naming
// the field (n_predict 0 or disagreeing with max_tokens, the two spellings of one penalty
// disagreeing, oversized lists and templates), and truncate_prompt keeps the last tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"
#include "server/sampling_extras.h"

namespace tandem::server {
namespace {

using nlohmann::json;

ApiRequest parse(const json& body, Endpoint endpoint = Endpoint::Completions) {
  json full = body;
  if (endpoint == Endpoint::Completions) full["prompt"] = "hi";
  if (endpoint == Endpoint::Chat) full["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
  return parse_request(endpoint, full.dump(), 16);
}

// The 400's param, or "" when the body is accepted.
std::string refused_field(const json& body, Endpoint endpoint = Endpoint::Completions) {
  try {
    parse(body, endpoint);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param;
  }
  return {};
}

TEST(SamplingExtras, ValuesReachTheEngineParams) {
  const ApiRequest r = parse({{"n_predict", 5},
                              {"typical_p", 1.0},
                              {"repeat_penalty", 1.2},
                              {"repeat_last_n", 32},
                              {"dry_multiplier", 0.8},
                              {"dry_base", 2},
                              {"dry_allowed_length", 3},
                              {"dry_penalty_last_n", 100},
                              {"dry_sequence_breakers", {"\n", "##"}},
                              {"xtc_probability", 0},
                              {"xtc_threshold", 0.2},
                              {"include_stop_str_in_output", true},
                              {"skip_special_tokens", false},
                              {"spaces_between_special_tokens", false},
                              {"bad_words", {"foo", " bar"}},
                              {"truncate_prompt_tokens", -1},
                              {"return_tokens_as_token_ids", true},
                              {"priority", -3},
                              {"mirostat", 2},
                              {"allowed_token_ids", {5, 9}},
                              {"mirostat_tau", 4},
                              {"mirostat_eta", 0.3}});
  const GenerationParams& p = r.params;
  EXPECT_EQ(p.max_tokens, 5);
  EXPECT_FLOAT_EQ(parse({{"typical_p", 0.7}}).params.sampling.typical_p, 0.7f);
  EXPECT_FLOAT_EQ(p.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(p.sampling.repeat_last_n, 32);
  EXPECT_FLOAT_EQ(p.sampling.dry.multiplier, 0.8f);
  EXPECT_FLOAT_EQ(p.sampling.dry.base, 2.0f);
  EXPECT_EQ(p.sampling.dry.allowed_length, 3);
  EXPECT_EQ(p.sampling.dry.penalty_last_n, 100);
  EXPECT_EQ(r.dry_breakers, (std::vector<std::string>{"\n", "##"}));
  EXPECT_FLOAT_EQ(parse({{"xtc_probability", 0.25}}).params.sampling.xtc_probability, 0.25f);
  EXPECT_FLOAT_EQ(p.sampling.xtc_threshold, 0.2f);
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_FALSE(p.detokenize.skip_special_tokens);
  EXPECT_FALSE(p.detokenize.spaces_between_special_tokens);
  EXPECT_EQ(r.bad_words, (std::vector<std::string>{"foo", " bar"}));
  EXPECT_EQ(r.truncate_prompt_tokens, -1);
  EXPECT_TRUE(r.tokens_as_ids);
  EXPECT_EQ(p.priority, -3);
  EXPECT_EQ(p.sampling.mirostat, 2);
  EXPECT_EQ(p.sampling.allowed_tokens, (std::vector<int32_t>{5, 9}));
  EXPECT_FLOAT_EQ(p.sampling.mirostat_tau, 4.0f);
  EXPECT_FLOAT_EQ(p.sampling.mirostat_eta, 0.3f);
  // Defaults: llama-server's breakers, nothing else on.
  const ApiRequest d = parse(json::object());
  EXPECT_EQ(d.dry_breakers, default_dry_breakers());
  EXPECT_FALSE(d.params.sampling.dry.enabled());
  EXPECT_EQ(d.params.sampling.typical_p, 1.0f);
  EXPECT_EQ(d.params.sampling.xtc_probability, 0.0f);
  EXPECT_EQ(parse({{"n_predict", -1}}).params.max_tokens, INT64_MAX);  // -1: up to the context
  EXPECT_EQ(parse({{"n_predict", 4}, {"max_tokens", 4}}).params.max_tokens, 4);
}

TEST(SamplingExtras, BadValuesAre400sNamingTheField) {
  EXPECT_EQ(refused_field({{"n_predict", 0}}), "n_predict");
  EXPECT_EQ(refused_field({{"n_predict", 3}, {"max_tokens", 4}}), "n_predict");
  EXPECT_EQ(refused_field({{"n_predict", 3}, {"max_completion_tokens", 4}}, Endpoint::Chat), "n_predict");
  EXPECT_EQ(refused_field({{"repeat_penalty", 1.1}, {"repetition_penalty", 1.2}}), "repetition_penalty");
  EXPECT_EQ(refused_field({{"typical_p", 1.5}}), "typical_p");
  EXPECT_EQ(refused_field({{"dry_base", 0.5}}), "dry_base");
  EXPECT_EQ(refused_field({{"dry_allowed_length", 0}}), "dry_allowed_length");
  EXPECT_EQ(refused_field({{"dry_sequence_breakers", "\n"}}), "dry_sequence_breakers");
  EXPECT_EQ(refused_field({{"dry_sequence_breakers", {std::string(41, 'x')}}}), "dry_sequence_breakers");
  EXPECT_EQ(refused_field({{"dry_sequence_breakers", json(std::vector<std::string>(17, "x"))}}),
            "dry_sequence_breakers");
  EXPECT_EQ(refused_field({{"xtc_threshold", -0.1}}), "xtc_threshold");
  EXPECT_EQ(refused_field({{"bad_words", {"   "}}}), "bad_words");
  EXPECT_EQ(refused_field({{"bad_words", {""}}}), "bad_words");
  EXPECT_EQ(refused_field({{"truncate_prompt_tokens", 0}}), "truncate_prompt_tokens");
  EXPECT_EQ(refused_field({{"truncate_prompt_tokens", -2}}), "truncate_prompt_tokens");
  EXPECT_EQ(refused_field({{"priority", "high"}}), "priority");
  EXPECT_EQ(refused_field({{"chat_template", ""}}, Endpoint::Chat), "chat_template");
  EXPECT_EQ(refused_field({{"chat_template", std::string(kMaxRequestTemplateBytes + 1, 'x')}}, Endpoint::Chat),
            "chat_template");
  EXPECT_EQ(refused_field({{"chat_template", "{{ x }}"}}), "chat_template");  // a chat field
  EXPECT_EQ(refused_field({{"mirostat", 3}}), "mirostat");
  EXPECT_EQ(refused_field({{"allowed_token_ids", json::array()}}), "allowed_token_ids");
  EXPECT_EQ(refused_field({{"allowed_token_ids", {1, -2}}}), "allowed_token_ids");
  EXPECT_EQ(refused_field({{"allowed_token_ids", 5}}), "allowed_token_ids");
  EXPECT_EQ(refused_field({{"mirostat", 1}, {"top_k", 5}}), "top_k");  // Mirostat replaces the truncations
  EXPECT_EQ(refused_field({{"mirostat", 2}, {"top_p", 0.9}}), "top_p");
  EXPECT_EQ(refused_field({{"mirostat", 2}, {"xtc_probability", 0.5}}), "xtc_probability");
  EXPECT_EQ(refused_field({{"mirostat", 2}, {"speculative", {{"type", "draft"}}}}), "mirostat");
  EXPECT_EQ(refused_field({{"mirostat", 2}, {"speculative", {{"type", "ngram"}}}}), "");
  EXPECT_EQ(refused_field({{"mirostat", 0}, {"top_k", 5}, {"mirostat_tau", 3}}), "");
}

TEST(SamplingExtras, TruncationKeepsTheLastTokens) {
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  truncate_prompt(prompt, 0, 8);
  EXPECT_EQ(prompt.size(), 5u);
  truncate_prompt(prompt, 3, 8);
  EXPECT_EQ(prompt, (std::vector<int32_t>{3, 4, 5}));
  truncate_prompt(prompt, -1, 2);  // the context's worth
  EXPECT_EQ(prompt, (std::vector<int32_t>{4, 5}));
  EXPECT_THROW(truncate_prompt(prompt, 9, 8), ApiError);
}

}  // namespace
}  // namespace tandem::server
