// HttpServer routes (see http_server.h). Each generation request gets an EventStream that the
// engine thread fills; the handler thread drains it, into one JSON body or SSE chunks. A
// failed SSE write (client gone) cancels the request, and the engine frees its blocks.
#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "base/error.h"

namespace tandem::server {

namespace {

// Events of one request, handed from the engine thread to the HTTP handler thread.
class EventStream {
 public:
  void push(RequestEvent&& event) {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
    ready_.notify_one();
  }
  // False on timeout.
  bool pop(RequestEvent& event, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
    event = std::move(events_.front());
    events_.pop_front();
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestEvent> events_;
};

struct StreamState {
  std::shared_ptr<EventStream> events;
  ResponseMeta meta;
  uint64_t request_id = 0;
  bool include_usage = false;
  bool first = true;
  bool done = false;
};

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

HttpServer::HttpServer(ServerConfig config) : config_(std::move(config)), http_(std::make_unique<httplib::Server>()) {
  httplib::Server& http = *http_;
  const int threads = std::max(4, config_.http_threads);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_payload_max_length(config_.max_body_bytes);
  // Generation can take a while between bytes; a slow client is not an error.
  http.set_write_timeout(60, 0);

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/v1/", 0) == 0 && !authorized(req)) {
      send_error(res, 401, "invalid or missing API key (send 'Authorization: Bearer KEY')", "authentication_error");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Statuses httplib produces itself (404, 413, ...) get an OpenAI-style body too.
  http.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message = res.status == 413   ? "the request body is too large"
                                : res.status == 404 ? "no such endpoint"
                                                    : "the request could not be served";
    const std::string type = res.status == 404 ? "not_found_error" : "invalid_request_error";
    res.set_content(dump_json(error_json(message, type)), "application/json");
  });
  http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    send_error(res, 500, message, "server_error");
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (engine_.load() == nullptr) {
      res.status = 503;
      res.set_content(R"({"status":"loading model"})", "application/json");
    } else {
      res.set_content(R"({"status":"ok"})", "application/json");
    }
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    Engine* engine = engine_.load();
    res.set_content(metrics_.render(engine ? engine->stats() : EngineStats{}), "text/plain; version=0.0.4");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { handle_models(res); });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generate(Endpoint::Completions, req, res);
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generate(Endpoint::Chat, req, res);
  });
}

HttpServer::~HttpServer() = default;

void HttpServer::bind() {
  if (config_.port == 0) {
    port_ = http_->bind_to_any_port(config_.host);
    TANDEM_CHECK_INPUT(port_ > 0, "cannot bind {} on any port", config_.host);
  } else {
    TANDEM_CHECK_INPUT(http_->bind_to_port(config_.host, config_.port), "cannot bind {}:{} (in use?)", config_.host,
                       config_.port);
    port_ = config_.port;
  }
}

void HttpServer::listen() { http_->listen_after_bind(); }

void HttpServer::stop() { http_->stop(); }

void HttpServer::attach(Engine* engine, std::string model_id, ChatRenderer chat_renderer) {
  model_id_ = std::move(model_id);
  chat_renderer_ = std::move(chat_renderer);
  engine_.store(engine);  // publishes model_id_ and chat_renderer_ to the handler threads
}

bool HttpServer::authorized(const httplib::Request& req) const {
  if (config_.api_key.empty()) return true;
  return req.get_header_value("Authorization") == "Bearer " + config_.api_key;
}

void HttpServer::send_error(httplib::Response& res, int status, const std::string& message, const std::string& type) {
  if (status != 401) metrics_.count_rejected();
  res.status = status;
  res.set_content(dump_json(error_json(message, type)), "application/json");
}

void HttpServer::handle_models(httplib::Response& res) const {
  nlohmann::json data = nlohmann::json::array();
  if (engine_.load() != nullptr)
    data.push_back({{"id", model_id_}, {"object", "model"}, {"created", 0}, {"owned_by", "tandem"}});
  res.set_content(dump_json({{"object", "list"}, {"data", data}}), "application/json");
}

