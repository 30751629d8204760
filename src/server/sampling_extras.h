// Issue 35's request fields beyond OpenAI's: vLLM's include_stop_str_in_output, bad_words,
// skip_special_tokens, spaces_between_special_tokens, truncate_prompt_tokens,
// return_tokens_as_token_ids, allowed_token_ids, priority and chat_template; llama-server's n_predict, typical_p,
// repeat_penalty / repeat_last_n, DRY and XTC (and the parameters of its samplers that are off).
// parse_sampling_extras reads them from the body (400s name the field); finish_sampling_extras
// does what needs the tokenizer or the server's flags, once the server has them.
#pragma once

#include <cstdint>
#include <vector>

#include "chat/chat_renderer.h"
#include "server/openai_protocol.h"
#include "server/request_json.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

constexpr size_t kMaxBadWords = 128;
constexpr size_t kMaxBadWordBytes = 256;
constexpr size_t kMaxDryBreakers = 16;
constexpr size_t kMaxAllowedTokens = 1 << 20;
// A request's own Jinja template: what one may be, in bytes (it is parsed on the worker pool,
// then rendered under the Jinja engine's limits, chat/jinja/evaluator.h RenderLimits).
constexpr size_t kMaxRequestTemplateBytes = 256 * 1024;

// n_predict against max_tokens / max_completion_tokens (`max_name`, present or not): returns the
// limit. -1 is no limit (the context's); 0 is refused (a request generates at least one token);
// both given and different is a 400.
int64_t max_tokens_with_n_predict(const RequestJson& body, const char* max_name, int64_t max_tokens);

// Reads the fields above into request.params and the request (after the OpenAI sampling fields).
void parse_sampling_extras(const RequestJson& body, ApiRequest& request);

// What the server decides about them.
struct ServingCapabilities {
  bool priority_scheduling = false;          // --scheduling-policy priority
  bool trust_request_chat_template = false;  // --trust-request-chat-template
  // The engine behind the server receives these fields (a disaggregated front forwards
  // requests in a format without them).
  bool extended_params = true;
};

// Turns bad_words and the DRY breakers into token sequences, and refuses (ApiError 400 naming
// the field) priority without priority scheduling, chat_template without trust, and any of these
// fields where the engine cannot receive them.
void finish_sampling_extras(ApiRequest& request, const Tokenizer& tokenizer, const ServingCapabilities& serving);

// The renderer for a request's own template: `base` (its BOS/EOS texts) with `source` compiled;
// a template that does not parse is a 400 naming 'chat_template'.
chat::ChatRenderer request_chat_renderer(const chat::ChatRenderer& base, const std::string& source);

// vLLM's truncate_prompt_tokens: keeps the prompt's last `truncate` tokens (-1: the last
// `context_length`); 0 leaves it whole. A value above the context is a 400.
void truncate_prompt(std::vector<int32_t>& prompt, int64_t truncate, int64_t context_length);

}  // namespace tandem::server
