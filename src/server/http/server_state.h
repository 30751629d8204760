// ServerState: what the listener and every connection of one HttpServer share — the config,
// the I/O context and worker pool, the attached engine, and the counters the engine thread
// also updates (held by shared_ptr so an engine callback never outlives them).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "chat/chat_renderer.h"
#include "chat/tool_call_parser.h"
#include "engine/generation_service.h"
#include "server/http/http_server.h"
#include "server/metrics.h"
#include "server/rank_head.h"
#include "server/request_log.h"
#include "server/responses_store.h"
#include "server/slot_table.h"

namespace tandem::server {

class Session;

// Updated from the engine thread (request ends) and the I/O thread.
struct ServingCounters {
  Metrics metrics;
  std::atomic<int64_t> in_engine{0};      // generation requests submitted, final event not yet pushed
  std::atomic<int64_t> busy_sessions{0};  // connections between a request's head and its response's end
  std::atomic<int64_t> open_connections{0};
  std::atomic<int64_t> fresh_connections{0};  // open, no request head read yet (shutdown answers them)
};

struct ServerState {
  explicit ServerState(ServerConfig config) : config(std::move(config)) {}

  const ServerConfig config;
  // /v1/responses' stored responses (previous_response_id), bounded by the config.
  ResponsesStore responses{config.max_stored_responses, config.max_stored_response_bytes};
  std::atomic<GenerationService*> engine{nullptr};  // stored last by attach(): publishes the four below
  std::string model_id;                             // model_names[0]: what responses carry
  std::vector<std::string> model_names;             // what a request's `model` may be
  std::string model_path;
  chat::ChatRenderer chat_renderer;
  RankHead rank_head;  // the model's classification head, if it has one (/rerank)
  // How the template's model writes tool calls and reasoning (from the template's text; the
  // built-in formats teach Hermes-style <tool_call>), for reading replies back.
  chat::ToolCallSyntax tool_call_syntax;
  std::shared_ptr<ServingCounters> counters = std::make_shared<ServingCounters>();
  std::atomic<uint64_t> next_response_id{1};

  // Set when shutdown begins: work on the worker pool for requests not yet admitted stops at
  // its next check (Session::on_worker), since they are all answered 503 now.
  std::atomic<bool> abandon_work{false};

  // I/O thread only.
  SlotTable slots;  // --parallel places, sized by attach() (slot_table.h)
  bool shutting_down = false;
  std::unordered_set<Session*> sessions;
  int64_t health_only_sessions = 0;  // of `sessions`: in the reserve past --max-connections

  // Last, so they are destroyed first: the coroutine frames the I/O context still holds
  // (connections open at stop) unregister themselves from `sessions` as they go.
  boost::asio::io_context io{1};
  // JSON parsing, chat rendering and tokenizing: a long prompt must not stall the I/O thread
  // that answers /health and moves every stream.
  boost::asio::thread_pool work{2};
};

// A line of the server's log (stderr), in --log-format.
inline void log_line(const ServerState& state, const std::string& message, std::string_view level) {
  const std::string line = log_message_line(level, message, state.config.log_format);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace tandem::server
