// /props (see props.h).
#include "server/props.h"

#include "base/build_info.h"
#include "server/openai_protocol.h"

namespace tandem::server {

using nlohmann::json;

std::string build_info() { return version_line(); }

json props_json(const ServerProps& props) {
  // The completions endpoint's defaults, read back from its parser (chat differs only in
  // max_tokens: by default it may run to the end of the context).
  const ApiRequest defaults = parse_request(Endpoint::Completions, R"({"prompt": ""})", 16, props.speculation);
  const GenerationParams& p = defaults.params;
  const SamplingParams& s = p.sampling;
  json speculative = {{"type", speculation_type_name(p.speculation.type)},
                      {"max", p.speculation.draft_max},
                      {"min", p.speculation.draft_min},
                      {"ngram_min", p.speculation.ngram_min},
                      {"ngram_max", p.speculation.ngram_max}};
  json params = {{"temperature", s.temperature},
                 {"top_k", s.top_k},
                 {"top_p", s.top_p},
                 {"min_p", s.min_p},
                 {"repetition_penalty", s.repetition_penalty},
                 {"repeat_last_n", s.repeat_last_n},
                 {"presence_penalty", s.presence_penalty},
                 {"frequency_penalty", s.frequency_penalty},
                 {"max_tokens", p.max_tokens},
                 {"chat_max_tokens", props.context_length},
                 {"min_tokens", p.min_tokens},
                 {"ignore_eos", p.ignore_eos},
                 {"speculative", std::move(speculative)}};
  const chat::ChatRenderer* renderer = props.chat_renderer;
  return {{"default_generation_settings", {{"n_ctx", props.context_length}, {"params", std::move(params)}}},
          {"total_slots", props.total_slots},
          {"model_path", props.model_path},
          {"model_alias", props.model_names.empty() ? "" : props.model_names.front()},
          {"served_model_names", props.model_names},
          // Empty for a built-in format (chat_format), which has no Jinja text.
          {"chat_template", renderer ? renderer->jinja_template : ""},
          {"chat_format", renderer ? renderer->name() : ""},
          {"bos_token", renderer ? renderer->bos_token : ""},
          {"eos_token", renderer ? renderer->eos_token : ""},
          {"n_ctx", props.context_length},
          {"build_info", build_info()},
          {"version", release_version()},
          {"commit", git_commit()}};
}

}  // namespace tandem::server
