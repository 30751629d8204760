// One /v1/completions request's outcome as the multi-process tests compare it (status, text,
// completion tokens, error message), and a set of requests sent at once, each on its own
// connection: what DisaggServer and SimulatedHosts hold against a single process's replies.
#pragma once

#include <future>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/server_process.h"

namespace tandem::testing {

struct CompletionReply {
  int status = 0;  // 0: no answer
  std::string text;
  int64_t completion_tokens = -1;
  std::string error;
};

inline CompletionReply complete(const ServerProcess& server, const nlohmann::json& request, int read_timeout_s = 60) {
  httplib::Client client = server.client();
  client.set_read_timeout(read_timeout_s, 0);
  const auto res = client.Post("/v1/completions", request.dump(), "application/json");
  CompletionReply reply;
  if (!res) return reply;
  reply.status = res->status;
  const nlohmann::json body = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status == 200) {
    reply.text = body["choices"][0]["text"];
    reply.completion_tokens = body["usage"]["completion_tokens"];
  } else if (body.is_object() && body.contains("error")) {
    reply.error = body["error"]["message"];
  }
  return reply;
}

// Every request at once, each on its own thread and connection; replies in request order.
inline std::vector<CompletionReply> all_at_once(const ServerProcess& server,
                                                const std::vector<nlohmann::json>& requests, int read_timeout_s = 60) {
  std::vector<std::future<CompletionReply>> futures;
  for (const nlohmann::json& request : requests)
    futures.push_back(std::async(
        std::launch::async, [&server, request, read_timeout_s] { return complete(server, request, read_timeout_s); }));
  std::vector<CompletionReply> replies;
  for (auto& f : futures) replies.push_back(f.get());
  return replies;
}

}  // namespace tandem::testing
