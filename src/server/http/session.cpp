// One connection's request loop (see session.h): idle wait, head, checks that need no body
// (shutdown, route, key, size), body, then the route's answer.
#include "server/http/session.h"

#include <malloc.h>
#include <poll.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include <fmt/format.h>

#include "server/api_key.h"
#include "server/cors.h"
#include "server/http_framing.h"
#include "server/model_names.h"
#include "server/props.h"
#include "server/refusal.h"
#include "server/stage_metrics.h"
#include "server/web_assets.h"
#include "server/worker_health.h"

namespace tandem::server {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);
// A request or response this large has its memory given back to the system once answered.
constexpr size_t kBigRequestBytes = 1 << 20;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

enum class Route {
  Health,
  Metrics,
  Models,
  Model,  // /v1/models/{id}
  Props,
  Tokenize,
  Detokenize,
  ApplyTemplate,
  Completions,
  Chat,
  Responses,
  StoredResponse,  // /v1/responses/{id}: GET, DELETE
  Embeddings,
  NativeCompletion,  // llama-server's /completion, /completions
  Infill,
  NativeEmbedding,  // llama-server's /embedding, /embeddings
  Rerank,           // /rerank, /reranking, /v1/rerank, /v1/reranking
  Slots,            // GET /slots
  SlotAction,       // POST /slots/{id}?action=save|restore|erase
  WebPage,          // the chat page's files: /, /chat.css, /chat.js
  NotFound
};

constexpr std::string_view kStoredResponsePrefix = "/v1/responses/";

Route route_of(std::string_view target) {
  target = target.substr(0, target.find('?'));
  if (target == "/health") return Route::Health;
  if (target == "/metrics") return Route::Metrics;
  if (target == "/v1/models") return Route::Models;
  if (!model_id_from_target(target).empty()) return Route::Model;
  if (target == "/props") return Route::Props;
  if (target == "/tokenize") return Route::Tokenize;
  if (target == "/detokenize") return Route::Detokenize;
  if (target == "/apply-template") return Route::ApplyTemplate;
  if (target == "/v1/completions") return Route::Completions;
  if (target == "/v1/chat/completions") return Route::Chat;
  if (target == "/v1/responses") return Route::Responses;
  if (target.size() > kStoredResponsePrefix.size() && target.starts_with(kStoredResponsePrefix))
    return Route::StoredResponse;
  if (target == "/v1/embeddings") return Route::Embeddings;
  if (target == "/completion" || target == "/completions") return Route::NativeCompletion;
  if (target == "/infill") return Route::Infill;
  if (target == "/embedding" || target == "/embeddings") return Route::NativeEmbedding;
  if (target == "/rerank" || target == "/reranking" || target == "/v1/rerank" || target == "/v1/reranking")
    return Route::Rerank;
  if (target == "/slots") return Route::Slots;
  if (target.starts_with("/slots/")) return Route::SlotAction;
  if (find_web_asset(target) != nullptr) return Route::WebPage;
  return Route::NotFound;
}

bool is_post(Route route) {
  return route == Route::Completions || route == Route::Chat || route == Route::Responses || route == Route::Tokenize ||
         route == Route::Detokenize || route == Route::ApplyTemplate || route == Route::Embeddings ||
         route == Route::NativeCompletion || route == Route::Infill || route == Route::NativeEmbedding ||
         route == Route::Rerank || route == Route::SlotAction;
}

bool method_allowed(Route route, http::verb method) {
  if (is_post(route)) return method == http::verb::post;
  if (route == Route::StoredResponse)
    return method == http::verb::get || method == http::verb::head || method == http::verb::delete_;
  switch (route) {
    case Route::NotFound: return true;  // answered 404 whatever the method
    default: return method == http::verb::get || method == http::verb::head;
  }
}

}  // namespace

Session::Session(ServerState& state, asio::ip::tcp::socket socket, bool health_only)
    : state_(state), stream_(std::move(socket)), health_only_(health_only) {
  state_.sessions.insert(this);
  if (health_only_) ++state_.health_only_sessions;
  ++state_.counters->open_connections;
  ++state_.counters->fresh_connections;
}

