// The request-field table (see request_fields.h). Sources of the names: OpenAI's chat and
// completions create params (openai npm 6.49), vLLM's ChatCompletionRequest and
// CompletionRequest (vllm/entrypoints/openai/{chat_completion,completion}/protocol.py), and
// llama-server's /completion options, which its /v1 endpoints also take
// (tools/server/README.md); the inventory test lists them with where each came from.
#include "server/request_fields.h"

#include <algorithm>

namespace tandem::server {
namespace {

using enum FieldKind;

constexpr FieldRule kRules[] = {
    // OpenAI's fields.
    {"model", Honoured},
    {"prompt", Honoured, kCompletionsOnly},
    {"messages", Honoured, kChatOnly},
    {"tools", Honoured, kChatOnly},
    {"tool_choice", Honoured, kChatOnly},
    {"parallel_tool_calls", Honoured, kChatOnly},
    {"n", Honoured},
    {"best_of", Honoured, kCompletionsOnly},  // only equal to n (parse_request)
    {"echo", Honoured},                       // completions; true on chat is a 400 (parse_request)
    {"suffix", Honoured, kCompletionsOnly},   // only empty (check_fields below)
    {"stream", Honoured},
    {"stream_options", Honoured},
    {"logprobs", Honoured},
    {"top_logprobs", Honoured, kChatOnly},
    {"max_tokens", Honoured},
    {"max_completion_tokens", Honoured},
    {"stop", Honoured},
    {"temperature", Honoured},
    {"top_p", Honoured},
    {"presence_penalty", Honoured},
    {"frequency_penalty", Honoured},
    {"seed", Honoured},
    {"logit_bias", Honoured},
    {"response_format", Honoured},
    {"functions", Refused, kChatOnly, "use 'tools' (the deprecated 'functions' is not supported)"},
    {"function_call", Refused, kChatOnly, "use 'tool_choice' (the deprecated 'function_call' is not supported)"},
    {"prediction", Refused, kChatOnly, "predicted outputs are not supported"},
    {"audio", Refused, kChatOnly, "audio output is not supported"},
    {"modalities", DefaultOnly, kChatOnly, "only text output is supported", R"([["text"]])"},
    {"web_search_options", Refused, kChatOnly, "web search is not supported"},
    {"moderation", Refused, kChatOnly, "moderation is not supported"},
    {"verbosity", Refused, kChatOnly, "output verbosity settings are not supported"},
    {"reasoning_effort", Refused, kChatOnly,
     "reasoning settings are not supported: a template's reasoning is controlled with 'chat_template_kwargs' (e.g. "
     "{\"enable_thinking\": false})"},
    {"prompt_cache_options", Refused, kChatOnly,
     "prompt cache options are not supported (the prefix cache is automatic)"},
    {"user", Metadata, kBothEndpoints, "an end-user id for the provider's abuse monitoring"},
    {"metadata", Metadata, kChatOnly, "tags stored with the completion by OpenAI; nothing is stored here"},
    {"store", Metadata, kChatOnly, "whether OpenAI stores the completion for evals; nothing is stored here"},
    {"service_tier", Metadata, kChatOnly, "OpenAI's processing tier (latency and price); there is one tier here"},
    {"safety_identifier", Metadata, kChatOnly, "an end-user id for the provider's abuse monitoring"},
    {"prompt_cache_key", Metadata, kChatOnly,
     "a routing hint for OpenAI's prompt cache; the prefix cache is automatic"},
    {"prompt_cache_retention", Metadata, kChatOnly,
     "how long OpenAI keeps a cached prefix; the prefix cache is automatic"},

    // vLLM's extra sampling and request parameters.
    {"top_k", Honoured},
    {"min_p", Honoured},
    {"repetition_penalty", Honoured},
    {"stop_token_ids", Honoured},
    {"include_stop_str_in_output", Honoured},
    {"ignore_eos", Honoured},
    {"min_tokens", Honoured},
    {"skip_special_tokens", Honoured},
    {"spaces_between_special_tokens", Honoured},
    {"truncate_prompt_tokens", Honoured},
    {"bad_words", Honoured},
    {"allowed_token_ids", Honoured},
    {"return_tokens_as_token_ids", Honoured},
    {"priority", Honoured},                  // non-zero only under --scheduling-policy priority (the server checks)
    {"chat_template", Honoured, kChatOnly},  // only with --trust-request-chat-template (the server checks)
    {"chat_template_kwargs", Honoured, kChatOnly},
    {"add_generation_prompt", Honoured, kChatOnly},
    {"continue_final_message", Honoured, kChatOnly},
    {"structured_outputs", Honoured},
    {"guided_json", Honoured},
    {"guided_choice", Honoured},
    {"guided_regex", Honoured},
    {"guided_grammar", Honoured},
    {"use_beam_search", DefaultOnly, kBothEndpoints, "beam search is not supported", "[false]"},
    {"length_penalty", DefaultOnly, kBothEndpoints, "it applies to beam search, which is not supported", "[1]"},
    {"include_reasoning", DefaultOnly, kChatOnly, "reasoning is always returned (as reasoning_content)", "[true]"},
    {"add_special_tokens", DefaultOnly, kChatOnly,
     "the chat prompt gets BOS only where the model's vocabulary asks for it and the template has none", "[false]"},
    {"add_special_tokens", DefaultOnly, kCompletionsOnly, "the prompt gets BOS as the model's vocabulary says",
     "[true]"},
    {"documents", DefaultOnly, kChatOnly, "documents for retrieval-augmented templates are not supported", "[[]]"},
    {"return_token_ids", DefaultOnly, kBothEndpoints,
     "token ids in the response are not supported (logprobs with 'return_tokens_as_token_ids' names the tokens)",
     "[false]"},
    {"max_repetition_pattern_size", DefaultOnly, kBothEndpoints, "stopping on repeated patterns is not supported",
     "[0]"},
    {"min_repetition_pattern_size", DefaultOnly, kBothEndpoints, "stopping on repeated patterns is not supported",
     "[0]"},
    {"repetition_min_count", DefaultOnly, kBothEndpoints, "stopping on repeated patterns is not supported", "[0]"},
    {"prompt_logprobs", Refused, kBothEndpoints, "prompt logprobs are not supported"},
    {"logits_processors", Refused, kBothEndpoints, "custom logits processors are not supported"},
    {"cache_salt", Refused, kBothEndpoints,
     "the prefix cache is shared by every request here; it cannot be salted per client"},
    {"kv_transfer_params", Refused, kBothEndpoints,
     "KV transfer between servers is not supported (disaggregated serving is 'tandem serve --workers')"},
    {"vllm_xargs", Refused, kBothEndpoints, "vLLM's extension arguments are not supported"},
    {"mm_processor_kwargs", Refused, kChatOnly, "there is no multimodal input"},
    {"prompt_embeds", Refused, kCompletionsOnly, "prompts as embeddings are not supported"},
    {"request_id", Metadata, kBothEndpoints, "a tracing id; responses carry the server's own ids"},

    // llama-server's /completion options (its /v1 endpoints take them too).
    {"n_predict", Honoured},
    {"typical_p", Honoured},
    {"repeat_penalty", Honoured},
    {"repeat_last_n", Honoured},
    {"dry_multiplier", Honoured},
    {"dry_base", Honoured},
    {"dry_allowed_length", Honoured},
    {"dry_penalty_last_n", Honoured},
    {"dry_sequence_breakers", Honoured},
    {"xtc_probability", Honoured},
    {"xtc_threshold", Honoured},
    {"grammar", Honoured},
    {"json_schema", Honoured},
    {"speculative", Honoured},  // Tandem's own
    {"mirostat", Honoured},     // 1 or 2 with top-k, top-p, min-p, typical-p and XTC off (parse_request)
    {"mirostat_tau", Honoured},
    {"mirostat_eta", Honoured},
    // A parameter of dynamic temperature, which is off unless dynatemp_range turns it on.
    {"dynatemp_exponent", Honoured},
    // The prefix cache is always on, and outputs do not depend on it (batch invariance).
    {"cache_prompt", Honoured},
    {"dynatemp_range", DefaultOnly, kBothEndpoints, "dynamic temperature is not implemented; 0 (off) is accepted",
     "[0]"},
    {"n_indent", DefaultOnly, kBothEndpoints, "minimum indentation is not supported", "[0]"},
    {"n_keep", DefaultOnly, kBothEndpoints, "context shifting is not done: a request ends at the end of the context",
     "[0]"},
    {"min_keep", DefaultOnly, kBothEndpoints, "the samplers always keep at least one token; no other minimum",
     "[0, 1]"},
    {"t_max_predict_ms", DefaultOnly, kBothEndpoints, "generation time limits are not supported", "[0]"},
    {"return_tokens", DefaultOnly, kBothEndpoints, "token ids in the response are not supported", "[false]"},
    {"timings_per_token", DefaultOnly, kBothEndpoints, "per-token timings are not returned", "[false]"},
    {"return_progress", DefaultOnly, kBothEndpoints, "prompt progress is not streamed", "[false]"},
    {"post_sampling_probs", DefaultOnly, kBothEndpoints,
     "probabilities after the sampling chain are not returned (logprobs are the model's)", "[false]"},
    {"lora", DefaultOnly, kBothEndpoints, "LoRA adapters are not supported", "[[]]"},
    {"reasoning_format", DefaultOnly, kChatOnly,
     "reasoning is always returned apart, as reasoning_content (llama-server's \"deepseek\")",
     R"(["auto", "deepseek"])"},
    {"thinking_forced_open", DefaultOnly, kChatOnly, "forcing the reasoning open is not supported", "[false]"},
    {"parse_tool_calls", DefaultOnly, kChatOnly, "tool calls are always parsed when 'tools' are given", "[true]"},
    {"n_probs", Refused, kBothEndpoints, "use 'logprobs' (llama-server's 'n_probs' is not supported)"},
    {"samplers", Refused, kBothEndpoints,
     "the sampler order is fixed: penalties, DRY, temperature, top-k, typical-p, top-p, min-p, XTC"},
    {"response_fields", Refused, kBothEndpoints, "selecting response fields is not supported"},
    {"image_data", Refused, kBothEndpoints, "there is no multimodal input"},
    {"id_slot", Metadata, kBothEndpoints, "a llama-server slot; scheduling alone, the output does not depend on it"},
};

std::string_view endpoint_path(Endpoint endpoint) {
  return endpoint == Endpoint::Chat ? "/v1/chat/completions" : "/v1/completions";
}

uint8_t endpoint_bit(Endpoint endpoint) { return endpoint == Endpoint::Chat ? kChatOnly : kCompletionsOnly; }

}  // namespace

std::span<const FieldRule> request_field_rules() { return kRules; }

const FieldRule* find_field_rule(Endpoint endpoint, std::string_view name) {
  for (const FieldRule& rule : kRules)
    if (rule.name == name && (rule.endpoints & endpoint_bit(endpoint))) return &rule;
  return nullptr;
}

void check_fields(Endpoint endpoint, const RequestJson& body, ApiRequest& request) {
  for (const auto& [name, value] : body.items()) {
    if (value.is_null()) continue;  // null is "not set" everywhere
    const FieldRule* rule = find_field_rule(endpoint, name);
    if (rule == nullptr) {
      const std::string_view key = name;  // (clang 14 captures no structured binding)
      const bool elsewhere =
          std::any_of(std::begin(kRules), std::end(kRules), [key](const FieldRule& r) { return r.name == key; });
      if (elsewhere)
        bad(fmt::format("'{}' is not a {} field (it belongs to {})", name, endpoint_path(endpoint),
                        endpoint_path(endpoint == Endpoint::Chat ? Endpoint::Completions : Endpoint::Chat)),
            ErrorCode::Unsupported);
      request.ignored_fields.push_back(name);
      continue;
    }
    switch (rule->kind) {
      case Honoured: break;
      case Metadata: request.ignored_fields.push_back(name); break;
      case Refused:
        bad(fmt::format("'{}' is not supported by this server: {}", name, rule->why), ErrorCode::Unsupported);
      case DefaultOnly: {
        const RequestJson accepted = RequestJson::parse(rule->accepted);
        if (std::find(accepted.begin(), accepted.end(), value) == accepted.end())
          bad(fmt::format("'{}' {} is not supported by this server: {} (accepted: {})", name, shown(value), rule->why,
                          rule->accepted),
              ErrorCode::Unsupported);
        break;
      }
    }
  }
  // Known, and refused unless they ask for the plain behaviour.
  if (!string_field(body, "suffix").empty())
    bad("'suffix' (fill-in-the-middle insertion) is not supported: this server has no infill prompt format",
        ErrorCode::Unsupported);
}

}  // namespace tandem::server
