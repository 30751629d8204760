// HttpServer: the OpenAI-compatible HTTP transport over cpp-httplib. Routes requests to the
// Engine, turns its events into JSON or SSE, enforces the API key and body limit, and
// cancels a request whose streaming client went away. Listens before the model is loaded
// (/health answers 503 until attach()). Owns no model state.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "server/chat_format.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"

namespace httplib {
class Server;
class Request;
class Response;
}  // namespace httplib

namespace tandem::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                        // 0: any free port (see HttpServer::port())
  std::string api_key;                    // empty: no authentication
  size_t max_body_bytes = 8 << 20;        // larger bodies get 413
  int http_threads = 32;                  // connections served at once
};

class HttpServer {
 public:
  explicit HttpServer(ServerConfig config);
  ~HttpServer();

  // Binds the socket; InputError when the address cannot be bound.
  void bind();
  int port() const { return port_; }
  // Serves on the calling thread until stop().
  void listen();
  // Stops accepting; in-flight handlers run to completion. Thread-safe.
  void stop();

  // The model is loaded: completions are served and /health turns 200. `engine` must outlive
  // this server's handlers.
  void attach(Engine* engine, std::string model_id, ChatRenderer chat_renderer);

 private:
  void handle_generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  void handle_models(httplib::Response& res) const;
  bool authorized(const httplib::Request& req) const;
  void send_error(httplib::Response& res, int status, const std::string& message, const std::string& type);

  ServerConfig config_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<Engine*> engine_{nullptr};
  std::string model_id_;
  ChatRenderer chat_renderer_;
  Metrics metrics_;
  std::atomic<uint64_t> next_response_id_{1};
};

}  // namespace tandem::server
