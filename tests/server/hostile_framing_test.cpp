// Issue 33's connection-level attacks against the real `tandem serve` on 127.0.0.1, over raw
// TCP (raw_http.h): request smuggling through Transfer-Encoding, malformed chunk sizes, a
// client that half-closes after its request, probes past --max-connections, a second stop
// signal, and --port values out of range. Each TEST is one attack and asserts the fixed
// behaviour; every wait is bounded; no assertion is a speed. Bodies: hostile_body_test.cpp.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <thread>

#include "hostile_checks.h"

namespace tandem::testing::hostile {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kSmuggled = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

// Sends `bytes` on a fresh connection; the responses it gets before the server closes it
// (or 5 s pass), and whether it closed.
struct Exchange {
  std::vector<RawResponse> responses;
  bool closed = false;
  std::string rest;  // bytes after the last whole response
};
Exchange send_and_read_all(int port, const std::string& bytes) {
  Exchange out;
  RawConnection connection;
  if (!connection.connect(port) || !connection.send(bytes)) return out;
  for (int i = 0; i < 4; ++i) {
    auto res = connection.read_response(5.0);
    if (!res) break;
    out.responses.push_back(std::move(*res));
  }
  out.rest = connection.unread();
  out.closed = connection.wait_closed(5.0);
  return out;
}

// Attack: a POST whose Transfer-Encoding is not exactly "chunked" — unknown, identity, gzip,
// chunked before another coding, another coding before chunked, two fields, beside
// Content-Length — followed on the same connection by a smuggled GET /v1/models. Before: the
// body was read as empty (or the gzip ignored) and the GET answered and logged as a request
// of its own. Fixed (RFC 9112 6.1, 6.3): one response, 400 (501 for "gzip, chunked"), and
// the connection closed; the smuggled request is never read, never logged.
TEST(HostileFraming, TransferEncodingSmugglingGetsOneResponseAndClose) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  const int port = server.port();
  for (const std::string header :
       {"Transfer-Encoding: xchunked", "Transfer-Encoding: identity", "Transfer-Encoding: gzip",
        "Transfer-Encoding: chunked, identity", "Transfer-Encoding: gzip, chunked",
        "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked", "Transfer-Encoding: gzip\r\nContent-Length: 5"}) {
    const std::string request =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + header +
        "\r\n\r\n0\r\n\r\n" + std::string(kSmuggled);
    const Exchange exchange = send_and_read_all(port, request);
    ASSERT_FALSE(exchange.responses.empty()) << header << ": no response";
    const RawResponse& first = exchange.responses.front();
    EXPECT_TRUE(first.status == 400 || first.status == 501) << header << ": " << first.status << " " << first.body;
    EXPECT_EQ(exchange.responses.size(), 1u)
        << header << ": the smuggled GET was answered: " << exchange.responses.back().status << " "
        << exchange.responses.back().body.substr(0, 200);
    EXPECT_EQ(exchange.rest.find("HTTP/1.1"), std::string::npos) << header << ": " << exchange.rest;
    EXPECT_TRUE(exchange.closed) << header << ": the connection stayed open";
  }
  // A plain chunked body still works, and is followed by the next request as pipelining allows.
  const Exchange chunked =
      send_and_read_all(port, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: Chunked\r\n\r\n" +
                                  fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", completion(2).size(), completion(2)) +
                                  "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(chunked.responses.size(), 2u);
  EXPECT_EQ(chunked.responses[0].status, 200) << chunked.responses[0].body;
  EXPECT_EQ(chunked.responses[1].status, 200) << chunked.responses[1].body;
  EXPECT_EQ(server.stop(), 0);
  const std::string log = server.log();
  size_t models_logged = 0;
  for (size_t at = log.find("GET /v1/models"); at != std::string::npos; at = log.find("GET /v1/models", at + 1))
    ++models_logged;
  EXPECT_EQ(models_logged, 1u) << "only the pipelined GET after the chunked body is a request:\n" << log;
}

// Attack: chunk sizes that are not hex, negative, or past 64 bits. Before: the connection was
// closed with no status line. Fixed: 400 with an OpenAI error, then the connection closes.
TEST(HostileFraming, MalformedChunkSizeIs400AndClose) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  for (const std::string size : {"zz", "-1", "1ffffffffffffffff", "123456789abcdef0123"}) {
    const Exchange exchange = send_and_read_all(
        server.port(), "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n" + size +
                           "\r\n{}\r\n0\r\n\r\n" + std::string(kSmuggled));
    ASSERT_EQ(exchange.responses.size(), 1u) << "chunk size " << size;
    std::optional<RawResponse> res = exchange.responses.front();
    expect_error(res, 400, "chunk size " + size);
    EXPECT_TRUE(exchange.closed) << "chunk size " << size;
  }
  expect_completion_served(server.port(), "after the malformed chunks");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Attack (a plain client, really): the request, then shutdown(SHUT_WR) — "I have nothing more
// to send" — and a wait for the answer. Before: taken for a client that left; the request was
// cancelled and nothing came back. Fixed: answered, streamed or not. (A client that closes
// its socket is still noticed and cancelled: HostileClient.DisconnectedClientsAreCancelled.)
TEST(HostileFraming, HalfClosedClientGetsItsAnswer) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  for (const bool stream : {false, true}) {
    RawConnection connection;
    ASSERT_TRUE(connection.connect(server.port()));
    ASSERT_TRUE(
        connection.send(http_request("POST", "/v1/completions", completion(24, stream), {"Connection: close"})));
    ASSERT_EQ(::shutdown(connection.fd(), SHUT_WR), 0);
    const auto res = connection.read_response(10.0);
    ASSERT_TRUE(res) << (stream ? "streamed" : "plain") << ": no answer: " << connection.error();
    EXPECT_EQ(res->status, 200) << res->body;
    if (stream)
      expect_complete_stream(*res, "half-closed stream");
    else
      EXPECT_EQ(parse(res->body).value("object", ""), "text_completion") << res->body;
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Attack: --max-connections 8 held by idle connections (slow clients), while a load
// balancer probes /health. Before: every probe got the connection cap's 503. Fixed: a small
// reserve past the cap answers /health (once per connection, then closes); any other request
// there still gets the 503 with Retry-After.
TEST(HostileFraming, HealthIsAnsweredPastMaxConnections) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--max-connections", "8"})) << server.log();
  const int port = server.port();
  std::vector<RawConnection> held(8);
  for (RawConnection& c : held) ASSERT_TRUE(c.connect(port)) << c.error();
  ASSERT_TRUE(held[0].send("GET /health HTTP/1.1\r\n"));  // a head begun, never ended
  std::this_thread::sleep_for(200ms);                     // all eight accepted
  int answered = 0;
  for (int probe = 0; probe < 20; ++probe) {
    const auto res = get(port, "/health", {}, 5.0);
    answered += res && res->status == 200;
  }
  EXPECT_EQ(answered, 20) << "of 20 /health probes with the connections held";
  const auto models = get(port, "/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 503) << models->body;
  EXPECT_TRUE(models->header("Retry-After")) << "503 without Retry-After";
  held.clear();
  std::this_thread::sleep_for(200ms);
  expect_completion_served(port, "after the held connections closed");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Attack (operator): a drain held up by a client that sent a head and never its body, and a
// second SIGTERM to stop waiting. Before: the second signal was ignored until the drain ended
// (--shutdown-timeout 30 here). Fixed: the process exits at once with 128 + SIGTERM.
TEST(HostileFraming, SecondStopSignalExitsAtOnce) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--read-timeout", "60", "--shutdown-timeout", "30"})) << server.log();
  RawConnection stuck;
  ASSERT_TRUE(stuck.connect(server.port()));
  ASSERT_TRUE(stuck.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"));
  std::this_thread::sleep_for(200ms);
  server.send_signal(SIGTERM);
  EXPECT_FALSE(server.wait_exit(1.0)) << "no drain at all: " << server.log();
  const auto second = Clock::now();
  server.send_signal(SIGTERM);
  const std::optional<int> code = server.wait_exit(10.0);
  ASSERT_TRUE(code) << "still running 10 s after the second SIGTERM: " << server.log();
  EXPECT_EQ(*code, 128 + SIGTERM) << server.log();
  EXPECT_LT(seconds_since(second), 10.0);
  EXPECT_NE(server.log().find("second SIGTERM"), std::string::npos) << server.log();
}

// Attack (operator): --port values that do not fit 16 bits. Before: 70000 listened on 4464,
// -1 on 65535, 65536 on a random port. Fixed: refused at start-up with a message naming the
// range; 0 still means any free port (every other test uses it).
TEST(HostileFraming, PortOutOfRangeIsRefused) {
  REQUIRE_MODEL();
  for (const std::string port : {"70000", "-1", "65536"}) {
    ServerProcess server;
    ASSERT_TRUE(server.spawn({"serve", "-m", shared_path(kAidreamsGguf), "--port", port, "-t", "1"}));
    const std::optional<int> code = server.wait_exit(10.0);
    if (!code) server.send_signal(SIGKILL);
    ASSERT_TRUE(code) << "--port " << port << " is serving: " << server.log();
    EXPECT_NE(*code, 0) << "--port " << port;
    const std::string log = server.log();
    EXPECT_NE(log.find("65535"), std::string::npos) << "--port " << port << ": " << log;
    EXPECT_EQ(log.find("listening on"), std::string::npos) << "--port " << port << ": " << log;
  }
}

}  // namespace
}  // namespace tandem::testing::hostile