Session::~Session() {
  state_.sessions.erase(this);
  if (health_only_) --state_.health_only_sessions;
  --state_.counters->open_connections;
  if (requests_read_ == 0) --state_.counters->fresh_connections;
}

asio::awaitable<void> Session::run(std::shared_ptr<Session> self) {
  bool open = true;
  while (open) {
    open = co_await self->serve_one();
    self->log_request();
    if (std::exchange(self->big_request_, false)) {
      // Megabytes of a request freed in the middle of malloc's arenas stay resident (the
      // worker threads' arenas are never trimmed from the top alone): given back here, on a
      // worker (it takes a few milliseconds), once per big request.
      asio::post(self->state_.work, [] { ::malloc_trim(0); });
    }
  }
  co_await self->close(self->unread_body_);
}

asio::awaitable<void> Session::refuse(ServerState& state, asio::ip::tcp::socket socket) {
  // Past --max-connections the request is not read: the answer is the same for every request.
  beast::tcp_stream stream(std::move(socket));
  HttpResponse response{http::status::service_unavailable, 11};
  response.set(http::field::content_type, "application/json");
  response.set(http::field::retry_after, "1");
  response.keep_alive(false);
  response.body() = dump_json(error_json(
      fmt::format("the server has {} connections open (--max-connections); retry later", state.config.max_connections),
      "server_error"));
  response.prepare_payload();
  stream.expires_after(1s);
  co_await http::async_write(stream, response, kNoThrow);
  beast::error_code ignored;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  stream.close();
}

void Session::close_if_idle(bool include_fresh) {
  // A connection that never sent a request is owed an answer (its request may be on the way:
  // it connected before the signal); so is one whose next request is already in the kernel.
  beast::error_code ignored;
  if (!idle_ || buffer_.size() != 0 || (requests_read_ == 0 && !include_fresh) ||
      stream_.socket().available(ignored) != 0)
    return;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  stream_.socket().cancel(ignored);
}

asio::awaitable<void> Session::close(bool drain_unread) {
  beast::error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  if (drain_unread) {
    // A client still sending a body it was told we refused: if we close with its bytes
    // unread, the kernel answers with a reset, and a client that writes its whole body before
    // reading (Python requests, cpp-httplib) loses our response. Bytes are dropped as they
    // come, so this costs bandwidth for a bounded time, never memory.
    stream_.expires_after(2s);
    const size_t limit = std::max<size_t>(16u << 20, 2 * state_.config.max_body_bytes);
    size_t dropped = 0;
    while (dropped < limit) {
      auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(64 << 10), kNoThrow);
      if (ec) break;
      dropped += n;
      buffer_.consume(buffer_.size());
    }
  }
  stream_.close();
}

asio::awaitable<bool> Session::peer_left() {
  pollfd fd{stream_.socket().native_handle(), POLLRDHUP, 0};
  if (::poll(&fd, 1, 0) <= 0) co_return false;
  if ((fd.revents & (POLLHUP | POLLERR)) != 0) co_return true;  // reset, or closed both ways
  if ((fd.revents & POLLRDHUP) == 0) co_return false;
  if (version_ < 11) co_return true;
  if (response_started_ || probed_) co_return false;  // the writes (or the probe sent) will meet the reset
  probed_ = true;
  static constexpr std::string_view kProbe = "HTTP/1.1 100 Continue\r\n\r\n";
  stream_.expires_after(seconds(state_.config.write_timeout_s));
  auto [ec, n] = co_await asio::async_write(stream_, asio::buffer(kProbe), kNoThrow);
  stream_.expires_never();
  co_return static_cast<bool>(ec);
}

HttpResponse Session::error_response(unsigned version, int status, std::string_view message, std::string_view type,
                                     bool keep_alive, std::string_view param, ErrorCode code) const {
  if (status != 401) state_.counters->metrics.count_rejected();
  HttpResponse response{static_cast<http::status>(status), version};
  response.set(http::field::content_type, "application/json");
  response.keep_alive(keep_alive);
  nlohmann::json body = error_json(message, type, param, code);
  if (code == ErrorCode::None)
    if (const auto fallback = openai_error_code(status, type)) body["error"]["code"] = *fallback;
  response.body() = dump_json(body);
  return response;
}

