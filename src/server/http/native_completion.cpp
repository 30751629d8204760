// llama-server's /completion (and /completions) and /infill on one connection (see session.h):
// its protocol (llama_server_api.h) as a GenerationFormat, so the request is prepared, admitted,
// generated and streamed exactly as /v1/completions is. Streams are its chunks — one per token
// event, then the final result with "stop": true — and no [DONE].
#include <fmt/format.h>

#include "server/http/generation_format.h"
#include "server/http/session.h"
#include "server/llama_server_api.h"

namespace tandem::server {

namespace {

NativeResult native_result(const Completion& completion, int32_t index) {
  NativeResult result;
  result.index = index;
  result.content = completion.text;
  result.tokens = completion.tokens;
  result.logprobs = completion.logprobs;
  result.finish_reason = completion.finish_reason;
  result.stop_string = completion.stop_string;
  result.prompt_tokens = completion.prompt_tokens;
  result.cached_tokens = completion.cached_tokens;
  result.completion_tokens = completion.completion_tokens;
  result.prefill_ms = completion.prefill_ms;
  result.decode_ms = completion.decode_ms;
  return result;
}

class NativeCompletionFormat final : public GenerationFormat {
 public:
  NativeCompletionFormat(const ServerState& state, bool infill) : state_(state), infill_(infill) {}

  ApiRequest parse(const std::string& body, int64_t context_length, const std::function<bool()>& abandoned) override {
    // serve_generation parses only once an engine is attached.
    const Tokenizer& tokenizer = state_.engine.load()->tokenizer();
    const SpeculationParams& speculation = state_.config.speculation;
    request_ = infill_ ? parse_infill(body, tokenizer, context_length, speculation, abandoned)
                       : parse_native_completion(body, tokenizer, context_length, speculation, abandoned);
    return request_.api;
  }
  std::string response_id(uint64_t serial) const override { return fmt::format("cmpl-{}", serial); }

  // One result object; several (prompts or n_cmpl) as an array, as llama-server answers them.
  std::string whole(const ResponseMeta& meta, const std::vector<Completion>& choices) override {
    nlohmann::json results = nlohmann::json::array();
    for (size_t i = 0; i < choices.size(); ++i)
      results.push_back(native_result_json(request_, native_result(choices[i], static_cast<int32_t>(i)), meta.model));
    return dump_json(results.size() == 1 ? results.front() : results);
  }
  std::string stream_event(const ResponseMeta& meta, const RequestEvent& event, const std::vector<nlohmann::json>&,
                           bool, bool, int32_t index) override {
    if (predicted_.size() <= static_cast<size_t>(index)) predicted_.resize(static_cast<size_t>(index) + 1, 0);
    int64_t& predicted = predicted_[static_cast<size_t>(index)];
    predicted += static_cast<int64_t>(event.tokens.size());
    std::string out;
    if (!event.finished || !event.text.empty() || !event.tokens.empty())
      out += sse_data(native_chunk_json(request_, index, event, predicted));
    if (!event.finished) return out;
    // The final result: its counts and times; the text and tokens went out in the chunks.
    Completion totals;
    totals.finish_reason = event.finish_reason;
    note_totals(totals, event);
    return out + sse_data(native_result_json(request_, native_result(totals, index), meta.model));
  }
  std::string stream_error(const ResponseMeta&, const RequestEvent& event) override {
    return sse_data(stream_error_json(event));
  }
  std::string stream_end(const ResponseMeta&, const std::vector<Completion>&) override { return {}; }

 private:
  const ServerState& state_;
  const bool infill_;
  NativeCompletionRequest request_;
  std::vector<int64_t> predicted_;  // per choice: tokens streamed so far
};

}  // namespace

boost::asio::awaitable<bool> Session::serve_native_completion(HttpRequest request, bool keep_alive, bool infill) {
  NativeCompletionFormat format(state_, infill);
  co_return co_await serve_generation(format, std::move(request), keep_alive);
}

}  // namespace tandem::server
