// HttpServer: the OpenAI-compatible HTTP/1.1 transport (Boost.Beast on Asio; why Beast is in
// src/server/README.md). One I/O thread runs every connection as a coroutine, so a slow or
// idle client holds a socket, never a thread; parsing and tokenizing run on a small worker
// pool. Every read and write has a deadline, bodies are capped for every transfer encoding,
// connections and waiting requests are capped (503 + Retry-After past them), and shutdown
// lets admitted requests finish. Listens before the model is loaded (/health says 503 until
// attach()). Owns no model state.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_renderer.h"
#include "chat/tool_call_parser.h"
#include "engine/generation_service.h"
#include "engine/speculation/speculation_params.h"
#include "server/cors.h"
#include "server/request_log.h"

namespace tandem::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port (see HttpServer::port())
  std::string api_key;                 // non-empty: every path but /health needs "Bearer KEY"
  std::string metrics_key;             // non-empty: /metrics needs this key instead of api_key
  size_t max_body_bytes = 8 << 20;     // larger bodies (any encoding) get 413
  size_t max_header_bytes = 16 << 10;  // larger request heads get 431
  int max_connections = 512;           // open connections; past it a new one gets 503
  int max_queue = 64;                  // generation requests waiting beyond --parallel; past it 503
  double read_timeout_s = 10.0;        // a request's head and body must arrive within this
  double idle_timeout_s = 30.0;        // a keep-alive connection with no request is closed
  double write_timeout_s = 30.0;       // a client that reads nothing for this long is dropped
  SpeculationParams speculation;       // --spec ...: for requests without a `speculative` object
  // --verbose: log each request's ignored (unknown) fields, /health and /metrics requests, and
  // the engine's scheduling decisions.
  bool verbose = false;
  LogFormat log_format = LogFormat::Text;  // --log-format: text lines or one JSON object per line
  CorsPolicy cors;                         // --allowed-origins: browser origins given CORS headers
  // --chat-template-kwargs: template variables every chat request gets (an object, or null);
  // a request's chat_template_kwargs override them key by key.
  nlohmann::ordered_json chat_template_kwargs = nullptr;
  Pooling pooling = Pooling::Mean;  // --pooling: how /v1/embeddings pools a prompt's hidden states
  // /v1/responses keeps stored responses (for previous_response_id) in memory, at most this
  // many (--max-stored-responses; 0: none) and this many bytes; the oldest go first.
  size_t max_stored_responses = 1024;
  size_t max_stored_response_bytes = size_t{64} << 20;
  // --tool-call-parser: how replies' tool calls are read, in place of the format the chat
  // template shows its model (detect_tool_call_syntax); unset: the template's.
  std::optional<chat::ToolCallFormat> tool_call_format;
  // --scheduling-policy priority: the engine orders waiting requests by their `priority`; without
  // it a request's non-zero priority is a 400 naming the flag (vLLM's rule).
  bool priority_scheduling = false;
  // --trust-request-chat-template: a chat request may bring its own Jinja `chat_template` (code
  // the server runs, under the Jinja engine's limits); without it that is a 400 naming the flag.
  bool trust_request_chat_template = false;
  // --slot-save-path: the directory POST /slots/{id}?action=save|restore keeps slot files in
  // (a bare file name each); empty: those actions are a 400 naming the flag.
  std::string slot_save_path;
};

// The model as the API names it.
struct ServedModel {
  std::vector<std::string> names;  // [0]: the id /v1/models lists and responses carry; each is accepted as `model`
  std::string path;                // the file it was loaded from (/props)
};

class HttpServer {
 public:
  explicit HttpServer(ServerConfig config);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket (never shared with another process); InputError when it cannot.
  void bind();
  int port() const;
  // Serves on its own threads until shutdown() or stop().
  void start();

  // The model is loaded: completions are served and /health turns 200. The engine must
  // outlive this server's use of it and stop before the server is destroyed.
  void attach(GenerationService* engine, ServedModel model, chat::ChatRenderer chat_renderer);

  // Graceful: stop accepting (connections already waiting in the backlog are answered 503),
  // refuse queued-but-unadmitted requests with 503, let admitted requests finish (streams end
  // with their final chunk and [DONE]), close idle connections; after `timeout_s` cancel
  // what is left. Returns when every response is written or the time is up. Thread-safe.
  void shutdown(double timeout_s);
  // Immediate: closes everything and joins the threads. Idempotent; safe before start().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::server
