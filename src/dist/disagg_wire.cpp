#include "dist/disagg_wire.h"

#include <cstring>
#include <memory>
#include <string>

#include "base/error.h"
#include "grammar/grammar.h"

namespace tandem::dist {

using nlohmann::json;

namespace {

json bytes_of(const std::string& text) { return json::binary(std::vector<uint8_t>(text.begin(), text.end())); }

std::string text_of(const json& value) {
  const std::vector<uint8_t>& bytes = value.get_binary();
  return {bytes.begin(), bytes.end()};
}

// The grammar as its rules: names in id order (a builder declaring them in this order gives
// the same ids back), each rule's alternatives as [kind, lo, hi, rule] elements.
json grammar_to_json(const grammar::Grammar& g) {
  json rules = json::array();
  for (uint32_t r = 0; r < g.n_rules(); ++r) {
    json alternatives = json::array();
    for (uint32_t start : g.alternatives(r)) {
      json elements = json::array();
      for (uint32_t p = start; g.elements()[p].kind != grammar::GrammarElement::kEnd; ++p) {
        const grammar::GrammarElement& e = g.elements()[p];
        elements.push_back({static_cast<int>(e.kind), e.lo, e.hi, e.rule});
      }
      alternatives.push_back(std::move(elements));
    }
    rules.push_back({{"name", bytes_of(g.rule_name(r))}, {"alternatives", std::move(alternatives)}});
  }
  return {{"root", g.root()}, {"rules", std::move(rules)}};
}

std::shared_ptr<const grammar::Grammar> grammar_from_json(const json& value) {
  grammar::GrammarBuilder builder;
  const json& rules = value.at("rules");
  std::vector<uint32_t> ids;
  for (const json& rule : rules) ids.push_back(builder.rule(text_of(rule.at("name"))));
  for (size_t r = 0; r < rules.size(); ++r) {
    TANDEM_CHECK_INPUT(ids[r] == r, "a grammar on the wire names rule {} twice", r);
    for (const json& alternative : rules[r].at("alternatives")) {
      std::vector<grammar::GrammarElement> elements;
      for (const json& e : alternative) {
        const auto kind = static_cast<grammar::GrammarElement::Kind>(e.at(0).get<int>());
        TANDEM_CHECK_INPUT(kind == grammar::GrammarElement::kBytes || kind == grammar::GrammarElement::kRule,
                           "a grammar on the wire has an element of kind {}", static_cast<int>(kind));
        const auto rule = e.at(3).get<uint32_t>();
        TANDEM_CHECK_INPUT(kind != grammar::GrammarElement::kRule || rule < rules.size(),
                           "a grammar on the wire refers to rule {} of {}", rule, rules.size());
        elements.push_back({kind, e.at(1).get<uint8_t>(), e.at(2).get<uint8_t>(), rule});
      }
      builder.add_alternative(static_cast<uint32_t>(r), std::move(elements));
    }
  }
  const auto root = value.at("root").get<uint32_t>();
  TANDEM_CHECK_INPUT(root < rules.size(), "a grammar on the wire has root {} of {} rules", root, rules.size());
  return std::make_shared<const grammar::Grammar>(builder.build(text_of(rules[root].at("name"))));
}

json logprob_to_json(const TopLogprob& entry) { return {entry.token, bytes_of(entry.text), entry.logprob}; }

TopLogprob logprob_from_json(const json& value) {
  return {value.at(0).get<int32_t>(), text_of(value.at(1)), value.at(2).get<float>()};
}

}  // namespace

std::vector<uint8_t> to_bytes(const json& message) { return json::to_cbor(message); }

json from_bytes(std::span<const uint8_t> bytes) {
  json message = json::from_cbor(bytes.begin(), bytes.end(), true, false);
  TANDEM_CHECK_INPUT(!message.is_discarded(), "a message between ranks is not CBOR ({} bytes)", bytes.size());
  return message;
}

json params_to_json(const GenerationParams& p) {
  const SamplingParams& s = p.sampling;
  json bias = json::array();
  for (const auto& [token, value] : s.logit_bias) bias.push_back({token, value});
  json stops = json::array();
  for (const std::string& stop : p.stop) stops.push_back(bytes_of(stop));
  json out = {
      {"sampling",
       {{"temperature", s.temperature},
        {"top_k", s.top_k},
        {"top_p", s.top_p},
        {"min_p", s.min_p},
        {"repetition_penalty", s.repetition_penalty},
        {"repeat_last_n", s.repeat_last_n},
        {"presence_penalty", s.presence_penalty},
        {"frequency_penalty", s.frequency_penalty},
        {"seed", s.seed},
        {"logit_bias", std::move(bias)}}},
      {"max_tokens", p.max_tokens},
      {"stop", std::move(stops)},
      {"top_logprobs", p.top_logprobs},
      {"ignore_eos", p.ignore_eos},
      {"stop_token_ids", p.stop_token_ids},
      {"min_tokens", p.min_tokens},
      {"speculation",
       {static_cast<int>(p.speculation.type), p.speculation.draft_max, p.speculation.draft_min, p.speculation.ngram_min,
        p.speculation.ngram_max}},
      {"pooling", static_cast<int>(p.pooling)},
  };
  if (p.grammar) out["grammar"] = grammar_to_json(*p.grammar);
  return out;
}

GenerationParams params_from_json(const json& j) {
  GenerationParams p;
  const json& s = j.at("sampling");
  p.sampling.temperature = s.at("temperature").get<float>();
  p.sampling.top_k = s.at("top_k").get<int32_t>();
  p.sampling.top_p = s.at("top_p").get<float>();
  p.sampling.min_p = s.at("min_p").get<float>();
  p.sampling.repetition_penalty = s.at("repetition_penalty").get<float>();
  p.sampling.repeat_last_n = s.at("repeat_last_n").get<int32_t>();
  p.sampling.presence_penalty = s.at("presence_penalty").get<float>();
  p.sampling.frequency_penalty = s.at("frequency_penalty").get<float>();
  p.sampling.seed = s.at("seed").get<uint64_t>();
  for (const json& pair : s.at("logit_bias")) p.sampling.logit_bias.emplace_back(pair.at(0), pair.at(1));
  p.max_tokens = j.at("max_tokens").get<int64_t>();
  for (const json& stop : j.at("stop")) p.stop.push_back(text_of(stop));
  p.top_logprobs = j.at("top_logprobs").get<int32_t>();
  p.ignore_eos = j.at("ignore_eos").get<bool>();
  p.stop_token_ids = j.at("stop_token_ids").get<std::vector<int32_t>>();
  p.min_tokens = j.at("min_tokens").get<int64_t>();
  const json& spec = j.at("speculation");
  const int type = spec.at(0).get<int>();
  TANDEM_CHECK_INPUT(type >= 0 && type <= static_cast<int>(SpeculationType::Draft), "speculation type {} on the wire",
                     type);
  p.speculation = {static_cast<SpeculationType>(type), spec.at(1).get<int32_t>(), spec.at(2).get<int32_t>(),
                   spec.at(3).get<int32_t>(), spec.at(4).get<int32_t>()};
  const int pooling = j.at("pooling").get<int>();
  TANDEM_CHECK_INPUT(pooling >= 0 && pooling <= static_cast<int>(Pooling::Last), "pooling {} on the wire", pooling);
  p.pooling = static_cast<Pooling>(pooling);
  if (j.contains("grammar")) p.grammar = grammar_from_json(j.at("grammar"));
  return p;
}

json event_to_json(const RequestEvent& e) {
  json logprobs = json::array();
  for (const TokenLogprob& entry : e.logprobs) {
    json top = json::array();
    for (const TopLogprob& t : entry.top) top.push_back(logprob_to_json(t));
    logprobs.push_back({logprob_to_json(entry.chosen), std::move(top)});
  }
  return {{"id", e.request_id},
          {"text", bytes_of(e.text)},
          {"tokens", e.tokens},
          {"logprobs", std::move(logprobs)},
          {"finished", e.finished},
          {"reason", static_cast<int>(e.finish_reason)},
          {"admitted", e.admitted},
          {"counts",
           {e.prompt_tokens, e.cached_tokens, e.completion_tokens, e.kv_bytes, e.preemptions, e.drafted_tokens,
            e.accepted_tokens, e.kv_transfer_bytes}},
          {"times", {e.queue_ms, e.ttft_ms, e.prefill_ms, e.decode_ms, e.e2e_ms, e.kv_transfer_ms}},
          {"itl", e.itl_ms},
          {"embedding", e.embedding},
          {"error", bytes_of(e.error)}};
}

RequestEvent event_from_json(const json& j) {
  RequestEvent e;
  e.request_id = j.at("id").get<uint64_t>();
  e.text = text_of(j.at("text"));
  e.tokens = j.at("tokens").get<std::vector<int32_t>>();
  for (const json& entry : j.at("logprobs")) {
    TokenLogprob logprob{logprob_from_json(entry.at(0)), {}};
    for (const json& t : entry.at(1)) logprob.top.push_back(logprob_from_json(t));
    e.logprobs.push_back(std::move(logprob));
  }
  e.finished = j.at("finished").get<bool>();
  const int reason = j.at("reason").get<int>();
  TANDEM_CHECK_INPUT(reason >= 0 && reason <= static_cast<int>(FinishReason::Error), "finish reason {} on the wire",
                     reason);
  e.finish_reason = static_cast<FinishReason>(reason);
  e.admitted = j.at("admitted").get<bool>();
  const json& c = j.at("counts");
  e.prompt_tokens = c.at(0);
  e.cached_tokens = c.at(1);
  e.completion_tokens = c.at(2);
  e.kv_bytes = c.at(3);
  e.preemptions = c.at(4);
  e.drafted_tokens = c.at(5);
  e.accepted_tokens = c.at(6);
  e.kv_transfer_bytes = c.at(7);
  const json& t = j.at("times");
  e.queue_ms = t.at(0);
  e.ttft_ms = t.at(1);
  e.prefill_ms = t.at(2);
  e.decode_ms = t.at(3);
  e.e2e_ms = t.at(4);
  e.kv_transfer_ms = t.at(5);
  e.itl_ms = j.at("itl").get<std::vector<double>>();
  e.embedding = j.at("embedding").get<std::vector<float>>();
  e.error = text_of(j.at("error"));
  return e;
}

std::vector<uint8_t> kv_block_frame(uint64_t request_id, std::span<const uint8_t> block_message) {
  std::vector<uint8_t> frame(sizeof(request_id) + block_message.size());
  std::memcpy(frame.data(), &request_id, sizeof(request_id));
  if (!block_message.empty())
    std::memcpy(frame.data() + sizeof(request_id), block_message.data(), block_message.size());
  return frame;
}

uint64_t kv_block_frame_id(std::span<const uint8_t> frame) {
  uint64_t id = 0;
  TANDEM_CHECK_INPUT(frame.size() >= sizeof(id), "a KV block frame of {} bytes has no request id", frame.size());
  std::memcpy(&id, frame.data(), sizeof(id));
  return id;
}

std::span<const uint8_t> kv_block_frame_message(std::span<const uint8_t> frame) {
  return frame.subspan(sizeof(uint64_t));
}

}  // namespace tandem::dist
