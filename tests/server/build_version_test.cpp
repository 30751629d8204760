// The build's version and commit, as `tandem --version` prints them, also in the server's
// first log line and in /props (build_info, version, commit).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/server_process.h"
#include "support/run_binary.h"

namespace tandem::testing {
namespace {

TEST(BuildVersion, ServerLogAndPropsMatchTheVersionFlag) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const CommandResult version = run_tandem("--version");
  ASSERT_EQ(version.exit_code, 0) << version.err;
  const std::string line = version.out.substr(0, version.out.find('\n'));  // "tandem X.Y.Z (commit HASH)"
  const size_t commit_at = line.find("(commit ");
  ASSERT_NE(commit_at, std::string::npos) << line;
  const std::string commit = line.substr(commit_at + 8, line.size() - commit_at - 9);
  EXPECT_FALSE(commit.empty());
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  EXPECT_NE(server.log().find("tandem serve: " + line + " listening on"), std::string::npos) << server.log();
  httplib::Client client("127.0.0.1", server.port());
  const auto response = client.Get("/props");
  ASSERT_TRUE(response && response->status == 200);
  const nlohmann::json props = nlohmann::json::parse(response->body);
  EXPECT_EQ(props["build_info"], line);
  EXPECT_EQ(props["commit"], commit);
  EXPECT_EQ(line.find(props["version"].get<std::string>()), 7u) << line;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace tandem::testing
