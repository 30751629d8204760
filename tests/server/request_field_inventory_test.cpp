// The field inventory (issue 35): every top-level request field OpenAI, vLLM and llama-server
// define for chat and completions — fixtures/request_field_inventory.json, each list with where
// it came from — is honoured (it changes the parsed request), refused with a 400 that names it,
// accepted only with the value asking for what this server does anyway, or (vendor metadata
// alone, with why) accepted and listed as ignored. None is silently ignored. The server's own
// table (request_fields.h) names nothing the inventory lacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"
#include "server/request_fields.h"

namespace tandem::server {
namespace {

using nlohmann::json;

json inventory() {
  const std::filesystem::path path =
      std::filesystem::path(__FILE__).parent_path() / "fixtures" / "request_field_inventory.json";
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  return json::parse(in);
}

// Everything parse_request decides, as text: two requests with the same fingerprint are served alike.
std::string fingerprint(const ApiRequest& r) {
  const GenerationParams& p = r.params;
  const SamplingParams& s = p.sampling;
  json messages = json::array();
  for (const ChatMessage& m : r.messages) messages.push_back({m.role, m.content});
  json prompts = json::array();
  for (const PromptInput& prompt : r.prompts) prompts.push_back({prompt.text, prompt.ids});
  json bias = json::array();
  for (const auto& [token, value] : s.logit_bias) bias.push_back({token, value});
  const json f = {
      {"model", r.model},
      {"prompts", prompts},
      {"messages", messages},
      {"tools", r.tools.size()},
      {"tool_choice", {static_cast<int>(r.tool_choice.mode), r.tool_choice.function}},
      {"parallel_tool_calls", r.parallel_tool_calls},
      {"render", {r.render.add_generation_prompt, r.render.continue_final_message, r.render.template_kwargs.dump()}},
      {"stream", r.stream},
      {"include_usage", r.include_usage},
      {"logprobs", r.logprobs},
      {"n", r.n},
      {"echo", r.echo},
      {"bad_words", r.bad_words},
      {"dry_breakers", r.dry_breakers},
      {"tokens_as_ids", r.tokens_as_ids},
      {"truncate_prompt_tokens", r.truncate_prompt_tokens},
      {"chat_template", r.chat_template},
      {"max_tokens", p.max_tokens},
      {"stop", p.stop},
      {"top_logprobs", p.top_logprobs},
      {"ignore_eos", p.ignore_eos},
      {"stop_token_ids", p.stop_token_ids},
      {"min_tokens", p.min_tokens},
      {"grammar", p.grammar != nullptr},
      {"speculation", static_cast<int>(p.speculation.type)},
      {"include_stop_str_in_output", p.include_stop_str_in_output},
      {"detokenize", {p.detokenize.skip_special_tokens, p.detokenize.spaces_between_special_tokens}},
      {"priority", p.priority},
      {"allowed_tokens", s.allowed_tokens},
      {"sampling",
       {s.temperature,
        s.top_k,
        s.top_p,
        s.min_p,
        s.repetition_penalty,
        s.repeat_last_n,
        s.presence_penalty,
        s.frequency_penalty,
        s.seed,
        bias,
        s.typical_p,
        s.xtc_probability,
        s.xtc_threshold,
        s.dry.multiplier,
        s.dry.base,
        s.dry.allowed_length,
        s.dry.penalty_last_n,
        s.mirostat,
        s.mirostat_tau,
        s.mirostat_eta}},
  };
  return f.dump();
}

json base_body(Endpoint endpoint) {
  // A fixed seed: an absent one is random, and would tell every request apart.
  if (endpoint == Endpoint::Chat)
    return {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"seed", 1}};
  return {{"prompt", "hi"}, {"seed", 1}};
}

ApiRequest parse(Endpoint endpoint, const json& body) { return parse_request(endpoint, body.dump(), 100); }

// The 400 a body gets, or a failure when it is accepted.
std::optional<ApiError> refusal(Endpoint endpoint, const json& body) {
  try {
    parse(endpoint, body);
  } catch (const ApiError& e) {
    return e;
  }
  return std::nullopt;
}

bool listed(const ApiRequest& r, const std::string& name) {
  return std::find(r.ignored_fields.begin(), r.ignored_fields.end(), name) != r.ignored_fields.end();
}

TEST(RequestFieldInventory, EveryFieldIsHonouredRefusedOrListedMetadata) {
  const json inv = inventory();
  ASSERT_GE(inv.at("fields").size(), 100u);
  std::map<std::string, int> verdicts;
  for (const json& entry : inv.at("fields")) {
    const std::string name = entry.at("name");
    for (const auto& [key, endpoint] : {std::pair{"chat", Endpoint::Chat}, {"completions", Endpoint::Completions}}) {
      if (!entry.contains(key)) continue;
      const json& expect = entry.at(key);
      const std::string verdict = expect.at("verdict");
      ++verdicts[verdict];
      SCOPED_TRACE(name + " on " + key + " (" + verdict + ")");
      json without = base_body(endpoint);
      if (expect.contains("with")) without.update(expect.at("with"));
      json with = without;
      with[name] = expect.at("example");
      const auto expect_refused = [&](const json& body) {
        const std::optional<ApiError> error = refusal(endpoint, body);
        ASSERT_TRUE(error.has_value()) << body.dump() << " was accepted";
        EXPECT_EQ(error->status, 400);
        EXPECT_EQ(error->param, name) << error->what();
        EXPECT_NE(std::string(error->what()).find("'" + name + "'"), std::string::npos) << error->what();
      };
      if (verdict == "refused") {
        expect_refused(with);
        continue;
      }
      const std::optional<ApiError> error = refusal(endpoint, with);
      ASSERT_FALSE(error.has_value()) << error->what();
      const ApiRequest got = parse(endpoint, with);
      if (verdict == "metadata") {
        EXPECT_TRUE(listed(got, name));
        EXPECT_FALSE(expect.value("reason", "").empty()) << "metadata needs a reason";
        const FieldRule* rule = find_field_rule(endpoint, name);
        ASSERT_NE(rule, nullptr);
        EXPECT_EQ(rule->kind, FieldKind::Metadata);
        continue;
      }
      EXPECT_FALSE(listed(got, name)) << "accepted but listed as ignored";
      if (verdict == "honoured") {
        EXPECT_NE(fingerprint(got), fingerprint(parse(endpoint, without))) << "the field changed nothing";
      } else if (verdict == "inert") {
        EXPECT_FALSE(expect.value("reason", "").empty()) << "an inert field needs a reason";
      } else if (verdict == "default_only") {
        json other = without;
        other[name] = expect.at("refused_example");
        expect_refused(other);
      } else {
        ADD_FAILURE() << "unknown verdict " << verdict;
      }
    }
  }
  EXPECT_GT(verdicts["honoured"], 50);
  EXPECT_GT(verdicts["refused"], 10);
}

// Every field the server's table names is in the inventory, and every inventory field has a rule
// (a field falling through to "unknown vendor extension" would be listed, not decided).
TEST(RequestFieldInventory, TheServersTableAndTheInventoryNameTheSameFields) {
  std::set<std::string> in_inventory;
  const json inv = inventory();
  for (const json& entry : inv.at("fields")) in_inventory.insert(entry.at("name").get<std::string>());
  std::set<std::string> in_table;
  for (const FieldRule& rule : request_field_rules()) in_table.insert(std::string(rule.name));
  for (const std::string& name : in_table) EXPECT_TRUE(in_inventory.count(name)) << name << " is not in the inventory";
  for (const std::string& name : in_inventory) EXPECT_TRUE(in_table.count(name)) << name << " has no rule";
}

TEST(RequestFieldInventory, AFieldOfTheOtherEndpointIsA400NamingIt) {
  const std::optional<ApiError> prompt_on_chat =
      refusal(Endpoint::Chat, {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"prompt", "x"}});
  ASSERT_TRUE(prompt_on_chat.has_value());
  EXPECT_EQ(prompt_on_chat->param, "prompt");
  EXPECT_NE(std::string(prompt_on_chat->what()).find("/v1/completions"), std::string::npos);
  const std::optional<ApiError> tools_on_completions =
      refusal(Endpoint::Completions, {{"prompt", "hi"}, {"tools", json::array()}});
  ASSERT_TRUE(tools_on_completions.has_value());
  EXPECT_EQ(tools_on_completions->param, "tools");
}

}  // namespace
}  // namespace tandem::server
