// Checks shared by the hostile-client tests (hostile_client_test.cpp, hostile_request_test.cpp):
// requests as bytes, OpenAI error bodies, SSE streams, Prometheus samples, and "is the server
// still serving others" probes, all over raw_http.h with bounded waits. Test helpers only.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "raw_http.h"
#include "server_process.h"

#ifndef REQUIRE_MODEL
#define REQUIRE_MODEL() TANDEM_REQUIRE_SHARED(::tandem::testing::kAidreamsGguf)
#endif

namespace tandem::testing::hostile {

using nlohmann::json;

// Token ids 10..400 are ordinary pieces of the 512-token vocabulary.
inline const json kPromptIds = json::array({10, 11, 12});

inline json parse(const std::string& text) { return json::parse(text, nullptr, false); }

inline std::string completion(int max_tokens, bool stream = false) {
  return json{{"prompt", kPromptIds}, {"max_tokens", max_tokens}, {"stream", stream}}.dump();
}

inline std::string describe(const std::optional<RawResponse>& res) {
  if (!res) return "(no response)";
  return std::to_string(res->status) + " " + res->body.substr(0, 400);
}

// An OpenAI error: {"error": {"message": string, "type": string, "code": ...}}.
inline void expect_error(const std::optional<RawResponse>& res, int status, const std::string& what) {
  ASSERT_TRUE(res) << what << ": no response";
  EXPECT_EQ(res->status, status) << what << ": " << res->body;
  const json body = parse(res->body);
  ASSERT_TRUE(body.is_object() && body.contains("error") && body["error"].is_object()) << what << ": " << res->body;
  EXPECT_TRUE(body["error"]["message"].is_string()) << what << ": " << res->body;
  EXPECT_TRUE(body["error"]["type"].is_string()) << what << ": " << res->body;
  EXPECT_TRUE(body["error"].contains("code")) << what << ": " << res->body;
}

inline std::string error_message(const std::optional<RawResponse>& res) {
  const json body = res ? parse(res->body) : json();
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return {};
  return body["error"].value("message", "");
}

inline std::optional<RawResponse> get(int port, const std::string& path, const std::vector<std::string>& headers = {},
                                      double timeout_s = 5.0) {
  return exchange(port, http_request("GET", path, {}, headers), timeout_s);
}

inline std::optional<RawResponse> post(int port, const std::string& path, const std::string& body,
                                       const std::vector<std::string>& headers = {}, double timeout_s = 20.0) {
  return exchange(port, http_request("POST", path, body, headers), timeout_s);
}

// An unlabelled sample of a Prometheus text page; nullopt when absent.
inline std::optional<double> metric(const std::string& page, const std::string& name) {
  const std::regex sample("(^|\n)" + name + " ([-+0-9.eE]+|NaN)");
  std::smatch match;
  if (!std::regex_search(page, match, sample)) return std::nullopt;
  return std::stod(match[2]);
}

inline std::string metrics_page(int port, const std::vector<std::string>& headers = {}) {
  const auto res = get(port, "/metrics", headers);
  return res && res->status == 200 ? res->body : std::string();
}

// The samples of `names` in a metrics page, one "name value" per line, for failure messages.
inline std::string metric_lines(const std::string& page, const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    const auto value = metric(page, name);
    out += name + " " + (value ? std::to_string(*value) : "(absent)") + "\n";
  }
  return out;
}

// The per-sequence context from the server's "ready" line.
inline int context_length(const ServerProcess& server) {
  std::smatch match;
  const std::string log = server.log();
  const std::regex context("context ([0-9]+)");
  return std::regex_search(log, match, context) ? std::stoi(match[1]) : 0;
}

// A 200 SSE body that ends well: a chunk with a finish_reason, then "data: [DONE]".
inline void expect_complete_stream(const RawResponse& res, const std::string& what) {
  const std::vector<std::string> events = sse_data(res.body);
  ASSERT_FALSE(events.empty()) << what << ": " << res.body;
  EXPECT_EQ(events.back(), "[DONE]") << what << ": the stream did not end with [DONE]: ..."
                                     << res.body.substr(res.body.size() > 300 ? res.body.size() - 300 : 0);
  bool finished = false;
  for (const std::string& event : events) {
    const json chunk = parse(event);
    if (!chunk.is_object() || !chunk.contains("choices")) continue;
    for (const json& choice : chunk["choices"])
      if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) finished = true;
  }
  EXPECT_TRUE(finished) << what << ": no chunk carried a finish_reason";
}

// GET /health answers 200 within `within_s` (a bound that detects a hang, not a speed).
inline void expect_health(int port, double within_s, const std::string& when) {
  const auto start = Clock::now();
  std::string why;
  const auto res = exchange(port, http_request("GET", "/health"), within_s, &why);
  ASSERT_TRUE(res) << "/health " << when << ": no answer within " << within_s << " s (" << why << ")";
  EXPECT_EQ(res->status, 200) << "/health " << when << ": " << res->body;
  EXPECT_LT(seconds_since(start), within_s) << "/health " << when;
}

inline void expect_completion_served(int port, const std::string& when, const std::vector<std::string>& headers = {}) {
  const auto res = post(port, "/v1/completions", completion(4), headers);
  ASSERT_TRUE(res) << "completion " << when << ": no response";
  EXPECT_EQ(res->status, 200) << "completion " << when << ": " << res->body;
}

}  // namespace tandem::testing::hostile
