// What every door into generation refuses of a request before anything is built for it: the
// engine's submit(), the library's max_tokens 0 answer and the disaggregated front all call
// these, so that each refuses the same requests with the same words. Pure checks against a
// vocabulary size and a context length; no model, no engine state.
#pragma once

#include <cstdint>
#include <span>

#include "engine/request.h"

namespace tandem {

// What Engine::check_request checks, for a given vocabulary and context: throws InputError
// for an empty or too long prompt, ids outside the vocabulary, top_logprobs above 20, an empty
// stop string, min_tokens outside 0..max_tokens.
void check_generation_request(std::span<const int32_t> prompt, const GenerationParams& params, int64_t vocab,
                              int64_t context_length);
// Everything submit() refuses of a request before it builds anything for it, for a given
// model: check_generation_request, max_tokens, the speculation settings (draft speculation
// only with a draft model), pooling without grammar or speculation. (The sampling options are
// checked where a Sampler is made.) Also for a process that takes requests on engines' behalf
// (the disaggregated front), so that both refuse the same requests with the same words.
void check_submission(std::span<const int32_t> prompt, const GenerationParams& params, int64_t vocab,
                      int64_t context_length, bool has_draft_model);

}  // namespace tandem
