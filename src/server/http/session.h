// Session: one client connection, served by a coroutine on the I/O thread. Reads requests in
// order (keep-alive and pipelining: bytes after one request stay buffered for the next)
// under the idle and read deadlines, enforces the head and body caps and the API key before
// a body is read, routes, and writes each response under the write deadline. Generation
// requests (generation.cpp) wait on the engine's events and notice a client that left.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/http/server_state.h"
#include "server/openai_protocol.h"
#include "server/refusal.h"
#include "server/request_log.h"

namespace tandem::server {

class GenerationFormat;

namespace beast = boost::beast;
namespace http = boost::beast::http;
using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;

class Session {
 public:
  enum class TextUtility { Tokenize, Detokenize, ApplyTemplate };
  // What an embedding request's body and answer look like: /v1/embeddings (OpenAI's),
  // llama-server's /embedding, or /rerank (its inputs pooled as the last position and scored by
  // the model's classification head).
  enum class EmbeddingShape { OpenAI, Native, Rerank };

  // `health_only`: a connection past --max-connections, in the reserve kept for probes: it
  // may ask for /health, once; anything else is the 503 refuse() answers.
  Session(ServerState& state, boost::asio::ip::tcp::socket socket, bool health_only = false);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Serves the connection to its end, then closes it. Keeps `self` alive meanwhile.
  static boost::asio::awaitable<void> run(std::shared_ptr<Session> self);
  // Answers one canned 503 (past --max-connections) and closes.
  static boost::asio::awaitable<void> refuse(ServerState& state, boost::asio::ip::tcp::socket socket);

  // I/O thread, at shutdown: a connection waiting for its next request is closed now; one
  // that has not sent any request yet only when `include_fresh` (after a grace period).
  void close_if_idle(bool include_fresh);

 private:
  // Reads and answers one request; false when the connection must close.
  boost::asio::awaitable<bool> serve_one();
  boost::asio::awaitable<bool> serve_generation(Endpoint endpoint, HttpRequest request, bool keep_alive);
  // Any generating endpoint, its protocol given by `format` (generation_format.h).
  boost::asio::awaitable<bool> serve_generation(GenerationFormat& format, HttpRequest request, bool keep_alive);
  // /v1/responses (responses.cpp): OpenAI's Responses API over the chat path.
  boost::asio::awaitable<bool> serve_responses(HttpRequest request, bool keep_alive);
  // GET /v1/responses/{id} (the stored response object) and DELETE (forgets it): responses.cpp.
  HttpResponse stored_response(const HttpRequest& request, bool keep_alive) const;
  // /tokenize, /detokenize, /apply-template (text_utilities.cpp): the body is read on the
  // worker pool, as a prompt is.
  boost::asio::awaitable<bool> serve_text_utility(TextUtility utility, HttpRequest request, bool keep_alive);
  // /v1/embeddings, /embedding and /rerank (embeddings.cpp): every input an embedding request in
  // the engine.
  boost::asio::awaitable<bool> serve_embeddings(HttpRequest request, bool keep_alive,
                                                EmbeddingShape shape = EmbeddingShape::OpenAI);
  // llama-server's /completion and /infill (native_completion.cpp) over serve_generation.
  boost::asio::awaitable<bool> serve_native_completion(HttpRequest request, bool keep_alive, bool infill);
  // GET /slots and POST /slots/{id}?action=save|restore|erase (slots.cpp).
  boost::asio::awaitable<bool> serve_slots(HttpRequest request, bool keep_alive);
  // Runs `work` on the worker pool, watching the client meanwhile (every kPeerPoll, peer_left):
  // `work` is passed `abandoned`, which turns true once nobody waits for its answer (the client
  // left, or the server is shutting down), and should then stop early. Waits for it to return
  // (it uses this session's data), and returns what it returned. worker_job.h.
  template <class Work>
  auto on_worker(Work work) -> boost::asio::awaitable<decltype(work(std::function<bool()>()))>;
  // Whether the client is gone. A reset is; a FIN alone may be a half-close (shutdown(SHUT_WR)
  // after a whole request) that still waits for its answer: an HTTP/1.1 client that has been
  // sent nothing yet is sent one "100 Continue" (RFC 9110 15.2: clients must read 1xx), which a
  // closed socket answers with a reset that the next call sees; an HTTP/1.0 client cannot be
  // sent one, so its FIN counts as gone. Once a response has started, its writes probe.
  boost::asio::awaitable<bool> peer_left();
  // Writes a whole response; false when the connection must close (or the write failed).
  boost::asio::awaitable<bool> send(HttpResponse response);
  // Shuts down sending, and when the client may still be sending a body we did not read,
  // reads and drops it for a moment first, so the close is not a reset that eats the answer.
  boost::asio::awaitable<void> close(bool drain_unread);

  // An OpenAI error body; `param` and `code` as ApiError's (a 404 invalid_request_error with no
  // code is model_not_found, openai_error_code).
  HttpResponse error_response(unsigned version, int status, std::string_view message, std::string_view type,
                              bool keep_alive, std::string_view param = {}, ErrorCode code = ErrorCode::None) const;
  HttpResponse error_response(unsigned version, const Refusal& refusal, bool keep_alive) const;
  HttpResponse json_response(unsigned version, const nlohmann::json& body, bool keep_alive) const;
  HttpResponse json_response(unsigned version, std::string body, bool keep_alive) const;
  HttpResponse health_response(unsigned version, bool keep_alive) const;
  // A request the worker pool abandoned (on_worker): at shutdown it is a 503 and the
  // connection closes; when its client left, there is no one to answer (false: close).
  boost::asio::awaitable<bool> answer_abandoned(unsigned version);
  // 503 + Retry-After while the model loads (no engine attached yet).
  HttpResponse loading_response(unsigned version, bool keep_alive) const;
  // Access-Control-Allow-Origin for an allowed Origin (cors_origin_), and Vary: Origin when
  // origins are listed. send() calls it; a streamed head (generation.cpp) does not yet.
  void set_cors_headers(http::fields& head) const;
  // Writes the log line of the request serve_one() just answered (if it read one), then forgets it.
  void log_request();

  ServerState& state_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bool idle_ = false;              // waiting for the first byte of the next request
  int64_t requests_read_ = 0;      // request heads read on this connection
  bool unread_body_ = false;       // answered without reading the request's body
  bool head_only_ = false;         // the request was HEAD: the response carries headers only
  const bool health_only_;         // in the reserve past --max-connections: /health only, then close
  unsigned version_ = 11;          // the request's HTTP version (11: 1.1)
  bool response_started_ = false;  // a byte of the current request's response has been written
  bool probed_ = false;            // peer_left() sent this request's 100 Continue
  bool big_request_ = false;       // a body or answer of megabytes: run() trims malloc's arenas after it
  // The request's Origin, when --allowed-origins allows it: send() adds the CORS headers.
  std::string cors_origin_;
  // The request being answered, for its log line: serve_one() starts it when a head arrives,
  // send() and the streamed head set the status, serve_generation() the tokens and times.
  RequestLogEntry log_entry_;
  std::chrono::steady_clock::time_point request_start_;
};

}  // namespace tandem::server