void HttpServer::handle_generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  Engine* engine = engine_.load();
  if (engine == nullptr) return send_error(res, 503, "the model is still loading", "server_error");

  ApiRequest api;
  std::vector<int32_t> prompt;
  auto events = std::make_shared<EventStream>();
  uint64_t request_id = 0;
  try {
    // Chat has no natural length: by default it may run to the end of the context.
    const int64_t default_max_tokens = endpoint == Endpoint::Chat ? engine->context_length() : 16;
    api = parse_request(endpoint, req.body, default_max_tokens);
    if (!api.model.empty() && api.model != model_id_)
      throw ApiError(400, "invalid_request_error", fmt::format("the model '{}' does not exist (this server has '{}')",
                                                               api.model, model_id_));
    const Tokenizer& tokenizer = engine->tokenizer();
    const bool bos = tokenizer.vocab().add_bos;
    if (endpoint == Endpoint::Chat) {
      // The template's turn markers are special tokens of chat models: match them whole.
      const std::string text = chat_renderer_.render(api.messages);
      prompt = tokenizer.encode(text, bos && !chat_renderer_.starts_with_bos(text), /*parse_special=*/true);
    } else if (!api.prompt_ids.empty()) {
      prompt = api.prompt_ids;
    } else {
      prompt = tokenizer.encode(api.prompt, bos);
    }
    request_id = engine->submit(prompt, api.params, [this, events](RequestEvent&& event) {
      if (event.finished) metrics_.observe(event);
      events->push(std::move(event));
    });
  } catch (const ApiError& e) {
    return send_error(res, e.status, e.what(), e.type);
  } catch (const InputError& e) {
    return send_error(res, 400, e.what(), "invalid_request_error");
  }

  ResponseMeta meta;
  meta.endpoint = endpoint;
  meta.id = fmt::format("{}-{}", endpoint == Endpoint::Chat ? "chatcmpl" : "cmpl", next_response_id_++);
  meta.created = unix_seconds();
  meta.model = model_id_;
  meta.logprobs = api.logprobs;

  if (!api.stream) {
    Completion completion;
    for (RequestEvent event;;) {
      if (!events->pop(event, std::chrono::milliseconds(1000))) continue;
      completion.text += event.text;
      for (TokenLogprob& lp : event.logprobs) completion.logprobs.push_back(std::move(lp));
      if (!event.finished) continue;
      completion.finish_reason = event.finish_reason;
      completion.prompt_tokens = event.prompt_tokens;
      completion.completion_tokens = event.completion_tokens;
      completion.cached_tokens = event.cached_tokens;
      break;
    }
    if (completion.finish_reason == FinishReason::Cancelled)
      return send_error(res, 503, "the server is shutting down; the request was cancelled", "server_error");
    res.set_content(dump_json(response_json(meta, completion)), "application/json");
    return;
  }

  auto state = std::make_shared<StreamState>();
  state->events = events;
  state->meta = meta;
  state->request_id = request_id;
  state->include_usage = api.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [engine, state](size_t, httplib::DataSink& sink) {
        RequestEvent event;
        // Wake now and then even without tokens, to notice a client that went away.
        if (!state->events->pop(event, std::chrono::milliseconds(200))) {
          if (!sink.is_writable()) {
            engine->cancel(state->request_id);
            return false;
          }
          return true;
        }
        const std::string chunks = sse_event(state->meta, event, state->first, state->include_usage);
        state->first = false;
        if (event.finished) state->done = true;
        if (!chunks.empty() && !sink.write(chunks.data(), chunks.size())) {
          if (!state->done) engine->cancel(state->request_id);
          return false;
        }
        if (state->done) sink.done();
        return true;
      },
      [engine, state](bool) {
        // Covers every way the response can end early (write error, server stop).
        if (!state->done) engine->cancel(state->request_id);
      });
}

}  // namespace tandem::server
