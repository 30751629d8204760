// POST /v1/responses on one connection (see session.h): the Responses protocol
// (responses_api.h) as a GenerationFormat, so the request is prepared, admitted, generated and
// streamed exactly as a chat completion is; a finished response asked to be stored ('store',
// true by default) goes into the server's bounded ResponsesStore for previous_response_id,
// GET /v1/responses/{id} and DELETE /v1/responses/{id}.
#include <fmt/format.h>

#include "server/http/generation_format.h"
#include "server/http/session.h"
#include "server/responses_api.h"

namespace tandem::server {

namespace {

class ResponsesFormat final : public GenerationFormat {
 public:
  explicit ResponsesFormat(ServerState& state) : state_(state) {}

  ApiRequest parse(const std::string& body, int64_t context_length, const std::function<bool()>& abandoned) override {
    request_ = parse_responses_request(body, context_length, state_.config.speculation, state_.responses, abandoned);
    return request_.api;
  }
  std::string response_id(uint64_t) const override { return id_; }

  std::string whole(const ResponseMeta& meta, const std::vector<Completion>& choices) override {
    ResponseBuilder& builder = builder_of(meta);
    const nlohmann::json response = builder.whole(choices.front());
    if (request_.store) state_.responses.put(id_, builder.stored());
    return dump_json(response);
  }
  std::string stream_event(const ResponseMeta& meta, const RequestEvent&, const std::vector<nlohmann::json>& deltas,
                           bool first, bool, int32_t) override {
    ResponseBuilder& builder = builder_of(meta);
    std::string out = first ? builder.stream_start() : std::string();  // before the deltas' events
    return out + builder.stream_deltas(deltas);
  }
  std::string stream_error(const ResponseMeta&, const RequestEvent& event) override {
    error_ = event.error;
    return {};
  }
  std::string stream_end(const ResponseMeta& meta, const std::vector<Completion>& choices) override {
    ResponseBuilder& builder = builder_of(meta);
    std::string out = builder.stream_finish(choices.front(), error_);
    // A client gone or a server shutting down cancels the reply: not a turn to continue from.
    const FinishReason reason = choices.front().finish_reason;
    if (request_.store && error_.empty() && reason != FinishReason::Cancelled && reason != FinishReason::None)
      state_.responses.put(id_, builder.stored());
    return out;
  }

 private:
  ResponseBuilder& builder_of(const ResponseMeta& meta) {
    if (!builder_) builder_.emplace(request_, id_, meta.created, meta.model);
    return *builder_;
  }

  ServerState& state_;
  const std::string id_ = random_item_id("resp_");
  ResponsesRequest request_;
  std::optional<ResponseBuilder> builder_;
  std::string error_;  // why the generation failed (stream: response.failed)
};

}  // namespace

HttpResponse Session::stored_response(const HttpRequest& request, bool keep_alive) const {
  std::string_view target = request.target();
  target = target.substr(0, target.find('?'));
  const std::string id(target.substr(target.rfind('/') + 1));
  if (request.method() == http::verb::delete_) {
    if (state_.responses.erase(id))
      return json_response(request.version(), {{"id", id}, {"object", "response.deleted"}, {"deleted", true}},
                           keep_alive);
  } else if (const std::optional<StoredResponse> stored = state_.responses.get(id)) {
    return json_response(request.version(), stored->response, keep_alive);
  }
  return error_response(request.version(), 404,
                        fmt::format("response '{}' is not stored on this server: unknown, sent with 'store': false, "
                                    "deleted, or evicted (the server keeps the last {} responses)",
                                    id.substr(0, 80), state_.responses.max_responses()),
                        "not_found_error", keep_alive);
}

boost::asio::awaitable<bool> Session::serve_responses(HttpRequest request, bool keep_alive) {
  ResponsesFormat format(state_);
  co_return co_await serve_generation(format, std::move(request), keep_alive);
}

}  // namespace tandem::server