HttpResponse Session::error_response(unsigned version, const Refusal& refusal, bool keep_alive) const {
  return error_response(version, refusal.status, refusal.message, refusal.type, keep_alive, refusal.param,
                        refusal.code);
}

HttpResponse Session::json_response(unsigned version, const nlohmann::json& body, bool keep_alive) const {
  HttpResponse response{http::status::ok, version};
  response.set(http::field::content_type, "application/json");
  response.keep_alive(keep_alive);
  response.body() = dump_json(body);
  return response;
}

HttpResponse Session::json_response(unsigned version, std::string body, bool keep_alive) const {
  HttpResponse response{http::status::ok, version};
  response.set(http::field::content_type, "application/json");
  response.keep_alive(keep_alive);
  response.body() = std::move(body);
  return response;
}

HttpResponse Session::health_response(unsigned version, bool keep_alive) const {
  GenerationService* engine = state_.engine.load();
  const std::vector<WorkerStatus> workers = engine ? engine->workers() : std::vector<WorkerStatus>{};
  const WorkerHealth health = worker_health(workers);
  const bool serving = engine != nullptr && (workers.empty() || health.serving);
  HttpResponse response{serving ? http::status::ok : http::status::service_unavailable, version};
  response.set(http::field::content_type, "application/json");
  response.keep_alive(keep_alive);
  if (!engine) {
    response.body() = R"({"status":"loading model"})";
  } else if (workers.empty()) {
    response.body() = R"({"status":"ok"})";
  } else {
    response.body() = health.body.dump();
  }
  return response;
}

asio::awaitable<bool> Session::answer_abandoned(unsigned version) {
  if (!state_.shutting_down) co_return false;  // its client left: no one to answer
  const Refusal refusal = abandoned_refusal();
  HttpResponse response = error_response(version, refusal.status, refusal.message, refusal.type, false);
  response.set(http::field::retry_after, "1");
  co_return co_await send(std::move(response));
}

HttpResponse Session::loading_response(unsigned version, bool keep_alive) const {
  HttpResponse response = error_response(version, 503, "the model is still loading", "server_error", keep_alive);
  response.set(http::field::retry_after, "1");
  return response;
}

void Session::set_cors_headers(http::fields& head) const {
  if (!cors_origin_.empty()) head.set(http::field::access_control_allow_origin, cors_origin_);
  // With a list of origins the answer depends on the Origin header, allowed or not: a cache
  // must not hand one origin's answer to another.
  if (!state_.config.cors.origins.empty() && !state_.config.cors.any) head.set(http::field::vary, "Origin");
}

void Session::log_request() {
  if (log_entry_.method.empty()) return;  // no request head was read
  const bool probe = log_entry_.path == "/health" || log_entry_.path == "/metrics";
  if (!probe || state_.config.verbose) {
    if (log_entry_.id.empty()) log_entry_.id = fmt::format("req-{}", state_.next_response_id++);
    log_entry_.total_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - request_start_).count();
    const std::string line = request_log_line(log_entry_, state_.config.log_format);
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  log_entry_ = {};
}

asio::awaitable<bool> Session::send(HttpResponse response) {
  log_entry_.status = response.result_int();
  big_request_ |= response.body().size() >= kBigRequestBytes;
  response.set(http::field::server, "tandem");
  set_cors_headers(response);
  response.prepare_payload();
  // A 204 has no body, and must not say so either (RFC 9110 8.6).
  if (response.result() == http::status::no_content) response.erase(http::field::content_length);
  if (head_only_) response.body().clear();  // Content-Length still says what GET would send
  stream_.expires_after(seconds(state_.config.write_timeout_s));
  response_started_ = true;
  auto [ec, n] = co_await http::async_write(stream_, response, kNoThrow);
  stream_.expires_never();
  if (ec == beast::error::timeout) state_.counters->metrics.count(TransportEvent::WriteTimeout);
  co_return !ec && response.keep_alive();
}

