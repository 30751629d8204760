// Reading the real server's JSON answers in tests: a 200's body, or a refusal's error object
// whose message holds a reason. Shared by the endpoint tests that drive `tandem serve` with
// cpp-httplib.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>

#include <nlohmann/json.hpp>

namespace tandem::testing {

inline httplib::Result post_json(httplib::Client& client, const std::string& path, const nlohmann::json& body,
                                 const httplib::Headers& headers = {}) {
  return client.Post(path.c_str(), headers, body.dump(), "application/json");
}

// The body of a 200 (null JSON, with a failure, for anything else).
inline nlohmann::json ok_json(const httplib::Result& res, const std::string& what) {
  EXPECT_TRUE(res) << what << ": no response";
  if (!res) return {};
  EXPECT_EQ(res->status, 200) << what << ": " << res->body;
  return nlohmann::json::parse(res->body, nullptr, false);
}

// The error object of a refusal with `status`; its message must contain `reason`.
inline nlohmann::json expect_error(const httplib::Result& res, int status, const std::string& reason,
                                   const std::string& what) {
  EXPECT_TRUE(res) << what << ": no response";
  if (!res) return {};
  EXPECT_EQ(res->status, status) << what << ": " << res->body;
  const nlohmann::json body = nlohmann::json::parse(res->body, nullptr, false);
  EXPECT_TRUE(body.is_object() && body.contains("error")) << what << ": " << res->body;
  if (!body.is_object() || !body.contains("error")) return {};
  EXPECT_NE(body["error"].value("message", "").find(reason), std::string::npos) << what << ": " << res->body;
  return body["error"];
}

}  // namespace tandem::testing
