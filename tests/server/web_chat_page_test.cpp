// The chat page at / (src/server/web/, and Debian's marked.min.js): served with the binary,
// without the API key, and nothing in it loads from elsewhere; then driven in headless
// Chromium (Debian's chromium package, through the playwright-core npm package) by
// web_chat_page_test.mjs: streamed answers, TTFT and tokens/s shown, the KV cache view filled
// in from /metrics, markdown rendered with hostile HTML as text, conversations kept in the
// browser, and a history longer than the context sent without its oldest exchanges. The
// browser's screenshots are kept in the build folder (test-artifacts/web-chat*.png).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "server/npm_packages.h"
#include "server/server_process.h"
#include "support/run_binary.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

std::string chromium_path() {
  const char* from_env = std::getenv("TANDEM_CHROMIUM");
  return from_env != nullptr && *from_env != '\0' ? from_env : "/usr/bin/chromium";
}

TEST(WebChatPage, ServedWithoutTheKeyAndSelfContained) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  ServerProcess server;
  ASSERT_TRUE(server.start({"--api-key", "page-key"})) << server.log();
  httplib::Client client("127.0.0.1", server.port());
  for (const auto& [path, type] : {std::pair<std::string, std::string>{"/", "text/html"},
                                   {"/index.html", "text/html"},
                                   {"/chat.js", "text/javascript"},
                                   {"/conversations.js", "text/javascript"},
                                   {"/markdown.js", "text/javascript"},
                                   {"/chat.css", "text/css"}}) {
    const auto response = client.Get(path);
    ASSERT_TRUE(response) << path;
    EXPECT_EQ(response->status, 200) << path;
    EXPECT_EQ(response->get_header_value("Content-Type").rfind(type, 0), 0u) << path;
    // No CDN, no font or script from elsewhere: every URL in the page is the server's own.
    EXPECT_FALSE(std::regex_search(response->body, std::regex(R"((src|href)\s*=\s*["']?(https?:)?//)"))) << path;
  }
  const auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("<script src=\"/chat.js\">"), std::string::npos);
  EXPECT_NE(page->body.find("<script src=\"/marked.min.js\">"), std::string::npos);
  // marked as Debian installs it (its code has URLs in strings, so it is not searched above).
  const auto marked = client.Get("/marked.min.js");
  ASSERT_TRUE(marked);
  EXPECT_EQ(marked->status, 200);
  EXPECT_EQ(marked->get_header_value("Content-Type").rfind("text/javascript", 0), 0u);
  EXPECT_EQ(marked->body.rfind("/**\n * marked - a markdown parser", 0), 0u) << marked->body.substr(0, 80);
  if (const fs::path installed = "/usr/share/javascript/marked/marked.min.js"; fs::exists(installed)) {
    std::ifstream file(installed, std::ios::binary);
    EXPECT_EQ(marked->body, std::string(std::istreambuf_iterator<char>(file), {}));
  }
  // The API behind the page still wants the key; unknown paths are still 404.
  EXPECT_EQ(client.Get("/metrics")->status, 401);
  EXPECT_EQ(client.Get("/chat.jsx")->status, 401);
  httplib::Headers key = {{"Authorization", "Bearer page-key"}};
  EXPECT_EQ(client.Get("/nothing-here", key)->status, 404);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(WebChatPage, HeadlessChromiumChatsRendersMarkdownKeepsConversationsAndTrims) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  if (!fs::exists(chromium_path()))
    GTEST_SKIP() << "no browser at " << chromium_path()
                 << " (apt-get install chromium, as .ci/run does, or set TANDEM_CHROMIUM); skipping";
  std::string why;
  if (!ensure_npm_packages("playwright", {"playwright-core@1"}, why)) GTEST_SKIP() << why << "; skipping";
  ServerProcess server;
  // The demo model answers ChatML with blank lines; under the llama2 format it writes words.
  // Its context is 128 tokens (the script's trimmed conversation counts on it: --ctx 128).
  ASSERT_TRUE(server.start({"--parallel", "2", "--chat-template", "llama2", "--ctx", "128"})) << server.log();
  const fs::path artifacts = fs::path(TANDEM_BINARY).parent_path() / "test-artifacts";
  fs::create_directories(artifacts);
  const fs::path screenshots[] = {artifacts / "web-chat.png", artifacts / "web-chat-trimmed.png"};
  for (const fs::path& screenshot : screenshots) fs::remove(screenshot);
  const std::string script = (fs::path(__FILE__).parent_path() / "web_chat_page_test.mjs").string();
  const std::string command = "timeout -k 5 100 node " + shell_quote(script) + " --npm " +
                              shell_quote(npm_cache_dir("playwright")) + " --chromium " + shell_quote(chromium_path()) +
                              " --url " + server.url() + " --artifacts " + shell_quote(artifacts.string());
  const int status = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << "\n" << server.log();
  for (const fs::path& screenshot : screenshots)
    EXPECT_TRUE(fs::exists(screenshot) && fs::file_size(screenshot) > 10000) << screenshot;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace tandem::testing