asio::awaitable<bool> Session::serve_one() {
  const ServerConfig& config = state_.config;
  head_only_ = false;
  response_started_ = false;
  probed_ = false;
  version_ = 11;
  cors_origin_.clear();
  if (buffer_.size() == 0) {
    // Between requests: wait for a first byte, no longer than the idle timeout.
    // At shutdown a kept-alive connection is done; a new one gets a grace period to send its
    // request and hear 503 (HttpServer closes it after that).
    if (state_.shutting_down && requests_read_ > 0) co_return false;
    idle_ = true;
    // A connection in the probes' reserve past --max-connections gets little time: it holds a
    // place kept for /health.
    stream_.expires_after(seconds(health_only_ ? std::min(1.0, config.idle_timeout_s) : config.idle_timeout_s));
    auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(8192), kNoThrow);
    idle_ = false;
    if (ec) co_return false;  // closed, reset, idle too long, or shut down
    buffer_.commit(n);
  }
  request_start_ = std::chrono::steady_clock::now();

  struct Busy {  // shutdown waits for connections that are answering a request
    ServingCounters& counters;
    explicit Busy(ServingCounters& c) : counters(c) { ++counters.busy_sessions; }
    ~Busy() { --counters.busy_sessions; }
  } busy(*state_.counters);

  // The whole request, head and body, must arrive within the read timeout: a client
  // trickling bytes loses its connection at the deadline, however steady the trickle.
  RequestParser parser;
  configure_request_parser(parser, FramingLimits{config.max_header_bytes, config.max_body_bytes});
  const auto read_deadline = std::chrono::steady_clock::now() +
                             seconds(health_only_ ? std::min(1.0, config.read_timeout_s) : config.read_timeout_s);
  stream_.expires_at(read_deadline);
  bool oversize = false;
  {
    auto [ec, n] = co_await http::async_read_header(stream_, buffer_, parser, kNoThrow);
    stream_.expires_never();
    if (ec == beast::error::timeout) {
      state_.counters->metrics.count(TransportEvent::ReadTimeout);
      co_return false;
    }
    if (ec == http::error::header_limit) {
      unread_body_ = true;
      co_await send(error_response(11, 431, fmt::format("the request head is over {} bytes", config.max_header_bytes),
                                   "invalid_request_error", false));
      co_return false;
    }
    // A Content-Length over the cap: the head is complete, so the key and the route are still
    // checked first (below), and the body is never read.
    oversize = ec == http::error::body_limit;
    if (oversize) ec = {};
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor)
      co_return false;
    if (ec) {
      unread_body_ = true;
      co_await send(error_response(11, 400, "malformed HTTP request: " + ec.message(), "invalid_request_error", false));
      co_return false;
    }
  }

  if (requests_read_++ == 0) --state_.counters->fresh_connections;
  const http::request<http::string_body>& head = parser.get();
  log_entry_.method = std::string(head.method_string());
  log_entry_.path = std::string(std::string_view(head.target()).substr(0, 200));
  const unsigned version = head.version();
  version_ = version;
  // A body whose length is not certain is never read, and nothing after it: the connection
  // closes after the answer (http_framing.h).
  if (const auto refusal = check_framing(head)) {
    unread_body_ = true;
    co_await send(error_response(version, refusal->status, refusal->message, "invalid_request_error", false));
    co_return false;
  }
  const bool body_pending = oversize || !parser.is_done();
  // Answering before the body is read means closing afterwards: its bytes would be taken
  // for the next request.
  const bool keep_alive = head.keep_alive();
  cors_origin_ = allowed_origin(config.cors, head[http::field::origin]);
  const auto refuse_now = [&](int status, std::string_view message, std::string_view type) -> asio::awaitable<bool> {
    unread_body_ = body_pending;
    co_return co_await send(error_response(version, status, message, type, keep_alive && !body_pending));
  };

  if (state_.shutting_down) {
    unread_body_ = body_pending;
    HttpResponse response = error_response(version, 503, "the server is shutting down", "server_error", false);
    response.set(http::field::retry_after, "1");
    co_await send(std::move(response));
    co_return false;
  }
  head_only_ = head.method() == http::verb::head;
  const Route route = route_of(head.target());
  if (health_only_ && route != Route::Health) {
    state_.counters->metrics.count(TransportEvent::ConnectionRefused);
    unread_body_ = body_pending;
    HttpResponse response = error_response(
        version, 503,
        fmt::format("the server has {} connections open (--max-connections); retry later", config.max_connections),
        "server_error", false);
    response.set(http::field::retry_after, "1");
    co_await send(std::move(response));
    co_return false;
  }
  // A CORS preflight carries no credentials, so it is answered before the key check; what it
  // reveals (the methods and headers allowed) is the same for every path. The CORS headers
  // themselves go only to an allowed origin (send()).
  if (head.method() == http::verb::options && route != Route::NotFound) {
    unread_body_ = body_pending;
    HttpResponse response{http::status::no_content, version};
    response.keep_alive(keep_alive && !body_pending);
    response.set(http::field::allow, is_post(route) ? "POST, OPTIONS" : "GET, HEAD, OPTIONS");
    if (!cors_origin_.empty()) {
      response.set(http::field::access_control_allow_methods, kCorsAllowMethods);
      response.set(http::field::access_control_allow_headers, kCorsAllowHeaders);
      response.set(http::field::access_control_max_age, kCorsMaxAgeSeconds);
    }
    co_return co_await send(std::move(response));
  }
  const std::string_view authorization = head[http::field::authorization];
  const std::string& key = route == Route::Metrics && !config.metrics_key.empty() ? config.metrics_key : config.api_key;
  // The page's files hold no data (a browser cannot send a key to load them); the requests
  // the page makes carry the key typed into it.
  if (route != Route::Health && route != Route::WebPage && !bearer_matches(authorization, key))
    co_return co_await refuse_now(401, "invalid or missing API key (send 'Authorization: Bearer KEY')",
                                  "authentication_error");
  if (route == Route::NotFound)
    co_return co_await refuse_now(
        404, fmt::format("no such endpoint: {}", std::string_view(head.target()).substr(0, 200)), "not_found_error");
  if (!method_allowed(route, head.method()))
    co_return co_await refuse_now(405,
                                  fmt::format("{} is not allowed on this endpoint", std::string(head.method_string())),
                                  "invalid_request_error");
  if (oversize)
    co_return co_await refuse_now(413,
                                  fmt::format("the request body is over the limit of {} bytes", config.max_body_bytes),
                                  "invalid_request_error");

  if (body_pending) {
    if (beast::iequals(head[http::field::expect], "100-continue")) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_at(read_deadline);
      co_await asio::async_write(stream_, asio::buffer(kContinue), kNoThrow);
    }
    stream_.expires_at(read_deadline);
    auto [ec, n] = co_await http::async_read(stream_, buffer_, parser, kNoThrow);
    stream_.expires_never();
    if (ec == beast::error::timeout) {
      state_.counters->metrics.count(TransportEvent::ReadTimeout);
      co_return false;
    }
    if (ec == http::error::body_limit) {  // chunked (or lying) bodies are cut off here, at the cap
      unread_body_ = true;
      co_await send(error_response(version, 413,
                                   fmt::format("the request body is over the limit of {} bytes", config.max_body_bytes),
                                   "invalid_request_error", false));
      co_return false;
    }
    if (const auto refusal = framing_refusal(ec)) {  // a malformed chunk: answered, and the rest never read
      unread_body_ = true;
      co_await send(error_response(version, refusal->status, refusal->message, "invalid_request_error", false));
      co_return false;
    }
    if (ec) co_return false;
  }
  HttpRequest request = parser.release();
  big_request_ |= request.body().size() >= kBigRequestBytes;

  GenerationService* engine = state_.engine.load();
  switch (route) {
    case Route::Health: co_return co_await send(health_response(version, keep_alive && !health_only_));
    case Route::Metrics: {
      HttpResponse response{http::status::ok, version};
      response.set(http::field::content_type, "text/plain; version=0.0.4");
      response.keep_alive(keep_alive);
      const TransportStats transport{state_.counters->open_connections.load(), state_.counters->in_engine.load()};
      response.body() =
          state_.counters->metrics.render(engine ? engine->stats() : EngineStats{}, transport,
                                          engine ? std::string_view(state_.model_id) : std::string_view());
      if (engine)
        response.body() += render_worker_metrics(engine->workers()) + render_stage_metrics(engine->stages()) +
                           render_tensor_parallel_metrics(engine->tensor_ranks());
      co_return co_await send(std::move(response));
    }
    case Route::Models: {
      nlohmann::json data = nlohmann::json::array();
      if (engine) data.push_back(model_json(state_.model_id, engine->context_length()));
      const nlohmann::json list = {{"object", "list"}, {"data", std::move(data)}};
      co_return co_await send(json_response(version, list, keep_alive));
    }
    case Route::Model: {
      if (!engine) co_return co_await send(loading_response(version, keep_alive));
      const std::string id = model_id_from_target(request.target());
      if (id.empty() || !model_name_accepted(state_.model_names, id))
        co_return co_await send(error_response(version, 404, model_not_found_message(state_.model_names, id),
                                               "invalid_request_error", keep_alive));
      co_return co_await send(json_response(version, model_json(id, engine->context_length()), keep_alive));
    }
    case Route::Props: {
      if (!engine) co_return co_await send(loading_response(version, keep_alive));
      ServerProps props;
      props.model_names = state_.model_names;
      props.model_path = state_.model_path;
      props.chat_renderer = &state_.chat_renderer;
      props.context_length = engine->context_length();
      props.total_slots = engine->max_seqs();
      props.speculation = config.speculation;
      const nlohmann::json body = props_json(props);
      co_return co_await send(json_response(version, body, keep_alive));
    }
    case Route::Tokenize: co_return co_await serve_text_utility(TextUtility::Tokenize, std::move(request), keep_alive);
    case Route::Detokenize:
      co_return co_await serve_text_utility(TextUtility::Detokenize, std::move(request), keep_alive);
    case Route::ApplyTemplate:
      co_return co_await serve_text_utility(TextUtility::ApplyTemplate, std::move(request), keep_alive);
    case Route::Completions: co_return co_await serve_generation(Endpoint::Completions, std::move(request), keep_alive);
    case Route::Chat: co_return co_await serve_generation(Endpoint::Chat, std::move(request), keep_alive);
    case Route::Responses: co_return co_await serve_responses(std::move(request), keep_alive);
    case Route::StoredResponse: co_return co_await send(stored_response(request, keep_alive));
    case Route::Embeddings: co_return co_await serve_embeddings(std::move(request), keep_alive);
    case Route::NativeCompletion:
      co_return co_await serve_native_completion(std::move(request), keep_alive, /*infill=*/false);
    case Route::Infill: co_return co_await serve_native_completion(std::move(request), keep_alive, /*infill=*/true);
    case Route::NativeEmbedding:
      co_return co_await serve_embeddings(std::move(request), keep_alive, EmbeddingShape::Native);
    case Route::Rerank: co_return co_await serve_embeddings(std::move(request), keep_alive, EmbeddingShape::Rerank);
    case Route::Slots:
    case Route::SlotAction: co_return co_await serve_slots(std::move(request), keep_alive);
    case Route::WebPage: {
      const WebAsset* asset = find_web_asset(request.target());
      HttpResponse response{http::status::ok, version};
      response.set(http::field::content_type, asset->content_type);
      response.set(http::field::cache_control, "no-cache");  // a new binary may serve a new page
      response.keep_alive(keep_alive);
      response.body() = asset->body;
      co_return co_await send(std::move(response));
    }
    case Route::NotFound: break;
  }
  co_return false;
}

}  // namespace tandem::server
